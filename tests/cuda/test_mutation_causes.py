"""Causes beyond constants (cuda/mutate.py, review/stages/mutation_causes.py): a hypothesised change of the
CUDA source is stated only when the mutated kernel reproduces the port's outputs on two inputs.

The "ports" here are CUDA kernels with one deliberate mistake written by hand (a stand-in for a flawed NKI
port's outputs, without the sandbox): the test knows the mistake, the code under test does not."""

from __future__ import annotations

import numpy as np
import pytest

from nkieval.cuda import run_task_cuda
from nkieval.cuda.mutate import mutations
from nkieval.cuda.program import preprocess
from nkieval.review.stages.mutation_causes import mutation_causes
from nkieval.tasks.inputs import generate_inputs
from nkieval.tasks.loader import PORTS_ROOT, load_task

SNIPPET = """\
__device__ float f(float a, float b) { return a - b; }
__global__ void k(const float* x, float* y, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float s = x[i] * 2.0f + 1.0f;
    s += f(x[i], 3.0f);
    y[i] = s;
}
void host(const float* x, float* y, int n) { k<<<(n + 255) / 256, 256>>>(x, y, n); }
"""


def test_mutations_cover_every_kind_and_leave_the_host_code_alone() -> None:
    ms = mutations(SNIPPET)
    whats = {m.what for m in ms}
    kinds = {m.kind for m in ms}
    assert kinds == {"formula", "precision", "order", "indexing"}
    assert "`x[i] * 2.0f + 1.0f` as `x[i] * 2.0f` (term `+ 1.0f` dropped)" in whats
    assert "`a - b` as `b - a` (operands swapped)" in whats
    assert any(w.startswith("the arguments `x[i]` and `3.0f` of `f` swapped") for w in whats)
    assert any(w.startswith("the statement `s += f(x[i], 3.0f);` dropped") for w in whats)
    assert any("(index off by one)" in w and w.startswith("`x[i]`") for w in whats)
    assert "`i >= n` as `i >= n + 1` (bound off by one)" in whats
    assert "`s` rounded to bf16" in whats
    host_line = SNIPPET.splitlines().index(next(ln for ln in SNIPPET.splitlines() if ln.startswith("void host"))) + 1
    assert all(m.line != host_line for m in ms)  # (the launch configuration is never a hypothesis)
    assert all(m.line != 3 for m in ms if m.kind == "formula")  # (thread-index arithmetic is not math)


def test_a_mutation_changes_only_its_span() -> None:
    text = preprocess(SNIPPET)
    m = next(m for m in mutations(SNIPPET) if m.what.startswith("`x[i] * 2.0f + 1.0f` as `x[i] * 2.0f`"))
    out = m.apply(text)
    assert out.replace("(x[i] * 2.0f)", "x[i] * 2.0f + 1.0f", 1) == text


def _runs(task_id: str, cuda_port: str) -> tuple[object, str, list[tuple[object, ...]]]:
    """(task, kernel.cu, runs) with the 'port' outputs from ``cuda_port`` on two of the task's shapes."""
    task = load_task(PORTS_ROOT / task_id)
    src = task.cuda_file.read_text()
    runs = []
    for s in sorted(task.shapes, key=lambda s: sum(s.dims.values()))[:2]:
        dims = dict(s.dims)
        specs = [(x.name, x.concrete(dims), x.dtype, x.family) for x in task.inputs]
        inp = generate_inputs(specs, "normal", 11, s.label if hasattr(s, "label") else str(dims))
        gpu, _ = run_task_cuda(task, inp, dims)
        port, _ = run_task_cuda(task, inp, dims, source=cuda_port)
        runs.append((str(dims), dims, inp, gpu, port))
    return task, src, runs


@pytest.mark.slow
@pytest.mark.parametrize(("task_id", "old", "new", "kind", "line"), [
    ("rmsnorm_warp", "xr[c] * inv_rms * (1.0f + w[c])", "xr[c] * inv_rms * w[c]", "formula", 22),
    ("layernorm_block", "block_sum(q, smem) / (float)n_cols", "block_sum(q, smem) / (float)(n_cols - 1)",
     "indexing", 34),
    ("causal_softmax", "const int last = row + (n_cols - n_rows);", "const int last = row + (n_cols - n_rows) + 1;",
     "indexing", 25),
    ("adam_lerp", "lerp(g, m[i], beta1)", "lerp(m[i], g, beta1)", "order", 16),
])
def test_the_mistake_is_named_at_its_cuda_line(task_id: str, old: str, new: str, kind: str, line: int) -> None:
    task = load_task(PORTS_ROOT / task_id)
    src = task.cuda_file.read_text()
    assert src.count(old) == 1
    task, src, runs = _runs(task_id, src.replace(old, new))
    outs = [s.name for s in task.outputs]  # type: ignore[attr-defined]
    causes = mutation_causes(task, src, runs, outs)
    assert len(causes) == 1, causes
    c = causes[0]
    assert (c["kind"], c["cuda_line"]) == (kind, line), c["summary"]
    assert all(r["after"] <= 1.0 < r["before"] for r in c["reproduced"])


