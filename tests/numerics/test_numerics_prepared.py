"""PreparedCheck: one preparation judges many outputs exactly as check() judges each one."""

from __future__ import annotations

import json
import threading

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from numerics_testlib import softmax32

from nkieval.numerics import PrecisionRecipe, PreparedCheck, check
from nkieval.numerics.formats import FORMATS, representable, round_to
from nkieval.numerics.gates import _grid_held, _top_k

BF16_MM = PrecisionRecipe(inputs=("bf16", "bf16"), accumulate="fp32", output="fp32", accumulation="psum_fp32_k128")


def _d(v) -> str:
    return json.dumps(v.to_dict(), sort_keys=True, default=str)


def _mm_case(seed: int = 0):
    import ml_dtypes

    rng = np.random.default_rng(seed)
    a = rng.standard_normal((40, 300)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((300, 50)).astype(ml_dtypes.bfloat16)
    y = a.astype(np.float64) @ b.astype(np.float64)
    good = y.astype(np.float32)
    bf16_out = y.astype(ml_dtypes.bfloat16).astype(np.float32)  # silent output downcast: fails
    dropped = (a[:, :256].astype(np.float64) @ b[:256].astype(np.float64)).astype(np.float32)  # lost K tail
    nan = good.copy()
    nan[3, 7] = np.nan
    return [a, b], [good, bf16_out, dropped, nan, good]


def test_matmul_many_outputs_equal_check():
    inputs, outs = _mm_case()
    for keep in (True, False):
        pc = PreparedCheck(inputs, "matmul", BF16_MM, input_family="normal", keep_blocks=keep, block_elems=512)
        for out in outs:
            want = check(out, inputs, "matmul", BF16_MM, input_family="normal", block_elems=512)
            assert _d(pc.check(out)) == _d(want)
        assert (pc.nbytes() > 0) == keep
    statuses = [check(o, inputs, "matmul", BF16_MM, input_family="normal").status for o in outs]
    assert statuses == ["pass", "fail", "fail", "fail", "pass"]  # the sequence exercises both verdicts


def test_generic_path_keeps_provisional_and_refined_magnitudes():
    """op='reference' (generic, perturbation magnitudes): a pass accepted under the provisional
    magnitudes, then a failure that needs the refined ones, then the pass again: each verdict
    equals a fresh check's, so a cached preparation never depends on what was judged before."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((16, 64)).astype(np.float32)

    def softmax64(v):
        e = np.exp(v - v.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    good = softmax32(x)
    bad = good * np.float32(1.0 + 2e-3)
    recipe = PrecisionRecipe(inputs=("fp32",), accumulate="fp32", output="fp32", transcendental="scalar_engine")
    pc = PreparedCheck([x], softmax64, recipe, input_family="normal", k=64, multilinear=False)
    assert pc.refinable
    seen = []
    for out in (good, bad, good, bad):
        want = check(out, [x], softmax64, recipe, input_family="normal", k=64, multilinear=False)
        got = pc.check(out)
        assert _d(got) == _d(want)
        seen.append(got.status)
    assert seen == ["pass", "fail", "pass", "fail"]


def test_concurrent_checks_agree():
    inputs, outs = _mm_case(2)
    pc = PreparedCheck(inputs, "matmul", BF16_MM, input_family="normal", keep_blocks=True, block_elems=256)
    want = [_d(check(o, inputs, "matmul", BF16_MM, input_family="normal", block_elems=256)) for o in outs]
    results: dict[int, list[str]] = {}

    def work(i: int) -> None:
        results[i] = [_d(pc.check(o)) for o in outs]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r == want for r in results.values())


def test_g0_failures_do_not_need_the_oracle():
    inputs, outs = _mm_case()
    pc = PreparedCheck(inputs, "matmul", BF16_MM, input_family="normal")
    v = pc.check(outs[0][:, :10])
    assert v.status == "fail" and v.deciding_gate == "G0"
    assert pc.nbytes() == 0  # nothing was built for a malformed output


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.0, np.inf]), min_size=0, max_size=60),
       st.integers(1, 12))
def test_top_k_is_the_k_largest_with_ties_to_the_lowest_index(vals, k):
    score = np.asarray(vals, dtype=np.float64)
    got = _top_k(score, min(k, score.size)) if score.size else np.arange(0)
    want = sorted(range(score.size), key=lambda i: (-score[i], i))[:min(k, score.size)]
    assert sorted(got.tolist()) == sorted(want)


def test_top_k_large_random_with_ties():
    rng = np.random.default_rng(3)
    score = np.round(rng.random(100_000) * 50) / 50
    for k in (1, 3, 10):
        got = _top_k(score, k).tolist()
        want = sorted(np.lexsort((np.arange(score.size), -score))[:k].tolist())
        assert got == want


def test_grid_membership_matches_representable():
    rng = np.random.default_rng(4)
    vals = np.concatenate([
        rng.standard_normal(2000),
        round_to(rng.standard_normal(2000) * 100, "bf16"),
        round_to(rng.standard_normal(2000), "fp16"),
        round_to(rng.standard_normal(2000) * 4, "fp8_e4m3fn"),
        round_to(rng.standard_normal(2000) * 1e4, "fp8_e5m2"),
        [0.0, -0.0, np.inf, -np.inf, np.nan, 65504.0, 70000.0, 448.0, 464.0, 2.0**-24, 2.0**-30, 1e-45, 2.0**-130, 3 * 2.0**-133,
         2.0**-126 * 1.00390625, 3.3895313892515355e38, 3.4e38, -np.nan],
    ]).astype(np.float32).astype(np.float64)
    for out in ("fp32", "fp16"):
        held = _grid_held(vals, FORMATS[out])
        assert held, out
        for c, ok in held.items():
            assert FORMATS[c].p < FORMATS[out].p
            want = representable(vals, c) | (np.isinf(vals) & np.isinf(round_to(vals, c)))
            assert np.array_equal(ok, want), c


def test_verdicts_are_kept_per_output_bytes():
    rng = np.random.default_rng(11)
    a, b = rng.standard_normal((32, 64)), rng.standard_normal((64, 24))
    pc = PreparedCheck([a.astype(np.float32), b.astype(np.float32)], "matmul",
                       {"inputs": ["fp32", "fp32"], "accumulate": "fp32", "output": "fp32"}, input_family="normal")
    good = (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float32)
    v1 = pc.check(good, worst_k=3, diagnose=False)
    assert pc.check(good.copy(), worst_k=3, diagnose=False) is v1  # same bytes: the kept verdict
    assert pc.check(good, worst_k=4, diagnose=False) is not v1  # other arguments: judged again
    bad = good.copy()
    bad[3, 5] += 1.0
    vb = pc.check(bad, worst_k=3, diagnose=False)
    assert vb.status == "fail" and v1.status == "pass"
    assert pc.diagnose(bad, vb) is pc.diagnose(bad.copy(), vb)
    assert pc.diagnose(bad, vb).to_dict() == pc.check(bad, worst_k=3, diagnose=True).to_dict()
    # bytes equal, dtype different: not the same output
    z = pc.check(np.zeros((32, 24), np.float32), worst_k=3, diagnose=False)
    assert pc.check(np.zeros((32, 24), np.int32), worst_k=3, diagnose=False) is not z
    for i in range(20):  # bounded
        pc.check(good + np.float32(i), worst_k=3, diagnose=False)
    assert len(pc._memo) <= PreparedCheck._MEMO_SIZE
    assert pc.check(good, worst_k=3, diagnose=False).to_dict() == v1.to_dict()


def test_ulp_bucket_table_matches_the_bit_length_rule():
    from nkieval.numerics.gates import _ULP_BUCKET

    d = np.arange(_ULP_BUCKET.size, dtype=np.int64)
    want = np.where(d <= 2, d, np.minimum(np.array([int(x - 1).bit_length() + 1 for x in d.tolist()]), 39))
    assert np.array_equal(_ULP_BUCKET, want)
