"""A prepared check keeps its blocks compacted (``stream.compact_block``): about half the memory, the same verdicts.

The verdicts of kept (compacted) blocks are compared with ``check()``'s, which streams blocks as they are made and
never compacts them, on outputs chosen to reach every compacted field: worst-element records (the dominant error
term), expected NaNs and infinities, out-of-contract elements, non-finite sigmas, fp64 outputs (whose rounded
oracle and ULP keys stay wide) and bf16 ones.
"""

from __future__ import annotations

import json
import math

import ml_dtypes
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from nkieval.numerics import PrecisionRecipe, PreparedCheck, check
from nkieval.numerics.stream import _dominant_index, _make_block

FP32_FN = PrecisionRecipe(inputs=("fp32",), accumulate="fp32", output="fp32", transcendental="scalar_engine")
FP32 = PrecisionRecipe(inputs=("fp32",), accumulate="fp32", output="fp32")
FP64_MM = PrecisionRecipe(inputs=("fp32", "fp32"), accumulate="fp64", output="fp64")
BF16_OUT_MM = PrecisionRecipe(inputs=("fp32", "fp32"), accumulate="fp32", output="bf16")


def _d(v) -> str:
    return json.dumps(v.to_dict(), sort_keys=True, default=str)


def _outputs(y: np.ndarray, dtype: type) -> list[np.ndarray]:
    """A correct output, one off by a relative 1e-3, one with a NaN and one with an infinity where neither
    is expected, and one off everywhere by the smallest step (the worst records then rank every term)."""
    with np.errstate(all="ignore"):
        good = y.astype(dtype)
        bad = (y * (1 + 1e-3)).astype(dtype)
        nan, inf = good.copy(), good.copy()
        nan.reshape(-1)[5] = np.nan
        inf.reshape(-1)[9] = np.inf
        step = np.nextafter(good, np.asarray(np.inf, dtype=good.dtype))
    return [good, bad, nan, inf, step]


def _cases():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((8, 96)).astype(np.float32)
    w = rng.standard_normal((96, 40)).astype(np.float32)
    xd, wd = x.astype(np.float64), w.astype(np.float64)
    neg = np.concatenate([x, -np.abs(x)])  # log of negatives: NaN expected, out of contract, sigma not finite
    with np.errstate(all="ignore"):
        yield "log", [neg], "log", FP32_FN, {}, np.log(neg.astype(np.float64)), np.float32
        big = x * 60  # exp past fp32's range: infinities expected
        yield "exp", [big], "exp", FP32_FN, {}, np.exp(big.astype(np.float64)), np.float32
    mu = xd.mean(-1, keepdims=True)
    ln = (xd - mu) / np.sqrt(((xd - mu) ** 2).mean(-1, keepdims=True) + 1e-5)
    yield "layernorm", [x], "layernorm", FP32, {}, ln, np.float32
    yield "matmul fp64", [x, w], "matmul", FP64_MM, {}, xd @ wd, np.float64
    yield "matmul bf16", [x, w], "matmul", BF16_OUT_MM, {}, xd @ wd, ml_dtypes.bfloat16


def test_kept_blocks_judge_as_streamed_blocks_and_reach_every_compacted_field():
    reached: set[str] = set()
    for name, inputs, op, recipe, params, y, dtype in _cases():
        kw = dict(input_family="normal", block_elems=256, **params)
        pc = PreparedCheck(inputs, op, recipe, keep_blocks=True, **kw)
        for out in _outputs(y, dtype):
            want = check(out, inputs, op, recipe, worst_k=25, **kw)
            got = pc.check(out, worst_k=25)
            assert _d(got) == _d(want), name
            if want.worst and any(w.dominant for w in want.worst):
                reached.add("dominant")
        for b in pc._kept[0]:
            reached.add(f"y_out {b.y_out.dtype}")
            reached.add(f"ulp {b.ulp_y.dtype}")
            reached |= {"special expected" if b.exp_special else "no special",
                        "contract" if not b.all_valid else "all valid",
                        "sigma not finite" if not b.sig_fin_all else "sigma finite"}
            if b.sg_all is not None and b.sg_all is b.bb.sigma:
                reached.add("sg_all shared")
    assert reached >= {"dominant", "y_out float32", "y_out float64", "ulp int32", "ulp int64", "special expected",
                       "no special", "contract", "all valid", "sigma not finite", "sigma finite",
                       "sg_all shared"}, reached


def test_kept_blocks_hold_about_half_the_bytes():
    """Against the same blocks uncompacted (``_make_block``'s): the layernorm case's 97 bytes per element fall to
    about 53 (float64 oracle, magnitudes, two bounds and sigma; float32 rounded oracle and ULP keys; one byte
    of dominant term, the grid masks)."""
    _, inputs, op, recipe, _, _, _ = next(c for c in _cases() if c[0] == "layernorm")
    pc = PreparedCheck(inputs, op, recipe, input_family="normal", keep_blocks=True, block_elems=256)
    pc.materialise()
    kept = pc.nbytes()
    full = 0
    for r0 in range(0, pc.prep.n_rows, pc.rows_per_block):
        r1 = min(pc.prep.n_rows, r0 + pc.rows_per_block)
        ob = pc.prep.evaluate(r0, r1)
        full += _make_block(0, ob, pc.rule(ob, pc.ctx), recipe, True).nbytes()
    assert kept < 0.6 * full, (kept, full)


_TERM = st.one_of(st.sampled_from([0.0, -0.0, 1.0, 2.0, math.inf, -math.inf, math.nan]),
                  st.floats(allow_nan=True, allow_infinity=True, width=64))


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 5).flatmap(lambda k: st.tuples(
    st.lists(st.lists(_TERM, min_size=6, max_size=6), min_size=k, max_size=k),
    st.lists(st.booleans(), min_size=k, max_size=k))))
def test_dominant_index_is_pythons_max_of_the_record(case):
    """The worst-element record's ``max(vals, key=vals.get)``, element by element: ties to the first term, a NaN
    never replacing an earlier term and a first-place NaN staying; a term may be one number for the block."""
    columns, scalar = case
    terms = {f"t{i}": (np.float64(col[0]) if one else np.asarray(col, dtype=np.float64))
             for i, (col, one) in enumerate(zip(columns, scalar))}
    idx = _dominant_index(terms, 6)
    names = list(terms)
    for j in range(6):
        vals = {k: float(np.asarray(v)[j]) if np.ndim(v) else float(v) for k, v in terms.items()}
        assert names[idx[j]] == max(vals, key=vals.get)
