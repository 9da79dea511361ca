"""The compiler model's passes on small kernels of our own: each fires where it should and not where it must not."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from click.testing import CliRunner

from nkieval import frontends

frontends.install()

import nki  # noqa: E402
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402

from nkieval.perf import estimate  # noqa: E402
from nkieval.perf.compiler import (  # noqa: E402
    PASSES,
    CompilerOptionError,
    CompilerOptions,
    compile_trace,
    parse_options,
)
from nkieval.sim.trace import Trace  # noqa: E402


def _trace(kernel, *args) -> Trace:
    nki.simulate(kernel, target="trn2")(*args)
    return nki.last_result().trace


def _only(name: str) -> CompilerOptions:
    return parse_options(["all=off", f"{name}=on"])


def _report(trace: Trace, name: str):
    out, rep = compile_trace(trace, _only(name))
    return out, next(p for p in rep.passes if p.name == name)


X = np.random.default_rng(0).standard_normal((128, 512), dtype=np.float32)
W = np.random.default_rng(1).standard_normal((128, 128), dtype=np.float32)


# -- dead-stores ---------------------------------------------------------------------------------------
@nki.jit
def zeros_then_overwrite(x):
    out = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x[0:128, 0:128])
    z = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=z, value=0.0)
    nisa.tensor_scalar(dst=z, data=t, op0=nl.multiply, operand0=2.0)
    nisa.dma_copy(dst=out, src=z)
    return out


@nki.jit
def zeros_then_partial_overwrite(x):
    out = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x[0:128, 0:64])
    z = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=z, value=0.0)
    nisa.tensor_scalar(dst=z[:, 0:64], data=t, op0=nl.multiply, operand0=2.0)
    nisa.dma_copy(dst=out, src=z)  # reads the zeros of columns 64..127
    return out


@nki.jit
def psum_zeroed_then_accumulated(x, w):
    out = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.shared_hbm)
    acc = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)
    nisa.memset(dst=acc, value=0.0)
    for k in nl.affine_range(4):
        a = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a, src=x[0:128, k * 128:(k + 1) * 128])
        b = nl.ndarray((128, 128), dtype=w.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=b, src=w)
        nisa.nc_matmul(dst=acc, stationary=a, moving=b, accumulate=True)
    res = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=acc)
    nisa.dma_copy(dst=out, src=res)
    return out


def test_dead_stores_removes_a_memset_that_is_overwritten_whole():
    tr = _trace(zeros_then_overwrite, X)
    out, rep = _report(tr, "dead-stores")
    assert tr.opcode_counts()["memset"] == 1
    assert out.opcode_counts()["memset"] == 0 and rep.instructions_after == rep.instructions_before - 1
    assert out.opcode_counts()["tensor_scalar"] == 1


def test_dead_stores_keeps_a_memset_whose_bytes_are_read():
    tr = _trace(zeros_then_partial_overwrite, X)
    out, rep = _report(tr, "dead-stores")
    assert out.opcode_counts()["memset"] == 1 and rep.changed == 0


@pytest.mark.filterwarnings("ignore:nc_matmul. accumulate=True onto PSUM written by a non-matmul")
def test_dead_stores_folds_a_zeroing_memset_into_the_first_accumulating_matmul():
    tr = _trace(psum_zeroed_then_accumulated, X, W)
    matmul_dst_modes = [r.operands[0].mode for r in tr.records if r.opcode == "nc_matmul"]
    assert matmul_dst_modes[0] == "rw"  # the simulator accumulates onto the memset's zeros
    out, _rep = _report(tr, "dead-stores")
    assert out.opcode_counts()["memset"] == 0
    modes = [r.operands[0].mode for r in out.records if r.opcode == "nc_matmul"]
    assert modes == ["w", "rw", "rw", "rw"]


# -- redundant-loads ------------------------------------------------------------------------------------
@nki.jit
def invariant_weight_load(x, w):
    out = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(4):
        wt = nl.ndarray((128, 128), dtype=w.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=wt, src=w)
        xt = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=xt, src=x[0:128, i * 128:(i + 1) * 128])
        y = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=y, data1=xt, data2=wt, op=nl.add)
        nisa.dma_copy(dst=out[0:128, i * 128:(i + 1) * 128], src=y)
    return out


@nki.jit
def load_of_a_source_written_in_the_loop(x, w):
    scratch = nl.ndarray((128, 128), dtype=w.dtype, buffer=nl.shared_hbm)
    out = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(4):
        wt = nl.ndarray((128, 128), dtype=w.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=wt, src=scratch)
        xt = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=xt, src=x[0:128, i * 128:(i + 1) * 128])
        y = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=y, data1=xt, data2=wt, op=nl.add)
        nisa.dma_copy(dst=scratch, src=y)
        nisa.dma_copy(dst=out[0:128, i * 128:(i + 1) * 128], src=y)
    return out


@nki.jit
def invariant_in_the_outer_loop_only(x, w):
    out = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.shared_hbm)
    for _i in nl.affine_range(2):
        for k in nl.affine_range(4):
            xt = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=xt, src=x[0:128, k * 128:(k + 1) * 128])  # the same for every i
            y = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.sbuf)
            nisa.tensor_scalar(dst=y, data=xt, op0=nl.multiply, operand0=2.0)
            nisa.dma_copy(dst=out[0:128, k * 128:(k + 1) * 128], src=y)
    return out


def test_redundant_loads_hoists_a_loop_invariant_load_and_redirects_its_readers():
    tr = _trace(invariant_weight_load, X, W)
    out, rep = _report(tr, "redundant-loads")
    assert rep.instructions_before - rep.instructions_after == 3
    assert rep.dma_bytes_before - rep.dma_bytes_after == 3 * 128 * 128 * 4
    kept = {r.operands[2].alloc for r in out.records if r.opcode == "tensor_tensor"}
    assert len(kept) == 1  # all four adds read the one tile loaded in the first iteration
    (a,) = kept
    last_add = max(r.seq for r in out.records if r.opcode == "tensor_tensor")
    assert out.allocations[a].free_seq > last_add  # its lifetime covers the later readers


@pytest.mark.filterwarnings("ignore:dma_copy. reads HBM tensor")
def test_redundant_loads_leaves_a_load_whose_source_is_written_in_the_loop():
    tr = _trace(load_of_a_source_written_in_the_loop, X, W)
    _, rep = _report(tr, "redundant-loads")
    assert rep.changed == 0


def test_redundant_loads_leaves_a_load_invariant_only_in_an_outer_loop():
    tr = _trace(invariant_in_the_outer_loop_only, X, W)
    _, rep = _report(tr, "redundant-loads")
    assert rep.changed == 0


# -- merge-iterations -------------------------------------------------------------------------------------
@nki.jit
def column_by_column(x):
    out = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x[0:128, 0:64])
    y = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.sbuf)
    for j in nl.affine_range(64):
        nisa.tensor_scalar(dst=y[:, j:j + 1], data=t[:, j:j + 1], op0=nl.multiply, operand0=2.0)
    nisa.dma_copy(dst=out, src=y)
    return out


@nki.jit
def prefix_chain(x):
    out = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    y = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=y, src=x[0:128, 0:64])
    for j in nl.affine_range(63):  # iteration j reads what iteration j - 1 wrote
        nisa.tensor_scalar(dst=y[:, j + 1:j + 2], data=y[:, j:j + 1], op0=nl.multiply, operand0=2.0)
    nisa.dma_copy(dst=out, src=y)
    return out


@nki.jit
def column_by_column_sequential(x):
    out = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x[0:128, 0:64])
    y = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.sbuf)
    for j in nl.sequential_range(64):
        nisa.tensor_scalar(dst=y[:, j:j + 1], data=t[:, j:j + 1], op0=nl.multiply, operand0=2.0)
    nisa.dma_copy(dst=out, src=y)
    return out


def test_merge_iterations_merges_independent_column_ops_into_one_instruction():
    tr = _trace(column_by_column, X)
    out, _rep = _report(tr, "merge-iterations")
    assert tr.opcode_counts()["tensor_scalar"] == 64
    (merged,) = [r for r in out.records if r.opcode == "tensor_scalar"]
    assert merged.attrs["merged_iterations"] == 64
    assert [o.shape for o in merged.operands] == [(128, 64), (128, 64)]
    assert sum(o.nbytes for o in merged.operands) == sum(o.nbytes for r in tr.records if r.opcode == "tensor_scalar"
                                                         for o in r.operands)


def test_merge_iterations_leaves_iterations_that_depend_on_each_other():
    tr = _trace(prefix_chain, X)
    out, rep = _report(tr, "merge-iterations")
    assert rep.changed == 0 and out.opcode_counts()["tensor_scalar"] == 63


def test_merge_iterations_leaves_a_sequential_range_loop():
    tr = _trace(column_by_column_sequential, X)
    _, rep = _report(tr, "merge-iterations")
    assert rep.changed == 0


def test_merged_iterations_estimate_faster_than_the_instructions_one_by_one():
    tr = _trace(column_by_column, X)
    on = estimate(tr, "trn2", compiler=_only("merge-iterations"))
    off = estimate(tr, "trn2", compiler=CompilerOptions.off())
    assert off.instructions == off.traced_instructions == len(tr.records)
    assert on.instructions == len(tr.records) - 63
    assert on.total_time_ns < 0.5 * off.total_time_ns


# -- options, report, CLI ------------------------------------------------------------------------------------
def test_options_name_every_pass_and_refuse_unknown_ones():
    assert [p.name for p in PASSES] == ["broadcast-lowering", "dead-stores", "redundant-loads", "merge-iterations",
                                        "engine-balance"]
    assert all(p.source.strip() and p.what.strip() for p in PASSES)
    loads = next(p for p in PASSES if p.name == "redundant-loads")
    assert parse_options(["redundant-loads=off"]).is_on(loads) is False
    assert parse_options([]).is_on(loads) is True
    with pytest.raises(CompilerOptionError, match="no compiler pass 'hoist'"):
        parse_options(["hoist=off"])
    with pytest.raises(CompilerOptionError, match="NAME=on or NAME=off"):
        parse_options(["dead-stores"])


def test_compiler_model_leaves_the_input_trace_unchanged():
    tr = _trace(invariant_weight_load, X, W)
    before = tr.to_json()
    compile_trace(tr)
    assert tr.to_json() == before


def test_cli_profile_reports_what_the_compiler_did(tmp_path):
    from nkieval.perf.cli import profile

    src = tmp_path / "k.py"
    src.write_text(
        "import nki, nki.isa as nisa, nki.language as nl\n"
        "@nki.jit\n"
        "def k(x, w):\n"
        "    out = nl.ndarray((128, 256), dtype=x.dtype, buffer=nl.shared_hbm)\n"
        "    for i in nl.affine_range(2):\n"
        "        wt = nl.ndarray((128, 128), dtype=w.dtype, buffer=nl.sbuf)\n"
        "        nisa.dma_copy(dst=wt, src=w)\n"
        "        xt = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.sbuf)\n"
        "        nisa.dma_copy(dst=xt, src=x[0:128, i * 128:(i + 1) * 128])\n"
        "        y = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.sbuf)\n"
        "        nisa.tensor_tensor(dst=y, data1=xt, data2=wt, op=nl.add)\n"
        "        nisa.dma_copy(dst=out[0:128, i * 128:(i + 1) * 128], src=y)\n"
        "    return out\n")
    run = CliRunner().invoke(profile, [f"{src}::k", "--target", "trn2", "--input", "128x256", "--input", "128x128"])
    assert run.exit_code == 0, run.output
    assert "what the compiler did (8 traced -> 7 instructions)" in run.output
    assert "redundant-loads   instr 8 -> 7, DMA bytes 393216 -> 327680" in run.output
    off = CliRunner().invoke(profile, [f"{src}::k", "--target", "trn2", "--input", "128x256", "--input", "128x128",
                                       "--compiler-pass", "redundant-loads=off"])
    assert off.exit_code == 0 and "redundant-loads   off" in off.output
    bad = CliRunner().invoke(profile, [f"{src}::k", "--compiler-pass", "nope=on"])
    assert bad.exit_code == 2 and "no compiler pass 'nope'" in bad.output


# -- invariants over a family of kernels ------------------------------------------------------------------
def _offset_chain(d: int):
    """Iteration j writes column j + d from column j: iterations d apart depend on each other (d = 0: none)."""
    @nki.jit
    def kernel(x):
        out = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
        y = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=y, src=x[0:128, 0:64])
        for j in nl.affine_range(64 - d):
            nisa.tensor_scalar(dst=y[:, j + d:j + d + 1], data=y[:, j:j + 1], op0=nl.add, operand0=1.0)
        nisa.dma_copy(dst=out, src=y)
        return out
    return kernel


@pytest.mark.parametrize("d", [0, 1, 2, 3])
def test_no_merged_instruction_joins_iterations_that_depend_on_each_other(d):
    tr = _trace(_offset_chain(d), X)
    out, _ = _report(tr, "merge-iterations")
    n_orig = tr.opcode_counts()["tensor_scalar"]
    merged = [r for r in out.records if r.opcode == "tensor_scalar"]
    assert sum(r.attrs.get("merged_iterations", 1) for r in merged) == n_orig  # every instance kept once
    for r in merged:
        k = r.attrs.get("merged_iterations", 1)
        dst, src = r.operands[0], r.operands[1]
        # a merged group's reads must not overlap its own writes unless it is one instance reading itself (d = 0)
        if k > 1 and d > 0:
            assert src.addr_hi <= dst.addr_lo or dst.addr_hi <= src.addr_lo
    if d == 0:
        assert len(merged) == 1
    else:
        assert len(merged) > 1 and max(r.attrs.get("merged_iterations", 1) for r in merged) <= d


def test_compiler_model_never_adds_instructions_or_dma_bytes():
    for kernel, args in ((zeros_then_overwrite, (X,)), (invariant_weight_load, (X, W)), (column_by_column, (X,)),
                         (prefix_chain, (X,)), (scale_by_broadcast_row, (XB, ROW))):
        _, rep = compile_trace(_trace(kernel, *args))
        for p in rep.passes:
            assert p.instructions_after <= p.instructions_before and p.dma_bytes_after <= p.dma_bytes_before


# -- engine-balance (opt-in) -------------------------------------------------------------------------------
@nki.jit
def copies_and_scalings(x):
    out = nl.ndarray((128, 2048), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(4):
        t = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[0:128, i * 512:(i + 1) * 512])
        a = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=a, src=t)
        b = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=b, data=a, op0=nl.multiply, operand0=2.0)
        acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
        nisa.tensor_copy(dst=acc, src=b)
        c = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=c, src=acc)
        nisa.dma_copy(dst=out[0:128, i * 512:(i + 1) * 512], src=c)
    return out


X4 = np.random.default_rng(2).standard_normal((128, 2048), dtype=np.float32)


def test_engine_balance_is_off_by_default_and_spreads_placeable_ops_when_on():
    tr = _trace(copies_and_scalings, X4)
    _, rep = compile_trace(tr)
    assert not next(p for p in rep.passes if p.name == "engine-balance").enabled
    assert {r.engine for r in tr.records if r.engine != "dma"} == {"vector"}
    out, rep = _report(tr, "engine-balance")
    engines = {r.engine for r in out.records if r.engine != "dma"}
    assert {"vector", "scalar"} <= engines and rep.changed > 0
    for r in out.records:
        if r.engine == "gpsimd":  # GpSimd cannot access PSUM
            assert all(o.buffer != "psum" for o in r.operands)
    on = estimate(tr, "trn2", compiler=_only("engine-balance"))
    off = estimate(tr, "trn2", compiler=CompilerOptions.off())
    assert on.summary["vector_active_time"] < off.summary["vector_active_time"]


def test_engine_balance_keeps_tensor_copy_off_the_scalar_engine_on_neuroncore_v2():
    from nkieval.perf.compiler.engine_balance import allowed_engines

    tr = _trace(copies_and_scalings, X4)
    copies = [r for r in tr.records if r.opcode == "tensor_copy"]
    assert all("scalar" not in allowed_engines(r, "trn1") for r in copies)
    assert all("scalar" in allowed_engines(r, "trn2") for r in copies)
    psum_reads = [r for r in copies if any(o.buffer == "psum" for o in r.operands)]
    assert psum_reads and all("gpsimd" not in allowed_engines(r, "trn2") for r in psum_reads)


def _accesses_outside_lifetimes(trace: Trace) -> list[tuple[int, int]]:
    """(record, alloc) of every on-chip access outside its allocation's [alloc_seq, free_seq) span."""
    bad = []
    for i, r in enumerate(trace.records):
        for o in r.operands:
            a = trace.allocations.get(o.alloc)
            if a is None or a.buffer == "hbm":
                continue
            if not (a.alloc_seq <= i and (a.free_seq is None or i < a.free_seq)):
                bad.append((i, o.alloc))
    return bad


