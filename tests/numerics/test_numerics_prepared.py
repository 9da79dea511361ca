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
from nkieval.numerics.grids import _grid_held
from nkieval.numerics.stream import _top_k

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
    from nkieval.numerics.ulp_hist import _ULP_BUCKET

    d = np.arange(_ULP_BUCKET.size, dtype=np.int64)
    want = np.where(d <= 2, d, np.minimum(np.array([int(x - 1).bit_length() + 1 for x in d.tolist()]), 39))
    assert np.array_equal(_ULP_BUCKET, want)


def _ulp_bucket_rule(d: int) -> int:
    """The ULP-histogram bucket by its definition: d up to 2, then bit length of d - 1, plus 1, at most 39."""
    return d if d <= 2 else min((d - 1).bit_length() + 1, 39)


_ULP_EDGES = sorted({max(0, min((1 << j) + o, (1 << 63) - 1)) for j in range(64) for o in (-2, -1, 0, 1, 2)})


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.integers(0, 70), st.integers(0, (1 << 63) - 1), st.sampled_from(_ULP_EDGES)),
                max_size=50))
def test_ulp_hist_counts_the_bucket_rule(ds):
    from nkieval.numerics.ulp_hist import _ulp_buckets, _ulp_hist

    d = np.array(ds, dtype=np.int64)
    want = np.bincount([_ulp_bucket_rule(x) for x in ds], minlength=40).astype(np.int64)
    assert np.array_equal(_ulp_hist(d.copy()), want)
    assert np.array_equal(np.bincount(_ulp_buckets(d), minlength=40)[:40], want)


def test_ulp_hist_on_every_small_distance_and_every_power_of_two_edge():
    from nkieval.numerics.ulp_hist import _ulp_hist

    small = np.arange(1 << 18, dtype=np.int64)
    want = np.bincount([_ulp_bucket_rule(x) for x in small.tolist()], minlength=40)
    assert np.array_equal(_ulp_hist(small.copy()), want)
    for x in _ULP_EDGES:  # one at a time: a wrong bucket cannot hide behind a compensating one
        h = _ulp_hist(np.array([x], dtype=np.int64))
        assert h[_ulp_bucket_rule(x)] == 1 and h.sum() == 1, x


def _z_bin_rule(z: float) -> int:
    """The z-histogram bin by its definition: floor(20 (log10 z + 4)) clipped to [-1, 220], plus 1
    (0 for z <= 0), computed step by step in float64 as the gate does."""
    if z <= 0:
        return 0
    t = float(np.floor((np.log10(np.float64(z)) + 4.0) * 20.0))
    return int(min(max(t, -1.0), 220.0)) + 1


def _z_edge_values() -> list[float]:
    """Every bin edge 10^(k/20 - 4) (and the stored _Z_EDGES) with its neighbours within 8 ulps."""
    from nkieval.numerics.stream import _Z_EDGES

    centres = [10.0 ** (k / 20 - 4) for k in range(-2, 224)] + [float(x) for x in _Z_EDGES]
    out = [0.0, 5e-324, 1e-300, 1e308, float(np.finfo(np.float64).max), np.inf]
    for c in centres:
        u = np.array([c]).view(np.int64)[0]
        out += np.arange(max(u - 8, 0), u + 9, dtype=np.int64).view(np.float64).tolist()
    return out


_Z_EDGE_VALUES = _z_edge_values()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.floats(0.0, np.inf), st.floats(1e-5, 1e8), st.sampled_from(_Z_EDGE_VALUES)), max_size=40))
def test_z_bins_in_place_matches_the_definition(zs):
    from nkieval.numerics.stream import _z_bins

    z = np.array(zs, dtype=np.float64)
    want = np.array([_z_bin_rule(x) for x in zs], dtype=np.int64)
    assert np.array_equal(_z_bins(z), want)
    work = z.copy()
    got = _z_bins(work, overwrite=True)
    assert got.dtype == np.int64 and (z.size == 0 or np.shares_memory(got, work))
    assert np.array_equal(got, want)


def test_z_bins_at_every_edge():
    from nkieval.numerics.stream import _z_bins

    z = np.array(_Z_EDGE_VALUES)
    want = np.array([_z_bin_rule(x) for x in _Z_EDGE_VALUES], dtype=np.int64)
    assert np.array_equal(_z_bins(z.copy(), overwrite=True), want)
    assert np.array_equal(_z_bins(z), want)


def test_nbytes_follows_the_kept_blocks_and_variant_outputs():
    """``nbytes`` (kept with the state it was counted in; the case cache asks after every case) is the walk over
    the kept blocks' and the variants' arrays after each change: blocks first kept, a variant's output added."""
    inputs, outs = _mm_case()
    pc = PreparedCheck(inputs, "matmul", BF16_MM, input_family="normal", keep_blocks=True, block_elems=512)

    def walked() -> int:
        return (sum(b.nbytes() for kept in pc._kept if kept for b in kept)
                + sum(v.nbytes for v in pc._variant_outputs.values() if v is not None))

    assert pc.nbytes() == 0 == walked()
    pc.check(outs[0])
    assert pc.nbytes() == walked() > 0
    before = pc.nbytes()
    with pc._lock:  # (as a diagnosis keeps a variant's formula on the whole inputs)
        pc._variant_outputs["v1"] = np.zeros(1000)
    assert pc.nbytes() == walked() == before + 8000
    with pc._lock:
        pc._variant_outputs["v2"] = None  # (a variant that raised: nothing kept)
    assert pc.nbytes() == walked() == before + 8000


def test_an_elementwise_bound_is_one_array_and_its_ratios_are_computed_once():
    """Where the probabilistic bound equals the worst-case one element for element (an elementwise op: no sum whose
    errors could cancel), a block keeps one array for both and folds one ratio array: the two bounds' margins and
    exceedances are then equal by construction, and each counts exactly the elements put out of bounds; a
    contraction keeps its tighter probabilistic bound apart."""
    from nkieval.numerics.stream import compact_block

    rng = np.random.default_rng(4)
    a, b = (rng.standard_normal(5000).astype(np.float32) for _ in range(2))
    fp32 = PrecisionRecipe(inputs=("fp32", "fp32"), accumulate="fp32", output="fp32")
    pc = PreparedCheck([a, b], "add", fp32, input_family="normal", keep_blocks=True, block_elems=1024)
    blocks = list(pc._blocks(0))
    assert blocks and all(blk.prb_is_det and blk.bb.tau_prb is blk.bb.tau_det for blk in blocks)
    good = a + b
    bad = good.copy()
    bad[[3, 1500, 2047, 2048, 4999]] += 1.0
    v_good, v_bad = pc.check(good), pc.check(bad)
    assert v_good.status == "pass" and v_bad.status == "fail"
    m = v_bad.metrics
    assert m.exceed_det == m.exceed_prb == 5 and m.margin_det == m.margin_prb > 1
    for out in (good, bad):  # the lean check agrees with the full one where it passes
        pc._memo.clear()
        assert pc.check(out, lean=True).status == pc.check(out).status

    inputs, _ = _mm_case()
    mm = PreparedCheck(inputs, "matmul", BF16_MM, input_family="normal", keep_blocks=False, block_elems=512)
    raw = list(mm._blocks(0))
    assert raw and not any(blk.prb_is_det for blk in raw)
    assert all(compact_block(blk).bb.tau_prb is not compact_block(blk).bb.tau_det for blk in raw)
