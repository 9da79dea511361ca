"""The simulator's speed caches never change what a kernel computes or records.

* ``NkiTensor._index`` memoises the normalisation of plain int / slice / ``nl.ds`` keys and keeps
  sub-views per view; the result must equal the general path (NumPy integer keys) exactly.
* ``NkiTensor.access`` shares one operand cache between equal views of an allocation.
* ``isa.core.read_f32`` keeps fp32 copies of the SBUF views a matmul reads: every write path
  must drop them, so a matmul after any write sees the new values.
"""

import ml_dtypes
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from isa_testlib import BF16, psum, rand

from nkieval.sim.errors import NkiValidationError
from nkieval.sim.isa import core
from nkieval.sim.runner import run_kernel


def in_kernel(fn, *arrays):
    box = {}

    def kernel(*args):
        box["v"] = fn(*args)

    run_kernel(kernel, arrays)
    return box["v"]


def _geometry(t):
    return t.shape, t.strides, t.offset, t.dtype.name, t.alloc.id


def _slow(key):
    """The same key with NumPy integers, which takes the general indexing path."""
    def conv(k):
        if isinstance(k, slice):
            return slice(*(None if v is None else np.int64(v) for v in (k.start, k.stop, k.step)))
        return np.int64(k)
    return tuple(conv(k) for k in key) if isinstance(key, tuple) else conv(key)


KEYS = [
    3, (slice(None), 2), (1, 2, 3), (slice(1, 5), slice(None), 4), (slice(0, 8, 2), 1), (-1,),
    (slice(2, None), slice(-3, None), slice(None, 2)), (slice(None), slice(None), slice(None, None, -1)),
    (slice(None), 0, slice(1, 6, 2)),
]


@pytest.mark.parametrize("buffer", ["sbuf", "hbm"])
def test_fast_index_path_equals_general_path(buffer):
    def fn(a):
        t = a if buffer == "hbm" else nl.ndarray((8, 4, 6), dtype=nl.float32, buffer=nl.sbuf)
        out = []
        for key in KEYS:
            first, again, slow = t[key], t[key], t[_slow(key)]
            assert first is not again
            out.append((_geometry(first), _geometry(again), _geometry(slow),
                        first.access("x", "r") == slow.access("x", "r")))
            sub = first[0:1]  # a view of a cached view: offsets keep propagating
            out.append((_geometry(sub), _geometry(slow[_slow((slice(0, 1),))]), True))
        return out

    for geos in in_kernel(fn, np.zeros((8, 4, 6), np.float32)):
        assert all(g == geos[0] for g in geos[:-1]) and geos[-1]


def test_fast_index_path_raises_like_general_path():
    def fn(a):
        msgs = []
        for key in [(slice(0, 9),), (8,), (slice(None), slice(3, 2)), (0, 0, 0, 0)]:
            for k in (key, _slow(key), key):  # the error is never cached
                try:
                    a[k]
                except NkiValidationError as e:
                    msgs.append(str(e))
        return msgs

    msgs = in_kernel(fn, np.zeros((8, 4, 6), np.float32))
    assert len(msgs) == 12 and all(msgs[i] == msgs[i - i % 3] for i in range(12))


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_fast_index_matches_numpy_values(data):
    shape = (5, 7, 3)
    arr = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    keys = []
    for n in shape[:data.draw(st.integers(1, 3))]:
        if data.draw(st.booleans()):
            keys.append(data.draw(st.integers(-n, n - 1)))
        else:
            lo = data.draw(st.integers(0, n - 1))
            keys.append(slice(lo, data.draw(st.integers(lo + 1, n)), data.draw(st.integers(1, 3))))
    key = tuple(keys)

    def fn(a):
        return [np.array(a[key].data) for _ in range(2)] + [np.array(a[_slow(key)].data)]

    got = in_kernel(fn, arr)
    for g in got:
        np.testing.assert_array_equal(g, arr[key])


# -- the fp32 copy of resident matmul operands --------------------------------------------------------------
WRITES = ["dma_copy", "tensor_copy", "memset", "tensor_tensor", "iota", "activation"]


@pytest.mark.parametrize("check", [False, True], ids=["lazy", "checked"])
def test_matmul_sees_every_write_to_a_cached_operand(check, monkeypatch):
    monkeypatch.setattr(core, "_CHECK_F32_CACHE", check)  # checked: every reuse of a copy is verified
    nt = len(WRITES)
    a = rand((128, nt, 64), 1).astype(BF16)
    b = rand((128, 96), 2).astype(BF16)
    c = rand((128, 64), 3).astype(BF16)
    built = []

    def kernel(a, b, c):
        a_sb = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        b_sb = nl.ndarray(b.shape, dtype=b.dtype, buffer=nl.sbuf)
        c_sb = nl.ndarray(c.shape, dtype=c.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a_sb, src=a)
        nisa.dma_copy(dst=b_sb, src=b)
        nisa.dma_copy(dst=c_sb, src=c)
        out = nl.ndarray((2 * nt, 64, 96), dtype=nl.float32, buffer=nl.shared_hbm)

        def mm(j, i):
            acc = psum((64, 96))
            nisa.nc_matmul(dst=acc, stationary=a_sb[:, i, :], moving=b_sb)
            res = nl.ndarray((64, 96), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res, src=acc)
            nisa.dma_copy(dst=out[j], src=res)

        for _ in range(2):  # read all of a_sb twice: its fp32 copy is built
            for i in range(nt):
                mm(i, i)
        built.append(a_sb.alloc.f32 is not None)
        for i, how in enumerate(WRITES):
            dst = a_sb[:, i, :]
            if how == "dma_copy":
                nisa.dma_copy(dst=dst, src=c)
            elif how == "tensor_copy":
                nisa.tensor_copy(dst=dst, src=c_sb)
            elif how == "memset":
                nisa.memset(dst=dst, value=1.5)
            elif how == "tensor_tensor":
                nisa.tensor_tensor(dst=dst, data1=c_sb, data2=c_sb, op=nl.add)
            elif how == "iota":
                nisa.iota(dst=dst, pattern=[[1, 64]], offset=0, channel_multiplier=0)
            elif how == "activation":
                nisa.activation(dst=dst, op=nl.copy, data=c_sb, scale=-1.0)
            mm(nt + i, i)
        return out

    out = nki.simulate(kernel)(a, b, c)
    assert built == [True]
    c32 = c.astype(np.float32)
    new = {"dma_copy": c32, "tensor_copy": c32, "memset": np.full((128, 64), 1.5, np.float32),
           "tensor_tensor": (c32 + c32).astype(BF16).astype(np.float32),
           "iota": np.broadcast_to(np.arange(64, dtype=np.float32).astype(BF16).astype(np.float32), (128, 64)),
           "activation": -c32}
    b32 = b.astype(np.float32)
    for i, how in enumerate(WRITES):
        np.testing.assert_allclose(out[i], a[:, i, :].astype(np.float32).T @ b32, rtol=1e-5, atol=1e-4)
        np.testing.assert_allclose(out[nt + i], new[how].T @ b32, rtol=1e-5, atol=1e-4, err_msg=how)