@pytest.mark.filterwarnings("ignore:nc_matmul. accumulate=True onto PSUM written by a non-matmul")
def test_compiled_traces_access_every_tile_within_its_lifetime():
    for kernel, args in ((zeros_then_overwrite, (X,)), (invariant_weight_load, (X, W)), (column_by_column, (X,)),
                         (psum_zeroed_then_accumulated, (X, W)), (scale_by_broadcast_row, (XB, ROW))):
        tr = _trace(kernel, *args)
        assert _accesses_outside_lifetimes(tr) == []
        out, _ = compile_trace(tr)
        assert [r.seq for r in out.records] == list(range(len(out.records)))
        assert _accesses_outside_lifetimes(out) == []


# -- broadcast-lowering ------------------------------------------------------------------------------------
@nki.jit
def scale_by_broadcast_row(x, g):
    out = nl.ndarray((128, 1024), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 1024), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    r = nl.ndarray((1, 1024), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.dma_copy(dst=r, src=g)
    gb = nl.broadcast_to(r, shape=(128, 1024))
    y = nl.multiply(t, gb)
    nisa.dma_copy(dst=out, src=y)
    return out


@nki.jit
def broadcast_both_axes(x, g):
    out = nl.ndarray((128, 256), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 256), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x[0:128, 0:256])
    r = nl.ndarray((1, 1), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=r, src=g[0:1, 0:1])
    gb = nl.broadcast_to(r, shape=(128, 256))
    y = nl.multiply(t, gb)
    nisa.dma_copy(dst=out, src=y)
    return out


