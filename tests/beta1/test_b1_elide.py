"""The Beta-1 compiler's lowering of assignments and zeroed accumulators (nkieval.frontends.beta1.elide): the
trace holds what the compiler emits (the result written where it is assigned, no PSUM memset before an
accumulation group), the values are the eager simulation's, and every elision condition is checked."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np
import pytest

from nkieval.frontends.beta1.elide import elide
from nkieval.perf import estimate
from nkieval.sim.trace import AllocationRecord, OperandAccess, Trace, TraceRecord

RNG = np.random.default_rng(5)


def _trace():
    return nki.last_result().trace


def _by_opcode(tr):
    out = {}
    for r in tr.records:
        out.setdefault(r.opcode, []).append(r)
    return out


def _consistent(tr):
    """Record positions, allocation positions and operand allocations agree after an elision."""
    assert [r.seq for r in tr.records] == list(range(len(tr.records)))
    used = {o.alloc for r in tr.records for o in r.operands}
    for o_alloc in used:
        assert o_alloc in tr.allocations
    for a in tr.allocations.values():
        assert 0 <= a.alloc_seq <= len(tr.records)
        assert a.free_seq is None or a.alloc_seq <= a.free_seq <= len(tr.records)
        uses = [i for i, r in enumerate(tr.records) if any(o.alloc == a.id for o in r.operands)]
        if uses and not a.kernel_arg:
            assert a.alloc_seq <= uses[0]
            assert a.free_seq is None or uses[-1] < a.free_seq


def test_loads_assigned_into_a_tile_are_one_dma_each_into_the_tile():
    @nki.jit(mode="simulation")
    def kern(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((2, nl.par_dim(128), 64), dtype=x.dtype, buffer=nl.sbuf)
        for k in nl.affine_range(2):
            t[k, :, :] = nl.load(x[k * 128:(k + 1) * 128, :])
        for k in nl.affine_range(2):
            nl.store(out[k * 128:(k + 1) * 128, :], value=t[k, :, :])
        return out

    x = RNG.standard_normal((256, 64)).astype(np.float32)
    np.testing.assert_array_equal(kern(x), x)
    tr = _trace()
    ops = _by_opcode(tr)
    assert "tensor_copy" not in ops
    loads = [r for r in ops["dma_copy"] if r.operands[0].buffer == "sbuf"]
    assert len(loads) == 2
    tile_ids = {r.operands[0].alloc for r in loads}
    assert len(tile_ids) == 1 and sorted(tr.allocations[tile_ids.pop()].shape) == [2, 64, 128]  # the named tile
    _consistent(tr)
    assert estimate(tr, "trn1").summary["vector_instruction_count"] == 0


@pytest.mark.parametrize("cast", [False, True])
def test_a_computed_result_is_written_where_it_is_assigned(cast):
    # into a tile of another dtype too: compute engines calculate in fp32 and cast on writing, so the activation
    # writes the bf16 tile itself
    @nki.jit(mode="simulation")
    def kern(x):
        dt = nl.bfloat16 if cast else x.dtype
        out = nl.ndarray(x.shape, dtype=dt, buffer=nl.shared_hbm)
        a = nl.load(x)
        y = nl.ndarray(x.shape, dtype=dt, buffer=nl.sbuf)
        y[...] = nl.exp(a)
        nl.store(out, value=y)
        return out

    x = RNG.standard_normal((128, 32)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(kern(x), np.float32), np.exp(x), rtol=2e-2 if cast else 1e-5)
    ops = _by_opcode(_trace())
    assert "tensor_copy" not in ops
    (act,) = ops["activation"]
    dst = next(o for o in act.operands if "w" in o.mode)
    (store,) = [r for r in ops["dma_copy"] if r.operands[0].buffer == "hbm"]
    assert dst.alloc == next(o for o in store.operands if o.role == "src").alloc  # y itself
    assert (dst.dtype, dst.nbytes) == (("bfloat16", 128 * 32 * 2) if cast else ("float32", 128 * 32 * 4))
    _consistent(_trace())


def test_a_named_value_read_again_keeps_its_copy():
    @nki.jit(mode="simulation")
    def kern(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        y = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        y[...] = t
        nl.store(out, value=nl.add(y, t))
        return out

    x = RNG.standard_normal((128, 16)).astype(np.float32)
    np.testing.assert_array_equal(kern(x), x + x)
    assert len(_by_opcode(_trace())["tensor_copy"]) == 1  # t is read by the add: the compiler keeps both tiles


def test_a_cast_on_assignment_keeps_its_copy():
    @nki.jit(mode="simulation")
    def kern(x):
        out = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.shared_hbm)
        y = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.sbuf)
        y[...] = nl.load(x)
        nl.store(out, value=y)
        return out

    x = RNG.standard_normal((128, 16)).astype(np.float32)
    kern(x)
    assert len(_by_opcode(_trace())["tensor_copy"]) == 1


def test_a_zeroed_psum_accumulator_starts_its_group_with_the_first_matmul():
    @nki.jit(mode="simulation")
    def kern(a_t, b):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)
        for k in nl.affine_range(2):
            acc[...] += nisa.nc_matmul(nl.load(a_t[k * 128:(k + 1) * 128, :]), nl.load(b[k * 128:(k + 1) * 128, :]))
        nl.store(out, value=nl.copy(acc))
        return out

    a_t = RNG.standard_normal((256, 128)).astype(np.float32)
    b = RNG.standard_normal((256, 512)).astype(np.float32)
    np.testing.assert_allclose(kern(a_t, b), a_t.T @ b, rtol=2e-2, atol=2e-2)
    tr = _trace()
    ops = _by_opcode(tr)
    assert "memset" not in ops
    mm = ops["nc_matmul"]
    modes = [next(o.mode for o in r.operands if o.role == "dst") for r in mm]
    assert modes[0] == "w" and all(m == "rw" for m in modes[1:])
    _consistent(tr)


def test_a_zeroed_accumulator_read_before_any_matmul_keeps_its_memset():
    @nki.jit(mode="simulation")
    def kern(a_t, b):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)
        first = nl.copy(acc)
        acc[...] += nisa.nc_matmul(nl.load(a_t), nl.load(b))
        nl.store(out, value=nl.add(nl.copy(acc), first))
        return out

    a_t = RNG.standard_normal((128, 128)).astype(np.float32)
    b = RNG.standard_normal((128, 512)).astype(np.float32)
    np.testing.assert_allclose(kern(a_t, b), a_t.T @ b, rtol=2e-2, atol=2e-2)
    assert len(_by_opcode(_trace())["memset"]) == 1


# -- the pass on hand-made traces: each condition that keeps a copy -------------------------------------------
def _op(alloc, role, mode, buffer="sbuf", lo=0, hi=256, dtype="float32", shape=(128, 64), name=""):
    return OperandAccess(role, mode, buffer, alloc, shape, dtype, 0, 128, lo, hi, 128 * (hi - lo), hi - lo,
                         ((1, shape[-1]),), name)


def _hand_trace(between: bool = False, extra_reader: bool = False, two_writers: bool = False):
    """load HBM(1) -> tmp(2); [between: a record touching x(3)]; tensor_copy tmp -> x; store x -> HBM(4)."""
    tr = Trace(target="trn1")
    for aid, buf in ((1, "hbm"), (2, "sbuf"), (3, "sbuf"), (4, "hbm")):
        tr.allocations[aid] = AllocationRecord(aid, buf, f"t{aid}", (128, 64), "float32", 0, 0, 256, None, 0, 0,
                                               kernel_arg=buf == "hbm")
    recs = []

    def add(opcode, engine, ops):
        recs.append(TraceRecord(len(recs), opcode, engine, ops, {}, 0, (), "k.py", len(recs) + 1))
        return recs[-1]

    add("dma_copy", "dma", [_op(2, "dst", "w"), _op(1, "src", "r", buffer="hbm")])
    if two_writers:
        add("memset", "vector", [_op(2, "dst", "w")])
    if between:
        add("memset", "vector", [_op(3, "dst", "w")])
    copy = add("tensor_copy", "vector", [_op(3, "dst", "w"), _op(2, "src", "r")])
    if extra_reader:
        add("tensor_copy", "vector", [_op(3, "dst", "w"), _op(2, "src", "r")])
    add("dma_copy", "dma", [_op(4, "dst", "w", buffer="hbm"), _op(3, "src", "r")])
    tr.records = recs
    tr.allocations[2].free_seq = len(recs)
    return tr, copy


def test_the_pass_elides_the_plain_case_and_renumbers():
    tr, copy = _hand_trace()
    assert elide(tr, [copy]) == 1
    assert [r.opcode for r in tr.records] == ["dma_copy", "dma_copy"]
    assert tr.records[0].operands[0].alloc == 3 and tr.records[0].operands[0].role == "dst"
    assert 2 not in tr.allocations
    _consistent(tr)


@pytest.mark.parametrize("case", ["between", "extra_reader", "two_writers"])
def test_the_pass_keeps_a_copy_whose_elision_could_be_observed(case):
    tr, copy = _hand_trace(**{case: True})
    n = len(tr.records)
    assert elide(tr, [copy]) == 0
    assert len(tr.records) == n and 2 in tr.allocations


def test_the_pass_keeps_a_copy_that_casts_or_reshapes():
    # (the hand-made producer is a DMA: it cannot cast)
    for kw in ({"dtype": "bfloat16"}, {"shape": (128, 32, 2)}):
        tr, copy = _hand_trace()
        copy.operands[0] = _op(3, "dst", "w", **kw)
        assert elide(tr, [copy]) == 0


@pytest.mark.parametrize("opcode, engine, elided", [("tensor_scalar", "vector", True), ("activation", "scalar", True),
                                                    ("iota", "gpsimd", False), ("bn_stats", "vector", False)])
def test_a_casting_copy_goes_only_where_the_producer_can_write_any_dtype(opcode, engine, elided):
    tr, copy = _hand_trace()
    tr.records[0] = TraceRecord(0, opcode, engine, [_op(2, "dst", "w")], {}, 0, (), "k.py", 1)
    copy.operands[0] = _op(3, "dst", "w", dtype="bfloat16")
    assert elide(tr, [copy]) == int(elided)
    if elided:
        assert tr.records[0].operands[0].alloc == 3 and tr.records[0].operands[0].dtype == "bfloat16"
        _consistent(tr)


def test_a_chain_of_assignments_collapses_into_the_load():
    @nki.jit(mode="simulation")
    def kern(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        a = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        b = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        a[...] = nl.load(x)
        b[...] = a  # a is read by nothing else: the load writes b
        nl.store(out, value=b)
        return out

    x = RNG.standard_normal((128, 16)).astype(np.float32)
    np.testing.assert_array_equal(kern(x), x)
    tr = _trace()
    assert [r.opcode for r in tr.records] == ["dma_copy", "dma_copy"]
    load, store = tr.records
    assert load.operands[0].alloc == next(o for o in store.operands if o.role == "src").alloc
    assert len([a for a in tr.allocations.values() if a.buffer == "sbuf"]) == 1
    _consistent(tr)


def test_a_destination_allocated_after_the_producer_keeps_its_copy():
    @nki.jit(mode="simulation")
    def kern(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        b = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)  # allocated after the load ran
        b[...] = t
        nl.store(out, value=b)
        return out

    x = RNG.standard_normal((128, 16)).astype(np.float32)
    np.testing.assert_array_equal(kern(x), x)
    tr = _trace()
    assert [r.opcode for r in tr.records] == ["dma_copy", "tensor_copy", "dma_copy"]
    _consistent(tr)


def test_a_masked_load_assigned_to_a_tile_is_one_dma_into_the_mask():
    @nki.jit(mode="simulation")
    def kern(x):
        n, d = x.shape
        out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
        i_p = nl.arange(128)[:, None]
        i_f = nl.arange(d)[None, :]
        for i in nl.affine_range((n + 127) // 128):
            rows = i * 128 + i_p
            buf = nl.ndarray((128, d), dtype=x.dtype, buffer=nl.sbuf)
            buf[i_p, i_f] = nl.load(x[rows, i_f], mask=rows < n)
            nl.store(out[rows, i_f], value=buf[i_p, i_f], mask=rows < n)
        return out

    x = RNG.standard_normal((300, 64)).astype(np.float32)
    np.testing.assert_array_equal(kern(x), x)
    tr = _trace()
    assert [r.opcode for r in tr.records] == ["dma_copy"] * 6
    assert tr.records[4].operands[0].partitions == 44  # the ragged tile's load writes its 44 rows of buf
    _consistent(tr)


def test_a_moved_destination_is_dataclasses_replace():
    """elide's direct construction of the moved operand equals ``dataclasses.replace`` field for field (a new field
    of OperandAccess, or another order, fails here)."""
    import dataclasses

    from nkieval.frontends.beta1.elide import _moved
    from nkieval.sim.trace import OperandAccess

    values = {f.name: f"v{k}" if f.type in ("str", str) else (k,) * 2 for k, f in enumerate(dataclasses.fields(OperandAccess))}
    dst = OperandAccess(**values)
    out = OperandAccess(**{k: (f"o{v}" if isinstance(v, str) else v) for k, v in values.items()})
    assert _moved(dst, out) == dataclasses.replace(dst, role=out.role, mode=out.mode, name=out.name)
