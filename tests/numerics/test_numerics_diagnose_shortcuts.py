"""The diagnosis's shortcuts give the results of the plain computation they replace."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from nkieval.numerics import PrecisionRecipe, PreparedCheck, Variant, generic_op
from nkieval.numerics.diagnose_fingerprint import _exact_in
from nkieval.numerics.formats import get_format
from nkieval.numerics.oracle import exact_in

RECIPE = PrecisionRecipe(inputs=("bf16", "bf16"), accumulate="fp32", output="fp32")


def _z(x_t: np.ndarray, w: np.ndarray) -> np.ndarray:
    return np.asarray(x_t, dtype=np.float64).T @ np.asarray(w, dtype=np.float64)


def _relu(x_t: np.ndarray, w: np.ndarray) -> np.ndarray:
    return np.maximum(_z(x_t, w), 0.0)


def _leaky_in_place(x_t: np.ndarray, w: np.ndarray) -> np.ndarray:
    """A wrong formula that writes into its (float64) inputs: it must get inputs of its own."""
    w *= 1.0
    z = _z(x_t, w)
    return np.where(z > 0, z, 0.1 * z)


def _leaky(x_t: np.ndarray, w: np.ndarray) -> np.ndarray:
    z = _z(x_t, w)
    return np.where(z > 0, z, 0.1 * z)


def _inputs() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    return (rng.standard_normal((64, 96)).astype(ml_dtypes.bfloat16),
            (rng.standard_normal((64, 80)) / 8).astype(ml_dtypes.bfloat16))


def test_exact_in_with_probe_agrees_with_the_full_scan() -> None:
    rng = np.random.default_rng(0)
    on_grid = rng.standard_normal(50_000).astype(ml_dtypes.bfloat16).astype(np.float32)
    one_off = on_grid.copy()
    one_off[1] = np.float32(1 + 2.0**-20)  # off the bf16 grid, between the probed elements
    finer = rng.standard_normal((300, 500)).astype(np.float32)
    for a in (on_grid, one_off, finer, finer.T, on_grid[:1000], np.zeros(5000, np.float32)):
        for fmt in ("bf16", "fp16", "tf32", "fp8_e4m3fn"):
            assert _exact_in(get_format(fmt), a) == exact_in(get_format(fmt), a), (fmt, a.shape)
    assert _exact_in(get_format("bf16"), on_grid) and not _exact_in(get_format("bf16"), one_off)


def test_variant_writing_into_its_inputs_is_named_and_leaves_them_alone() -> None:
    x_t, w = _inputs()
    w64 = w.astype(np.float64)  # a float64 input is passed as it is; a converted one is not
    got = _leaky(x_t, w).astype(np.float32)
    for inputs in ([x_t, w], [x_t, w64]):
        before = [a.copy() for a in inputs]
        ids = []
        for fn in (_leaky, _leaky_in_place):
            op = generic_op(_relu, k=64, multilinear=True,
                            variants=(Variant("leaky", "a leaky ReLU", "use ReLU", fn),))
            v = PreparedCheck(inputs, op, RECIPE, input_family="normal").check(got)
            assert v.status == "fail"
            ids.append([f.id for f in v.findings])
        assert ids[0] == ids[1] and ids[0][0] == "leaky", ids
        if inputs[1].dtype != np.float64:
            assert all(np.array_equal(a, b) for a, b in zip(inputs, before))


def test_variants_see_the_same_inputs_and_hint_retries_are_not_recomputed() -> None:
    x_t, w = _inputs()
    seen: list[tuple[int, ...]] = []

    def watch(fn):
        def g(*a: np.ndarray) -> np.ndarray:
            seen.append(tuple(id(x) for x in a))
            assert all(x.dtype == np.float64 for x in a)
            return fn(*a)
        return g

    got = _leaky(x_t, w).astype(np.float32)
    op = generic_op(_relu, k=64, multilinear=True,
                    variants=(Variant("leaky", "a leaky ReLU", "use ReLU", watch(_leaky)),
                              Variant("plain", "plain ReLU", "-", watch(_relu))))
    pc = PreparedCheck([x_t, w], op, RECIPE, input_family="normal", keep_blocks=False)
    v0 = pc.check(got, diagnose=False)
    v = pc.diagnose(got, v0, hint="plain")  # not confirmed: the full search follows
    assert v.findings and v.findings[0].id == "leaky"
    assert len(seen) == 2 and seen[0] == seen[1]  # each formula once, on one conversion of the inputs
