"""Dot-product chains that both sides round alike (cuda/chains.py), kept in fp32 in the envelope's pivot
(cuda/exact.py ``keep``) when the port's trace has a matmul of the chain's length (differential's
``_shared_chains``)."""

from __future__ import annotations

from types import SimpleNamespace

import ml_dtypes
import numpy as np

from nkieval.cuda import run_host
from nkieval.cuda.chains import chain_length, dimension_constants, dot_chains
from nkieval.cuda.exact import exact_source
from nkieval.cuda.program import preprocess

# one row per block: s = a[i] . b as an fp32 FMA chain, then y[i] = exp((s - s0) / sqrt(d)) with s0 = a[0] . b
SCORES = """\
__global__ void scores_kernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ y,
                              int n, int d) {
    int i = blockIdx.x;
    float scale = rsqrtf((float)d);
    float s = 0.0f;
    for (int c = 0; c < d; ++c) s = fmaf(a[i * d + c], b[c], s);
    float t = 0.0f;
    for (int c = 0; c < d; ++c) t += a[c] * b[c];
    y[i] = expf((s - t) * scale);
}
void scores(const float* a, const float* b, float* y, int n, int d) { scores_kernel<<<n, 1>>>(a, b, y, n, d); }
"""


def test_the_chains_are_found_with_their_bounds() -> None:
    chains = dot_chains(SCORES)
    assert [(c.var, c.function, c.bound, c.inclusive, c.line) for c in chains] == [
        ("s", "scores_kernel", "d", False, 5), ("t", "scores_kernel", "d", False, 7)]
    text = preprocess(SCORES).encode()  # (the spans are in the preprocessed text, as exact_source rewrites it)
    assert text[chains[0].start:chains[0].end].decode().startswith("float s = 0.0f;")
    assert text[chains[0].start:chains[0].end].decode().endswith("s);")


def test_what_is_not_a_chain() -> None:
    src = """\
__global__ void k(const float* a, float* y, int d) {
    float s = 1.0f;
    for (int c = 0; c < d; ++c) s += a[c] * a[c];
    float u = 0.0f;
    for (int c = 0; c < d; ++c) u += a[c];
    float v = 0.0f;
    for (int c = 1; c < d; ++c) v += a[c] * a[c];
    float w = 0.0f;
    for (int c = 0; c < d; ++c) { w += a[c] * a[c]; y[c] = w; }
    float z = 0.0f;
    for (int c = 0; c < d; c += 2) z += a[c] * a[c];
    float p = 0.0f;
    for (int c = 0; c < d; ++c) p += a[c] * a[c] + 1.0f;
    y[0] = s + u + v + w + z + p;
}
"""
    # (a non-zero start value, a sum without a product, a loop from 1, a body of two statements, a stride,
    # a product plus a further term)
    assert dot_chains(src) == []


def test_the_chain_length_follows_the_launch_to_the_task_dimension() -> None:
    s, _ = dot_chains(SCORES)
    binding = {"a": "in:a", "b": "in:b", "y": "out:y", "n": "dim:N", "d": "dim:D"}
    assert chain_length(SCORES, s, binding, {"N": 4, "D": 96}) == 96
    assert chain_length(SCORES, s, {**binding, "d": "param:d"}, {"N": 4, "D": 96}) is None
    literal = SCORES.replace("(a, b, y, n, d);", "(a, b, y, n, 32);")
    assert chain_length(literal, dot_chains(literal)[0], binding, {"N": 4, "D": 96}) == 32
    blockwise = SCORES.replace("c < d; ++c) s", "c <= i; ++c) s")
    assert chain_length(blockwise, dot_chains(blockwise)[0], binding, {"N": 4, "D": 96}) is None


def test_kept_chains_stay_fp32_and_the_rest_widens() -> None:
    s, _t = dot_chains(SCORES)
    out = exact_source(SCORES, [s])
    assert "float s = 0.0f;" in out and "s = fmaf(a[i * d + c], b[c], s);" in out
    assert "double t = 0.0f;" in out and "exp((s - t) * scale)" in out and "double scale" in out
    assert exact_source(SCORES, []) == exact_source(SCORES)
    assert "double s = 0.0f;" in exact_source(SCORES)


def test_dimension_constants_are_float_scalars_of_integer_parameters_alone() -> None:
    src = """\
__global__ void k(const float* a, float* y, int d, float eps) {
    float scale = rsqrtf((float)d);
    const float inv = 1.0f / (float)d;
    float e = rsqrtf((float)d + eps);
    float r = rsqrtf(a[0]);
    float two = 2.0f, three = 3.0f;
    int d2 = d * 2;
    float f = rsqrtf((float)d2);
    float g = halve((float)d);
    float h = 1.5e-3f * (float)d;
    y[0] = scale + inv + e + r + two + three + f + g + h;
}
"""
    # (not: a float parameter, a memory read, two declarators, a local integer, a call of another function)
    assert [(c.var, c.line) for c in dimension_constants(src)] == [("scale", 2), ("inv", 3), ("h", 10)]
    (scale,) = dimension_constants(SCORES)
    out = exact_source(SCORES, [*dot_chains(SCORES), scale])
    assert "float scale = rsqrtf((float)d);" in out and "exp((s - t) * scale)" in out


