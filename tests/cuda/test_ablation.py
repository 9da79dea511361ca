"""What a GPU-vs-port difference comes from (cuda/ablate.py; review/stages/differential.py,
``_explain_differences``): the CUDA kernel re-run with one source of difference removed at a time.

The kernels are our own, each with one known source of difference from its "port" (computed here with NumPy the
way a port would): an fp32 sum in another order, ``__expf`` under ``--use_fast_math``, a contracted multiply-add."""

from __future__ import annotations

import numpy as np
import pytest

from nkieval.cuda import run_task_cuda
from nkieval.cuda.ablate import ablations, named, shares
from nkieval.cuda.program import preprocess
from nkieval.tasks.loader import load_task

HOST = """
void row_softmax(const float* x, float* out, int n_rows, int n_cols, cudaStream_t stream) {
    k<<<(n_rows + 63) / 64, 64, 0, stream>>>(x, out, n_rows, n_cols);
}
"""
#: a row's sum, accumulated by one thread from the first column to the last
SUM = """__global__ void k(const float* x, float* out, int n, int d) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= n) return;
    float s = 0.0f;
    for (int c = 0; c < d; ++c) s += x[r * d + c];
    for (int c = 0; c < d; ++c) out[r * d + c] = s;
}
""" + HOST
#: exp with the fast-math intrinsic, built with --use_fast_math
EXP = """// build: nvcc -O3 --use_fast_math
__global__ void k(const float* x, float* out, int n, int d) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= n) return;
    for (int c = 0; c < d; ++c) out[r * d + c] = __expf(x[r * d + c]);
}
""" + HOST
#: a multiply-add nvcc contracts to one FMA (-fmad=true, the default)
FMA = """__global__ void k(const float* x, float* out, int n, int d) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= n) return;
    for (int c = 0; c < d; ++c) { float v = x[r * d + c]; out[r * d + c] = v * 1.3f - v * v; }
}
""" + HOST

N, D = 1024, 256  # (1,024 rows: a share measured on few rows varies by a factor of two with the inputs)


def _ports(x: np.ndarray) -> dict[str, np.ndarray]:
    # (the row summed in fp32 from the last column to the first: np.cumsum adds one element at a time)
    backwards = np.cumsum(x[:, ::-1], axis=1, dtype=np.float32)[:, -1:]
    return {"sum": np.repeat(backwards, D, axis=1),
            "exp": np.exp(x.astype(np.float64)).astype(np.float32),  # (a correctly rounded exp)
            "fma": x * np.float32(1.3) - x * x}  # (two fp32 roundings: no contraction)


def _attribution(source: str, port: np.ndarray, x: np.ndarray) -> dict[str, float]:
    task = load_task("row_softmax")
    dims = {"N": N, "D": D}
    gpu, _ = run_task_cuda(task, {"x": x}, dims, source=source)
    ablated = {}
    for a in ablations(source):
        out, _ = run_task_cuda(task, {"x": x}, dims, source=a.source, options=a.options)
        ablated[a.name] = out[0]
    got = shares(gpu[0], port, ablated)
    assert got is not None
    return got


@pytest.fixture(scope="module")
def attributions() -> dict[str, dict[str, float]]:
    x = (np.random.default_rng(7).standard_normal((N, D)) * 3).astype(np.float32)
    ports = _ports(x)
    return {name: _attribution(src, ports[name], x) for name, src in (("sum", SUM), ("exp", EXP), ("fma", FMA))}


@pytest.mark.parametrize(("kernel", "cause"), [("sum", "accumulation"), ("exp", "fast_math"), ("fma", "fma")])
def test_the_known_source_of_difference_is_named(attributions: dict[str, dict[str, float]], kernel: str,
                                                 cause: str) -> None:
    got = attributions[kernel]
    causes = named(got)
    assert causes and causes[0][0] == cause, got
    # (the other ablations remove next to nothing: they change roundings this kernel does not make)
    assert all(abs(v) < 0.05 for k, v in got.items() if k != cause), got


def test_an_fp32_sum_in_another_order_is_shared_by_both_sides(attributions: dict[str, dict[str, float]]) -> None:
    """The port rounds its own sum too: removing the GPU's rounding removes about half the squared difference
    (two independent errors of one size), not all of it."""
    assert 0.3 < attributions["sum"]["accumulation"] < 0.7


def test_the_attribution_does_not_always_name_the_same_cause(attributions: dict[str, dict[str, float]]) -> None:
    tops = {kernel: named(got)[0][0] for kernel, got in attributions.items()}
    assert len(set(tops.values())) == 3, tops


def test_the_ablations_offered_follow_the_source() -> None:
    assert [a.name for a in ablations(SUM)] == ["fma", "accumulation"]
    assert [a.name for a in ablations(EXP)] == ["fma", "fast_math", "ftz"]
    fast = next(a for a in ablations(EXP) if a.name == "fast_math")
    assert "__expf" not in fast.source and "expf(" in fast.source and fast.options.ftz and not fast.options.fast_math
    acc = next(a for a in ablations(SUM) if a.name == "accumulation")
    assert "double s = 0.0f;" in acc.source and preprocess(SUM).replace("float s =", "double s =") == acc.source
    shared = ablations(load_task("row_softmax").cuda_file.read_text())
    widened = next(a for a in shared if a.name == "accumulation").source
    # (the block's tree reduction through shared memory, and the pointer parameter it goes through)
    assert "__shared__ double smem" in widened and "double* smem" in widened
    low = """__global__ void k(const float* x, float* out, int n, int d) {
    __nv_bfloat16 h = __float2bfloat16(x[0] * 2.0f);
    out[0] = __bfloat162float(h);
}""" + HOST
    mixed = next(a for a in ablations(low) if a.name == "mixed_precision")
    assert "float h = (x[0] * 2.0f);" in mixed.source


@pytest.mark.slow
def test_the_review_s_envelope_line_names_what_the_difference_comes_from() -> None:
    """layernorm's kernel merges Welford statistics in fp32; its expert port's statistics are exact to within
    fp32 (bn_stats): the GPU's accumulation is the difference."""
    from nkieval.review.pipeline import review

    task = load_task("layernorm")
    r = review("layernorm", str(task.solution_file), seed=5, compare_references=False)
    mig = next(c for c in r.criteria if c.id == "migration")
    line = next(f for f in mig.feedback if "expected envelope" in f.observed)
    assert "the difference comes from the GPU's fp32 accumulation (order and rounding)" in line.observed
    top = line.evidence["envelope_causes"][0]
    assert top["ablation"] == "accumulation" and top["share"] > 0.5
