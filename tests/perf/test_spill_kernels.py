"""Spill priced by what moves, on kernels of our own that over-subscribe SBUF (trn2: 212,984 usable B/partition).

A zero-initialised buffer overwritten tile by tile before it is read moves nothing; data computed on chip and read
later is saved and reloaded; zeros read before they are written are refilled by a memset, not read from HBM; and a
kernel whose DMAs are mostly spill traffic is labelled spill-bound.
"""

from __future__ import annotations

import ml_dtypes
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

from nkieval.perf import estimate
from nkieval.perf import spill as spill_mod
from nkieval.perf.metrics import WAIT_BOUND_SHARE, classify
from nkieval.perf.spill import estimate_spill
from nkieval.sim.options import SimOptions

pytestmark = pytest.mark.filterwarnings("ignore:kernel. tiles live at once need")

F, T = 65536, 2048  # a [128, 65536] fp32 buffer: 256 KiB per partition, more than the SBUF holds
USABLE = 212984  # trn2 compiler-usable SBUF per partition (nkipy HardwareConstants.h)


@nki.jit
def zero_then_overwrite(x):
    out = nl.ndarray((128, F), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((128, F), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=0.0)
    for i in nl.affine_range(F // T):
        t = nl.ndarray((128, T), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[:, i * T:(i + 1) * T])
        nisa.tensor_scalar(dst=acc[:, i * T:(i + 1) * T], data=t, op0=nl.multiply, operand0=2.0)
        nisa.dma_copy(dst=out[:, i * T:(i + 1) * T], src=acc[:, i * T:(i + 1) * T])
    return out


@nki.jit
def zero_then_accumulate(x):
    out = nl.ndarray((128, F), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((128, F), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=0.0)
    for i in nl.affine_range(F // T):
        t = nl.ndarray((128, T), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[:, i * T:(i + 1) * T])
        nisa.tensor_tensor(dst=acc[:, i * T:(i + 1) * T], data1=acc[:, i * T:(i + 1) * T], data2=t, op=nl.add)
        nisa.dma_copy(dst=out[:, i * T:(i + 1) * T], src=acc[:, i * T:(i + 1) * T])
    return out


@nki.jit
def compute_then_read(x):
    out = nl.ndarray((128, F), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((128, F), dtype=nl.float32, buffer=nl.sbuf)
    for i in nl.affine_range(F // T):
        t = nl.ndarray((128, T), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[:, i * T:(i + 1) * T])
        nisa.tensor_scalar(dst=acc[:, i * T:(i + 1) * T], data=t, op0=nl.multiply, operand0=2.0)
    for i in nl.affine_range(F // T):
        y = nl.ndarray((128, T), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=y, data1=acc[:, i * T:(i + 1) * T], data2=acc[:, i * T:(i + 1) * T], op=nl.multiply)
        nisa.dma_copy(dst=out[:, i * T:(i + 1) * T], src=y)
    return out


FB, TB = 131072, 4096  # bf16: 256 KiB per partition


@nki.jit
def cyclic_passes(x):
    """Three in-place passes over a buffer larger than SBUF: each pass needs tiles the previous one evicted."""
    out = nl.ndarray((128, FB), dtype=nl.bfloat16, buffer=nl.shared_hbm)
    acc = nl.ndarray((128, FB), dtype=nl.bfloat16, buffer=nl.sbuf)
    for i in nl.affine_range(FB // TB):
        nisa.dma_copy(dst=acc[:, i * TB:(i + 1) * TB], src=x[:, i * TB:(i + 1) * TB])
    for _ in range(3):
        for i in nl.affine_range(FB // TB):
            nisa.tensor_scalar(dst=acc[:, i * TB:(i + 1) * TB], data=acc[:, i * TB:(i + 1) * TB], op0=nl.add,
                               operand0=1.0)
    for i in nl.affine_range(FB // TB):
        nisa.dma_copy(dst=out[:, i * TB:(i + 1) * TB], src=acc[:, i * TB:(i + 1) * TB])
    return out


def _trace(kernel, x):
    nki.simulate(kernel, target="trn2", options=SimOptions.from_env(capacity_check="warn"))(x)
    return nki.last_result().trace


@pytest.fixture(scope="module")
def x32():
    return np.ones((128, F), np.float32)


def _both_walks_agree(trace) -> None:
    native = estimate_spill(trace, USABLE)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(spill_mod, "_NATIVE", False)
        assert estimate_spill(trace, USABLE) == native


def test_a_zero_initialised_buffer_overwritten_before_it_is_read_moves_nothing(x32) -> None:
    tr = _trace(zero_then_overwrite, x32)
    assert tr.peak_sbuf_bytes > USABLE
    s = estimate(tr, "trn2").summary
    assert s["spill_evictions"] > 0  # the buffer does not fit: tiles are dropped ...
    # ... but the zeros are dead before anything reads them: no save, no reload, no refill
    assert (s["spill_save_bytes"], s["spill_reload_bytes"], s["spill_refill_bytes"]) == (0, 0, 0)
    _both_walks_agree(tr)


def test_zeros_read_before_they_are_written_are_refilled_not_reloaded(x32) -> None:
    tr = _trace(zero_then_accumulate, x32)
    s = estimate(tr, "trn2").summary
    assert s["spill_save_bytes"] == 0 and s["spill_reload_bytes"] == 0
    # at least the overflow of the buffer must be made again before it is read
    assert s["spill_refill_bytes"] >= (tr.peak_sbuf_bytes - USABLE) * 128
    _both_walks_agree(tr)


def test_data_computed_on_chip_and_read_later_is_saved_and_reloaded(x32) -> None:
    tr = _trace(compute_then_read, x32)
    s = estimate(tr, "trn2").summary
    assert s["spill_reload_bytes"] == s["spill_save_bytes"]  # every evicted tile is read again
    assert s["spill_reload_bytes"] >= (tr.peak_sbuf_bytes - USABLE) * 128
    assert s["spill_refill_bytes"] == 0
    _both_walks_agree(tr)


def test_a_kernel_whose_dmas_are_mostly_spill_is_labelled_spill_bound() -> None:
    tr = _trace(cyclic_passes, np.ones((128, FB), ml_dtypes.bfloat16))
    est = estimate(tr, "trn2")
    assert est.bottleneck.resource == "spill" and est.bottleneck.bound == "memory"
    assert "spill" in est.bottleneck.reason
    assert est.summary["spill_dma_active_time_percent"] >= 0.5 * est.summary["dma_active_time_percent"]
    assert est.stalls["vector"]["waiting_on_spill"] > 0


@pytest.mark.parametrize("spill_share,expect", [(WAIT_BOUND_SHARE, "spill"), (WAIT_BOUND_SHARE / 2, "vector")])
def test_the_busiest_engine_waiting_on_spill_names_spill(spill_share: float, expect: str) -> None:
    total = 1000.0
    util = {"tensor": 0.0, "vector": 0.8, "scalar": 0.0, "gpsimd": 0.0, "sync": 0.0, "dma": 0.3}
    stalls = {"vector": {"busy": 800.0, "waiting_on_spill": spill_share * total}}
    b = classify(util, stalls, total)
    assert b.resource == expect
    assert b.bound == ("memory" if expect == "spill" else "compute")
