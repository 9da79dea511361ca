"""Compiling a program for replays: the shared checks stay as strict, and a parsed program keeps no parsed tree.

A view's geometry (dtype names, offset, shape, strides) is checked once and shared by every allocation viewed the
same way, so its bound against the allocation's storage must still be checked per allocation, at replay. JSON's
``true`` hashes like ``1``, so a geometry cache must not let a bool through where an integer is required. A
program parsed from JSON drops its event lists once compiled; its text stands for them.
"""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest

import nkieval.frontends

nkieval.frontends.install(force=True)

import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402

from nkieval.sim.program import (  # noqa: E402
    ArgSpec,
    Program,
    ProgramError,
    compile_program,
    record_program,
    replay_program,
)
from nkieval.sim.runner import run_kernel  # noqa: E402


def k_two_tiles(a):
    """A wide tile and a narrow one, each the destination of a copy of its own width."""
    out = nl.ndarray((128, 8), dtype=a.dtype, buffer=nl.shared_hbm)
    wide = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)
    narrow = nl.ndarray((128, 8), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=wide[:, 0:8], src=a)
    nisa.dma_copy(dst=narrow, src=wide[:, 0:8])
    nisa.dma_copy(dst=out, src=narrow)
    return out


def _doc() -> dict:
    return json.loads(record_program(k_two_tiles, [ArgSpec((128, 8), "float32")], {}, target="trn2").program.to_json())


def _operands(doc: dict) -> list[dict]:
    """The view operands (``{"T": k}``) of the instructions, in order (dst then src of each copy)."""
    out = []
    for ev in doc["programs"][0]["events"]:
        if ev[0] == "i":
            out += [v for v in ev[3] if isinstance(v, dict) and "T" in v]
    return out


def _view_of(doc: dict, operand: dict) -> list:
    """An operand's views table entry as ``[id, dtype, storage, offset, shape, strides]``."""
    body = doc["programs"][0]
    aid, lay, off = body["views"][operand["T"]]
    dname, sname, shape, strides = body["layouts"][lay]
    return [aid, dname, sname, off, shape, strides]


def _set_view(doc: dict, operand: dict, aid: object, dname: str, sname: str, off: object, shape: list,
              strides: list) -> None:
    """Point ``operand`` at a new views table entry of its own (and a new layout)."""
    body = doc["programs"][0]
    body["layouts"].append([dname, sname, shape, strides])
    body["views"].append([aid, len(body["layouts"]) - 1, off])
    operand["T"] = len(body["views"]) - 1


def _replay(doc: dict) -> np.ndarray:
    a = np.arange(128 * 8, dtype=np.float32).reshape(128, 8)
    return replay_program(Program.from_json(json.dumps(doc)), [a], {}, target="trn2").outputs


def test_the_untampered_program_replays():
    a = np.arange(128 * 8, dtype=np.float32).reshape(128, 8)
    np.testing.assert_array_equal(_replay(_doc()), a)


def test_a_geometry_that_fits_one_allocation_is_refused_on_a_smaller_one():
    """The wide tile's view [:, 56:64] fits it; the same geometry on the narrow tile (the next copy's destination)
    reaches past its storage, and must be refused though its geometry was checked already."""
    doc = _doc()
    ops = _operands(doc)
    wide_dst, narrow_dst = _view_of(doc, ops[0]), _view_of(doc, ops[2])
    assert wide_dst[0] != narrow_dst[0]
    wide_cols = [wide_dst[0], "float32", "float32", 224, [128, 8], [256, 4]]
    _set_view(doc, ops[0], *wide_cols)  # (fits the wide tile: 128 partitions of 256 bytes)
    _replay(doc)
    _set_view(doc, ops[2], narrow_dst[0], *wide_cols[1:])  # (the same geometry on the narrow tile's 32-byte rows)
    with pytest.raises(ProgramError) as info:
        _replay(doc)
    assert info.value.rule == "program-bounds"


@pytest.mark.parametrize("field, value", [(0, True), (3, False), (4, [True, 8]), (5, [32, True])])
def test_a_bool_where_a_view_needs_an_integer_is_refused(field, value):
    """JSON's true and false hash like 1 and 0: a cached geometry must not accept them for integers."""
    doc = _doc()
    assert _replay(doc) is not None  # the same view with integers replays (and is cached)
    op = _operands(doc)[1]
    view = _view_of(doc, op)
    view[field] = value
    _set_view(doc, op, *view)
    with pytest.raises(ProgramError) as info:
        _replay(doc)
    assert info.value.rule == "program-format"


