"""Lean numerics verdicts (``PreparedCheck.check(lean=True)``, the brief review's): a passing output's verdict has
the full verdict's status, margin, deciding gate and every gate's result, with the report-only statistics left
out and said so; any other output gets the full verdict itself. On a matmul (statistical and not, many blocks,
a generic-path op), relu with NaN and infinities, and outputs that pass, fail in a late block, fail only on the
z statistic's quantile, are inconclusive (an all-zeros-passing output) or have unwritten elements."""

from __future__ import annotations

import math

import numpy as np
import pytest

from nkieval.numerics import PrecisionRecipe, PreparedCheck
from nkieval.numerics.gates import _NOT_GATHERED, LEAN_NOTE
from nkieval.numerics.stream import Z_P99_LIMIT
from nkieval.review.adapters import numerics_dict

FP32_MM = PrecisionRecipe(inputs=("fp32", "fp32"), accumulate="fp32", output="fp32")
FP32 = PrecisionRecipe(inputs=("fp32",), accumulate="fp32", output="fp32")


def _matmul() -> tuple[list[np.ndarray], np.ndarray]:
    rng = np.random.default_rng(21)
    a = rng.standard_normal((64, 300)).astype(np.float32)
    b = rng.standard_normal((300, 48)).astype(np.float32)
    return [a, b], a.astype(np.float64) @ b.astype(np.float64)


def _outputs(y: np.ndarray, pc: PreparedCheck, kernel: np.ndarray) -> list[np.ndarray]:
    """A float32 kernel's; correctly rounded; with noise well inside the bounds; one element over the hard bound in the last block
    only; many elements with z over the limit inside the bounds (G5's quantile); NaN (unwritten) in the
    last block; exactly zero (G7 where the bounds are wide); the output in bf16 steps."""
    import ml_dtypes

    rng = np.random.default_rng(22)
    good = y.astype(np.float32)
    blocks = list(pc._blocks(0))
    flat_y = y.reshape(-1)
    outs = [kernel, good]
    noisy = good.reshape(-1).copy()
    for blk in blocks:
        tau = np.minimum(blk.bb.tau_det, blk.bb.tau_prb)
        noisy[blk.e0:blk.e0 + blk.y.size] = (blk.y + rng.uniform(-0.3, 0.3, blk.y.size) * tau).astype(np.float32)
    outs.append(noisy.reshape(y.shape))
    late = good.reshape(-1).copy()
    last = blocks[-1]
    late[last.e0] = np.float32(flat_y[last.e0] + 4 * last.bb.tau_det[0])
    outs.append(late.reshape(y.shape))
    zs = good.reshape(-1).copy()
    for blk in blocks:
        if blk.bb.sigma is None:
            continue
        idx = rng.choice(blk.y.size, size=max(1, blk.y.size // 20), replace=False)
        step = np.minimum(Z_P99_LIMIT * 3 * blk.bb.sigma[idx], 0.9 * blk.bb.tau_prb[idx])
        zs[blk.e0 + idx] = (blk.y[idx] + step).astype(np.float32)
    outs.append(zs.reshape(y.shape))
    unwritten = good.reshape(-1).copy()
    unwritten[last.e0 + last.y.size // 2:] = np.nan
    outs.append(unwritten.reshape(y.shape))
    outs.append(np.zeros_like(good))
    outs.append(good.astype(ml_dtypes.bfloat16).astype(np.float32))
    return outs


def _same_outcome(lean: object, full: object) -> None:
    assert lean.status == full.status  # type: ignore[attr-defined]
    assert lean.deciding_gate == full.deciding_gate  # type: ignore[attr-defined]
    m_lean, m_full = lean.margin, full.margin  # type: ignore[attr-defined]
    assert m_lean == m_full or (math.isnan(m_lean) and math.isnan(m_full))
    assert lean.gates == full.gates  # type: ignore[attr-defined]


def _check_all(pc: PreparedCheck, outs: list[np.ndarray]) -> dict[str, int]:
    seen = {"pass": 0, "other": 0}
    for out in outs:
        full = pc.check(out, diagnose=False)
        pc._memo.clear()  # (the lean check would otherwise get the full verdict back)
        lean = pc.check(out, diagnose=False, lean=True)
        pc._memo.clear()
        _same_outcome(lean, full)
        if full.status == "pass":
            seen["pass"] += 1
            assert LEAN_NOTE in lean.notes and lean.worst == ()
            assert all(getattr(lean.metrics, k) is None for k in _NOT_GATHERED)
            kept = {k: v for k, v in numerics_dict(full)["metrics"].items() if k not in _NOT_GATHERED}
            assert {k: v for k, v in numerics_dict(lean)["metrics"].items() if k not in _NOT_GATHERED} == kept
        else:
            seen["other"] += 1
            assert numerics_dict(lean) == numerics_dict(full)  # the full verdict itself
    return seen


@pytest.mark.parametrize("family", ["normal", None])
def test_lean_matmul_verdicts_have_the_full_outcome(family: str | None) -> None:
    inputs, y = _matmul()
    pc = PreparedCheck(inputs, "matmul", FP32_MM, input_family=family, keep_blocks=True, block_elems=512)
    assert len(list(pc._blocks(0))) > 4
    seen = _check_all(pc, _outputs(y, pc, inputs[0] @ inputs[1]))
    assert seen["pass"] >= 2 and seen["other"] >= 3


def test_lean_generic_path_verdicts_have_the_full_outcome() -> None:
    inputs, _ = _matmul()
    a, b = (x.astype(np.float64) for x in inputs)

    def fn(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.tanh(0.1 * (a @ b))  # (not multilinear: provisional magnitudes first, then refined)

    pc = PreparedCheck([a, b], fn, FP32_MM, input_family="normal", keep_blocks=True, block_elems=512, k=300,
                       multilinear=False)
    assert pc.refinable
    kernel = np.tanh(np.float32(0.1) * (inputs[0] @ inputs[1]))
    seen = _check_all(pc, _outputs(fn(a, b), pc, kernel))
    assert seen["pass"] >= 1 and seen["other"] >= 2


def test_lean_verdicts_with_special_values() -> None:
    rng = np.random.default_rng(23)
    x = rng.standard_normal((40, 64)).astype(np.float32)
    x[0, :4] = [np.nan, np.inf, -np.inf, 0.0]
    pc = PreparedCheck([x], "relu", FP32, input_family="normal", keep_blocks=True, block_elems=256)
    good = np.maximum(x, 0)
    good[0, 0] = np.nan
    swallowed = good.copy()
    swallowed[0, 0] = 0.0
    produced = good.copy()
    produced[-1, -1] = np.nan
    seen = _check_all(pc, [good, swallowed, produced])
    assert seen == {"pass": 1, "other": 2}


def test_a_lean_check_that_gives_up_returns_and_keeps_the_full_verdict() -> None:
    inputs, y = _matmul()
    pc = PreparedCheck(inputs, "matmul", FP32_MM, input_family="normal", keep_blocks=True, block_elems=512)
    bad = y.astype(np.float32)
    bad.reshape(-1)[0] += np.float32(1.0)  # over every bound in the first block: the lean stream stops there
    v = pc.check(bad, diagnose=False, lean=True)
    assert v.status == "fail" and LEAN_NOTE not in v.notes and v.worst
    assert pc.check(bad, diagnose=False) is v  # kept as the full verdict
    good = y.astype(np.float32)
    full = pc.check(good, diagnose=False)
    assert pc.check(good, diagnose=False, lean=True) is full  # a kept full verdict serves a lean check too
