"""The compact trace form (``Trace.to_compact`` / ``Trace.from_compact``, the review sandbox's
transport) carries exactly what ``to_json`` / ``from_json`` carry, for real and unusual traces,
and refuses a text of another version, layout or field list."""

import dataclasses
import gc
import json

import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

from nkieval.sim.runner import run_kernel
from nkieval.sim.trace import AllocationRecord, OperandAccess, Trace, TraceRecord


def _same_as_json(tr: Trace) -> Trace:
    """``from_compact(to_compact())``, checked against ``from_json(to_json())``: records, allocations,
    warnings, header and the exact JSON text (so value types too)."""
    back = Trace.from_compact(tr.to_compact())
    ref = Trace.from_json(tr.to_json())
    assert back.records == ref.records
    assert back.allocations == ref.allocations and list(back.allocations) == list(ref.allocations)
    assert back.warnings == ref.warnings
    assert back.to_json() == ref.to_json()
    return back


def _kernel(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(a.shape[0] // 128):
        ta = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        tb = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=ta, src=a[i * 128:(i + 1) * 128, :])
        nisa.dma_copy(dst=tb, src=b[i * 128:(i + 1) * 128, :])
        nisa.tensor_tensor(dst=ta, data1=ta, data2=tb, op=nl.add)
        nisa.tensor_scalar(dst=tb, data=ta, op0=nl.multiply, operand0=2.0)
        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=tb)
    return out


def test_a_simulated_trace_round_trips():
    a = np.ones((1024, 64), np.float32)
    res = run_kernel(_kernel, [a, a + 1])
    assert len(res.trace) >= 40  # (long enough for packed columns)
    _same_as_json(res.trace)


@dataclasses.dataclass(frozen=True)
class _Mode:
    name: str
    level: int


def _op(i: int, **kw) -> OperandAccess:
    base = dict(role="dst", mode="w", buffer="sbuf", alloc=1 + i % 3, shape=(128, 4), dtype="float32",
                partition_start=0, partitions=128, addr_lo=16 * i, addr_hi=16 * i + 16, nbytes=2048,
                contiguous_bytes=16, pattern=((1, 4),), name="t")
    return OperandAccess(**{**base, **kw})


def _unusual() -> Trace:
    tr = Trace(target="trn2", num_programs=2, kernel="k", peak_sbuf_bytes=123, peak_psum_bytes=7)
    attrs = [{"cast": False, "mode": 0}, {"cast": 0, "mode": 0}, {"cast": 0.0, "mode": 0}, {"flag": True},
             {"flag": 1}, {"axis": [1]}, {"axis": [1.0]}, {"axis": (1,)}, {"nested": {"a": [1, {"b": None}]}},
             {"m": _Mode("x", 1)}, {}, {"scale": float("inf")}, {"mode": 0, "cast": False}, {"big": 1 << 70}]
    for i in range(200):  # (repeated: columns long enough to be packed, heads and kinds shared)
        k = i % len(attrs)
        ops = [_op(i), _op(i, role="src", mode="r", buffer="hbm", addr_lo=-i, addr_hi=(1 << 40) + i)]
        if k == 3:
            ops = []
        elif k == 4:
            ops.append(_op(i, shape=[128, 4], pattern=[[1, 4]]))  # (lists: an unhashable kind)
        file, function = ("k.py", "kern") if i % 5 else (None, None)
        loops = () if k < 6 else ((("affine", i % 4, 4),) if k < 10 else [["seq", 0, 2]])
        line = None if file is None else 10 + k
        tr.append(TraceRecord(0, f"op{k % 4}", "vector" if k % 2 else "dma", ops, attrs[k], i % 2, loops, file,
                              line, function))
    tr.records[7].seq = 1000  # (not its position)
    for j in range(40):
        tr.allocations[j] = AllocationRecord(j, "sbuf" if j % 2 else "hbm", f"a{j % 3}", (128, 4), "float32",
                                             4096 * j, 0, 16, "k.py:3" if j % 7 else None, j % 2, j,
                                             None if j % 3 else j + 5, j == 0, j == 1)
    tr.allocations[99] = AllocationRecord(99, "psum", "p", [2, 2], "float32", -1, 1 << 65, 8, None, 0, 5)
    tr.warnings = [{"kind": "w", "at": [1, 2]}, {"kind": "x", "n": None}]
    return tr


