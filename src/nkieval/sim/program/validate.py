"""The judge's checks of a program document before anything of it runs.

The replay checks every value as it decodes it (names against the simulator's registries, views against
their allocation's bounds); this pass checks what must hold of the whole document first: its shape (one body
per program of its launch), its size (events, nesting, table lengths) and that every event is one of the known
kinds with its number of fields (each table entry is checked when the program is compiled, once), so a malformed program is refused at once, naming the rule and the place.
"""

from __future__ import annotations

from typing import Any

from nkieval.hardware import get_target
from nkieval.sim.program.codec import MAX_DEPTH, MAX_EVENTS, MAX_TABLE_ENTRIES, TABLES, Program, ProgramError

#: Fields of each event kind (see :mod:`nkieval.sim.program.codec`).
EVENT_FIELDS = {"a": 5, "i": 6, "f": 2, "s": 6, "L": 7, "n": 3}


def validate(program: Program, max_events: int = MAX_EVENTS) -> None:
    """Raise :class:`ProgramError` unless ``program`` is well formed and within its limits."""
    try:
        get_target(program.target)
    except Exception as e:  # an unknown target name
        raise ProgramError(f"unknown target {program.target!r}: {e}", rule="program-format") from None
    if program.grid:
        if any(g <= 0 for g in program.grid) or len(program.grid) > 3:
            raise ProgramError(f"bad SPMD grid {program.grid}", rule="program-format")
        expected = 1
        for g in program.grid:
            expected *= g
    else:
        if program.lnc not in (1, 2):
            raise ProgramError(f"LNC degree {program.lnc} is not 1 or 2", rule="program-format")
        expected = program.lnc
    if len(program.programs) != expected:
        raise ProgramError(f"{len(program.programs)} program bodies for a launch of {expected} programs",
                           rule="program-format")
    count = 0
    for k, body in enumerate(program.programs):
        if len(body.args) > len(program.arg_names) or any(a is not None and not _is_int(a) for a in body.args):
            raise ProgramError("bad argument ids", rule="program-format", where=f"program {k}")
        for name in TABLES:
            table = getattr(body, name)
            if not isinstance(table, list):
                raise ProgramError(f"the {name} table is not a list", rule="program-format", where=f"program {k}")
            if len(table) > MAX_TABLE_ENTRIES:
                raise ProgramError(f"{len(table)} entries in the {name} table, more than {MAX_TABLE_ENTRIES}",
                                   rule="program-size", where=f"program {k}")
        count += _walk(body.events, 0, max_events - count, f"program {k}")


def _walk(events: Any, depth: int, budget: int, where: str) -> int:
    if depth > MAX_DEPTH:
        raise ProgramError(f"device loops nested deeper than {MAX_DEPTH}", rule="program-size", where=where)
    if not isinstance(events, list):
        raise ProgramError("events are not a list", rule="program-format", where=where)
    n = 0
    for i, ev in enumerate(events):
        n += 1
        if n > budget:
            raise ProgramError(f"more than {MAX_EVENTS} events", rule="program-size", where=where)
        if not isinstance(ev, list) or not ev or EVENT_FIELDS.get(ev[0]) != len(ev):
            raise ProgramError(f"event {i} is not a known event: {str(ev)[:80]}", rule="program-format",
                               where=where)
        if ev[0] == "L":
            n += _walk(ev[4], depth + 1, budget - n, f"{where}, loop at event {i}")
    return n


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)
