"""nc_matmul's ``is_stationary_onezero`` / ``is_moving_onezero``: a promise about an fp32 operand's values.

The hint lets the PE skip the fp32 passes an operand of other values needs, and the performance model credits the
2x (``mm_fp32_onezero_speedup``), so the run checks the promise where it has the values: an fp32 operand flagged
but holding anything but zeros and ones is an ``onezero-hint`` error (its result would be undefined on hardware,
its speed-up unearned). Identity transposes and ones broadcasts, the documented uses, run as before; the hint has
no effect, and is not checked, on other dtypes; a record-only run (no values) leaves the check to the replay.
"""

from __future__ import annotations

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

from nkieval.sim.errors import NkiValidationError
from nkieval.sim.program import ArgSpec, Program, record_program, replay_program


def k_scaled_sum(ones_like, x):
    """``stationary.T @ x`` with ``stationary`` loaded from the first input and flagged as zeros and ones."""
    st = nl.ndarray(ones_like.shape, dtype=ones_like.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=st, src=ones_like)
    mv = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=mv, src=x)
    acc = nl.ndarray((ones_like.shape[1], x.shape[1]), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=acc, stationary=st, moving=mv, is_stationary_onezero=True)
    out = nl.ndarray(acc.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    res = nl.ndarray(acc.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=acc)
    nisa.dma_copy(dst=out, src=res)
    return out


def k_identity_transpose(x, eye):
    """``x.T`` through the PE with an fp32 identity as the flagged moving operand (the documented use)."""
    ident = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=ident, src=eye)
    src = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=src, src=x)
    acc = nl.ndarray((x.shape[1], 128), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=acc, stationary=src, moving=ident, is_moving_onezero=True)
    res = nl.ndarray(acc.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=acc)
    out = nl.ndarray(acc.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=res)
    return out


def _x(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((128, 256)).astype(np.float32)


def test_ones_and_identity_keep_their_hint():
    ones = np.ones((128, 64), np.float32)
    np.testing.assert_allclose(nki.simulate(k_scaled_sum)(ones, _x()), ones.T @ _x(), rtol=1e-6, atol=1e-5)
    mask = (np.random.default_rng(1).random((128, 64)) < 0.5).astype(np.float32)  # zeros and ones, -0.0 among them
    mask[0, 0] = -0.0
    np.testing.assert_allclose(nki.simulate(k_scaled_sum)(mask, _x()), mask.T @ _x(), rtol=1e-6, atol=1e-5)
    x = _x(2)[:, :96]
    np.testing.assert_array_equal(nki.simulate(k_identity_transpose)(x, np.eye(128, dtype=np.float32)), x.T)


@pytest.mark.parametrize("bad", [0.5, -1.0, 2.0, np.nan, np.inf])
def test_an_fp32_operand_with_other_values_breaks_the_hint(bad):
    st = np.ones((128, 64), np.float32)
    st[3, 17] = bad
    with pytest.raises(NkiValidationError) as info:
        nki.simulate(k_scaled_sum)(st, _x())
    err = info.value
    assert (err.rule, err.operand, err.instruction) == ("onezero-hint", "stationary", "nc_matmul")
    assert "is_stationary_onezero=True but stationary[128, 64] holds values other than 0 and 1" in str(err)
    assert "at [3, 17]" in str(err)


def test_the_hint_is_not_checked_where_it_has_no_effect():
    # the documented "no impact for non-float32": a bf16 operand of any values runs as it always did
    st = np.random.default_rng(3).standard_normal((128, 64)).astype(np.float32).astype(nl.bfloat16)
    x = _x().astype(nl.bfloat16)
    got = nki.simulate(k_scaled_sum)(st, x)
    want = st.astype(np.float32).T @ x.astype(np.float32)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


def test_a_recording_without_values_leaves_the_check_to_the_replay():
    rec = record_program(k_scaled_sum, [ArgSpec((128, 64), "float32"), ArgSpec((128, 256), "float32")])
    prog = Program.from_json(rec.program.to_json())
    ones = np.ones((128, 64), np.float32)
    np.testing.assert_allclose(replay_program(prog, [ones, _x()], {}).outputs, ones.T @ _x(), rtol=1e-6, atol=1e-5)
    halves = np.full((128, 64), 0.5, np.float32)
    with pytest.raises(NkiValidationError, match=r"rule onezero-hint"):
        replay_program(prog, [halves, _x()], {})
