"""The instruction trace of the acceptance kernels: every executed instruction is recorded,
with its operands' geometry, program, loop context and kernel source line; JSON round-trips."""

import json
import os

import nki.isa as nki_isa
import pytest

from nkieval.examples import acceptance as acc
from nkieval.sim import isa as sim_isa
from nkieval.sim.isa import INSTRUCTIONS
from nkieval.sim.trace import TRACE_SCHEMA_VERSION, Trace


@pytest.fixture
def executed(monkeypatch):
    """Count every call of every registered instruction, however a kernel reaches it."""
    counts = {"n": 0}
    for name, info in INSTRUCTIONS.items():
        def counting(*a, _fn=info.fn, **k):
            counts["n"] += 1
            return _fn(*a, **k)

        monkeypatch.setattr(sim_isa, name, counting)
        monkeypatch.setattr(nki_isa, name, counting)
    return counts


@pytest.mark.parametrize("name", ["layer_norm", "matmul_bf16_resident", "causal_mask", "cumsum", "gather",
                                  "softmax", "lnc2_scale_add"])
def test_every_executed_instruction_is_recorded(name, executed):
    _, _, result = acc.run_case(acc.BY_NAME[name])
    assert executed["n"] == len(result.trace.records) > 0


def test_record_fields():
    _, _, result = acc.run_case(acc.BY_NAME["matmul_bf16_resident"])
    tr = result.trace
    assert [r.seq for r in tr.records] == list(range(len(tr.records)))
    src = os.path.basename(acc.__file__)
    for r in tr.records:
        assert r.file and os.path.basename(r.file) == src and r.line > 0 and r.function == "matmul_bf16_resident"
        assert r.engine in ("tensor", "vector", "scalar", "gpsimd", "dma", "sync")
        assert r.operands and all(o.mode in ("r", "w", "rw") for o in r.operands)
    mm = next(r for r in tr.records if r.opcode == "nc_matmul")
    assert [len(x) for x in mm.loops] == [3, 3, 3] and [x[0] for x in mm.loops] == ["affine"] * 3
    dst, stat, _mov = mm.operands
    assert (dst.role, dst.buffer, dst.dtype, dst.shape) == ("dst", "psum", "float32", (128, 512))
    assert (stat.buffer, stat.dtype, stat.shape, stat.partitions) == ("sbuf", "bfloat16", (128, 128), 128)
    # the stationary is a column block of a [128, K/128, M] resident tile: its bytes per partition
    a_alloc = tr.allocations[stat.alloc]
    assert stat.addr_lo >= a_alloc.address and stat.addr_hi <= a_alloc.address + a_alloc.bytes_per_partition
    assert stat.addr_hi - stat.addr_lo == 128 * 2 and stat.nbytes == 128 * 128 * 2
    assert stat.pattern == ((1, 128),)
    dma = next(r for r in tr.records if r.opcode == "dma_copy")
    hbm = next(o for o in dma.operands if o.buffer == "hbm")
    assert hbm.contiguous_bytes > 0 and hbm.partitions == 0


def test_lnc2_records_carry_their_program():
    _, _, result = acc.run_case(acc.BY_NAME["lnc2_scale_add"])
    assert {r.program for r in result.trace.records} == {0, 1}


def test_json_round_trip(tmp_path):
    _, _, result = acc.run_case(acc.BY_NAME["layer_norm"])
    tr = result.trace
    path = tmp_path / "trace.json"
    text = tr.to_json(str(path))
    assert path.read_text() == text
    d = json.loads(text)
    assert d["schema"] == "nkieval.trace" and d["version"] == TRACE_SCHEMA_VERSION
    back = Trace.from_json(text)
    assert back.to_dict() == tr.to_dict()
    assert back.records[5] == tr.records[5]
    assert back.opcode_counts() == tr.opcode_counts()


def test_json_rejects_foreign_documents():
    with pytest.raises(ValueError, match="not an nkieval trace"):
        Trace.from_dict({"schema": "other"})
    with pytest.raises(ValueError, match=r"schema version 9\.0 is not supported"):
        Trace.from_dict({"schema": "nkieval.trace", "version": "9.0", "target": "trn2"})