@nki.jit
def broadcast_by_hand(x, g):
    out = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.shared_hbm)
    r = nl.ndarray((1, 512), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=r, src=g[0:1, 0:512])
    ones = nl.ndarray((1, 128), dtype=x.dtype, buffer=nl.sbuf)
    nisa.memset(dst=ones, value=1.0)
    ps = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=ps, stationary=ones, moving=r)
    staged = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=staged, src=ps)
    res = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=staged)
    nisa.dma_copy(dst=out, src=res)
    return out


XB = np.random.default_rng(3).standard_normal((128, 1024), dtype=np.float32)
ROW = np.random.default_rng(4).standard_normal((1, 1024), dtype=np.float32).astype(ml_dtypes.bfloat16)


def _trace_on(kernel, target, *args) -> Trace:
    nki.simulate(kernel, target=target)(*args)
    return nki.last_result().trace


def test_broadcast_lowering_evacuates_psum_straight_into_the_result_tile():
    tr = _trace(scale_by_broadcast_row, XB, ROW)
    copies = [r for r in tr.records if r.opcode == "tensor_copy"]
    assert len(copies) == 3  # two 512-column evacuations into an fp32 staging tile, one full copy (to bf16)
    staging = copies[0].writes()[0].alloc
    result = copies[2].writes()[0].alloc
    out, rep = _report(tr, "broadcast-lowering")
    assert rep.instructions_after == rep.instructions_before - 1
    kept = [r for r in out.records if r.opcode == "tensor_copy"]
    assert len(kept) == 2 and all(r.writes()[0].alloc == result for r in kept)
    assert not any(o.alloc == staging for r in out.records for o in r.operands)
    # the evacuations cover the result tile's two column halves, byte for byte (bf16: 2 bytes a column)
    lo = tr.allocations[result].address
    assert sorted((r.writes()[0].addr_lo - lo, r.writes()[0].addr_hi - lo) for r in kept) == [(0, 1024), (1024, 2048)]
    assert {r.engine for r in kept} == {"vector", "scalar"}  # trn2: Scalar may read PSUM; the load is split
    assert _accesses_outside_lifetimes(out) == []


