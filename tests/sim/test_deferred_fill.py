"""Deferred sentinel fills (``allocate(..., defer_fill=True)``) leave every value, warning and trace as an eager
fill does: the storage is filled before an instruction or the host first touches it, and only a write known to
cover every element of the storage (``cover_deferred_fill``) skips the fill (issue 31, speed)."""

import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

from nkieval.sim import tensor as sim_tensor
from nkieval.sim.context import current
from nkieval.sim.errors import NkiValidationError
from nkieval.sim.runner import run_kernel
from nkieval.sim.tensor import _covers, allocate, cover_deferred_fill


def _run(fn):
    """Run ``fn()`` inside a kernel; returns (fn's value, the run's warnings)."""
    box = {}

    def kernel():
        box["v"] = fn()

    res = run_kernel(kernel, ())
    return box["v"], res.trace.warnings


def _copy_out(t):
    """``t``'s values as an instruction reads them (a copy into a fresh, eagerly filled SBUF tile)."""
    out = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=out, src=t)
    return np.array(out.data, dtype=np.float64)


@pytest.mark.parametrize(("dtype", "sentinel"), [(nl.float32, np.nan), (nl.bfloat16, np.nan), (nl.int32, 4)])
def test_a_read_before_any_write_reads_the_sentinels_and_warns(dtype, sentinel):
    def fn():
        t = allocate((4, 8), dtype, nl.sbuf, "t", defer_fill=True)
        return _copy_out(t)

    got, warns = _run(fn)
    assert np.array_equal(got, np.full((4, 8), sentinel), equal_nan=True)
    assert [w["rule"] for w in warns] == ["uninitialized"]


def test_a_partial_write_keeps_the_sentinels_in_the_rest():
    def fn():
        t = allocate((4, 8), nl.float32, nl.sbuf, "t", defer_fill=True)
        nisa.memset(dst=t[:, 0:3], value=1.5)
        return _copy_out(t)

    got, _ = _run(fn)
    assert (got[:, :3] == 1.5).all()
    assert np.isnan(got[:, 3:]).all()


def test_a_host_read_fills_first():
    def fn():
        t = allocate((2, 3), nl.float32, nl.sbuf, "t", defer_fill=True)
        return np.asarray(t), t.numpy()

    (a, b), _ = _run(fn)
    assert np.isnan(a).all() and np.isnan(b).all()


def _count_fills(monkeypatch):
    filled = []
    real = sim_tensor._fill_sentinel

    def spy(storage, value):
        filled.append(storage.shape)
        real(storage, value)

    monkeypatch.setattr(sim_tensor, "_fill_sentinel", spy)
    return filled


def test_a_write_covering_the_storage_skips_the_fill(monkeypatch):
    filled = _count_fills(monkeypatch)

    def fn():
        t = allocate((4, 2, 8), nl.float32, nl.sbuf, "t", defer_fill=True)
        cover_deferred_fill(t.permute((0, 2, 1)))  # the whole storage, through a transposed view of it
        pending = set(current().unfilled)
        nisa.memset(dst=t, value=2.0)
        return _copy_out(t), pending

    (got, pending), _ = _run(fn)
    assert (got == 2.0).all()
    assert pending == set()
    assert filled == [(4, 2, 8)]  # the copy's destination (eager); never the covered tile


def test_a_write_covering_part_of_the_storage_fills_it(monkeypatch):
    filled = _count_fills(monkeypatch)

    def fn():
        t = allocate((4, 16), nl.float32, nl.sbuf, "t", defer_fill=True)
        assert filled == []
        cover_deferred_fill(t[:, 0:8])
        assert filled == [(4, 16)]
        nisa.memset(dst=t[:, 0:8], value=3.0)
        return _copy_out(t)

    got, _ = _run(fn)
    assert (got[:, :8] == 3.0).all() and np.isnan(got[:, 8:]).all()


def test_a_freed_tile_leaves_the_program_s_deferred_set():
    def fn():
        ctx = current()
        t = allocate((2, 4), nl.float32, nl.sbuf, "t", defer_fill=True)
        during = set(ctx.unfilled)
        del t
        return during, set(ctx.unfilled)

    (during, after), _ = _run(fn)
    assert len(during) == 1 and after == set()


