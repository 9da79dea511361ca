"""``nl.int64`` (current ``nki`` API): which paths take it, which refuse it, and that nothing truncates it.

Documented (nki.isa.scalar_load / scalar_store / NkiScalar pages): scalar_load and scalar_store accept
nl.int64 and the value "is not truncated"; "Unlike the compute instructions, scalar_load accepts nl.int64".
nkieval therefore lets DMA move int64 bit-exactly and refuses it in every other instruction.
"""

from __future__ import annotations

import pickle

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

from nkieval.sim import dtypes as dt
from nkieval.sim.errors import NkiValidationError
from nkieval.sim.isa import INSTRUCTIONS
from nkieval.sim.isa.core import INT64_INSTRUCTIONS
from nkieval.sim.runner import run_kernel

BIG = np.array([[(1 << 40) + 7]], np.int64)


def _sbuf_copy(x):
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    return t


def test_nl_int64_is_exported_by_the_current_api_only():
    assert nl.int64 is dt.int64 and nl.int64.itemsize == 8
    import neuronxcc.nki.language as b1nl

    assert not hasattr(b1nl, "int64")


def test_numpy_int64_and_the_name_are_not_nl_int64():
    for like in (np.int64, np.dtype(np.int64), "int64"):
        with pytest.raises(dt.UnknownDTypeError, match=r"write nl\.int64") as e:
            dt.to_dtype(like)
        assert e.value.rule == "dtype"
    assert dt.to_dtype(dt.int64) is dt.int64


def test_int64_dtype_pickles_to_the_singleton():
    assert pickle.loads(pickle.dumps(dt.int64)) is dt.int64


def test_int64_kernel_argument_round_trips_bit_exact():
    vals = np.array([[np.iinfo(np.int64).max, np.iinfo(np.int64).min, -1, (1 << 53) + 1]], np.int64)

    def k(x):
        assert x.dtype is nl.int64
        t = _sbuf_copy(x)
        o = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=o, src=t)
        return o

    out = nki.simulate(k)(vals)
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, vals)


def test_torch_int64_argument_becomes_int64():
    torch = pytest.importorskip("torch")

    def k(x):
        s = nisa.scalar_load(x)
        o = nl.ndarray((1, 1), dtype=nl.int64, buffer=nl.shared_hbm)
        nisa.scalar_store(o, s + 1)
        return o

    out = nki.simulate(k)(torch.tensor([[1 << 40]], dtype=torch.int64))
    assert int(out[0, 0]) == (1 << 40) + 1


def test_beta1_keeps_refusing_int64_arguments():
    import neuronxcc.nki as b1

    def k(x):
        return x

    with pytest.raises(NkiValidationError, match="kernel argument 'x'") as e:
        b1.simulate_kernel(k, BIG)
    assert e.value.rule == "kernel"


def test_scalar_store_keeps_all_64_bits():
    def k(x):
        s = nisa.scalar_load(_sbuf_copy(x))
        o = nl.ndarray((1, 3), dtype=nl.int64, buffer=nl.shared_hbm)
        for j, v in enumerate((s * s, -s, s - s - 1)):
            r = nl.ndarray((1, 1), dtype=nl.int64, buffer=nl.sbuf)
            nisa.scalar_store(r, v)
            nisa.dma_copy(dst=o[:, j:j + 1], src=r)
        return o

    x = int(BIG[0, 0])
    want = [(x * x + (1 << 63)) % (1 << 64) - (1 << 63), -x, -1]  # int64 multiplication wraps at 64 bits
    np.testing.assert_array_equal(nki.simulate(k)(BIG), np.array([want], np.int64))


def test_int64_offset_beyond_32_bits_is_not_truncated():
    """An HBM row offset of 2**32 + 1 must address row 2**32 + 1 (out of bounds here), never row 1."""
    rows = np.arange(12, dtype=np.float32).reshape(4, 3)

    def k(x, i):
        s = nisa.scalar_load(i)
        t = nl.ndarray((1, 3), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x.ap([[3, 1], [1, 3]], offset=0, scalar_offset=s, indirect_dim=0))
        return t

    with pytest.raises(NkiValidationError) as e:
        nki.simulate(k)(rows, np.array([[(1 << 32) + 1]], np.int64))
    assert e.value.rule == "out-of-bounds"


def test_int64_tiles_count_eight_bytes_in_capacity():
    def k(x):
        t = nl.ndarray((4, 100), dtype=nl.int64, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        o = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=o, src=t)
        return o

    res = run_kernel(k, (np.zeros((4, 100), np.int64),))
    recs = [a for a in res.trace.allocations.values() if a.buffer == "sbuf" and a.dtype == "int64"]
    assert recs and recs[0].bytes_per_partition >= 800


@pytest.mark.parametrize("name", sorted(n for n in INSTRUCTIONS if n not in INT64_INSTRUCTIONS))
def test_every_other_instruction_refuses_an_int64_operand(name):
    """The gate runs before the instruction's own checks, whatever else the call gets wrong."""
    info = INSTRUCTIONS[name]

    def k(x):
        t = _sbuf_copy(x)
        info.fn(t)

    with pytest.raises(NkiValidationError) as e:
        run_kernel(k, (np.zeros((4, 4), np.int64),), target="trn3")
    assert e.value.rule == "dtype", str(e.value)
    assert "nl.int64" in str(e.value) and e.value.instruction == name


def test_int64_inside_an_operand_list_is_found():
    def k(x):
        t = _sbuf_copy(x)
        f = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_compute(dst=f, srcs=[f, t], scales=[1.0, 1.0], reduce_op=nl.add)

    with pytest.raises(NkiValidationError, match=r"srcs is an nl\.int64 tensor") as e:
        run_kernel(k, (np.zeros((4, 4), np.int64),))
    assert e.value.rule == "dtype"