def test_broadcast_lowering_lowers_vector_time_of_a_vector_bound_kernel():
    tr = _trace(scale_by_broadcast_row, XB, ROW)
    on = estimate(tr, "trn2", compiler=_only("broadcast-lowering"))
    off = estimate(tr, "trn2", compiler=CompilerOptions.off())
    assert on.summary["vector_active_time"] < off.summary["vector_active_time"]
    assert on.total_time_ns < off.total_time_ns


def test_broadcast_lowering_keeps_evacuations_on_the_vector_engine_on_neuroncore_v2():
    tr = _trace_on(scale_by_broadcast_row, "trn1", XB, ROW)
    out, rep = _report(tr, "broadcast-lowering")
    assert rep.instructions_after == rep.instructions_before - 1
    assert {r.engine for r in out.records if r.opcode == "tensor_copy"} == {"vector"}


def test_broadcast_lowering_keeps_the_copy_of_a_free_dimension_broadcast():
    tr = _trace(broadcast_both_axes, X, X[0:1, 0:1].copy())
    out, rep = _report(tr, "broadcast-lowering")
    assert rep.instructions_after == rep.instructions_before  # the copy reads a stride-0 view: it stays
    assert [r.opcode for r in out.records] == [r.opcode for r in tr.records]


def test_broadcast_lowering_leaves_the_same_instructions_written_by_hand():
    tr = _trace(broadcast_by_hand, X, X[0:1].copy())
    out, rep = _report(tr, "broadcast-lowering")
    assert rep.changed == 0 and out is tr