@pytest.mark.parametrize(("shape", "strides", "covers"), [
    ((4, 8), (32, 4), True),  # C order
    ((8, 4), (4, 32), True),  # its transpose
    ((2, 4, 4), (16, 4, 32), True),  # a permutation of three axes ((4, 2, 4) in C order)
    ((4, 8, 1), (32, 4, 999), True),  # a unit axis's stride is never stepped
    ((4, 8), (16, 4), False),  # rows overlap: elements 16..31 twice, the last 16 never
    ((4, 8), (64, 4), False),  # gaps: twice the span
    ((32,), (4,), True),
])
def test_covers_only_a_view_holding_each_element_once(shape, strides, covers):
    storage = np.zeros(32, np.float32)
    view = np.lib.stride_tricks.as_strided(storage, shape=shape, strides=strides)
    assert _covers(view, storage) is covers


def test_covers_needs_the_storage_s_size_and_dtype():
    storage = np.zeros((4, 8), np.float32)
    assert not _covers(storage[:, :4], storage)
    assert not _covers(storage.view(np.int32), storage)


def test_a_deferred_psum_tile_gets_its_flags_when_first_touched():
    def fn():
        t = allocate((4, 8), nl.float32, nl.psum, "acc", defer_fill=True)
        before = t.alloc.mm_written
        nisa.memset(dst=t[:, 0:4], value=0.0)
        return before, t.alloc.mm_written.copy(), t.alloc.other_written.copy()

    (before, mm, other), _ = _run(fn)
    assert before is None
    assert not mm.any()
    assert other[:, :4].all() and not other[:, 4:].any()


def test_a_matmul_accumulating_onto_a_deferred_psum_tile_reads_its_sentinels_and_warns():
    def fn():
        a = nl.ndarray((8, 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=a, value=1.0)
        acc = allocate((4, 4), nl.float32, nl.psum, "acc", defer_fill=True)
        nisa.nc_matmul(dst=acc, stationary=a, moving=a, accumulate=True)
        return _copy_out(acc)

    got, warns = _run(fn)
    assert np.isnan(got).all()  # the NaN sentinels plus the product
    assert "psum-accumulate" in [w["rule"] for w in warns]


# -- write-only destinations (isa.core.WRITE_ONLY_DST): the store decides --------------------------------------
def test_a_write_only_instruction_storing_the_whole_dst_skips_the_fill(monkeypatch):
    filled = _count_fills(monkeypatch)

    def fn():
        src = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=src, value=5.0)
        filled.clear()
        t = allocate((4, 8), nl.float32, nl.sbuf, "t", defer_fill=True)
        nisa.tensor_copy(dst=t, src=src)
        return list(filled), t.alloc.unfilled, _copy_out(t)

    (fills, owed, got), _ = _run(fn)
    assert fills == [] and owed is None
    assert (got == 5.0).all()


def test_a_dst_that_is_also_the_source_is_filled_first():
    def fn():
        t = allocate((4, 8), nl.float32, nl.sbuf, "t", defer_fill=True)
        nisa.tensor_copy(dst=t, src=t)
        return _copy_out(t)

    got, warns = _run(fn)
    assert np.isnan(got).all()
    assert "uninitialized" in [w["rule"] for w in warns]


def test_a_dst_whose_storage_another_operand_reads_is_filled_first():
    def fn():
        t = allocate((4, 8), nl.float32, nl.sbuf, "t", defer_fill=True)
        nisa.tensor_copy(dst=t[:, 0:4], src=t[:, 4:8])
        return _copy_out(t)

    got, _ = _run(fn)
    assert np.isnan(got).all()


def test_a_partial_store_that_bypasses_write_keeps_the_sentinels_around_it():
    """Integer tensor_tensor stores its bits straight into the view (isa.core.write_bits): mark_written fills the
    rest of the storage around what was stored."""

    def fn():
        a = nl.ndarray((4, 2), dtype=nl.int32, buffer=nl.sbuf)
        nisa.memset(dst=a, value=6)
        t = allocate((4, 8), nl.int32, nl.sbuf, "t", defer_fill=True)
        nisa.tensor_tensor(dst=t[:, 0:2], data1=a, data2=a, op=nl.bitwise_and)
        return _copy_out(t)

    got, _ = _run(fn)
    assert (got[:, :2] == 6).all() and (got[:, 2:] == 4).all()


def test_a_write_only_instruction_that_raises_leaves_the_fill_owed():
    def fn():
        t = allocate((4, 8), nl.float32, nl.sbuf, "t", defer_fill=True)
        src = nl.ndarray((2, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=src, value=1.0)
        with pytest.raises(NkiValidationError):
            nisa.tensor_copy(dst=t, src=src)  # partition counts differ
        return t.alloc.unfilled, _copy_out(t)

    (owed, got), _ = _run(fn)
    assert owed is not None  # still owed after the refused instruction
    assert np.isnan(got).all()