@pytest.mark.slow
def test_two_mistakes_at_once_are_not_explained_by_one_mutation() -> None:
    task = load_task(PORTS_ROOT / "adam_lerp")
    src = task.cuda_file.read_text()
    both = src.replace("const float m_hat = m1 / bc1;", "const float m_hat = m1;").replace(
        "const float v_hat = v1 / bc2;", "const float v_hat = v1;")
    task, src, runs = _runs("adam_lerp", both)
    assert mutation_causes(task, src, runs, ["param_new"], budget_s=30.0) == []


def test_a_port_that_agrees_gets_no_cause() -> None:
    task = load_task(PORTS_ROOT / "sgd_nesterov")
    task, src, runs = _runs("sgd_nesterov", task.cuda_file.read_text())
    assert all(np.array_equal(r[3][0], r[4][0]) for r in runs)
    assert mutation_causes(task, src, runs, ["param_new", "buf_new"]) == []


RACY = """\
__global__ void shift(const float* x, float* y, int n) {
    __shared__ float s[64];
    const int t = threadIdx.x;
    s[t] = x[blockIdx.x * 64 + t];
    BARRIER
    y[blockIdx.x * 64 + t] = s[(t + 1) % 64];
}
void host(const float* x, float* y, int n) { shift<<<n / 64, 64>>>(x, y, n); }
"""


def test_a_shared_memory_read_of_another_threads_write_without_a_barrier_is_a_race() -> None:
    from nkieval.cuda import run_host

    x = np.arange(128, dtype=np.float32)
    racy = run_host(RACY.replace("BARRIER", ""), "host", {"x": x, "y": np.zeros(128, np.float32), "n": 128})
    assert len(racy.warnings) == 1 and racy.warnings[0].startswith("shared-memory race in shift at kernel.cu:6")
    assert "written by thread 1" in racy.warnings[0]
    synced = run_host(RACY.replace("BARRIER", "__syncthreads();"), "host",
                      {"x": x, "y": np.zeros(128, np.float32), "n": 128})
    assert synced.warnings == []
    np.testing.assert_array_equal(synced.memory["y"], np.roll(x.reshape(2, 64), -1, axis=1).reshape(-1))


@pytest.mark.slow
def test_no_race_is_reported_in_the_shipped_shared_memory_kernels() -> None:
    from nkieval.tasks.loader import builtin_tasks, port_tasks

    # (every shipped kernel.cu with __shared__ was checked when this was written; these cover the patterns:
    # tree reductions, tiled GEMMs with two barriers per slab, a block_sum helper, a block-wide scan)
    some = {"gemm_bf16", "row_sum", "rmsnorm", "cumsum", "transpose_2d", "layernorm_block", "gemm_bias_relu"}
    for t in [*builtin_tasks(), *port_tasks()]:
        if t.id not in some or t.cuda_file is None or "__shared__" not in t.cuda_file.read_text():
            continue
        small = min(t.shapes, key=lambda s: sum(s.dims.values()))
        dims = dict(small.dims)
        specs = [(v.name, v.concrete(dims), v.dtype, v.family) for v in t.inputs]
        _, run = run_task_cuda(t, generate_inputs(specs, t.families[0], 7, "race"), dims)
        assert not [w for w in run.warnings if w.startswith("shared-memory race")], (t.id, run.warnings)


def test_mutated_kernels_outputs_are_reused_by_the_next_review_and_give_the_same_cause(monkeypatch) -> None:
    """A mutant's outputs on given inputs do not depend on the candidate: the next flawed port of the task
    (an RL loop's common case) reuses them, tries the same mutants and states the same cause."""
    import nkieval.cuda as cuda
    from nkieval.review.stages.kept_runs import KEPT_RUNS

    task = load_task(PORTS_ROOT / "rmsnorm_warp")
    src = task.cuda_file.read_text()
    task, src, runs = _runs("rmsnorm_warp", src.replace("xr[c] * inv_rms * (1.0f + w[c])", "xr[c] * inv_rms * w[c]"))
    outs = [s.name for s in task.outputs]  # type: ignore[attr-defined]
    KEPT_RUNS.clear()
    calls: list[int] = []
    real = cuda.run_task_cuda

    def counting(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(cuda, "run_task_cuda", counting)
    first = mutation_causes(task, src, runs, outs)
    n = len(calls)
    assert first and n > 0
    assert mutation_causes(task, src, runs, outs) == first
    assert len(calls) == n, "the second search ran mutants again"


def test_the_inputs_digest_takes_every_dtype_and_tells_values_apart() -> None:
    import ml_dtypes

    from nkieval.review.stages.mutation_causes import _digest

    a = np.arange(12, dtype=np.float32).reshape(3, 4).astype(ml_dtypes.bfloat16)
    b = a.copy()
    b[2, 3] = 0
    assert _digest({"x": a}) == _digest({"x": a.copy()})
    assert _digest({"x": a}) != _digest({"x": b})
    assert _digest({"x": a}) != _digest({"x": a.astype(np.float32)})  # same values, another dtype
    assert _digest({"x": a[:, ::2]}) == _digest({"x": np.ascontiguousarray(a[:, ::2])})