def test_a_parsed_program_keeps_its_text_not_its_tree():
    a = np.arange(128 * 8, dtype=np.float32).reshape(128, 8)
    text = record_program(k_two_tiles, [ArgSpec((128, 8), "float32")], {}, target="trn2").program.to_json()
    prog = Program.from_json(text)
    first = replay_program(prog, [a], {}, target="trn2")
    assert all(body.events == [] for body in prog.programs)
    assert prog.to_json() == text
    again = replay_program(prog, [a + 1], {}, target="trn2")  # (replays need only the compiled steps)
    eager = run_kernel(k_two_tiles, [a + 1], {}, target="trn2")
    np.testing.assert_array_equal(again.outputs, eager.outputs)
    assert [r.opcode for r in first.trace.records] == [r.opcode for r in again.trace.records]


def test_a_recorded_program_keeps_its_events_when_compiled():
    rec = record_program(k_two_tiles, [ArgSpec((128, 8), "float32")], {}, target="trn2")
    before = rec.program.to_json()
    compile_program(rec.program)
    assert rec.program.programs[0].events and rec.program.to_json() == before


def test_threads_compiling_one_program_share_one_compile():
    text = record_program(k_two_tiles, [ArgSpec((128, 8), "float32")], {}, target="trn2").program.to_json()
    prog = Program.from_json(text)
    got: list = []
    threads = [threading.Thread(target=lambda: got.append(compile_program(prog))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 4 and all(c is got[0] for c in got)
    assert sum(len(steps) for _, _, steps, _ in got[0].bodies) == prog.n_events


def test_a_keyword_given_twice_takes_its_last_value_as_a_dict_display_does():
    """A tampered program may name a keyword twice; its decoder keeps the last value (as the JSON object of the
    same pairs would), whether the earlier one is a view and the later a constant or the other way round."""
    from nkieval.sim.errors import NkiValidationError

    doc = _doc()
    body = doc["programs"][0]
    first = next(ev for ev in body["events"] if ev[0] == "i")
    name, names, loc = body["calls"][first[1]]
    names, values = list(names), first[3]
    body["calls"].append([name, names, loc])  # (the first instruction's own call site, so only it changes)
    first[1] = len(body["calls"]) - 1
    dst = values[names.index("dst")]
    names.insert(0, "dst")
    values.insert(0, 5)  # (a constant, overridden by the view after it)
    a = np.arange(128 * 8, dtype=np.float32).reshape(128, 8)
    np.testing.assert_array_equal(_replay(doc), a)
    names.append("dst")
    values.append(5)  # (now the constant comes last: the instruction gets it, and refuses it)
    with pytest.raises(NkiValidationError):
        _replay(doc)
    values[-1] = dst
    np.testing.assert_array_equal(_replay(doc), a)


def _first(doc: dict, kind: str) -> list:
    """The first event of ``kind``, or the first entry of the table ``kind``."""
    body = doc["programs"][0]
    return body[kind][0] if kind in body else next(ev for ev in body["events"] if ev[0] == kind)


@pytest.mark.parametrize("kind, field, value", [
    ("i", 2, [{"zz": 1}]),            # a positional operand of an unknown kind
    ("i", 2, [[1, True, {"zz": 1}]]),  # ... nested in a list
    ("i", 2, {"d": []}),              # positional operands that are not a list
    ("i", 3, {"d": []}),              # keyword values that are not a list
    ("i", 3, [{"T": 0}]),             # ... fewer than the call's keyword names
    ("i", 3, [{"zz": 1}, {"T": 0}]),  # a keyword's value of an unknown kind
    ("i", 3, [{"T": True}, {"T": 0}]),  # a view index that is a bool
    ("i", 5, [["static", True, 4]]),  # a loop frame with a bool for its index
    ("i", 5, [["static", 0]]),        # a loop frame of two fields
    ("i", 5, "x"),                    # loop frames that are not a list
    ("i", 1, True),                   # a call index that is a bool
    ("a", 2, True),                   # an allocation site index that is a bool
    ("allocs", 0, [True, 8]),         # an allocation's shape with a bool
    ("allocs", 0, [128, 8.0]),        # ... with a float
    ("allocs", 0, "x"),               # ... that is not a list
    ("calls", 1, [5, "src"]),         # a call's keyword name that is not a string
])
def test_an_instruction_s_and_an_allocation_s_fields_are_checked_whatever_their_common_case_skips(kind, field, value):
    """Compiling takes shortcuts for the common cases (no positional operand, no loop frame, keyword operands that
    are views, a shape of exact integers): a field off those cases must still be decoded, and refused when bad."""
    doc = _doc()
    assert _replay(doc) is not None
    _first(doc, kind)[field] = value
    with pytest.raises(ProgramError) as info:
        _replay(doc)
    assert info.value.rule == "program-format"