def test_fp32_copy_is_read_only_and_dropped_on_write():
    a = rand((128, 2, 32), 4).astype(ml_dtypes.bfloat16)

    def fn(a_hbm):
        t = nl.ndarray(a_hbm.shape, dtype=a_hbm.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a_hbm)
        views = [core.read_f32(t[:, i, :]) for i in range(2)] + [core.read_f32(t[:, 0, :])]
        cached = t.alloc.f32 is not None
        nisa.memset(dst=t[:, 1, :], value=0.0)
        return views, cached, t.alloc.f32 is None, core.read_f32(t[:, 1, :]).copy()

    views, cached, dropped, after = in_kernel(fn, a)
    assert cached and dropped
    assert not views[2].flags.writeable
    np.testing.assert_array_equal(views[2], a[:, 0, :].astype(np.float32))
    np.testing.assert_array_equal(after, np.zeros((128, 32), np.float32))


def _mixed_kernel(a, b):
    """DMA, Vector, Scalar and GpSimd instructions on tiles and HBM, with a reduce result."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    x = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    y = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    r = nl.ndarray((a.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=a)
    nisa.dma_copy(dst=y, src=b)
    nisa.tensor_tensor(dst=x, data1=x, data2=y, op=nl.add)
    nisa.tensor_scalar(dst=y, data=x, op0=nl.multiply, operand0=2.0)
    nisa.activation(dst=x, op=nl.exp, data=y, reduce_op=nl.add, reduce_res=r)
    nisa.tensor_copy(dst=y, src=x)
    nisa.memset(dst=x, value=0.0)
    nisa.dma_copy(dst=out, src=y)
    return out


def test_an_untraced_run_makes_no_operand_records(monkeypatch):
    """``record`` makes the operands' trace records only for a kept trace (``record_trace``); a traced run makes one
    per operand of every record, with the roles and modes the instruction names."""
    from nkieval.sim.options import SimOptions
    from nkieval.sim.tensor import NkiTensor

    calls = []
    real = NkiTensor.access

    def counted(self, role, mode):
        calls.append((role, mode))
        return real(self, role, mode)

    monkeypatch.setattr(NkiTensor, "access", counted)
    a, b = rand((128, 64)), rand((128, 64))
    untraced = run_kernel(_mixed_kernel, [a, b], options=SimOptions.from_env(record_trace=False))
    assert calls == []
    traced = run_kernel(_mixed_kernel, [a, b], options=SimOptions.from_env())
    np.testing.assert_array_equal(untraced.outputs, traced.outputs)
    ops = [(o.role, o.mode) for rec in traced.trace.records for o in rec.operands]
    assert calls == ops
    assert [rec.opcode for rec in traced.trace.records] == [
        "dma_copy", "dma_copy", "tensor_tensor", "tensor_scalar", "activation", "tensor_copy", "memset", "dma_copy"]
    assert ops[:4] == [("dst", "w"), ("src", "r"), ("dst", "w"), ("src", "r")]
    assert ("reduce_res", "w") in ops


def test_enum_arguments_remembered_are_still_checked():
    """``core.enum_value`` remembers accepted ints and members by type: a bool, a float or an unknown value equal
    to an accepted one is still refused, and an object with its own ``value`` is read each time."""
    from nkieval.sim.isa.enums import oob_mode

    assert core.enum_value(oob_mode.skip, oob_mode, "oob_mode") == int(oob_mode.skip)
    assert core.enum_value(int(oob_mode.skip), oob_mode, "oob_mode") == int(oob_mode.skip)
    assert core.enum_value(np.int32(int(oob_mode.skip)), oob_mode, "oob_mode") == int(oob_mode.skip)
    one = next(int(m) for m in oob_mode if int(m) == 1)
    core.enum_value(one, oob_mode, "oob_mode")
    for bad in (True, 1.0, 99, "skip", [1]):
        with pytest.raises(NkiValidationError, match="oob_mode must be one of"):
            core.enum_value(bad, oob_mode, "oob_mode")

    class Changing:
        value = int(oob_mode.skip)

    c = Changing()
    assert core.enum_value(c, oob_mode, "oob_mode") == int(oob_mode.skip)
    c.value = 99
    with pytest.raises(NkiValidationError):
        core.enum_value(c, oob_mode, "oob_mode")
