"""The program document's tables (format version 2): what repeats is written once and named by index.

Every index an event or an entry holds must be in range, every entry must have its shape and is checked once,
whether or not an event names it, and each table is bounded; a program of another version is refused, saying
which one this install reads.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import nkieval.frontends

nkieval.frontends.install(force=True)

import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402

from nkieval.sim.errors import NkiValidationError  # noqa: E402
from nkieval.sim.program import (  # noqa: E402
    PROGRAM_VERSION,
    ArgSpec,
    Program,
    ProgramError,
    record_program,
    replay_program,
)
from nkieval.sim.program import record as record_mod  # noqa: E402
from nkieval.sim.program import validate as validate_mod  # noqa: E402
from nkieval.sim.runner import run_kernel  # noqa: E402


def k_loop(a):
    """Four tiles made and copied at the same two lines: the tables hold each line, site and layout once."""
    out = nl.ndarray((128, 32), dtype=a.dtype, buffer=nl.shared_hbm)
    for j in range(4):
        t = nl.ndarray((128, 8), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[:, j * 8:(j + 1) * 8])
        nisa.dma_copy(dst=out[:, j * 8:(j + 1) * 8], src=t)
    return out


_A = np.arange(128 * 32, dtype=np.float32).reshape(128, 32)


def _doc() -> dict:
    return json.loads(record_program(k_loop, [ArgSpec((128, 32), "float32")], {}, target="trn2").program.to_json())


def _replay(doc: dict) -> np.ndarray:
    return replay_program(Program.from_json(json.dumps(doc)), [_A], {}, target="trn2").outputs


def _refused(doc: dict, rule: str = "program-format") -> ProgramError:
    with pytest.raises(ProgramError) as info:
        _replay(doc)
    assert info.value.rule == rule, info.value
    return info.value


def test_a_loop_s_repeats_are_written_once_and_replay_as_recorded():
    doc = _doc()
    body = doc["programs"][0]
    assert doc["version"] == PROGRAM_VERSION == 2
    # two copy lines, the tile's line and the output's: each kernel line, call and allocation site once
    assert len(body["calls"]) == 2 and len(body["allocs"]) == 2 and len(body["locs"]) == 4
    assert len([e for e in body["events"] if e[0] == "i"]) == 8 and len(body["views"]) == 1 + 4 * 2 + 4
    np.testing.assert_array_equal(_replay(doc), run_kernel(k_loop, [_A.copy()], {}, target="trn2").outputs)
    np.testing.assert_array_equal(_replay(doc), _A)


def _first(doc: dict, kind: str) -> list:
    return next(ev for ev in doc["programs"][0]["events"] if ev[0] == kind)


def _first_view_operand(doc: dict) -> dict:
    return next(v for v in _first(doc, "i")[3] if isinstance(v, dict) and "T" in v)


@pytest.mark.parametrize("tamper", [
    lambda d: _first_view_operand(d).__setitem__("T", len(d["programs"][0]["views"])),  # a view past the table
    lambda d: _first_view_operand(d).__setitem__("T", -1),                      # a negative index
    lambda d: _first(d, "i").__setitem__(1, len(d["programs"][0]["calls"])),  # a call site past the table
    lambda d: _first(d, "a").__setitem__(2, len(d["programs"][0]["allocs"])),  # an allocation site past it
    lambda d: d["programs"][0]["views"][0].__setitem__(1, len(d["programs"][0]["layouts"])),  # a layout past it
    lambda d: d["programs"][0]["calls"][0].__setitem__(2, len(d["programs"][0]["locs"])),  # a kernel line past it
    lambda d: d["programs"][0]["allocs"][0].__setitem__(5, 1 << 40),            # ... far past it
    lambda d: d["programs"][0]["calls"][0].__setitem__(2, "0"),                # an index that is not an integer
])
def test_an_index_out_of_its_table_is_refused(tamper):
    doc = _doc()
    tamper(doc)
    _refused(doc)


@pytest.mark.parametrize("table, entry", [
    ("views", [1, 0]),                                   # a view of two fields
    ("views", {"aid": 1}),                               # ... not a list
    ("layouts", ["float32", "float32", [8]]),            # a layout of three fields
    ("layouts", ["float32", "float32", 8, 4]),           # ... whose shape is not a list
    ("layouts", ["float33", "float32", [8], [4]]),       # ... of an unknown dtype
    ("layouts", ["float32", "object", [8], [4]]),        # ... of an unknown storage dtype
    ("locs", ["k.py", 3]),                               # a kernel line of two fields
    ("calls", ["dma_copy", ["dst", "src"]]),             # a call of two fields
    ("calls", ["os_system", [], None]),                  # ... of an unknown instruction
    ("allocs", [[8], "float32", "sbuf", "", "ndarray"]),  # an allocation site of five fields
    ("allocs", [[8], "float32", "l3_cache", "", "ndarray", None]),  # ... in an unknown buffer
])
def test_a_table_entry_of_the_wrong_shape_is_refused_even_when_no_event_names_it(table, entry):
    """Each entry is checked once, when the program is compiled: an entry appended after those the events name
    is checked as well (and refused before any instruction runs)."""
    doc = _doc()
    doc["programs"][0][table].append(entry)
    _refused(doc)


def test_a_layout_s_bounds_are_checked_at_each_view_s_offset():
    """A layout is checked once; each view's byte offset against it (a negative start, a misaligned offset)."""
    doc = _doc()
    body = doc["programs"][0]
    aid, lay, _ = body["views"][0]
    body["views"].append([aid, lay, -4])
    _refused(doc, "program-bounds")
    body["views"][-1] = [aid, lay, 2]
    _refused(doc, "program-bounds")
    body["views"][-1] = [aid, lay, 0]
    np.testing.assert_array_equal(_replay(doc), _A)