def test_unusual_records_round_trip_exactly():
    tr = _unusual()
    back = _same_as_json(tr)
    # True, 0 and 0.0 kept apart although equal; lists stay lists; the dataclass arrives as its dict
    assert [type(r.attrs.get("cast")) for r in back.records[:3]] == [bool, int, float]
    assert [type(r.attrs["flag"]) for r in back.records[3:5]] == [bool, int]
    assert [type(r.attrs["axis"][0]) for r in back.records[5:7]] == [int, float]
    assert back.records[9].attrs == {"m": {"name": "x", "level": 1}}
    assert list(back.records[12].attrs) == ["mode", "cast"]
    # a record's attributes are its own (records 14 apart share a head): changing one record's
    # does not change another's
    back.records[5].attrs["axis"].append(2)
    back.records[8].attrs["nested"]["a"][1]["b"] = 3
    back.records[0].attrs["cast"] = True
    assert back.records[5 + 14].attrs == {"axis": [1]}
    assert back.records[8 + 14].attrs == {"nested": {"a": [1, {"b": None}]}}
    assert back.records[14].attrs == {"cast": False, "mode": 0}


@pytest.mark.parametrize("n", [0, 1, 2, 17])
def test_small_traces_round_trip(n):
    tr = Trace(target="trn2")
    for i in range(n):
        tr.append(TraceRecord(0, "memset", "vector", [_op(i)], {"v": i}, 0, (), "k.py", 3, "kern"))
    _same_as_json(tr)


def test_the_text_is_json_and_refuses_other_versions_layouts_and_fields():
    text = _unusual().to_compact()
    assert isinstance(text, str)
    d = json.loads(text)
    for key, value, what in [("schema", "nkieval.trace", "schema"), ("version", "0.9", "version"),
                             ("layout", 2, "layout"), ("fields", [["id"]], "fields"),
                             ("layout_fields", [], "fields")]:
        bad = dict(d, **{key: value})
        with pytest.raises(ValueError, match=what):
            Trace.from_compact(json.dumps(bad))
    packed = d["operands"][3]  # (addr_lo: ints, negative ones too, packed)
    assert isinstance(packed, str) and Trace.from_compact(text).records[1].operands[1].addr_lo == -1
    for bad_column in ["Z" + packed[1:], "", packed[:-4], [1, 2, 3], {"a": 1}]:
        bad = dict(d, operands=[*d["operands"][:3], bad_column, *d["operands"][4:]])
        with pytest.raises(ValueError, match="column"):
            Trace.from_compact(json.dumps(bad))


def test_counts_are_checked_and_bounded():
    """A column of one repeated value is a few bytes whatever its length: a reader of untrusted text
    bounds what it builds (``max_items``) and refuses counts that are not three non-negative ints."""
    tr = Trace(target="trn2")
    for i in range(40):
        tr.append(TraceRecord(i, "memset", "vector", [_op(0)], {"v": 1}, 0, (), "k.py", 3, "kern"))
    text = tr.to_compact()
    d = json.loads(text)
    assert d["counts"] == [40, 40, 0]
    assert len(Trace.from_compact(text, max_items=80).records) == 40
    with pytest.raises(ValueError, match="more than the 79 items allowed"):
        Trace.from_compact(text, max_items=79)
    huge = dict(d, counts=[10**12, 10**12, 0])
    with pytest.raises(ValueError, match="items allowed"):
        Trace.from_compact(json.dumps(huge), max_items=10**6)
    for counts in [[40, 40], [40, -1, 0], [40.0, 40, 0], "40", None]:
        with pytest.raises(ValueError, match="counts"):
            Trace.from_compact(json.dumps(dict(d, counts=counts)))


def test_the_collector_is_left_as_it_was():
    tr = _unusual()
    assert gc.isenabled()
    Trace.from_compact(tr.to_compact())
    assert gc.isenabled()
    gc.disable()
    try:
        Trace.from_compact(tr.to_compact())
        assert not gc.isenabled()
    finally:
        gc.enable()
    with pytest.raises(ValueError):
        Trace.from_compact("[]")
    assert gc.isenabled()