def _bf16(x: np.ndarray) -> np.ndarray:
    return x.astype(ml_dtypes.bfloat16).astype(np.float32)


def _fma_chain(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The port's side: each row's dot product as one fp32 rounding per step, in index order (products of
    bf16 values are exact, and a float64 sum of one product and an fp32 accumulator here too)."""
    acc = np.zeros(a.shape[0], np.float32)
    for c in range(a.shape[1]):
        acc = (a[:, c].astype(np.float64) * b[c] + acc).astype(np.float32)
    return acc


def test_the_shared_pivot_bounds_the_difference_within_10x_where_the_exact_one_is_far_looser() -> None:
    from nkieval.review.stages.differential import _envelope

    rng = np.random.default_rng(3)
    n, d = 16, 96
    a = _bf16(rng.standard_normal((n, d)) * 40)  # (large scores: their fp32 rounding shows after exp)
    a[1:] = a[0] + _bf16(rng.standard_normal((n - 1, d)) * 0.05)
    b = _bf16(rng.standard_normal(d) * 40)
    args = {"a": a, "b": b, "y": np.zeros(n, np.float32), "n": n, "d": d}
    gpu = run_host(SCORES, "scores", args).memory["y"]
    s, t = dot_chains(SCORES)
    shared = run_host(exact_source(SCORES, [s, t, *dimension_constants(SCORES)]), "scores", args).memory["y"]
    exact = run_host(exact_source(SCORES), "scores", args).memory["y"]
    dots = _fma_chain(a, b)
    scale = np.float32(1 / np.sqrt(d))  # (the port: the same chains and fp32 scale, its own exp)
    port = np.exp(((dots - dots[0]) * scale).astype(np.float32))
    task = SimpleNamespace(outputs=[SimpleNamespace(name="y")])
    ratios = {}
    for name, pivot in (("shared", shared), ("exact", exact)):
        rec = {"y": {"envelope": None, "observed": 0.0}}
        _envelope([gpu], [port], [[pivot]], rec, task)
        assert rec["y"]["observed"] > 0 and rec["y"]["envelope"] >= rec["y"]["observed"]
        ratios[name] = rec["y"]["envelope"] / rec["y"]["observed"]
    assert ratios["shared"] <= 10
    assert ratios["exact"] > 10 * ratios["shared"]


def _record(opcode: str, **attrs: object) -> SimpleNamespace:
    return SimpleNamespace(opcode=opcode, attrs=attrs, operands=[])


def test_only_chains_the_trace_contracts_in_one_fresh_matmul_are_shared(monkeypatch) -> None:
    from nkieval.review.stages import differential as diff

    task = SimpleNamespace(kernel="scores", inputs=[SimpleNamespace(name="a", shape=["N", "D"]),
                                                    SimpleNamespace(name="b", shape=["D"])],
                           outputs=[SimpleNamespace(name="y", shape=["N"])], params={})
    loaded = SimpleNamespace(task=task, cases=[SimpleNamespace(dims={"N": 4, "D": 32}),
                                               SimpleNamespace(dims={"N": 8, "D": 96})])
    runs = [SimpleNamespace(status="ok", traced=False), SimpleNamespace(status="ok", traced=True)]

    def shared(*records: SimpleNamespace) -> list[str]:
        monkeypatch.setattr(diff, "_port_trace", lambda _runs: SimpleNamespace(records=list(records)))
        return [c.var for c in diff._shared_chains(loaded, SCORES, runs)]

    # (the traced case's D; with the chains, their kernel's dimension constant)
    assert shared(_record("nc_matmul", K=96, accumulated=False)) == ["s", "t", "scale"]
    assert shared(_record("nc_matmul", K=32, accumulated=False)) == []  # (another case's D)
    assert shared(_record("nc_matmul", K=96, accumulated=True)) == []  # (adds onto earlier PSUM contents)
    assert shared(_record("nc_matmul", K=96, accumulated=False, is_transpose=True)) == []
    assert shared(_record("tensor_reduce", K=96)) == []
    monkeypatch.setattr(diff, "_port_trace", lambda _runs: None)
    assert diff._shared_chains(loaded, SCORES, runs) == []


def test_a_chain_finder_that_fails_leaves_the_pivot_widened(monkeypatch) -> None:
    import nkieval.cuda.chains as chains
    from nkieval.review.stages import differential as diff

    def broken(_src: str) -> list[object]:
        raise RecursionError("a source too deep to walk")

    monkeypatch.setattr(chains, "dot_chains", broken)
    loaded = SimpleNamespace(task=SimpleNamespace(), cases=[SimpleNamespace(dims={})])
    assert diff._shared_chains(loaded, SCORES, [SimpleNamespace(status="ok", traced=True)]) == []