@pytest.mark.parametrize("table", ["locs", "layouts", "views", "calls", "allocs"])
def test_a_huge_table_is_refused_before_anything_is_compiled(table, monkeypatch):
    """(The bound made small here: at its value, millions of entries, a test would spend seconds building one.)"""
    doc = _doc()
    body = doc["programs"][0]
    bound = max(len(body[t]) for t in ("locs", "layouts", "views", "calls", "allocs"))
    monkeypatch.setattr(validate_mod, "MAX_TABLE_ENTRIES", bound)
    np.testing.assert_array_equal(_replay(doc), _A)  # (every table within the bound)
    body[table] += ["not even an entry"] * (bound + 1 - len(body[table]))  # (the size is refused first)
    info = _refused(doc, "program-size")
    assert info.where == "program 0" and table in str(info)


def test_a_table_that_is_not_a_list_is_refused():
    doc = _doc()
    doc["programs"][0]["views"] = {"0": [1, 0, 0]}
    text = json.dumps(doc)
    with pytest.raises(ProgramError) as info:
        replay_program(Program.from_json(text), [_A], {}, target="trn2")
    assert info.value.rule == "program-format"


def test_a_missing_table_is_refused():
    doc = _doc()
    del doc["programs"][0]["allocs"]
    with pytest.raises(ProgramError) as info:
        Program.from_json(json.dumps(doc))
    assert info.value.rule == "program-format"


def test_the_recorder_refuses_a_kernel_past_the_table_bound(monkeypatch):
    monkeypatch.setattr(record_mod, "MAX_TABLE_ENTRIES", 5)
    with pytest.raises(NkiValidationError) as info:
        record_program(k_loop, [ArgSpec((128, 32), "float32")], {}, target="trn2")
    assert info.value.rule == "instruction-budget"


def test_a_program_of_another_version_is_refused_naming_the_version_this_install_reads():
    doc = _doc()
    for version in (1, 3, "2", None):
        doc["version"] = version
        with pytest.raises(ProgramError) as info:
            Program.from_json(json.dumps(doc))
        assert info.value.rule == "program-format" and "is not 2, the only version this install reads" in str(
            info.value)
