"""A stream block whose largest ratio is within its bound (``_Stream.update``: no comparison, count or mismatch
mask built for it) and one whose largest z is within the limit (``_fold_z``): the counts of elements over the
deterministic and the probabilistic bounds, of z over the limit, the mismatch count and locations are those
of every element compared by its definition, on outputs whose blocks are within, at and over their bounds."""

from __future__ import annotations

import numpy as np
import pytest

from nkieval.numerics import PrecisionRecipe, PreparedCheck
from nkieval.numerics.stream import Z_P99_LIMIT

BF16_MM = PrecisionRecipe(inputs=("bf16", "bf16"), accumulate="fp32", output="fp32", accumulation="psum_fp32_k128")


def _case() -> tuple[list[np.ndarray], np.ndarray]:
    import ml_dtypes

    rng = np.random.default_rng(11)
    a = rng.standard_normal((64, 300)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((300, 48)).astype(ml_dtypes.bfloat16)
    return [a, b], a.astype(np.float64) @ b.astype(np.float64)


def _by_definition(pc: PreparedCheck, got: np.ndarray) -> dict[str, int]:
    """Every element's ratios and z, block by block, counted without any block skipped."""
    flat = got.reshape(-1).astype(np.float64)
    det = prb = z_over = mism = 0
    for blk in pc._blocks(0):
        g = flat[blk.e0:blk.e0 + blk.y.size]
        bb = blk.bb
        e = np.abs(g - blk.y)
        with np.errstate(divide="ignore", invalid="ignore"):
            r_det = np.where(bb.tau_det > 0, e / bb.tau_det, np.where(e > 0, np.inf, 0.0))
            r_prb = np.where(bb.tau_prb > 0, e / bb.tau_prb, np.where(e > 0, np.inf, 0.0))
        det += int((r_det > 1).sum())
        prb += int((r_prb > 1).sum())
        over = (r_det > 1) | (r_prb > 1) if pc.statistical else r_det > 1
        mism += int(over.sum())
        if bb.sigma is not None:
            z_over += int((e / np.maximum(bb.sigma, np.finfo(np.float64).tiny) > Z_P99_LIMIT).sum())
    return {"exceed_det": det, "exceed_prb": prb, "z_over": z_over, "mismatch_count": mism}


def _outputs(y: np.ndarray, pc: PreparedCheck) -> list[np.ndarray]:
    """Correctly rounded; then errors of a few times the bound in some blocks only, at and near the bound, and
    z just over and under the limit, so that quiet and loud blocks alternate."""
    rng = np.random.default_rng(12)
    good = y.astype(np.float32)
    outs = [good]
    blocks = list(pc._blocks(0))
    for factors in ((3.0,), (0.999, 1.001), (0.5, 1.5, 2.0), (1.0,)):
        out = good.reshape(-1).copy()
        for i, blk in enumerate(blocks):
            if i % 3:  # two blocks in three left within their bounds
                continue
            idx = rng.choice(blk.y.size, size=4, replace=False)
            f = np.asarray(factors)[rng.integers(0, len(factors), size=4)]
            tau = blk.bb.tau_prb if pc.statistical else blk.bb.tau_det
            out[blk.e0 + idx] = (blk.y[idx] + f * tau[idx]).astype(np.float32)
        outs.append(out.reshape(y.shape))
    z_out = good.reshape(-1).copy()
    for blk in blocks[::2]:
        if blk.bb.sigma is None:
            continue
        j = int(rng.integers(0, blk.y.size))
        z_out[blk.e0 + j] = np.float32(blk.y[j] + Z_P99_LIMIT * 1.01 * blk.bb.sigma[j])
    outs.append(z_out.reshape(y.shape))
    return outs


@pytest.mark.parametrize("family", ["normal", None])
def test_counts_over_the_bounds_and_z_are_those_of_every_element(family: str | None) -> None:
    inputs, y = _case()
    pc = PreparedCheck(inputs, "matmul", BF16_MM, input_family=family, keep_blocks=True, block_elems=256)
    assert len(list(pc._blocks(0))) > 6
    quiet = loud = 0
    for out in _outputs(y, pc):
        m = pc.check(out, diagnose=False).metrics
        want = _by_definition(pc, out)
        assert {k: getattr(m, k) for k in want} == want
        # the output's blocks include both kinds (the test exercises the skipped and the counted path)
        flat = out.reshape(-1).astype(np.float64)
        for blk in pc._blocks(0):
            e = np.abs(flat[blk.e0:blk.e0 + blk.y.size] - blk.y)
            over = bool((e > blk.bb.tau_det).any())
            quiet, loud = quiet + (not over), loud + over
    assert quiet and loud


def test_mismatch_locations_with_quiet_blocks_between_loud_ones() -> None:
    inputs, y = _case()
    pc = PreparedCheck(inputs, "matmul", BF16_MM, input_family="normal", keep_blocks=True, block_elems=256)
    out = y.astype(np.float32)
    blocks = list(pc._blocks(0))
    flat = out.reshape(-1)
    bad = []
    for blk in blocks[1::3]:
        j = blk.e0 + blk.y.size // 2
        flat[j] = np.float32(y.reshape(-1)[j] + 5 * blk.bb.tau_det[blk.y.size // 2])
        bad.append(j)
    v = pc.check(out, diagnose=False)
    assert v.metrics.mismatch_count == len(bad)
    fresh = PreparedCheck(inputs, "matmul", BF16_MM, input_family="normal", keep_blocks=True, block_elems=len(flat))
    assert v.metrics.mismatch_where == fresh.check(out, diagnose=False).metrics.mismatch_where


@pytest.mark.parametrize("storage", ["float32", "bfloat16"])
def test_the_correctly_rounded_rate_is_that_of_every_element(storage: str) -> None:
    """``cr_rate``, read off the ULP histogram's zero distances where the output is in the recipe's own storage
    type, is the share of compared elements equal to ``fl_out(y)``: with elements one ulp off, signed zeros
    against zeros of the oracle, and an output in a wider storage than the recipe's (counted by comparison)."""
    import ml_dtypes

    from nkieval.numerics.formats import round_to

    rng = np.random.default_rng(13)
    x = rng.standard_normal((32, 64)).astype(np.float32)
    recipe = PrecisionRecipe(inputs=("fp32",), accumulate="fp32", output="bf16" if storage == "bfloat16" else "fp32")
    dt = ml_dtypes.bfloat16 if storage == "bfloat16" else np.float32
    x[0, :8] = 0.0  # relu(0) = 0: zeros of the oracle
    pc = PreparedCheck([x], "relu", recipe, input_family="normal", keep_blocks=True, block_elems=256)
    y_out = round_to(np.maximum(x.astype(np.float64), 0.0), recipe.out_format)
    bits = np.uint16 if storage == "bfloat16" else np.uint32
    for trial in range(6):
        out = y_out.astype(dt)
        flat = out.reshape(-1)
        idx = rng.choice(flat.size, size=trial * 40, replace=False)
        flat.view(bits)[idx] += 1  # one ulp further from zero
        if trial % 2:
            out[0, :8] = -0.0  # -0 == +0: correctly rounded
        m = pc.check(out, diagnose=False).metrics
        want = np.count_nonzero(out.astype(np.float64) == y_out) / out.size
        assert 0 < want and (want < 1) == (trial > 0)
        assert m.cr_rate == want
        if storage == "bfloat16":
            # fp32 storage, wider than the recipe's bf16: values off the bf16 grid, an fp32 ulp away from
            # fl_out(y), are not correctly rounded although their bf16 keys are fl_out(y)'s
            wide = out.astype(np.float32)
            off = np.setdiff1d(np.arange(flat.size), idx)[trial::7]
            wide.reshape(-1).view(np.uint32)[off] ^= 1
            want_wide = np.count_nonzero(wide.astype(np.float64) == y_out) / out.size
            assert want_wide < want
            assert pc.check(wide, diagnose=False).metrics.cr_rate == want_wide
