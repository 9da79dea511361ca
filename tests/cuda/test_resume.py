"""Mutants resumed from the original kernel's state (``nkieval.cuda.resume``): a resumed run must give exactly
what a fresh run of the mutant gives (outputs bitwise, or the same error), on every mutation the cause search
tries, and must not resume past a statement the change can reach (a device function called earlier, a kernel
launched earlier, a loop whose body holds the change)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nkieval.cuda import run_task_cuda, work_units
from nkieval.cuda.mutate import call_site_variants, mutations
from nkieval.cuda.program import parse_program, preprocess
from nkieval.cuda.resume import ResumableRun, resume_point
from nkieval.cuda.runner import run_host
from nkieval.review.stages.kept_runs import KeptRuns, inputs_digest, kept_cuda_run
from nkieval.tasks.inputs import generate_inputs
from nkieval.tasks.loader import BUILTIN_ROOT, PORTS_ROOT, load_task


def _outcome(run: object) -> object:
    """Outputs as bytes, or the error's type and message (what the cause search sees of a run)."""
    try:
        outs = run()  # type: ignore[operator]
    except Exception as e:  # (any error of a mutant is a fault: both runs must raise the same)
        return (type(e).__name__, str(e))
    return [(a.dtype.str, a.shape, np.ascontiguousarray(a).tobytes()) for a in outs]


def _smallest_case(task: object) -> tuple[dict[str, int], dict[str, np.ndarray]]:
    s = min(task.shapes, key=lambda s: sum(s.dims.values()))  # type: ignore[attr-defined]
    dims = dict(s.dims)
    specs = [(x.name, x.concrete(dims), x.dtype, x.family) for x in task.inputs]  # type: ignore[attr-defined]
    return dims, generate_inputs(specs, "normal", 7, str(dims))


TASKS = [(BUILTIN_ROOT, "gemm_bf16"), (BUILTIN_ROOT, "causal_attention"), (PORTS_ROOT, "layernorm_block"),
         (PORTS_ROOT, "online_softmax"), (PORTS_ROOT, "adam_lerp"), (PORTS_ROOT, "causal_softmax")]


@pytest.mark.slow
@pytest.mark.parametrize(("root", "task_id"), TASKS)
def test_every_mutant_resumed_gives_its_fresh_run(root: object, task_id: str) -> None:
    task = load_task(root / task_id)  # type: ignore[operator]
    src = task.cuda_file.read_text()
    text = preprocess(src)
    dims, inputs = _smallest_case(task)
    resumable = ResumableRun(task, text, inputs, dims, task.params, min_gain=0.0)  # (wherever the text allows)
    ms = list(mutations(src))
    ms += [v for m in ms[:40] for v in call_site_variants(src, m)]
    resumed = 0
    for m in ms:
        mutant = m.apply(text)
        fresh = _outcome(lambda mutant=mutant: run_task_cuda(task, inputs, dims, dict(task.params), source=mutant,
                                                             work_limit=work_units(1.0))[0])
        if fresh and isinstance(fresh, tuple) and fresh[0] == "ExecutorTimeout":
            continue  # (an endless mutant: a timeout's charge is tested below, not its message)
        resumed += resumable.point(mutant) is not None
        again = _outcome(lambda mutant=mutant: resumable.run(mutant, work_units(1.0)))
        assert again == fresh, (task_id, m.what)
    assert resumed >= len(ms) // 3, (task_id, resumed, len(ms))  # (the resume is exercised, not bypassed)


SOURCE = """\
__device__ float twice(float v) { return 2.0f * v; }
__device__ float plus_one(float v) { return v + 1.0f; }
__device__ float block_sum(float v, float* red) {
    red[threadIdx.x] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
        __syncthreads();
    }
    float r = red[0];
    __syncthreads();
    return r;
}
__global__ void first(const float* x, float* w, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    w[i] = plus_one(x[i]) * 0.5f;
}
__global__ void second(const float* x, const float* w, float* y, float* total, int n) {
    __shared__ float red[64];
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    float a = i < n ? twice(x[i]) : 0.0f;
    float acc = 0.0f;
    for (int k = 0; k < 5; ++k) acc += a * (float)k - w[i < n ? i : 0];
    const float s = block_sum(acc, red);
    if (i >= n) return;
    y[i] = acc / (s + 3.0f) + plus_one(a);
    if (threadIdx.x == 0) total[blockIdx.x] = s;
}
void host(const float* x, float* y, float* total, int n, float* w) {
    first<<<(n + 63) / 64, 64>>>(x, w, n);
    second<<<(n + 63) / 64, 64>>>(x, w, y, total, n);
}
"""
#: the host launches both kernels, through a workspace (``w``, grown as ``first`` writes it)


def _host_run(source: str, x: np.ndarray, n: int) -> list[np.ndarray]:
    nb = (n + 63) // 64
    run = run_host(source, "host", {"x": x, "y": np.full(n, np.nan, np.float32),
                                    "total": np.full(nb, np.nan, np.float32), "n": n}, time_limit_s=2.0)
    return [run.memory["y"], run.memory["total"], run.memory["w"]]


def test_the_resume_point_stops_before_what_the_change_reaches() -> None:
    text = preprocess(SOURCE)
    base = parse_program(text)
    launched = ["first", "second"]

    def point(old: str, new: str) -> tuple[int, int] | None:
        assert text.count(old) == 1, old
        return resume_point(base, parse_program(text.replace(old, new)), launched, "host")

    # a change in `second`'s last statement: launch 1 (the first launch is skipped), before that statement
    assert point("total[blockIdx.x] = s;", "total[blockIdx.x] = s + 1.0f;") == (1, 8)
    # inside the loop: before the loop, not after it
    assert point("acc += a * (float)k", "acc += a * (float)(k + 1)") == (1, 4)
    # a device function called by both kernels: from `first`'s statement 2, where `first` first calls it
    assert point("return v + 1.0f;", "return v + 2.0f;") == (0, 2)
    # `first`'s first statement: nothing to skip, a fresh run
    assert point("if (i >= n) return;\n    w[i]", "if (i > n) return;\n    w[i]") == (0, 1)
    assert point("void first(const float* x, float* w, int n) {\n    const int i",
                 "void first(const float* x, float* w, int n) {\n    int i") is None
    # a device function only `second` calls, at its statement 2 (through the initialiser of `a`)
    assert point("return 2.0f * v;", "return 3.0f * v;") == (1, 2)
    # the block reduction, first called at statement 5
    assert point("red[threadIdx.x] += red[threadIdx.x + s];", "red[threadIdx.x] -= red[threadIdx.x + s];") == (1, 5)
    # host code, a signature: never resumed
    assert point("second<<<(n + 63) / 64, 64>>>", "second<<<(n + 63) / 64, 32>>>") is None
    assert point("__global__ void second(const float* x", "__global__ void second(const float* xx") is None


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 150), st.integers(0, 2**31 - 1))
def test_a_resumed_mutant_equals_its_fresh_run_on_random_inputs(pick: int, n: int, seed: int) -> None:
    """Any mutation of the two-kernel source, on any size (one block or several, a partial last block): the run
    resumed from the original's state gives the fresh run's outputs and workspace bitwise."""
    text = preprocess(SOURCE)
    ms = mutations(SOURCE)
    m = ms[pick % len(ms)]
    mutant = m.apply(text)
    x = np.random.default_rng(seed).standard_normal(n).astype(np.float32)
    fresh = _outcome(lambda: _host_run(mutant, x, n))
    resumed = _outcome(lambda: _resumed_host_run(text, mutant, x, n))
    assert resumed == fresh, m.what


def _resumed_host_run(text: str, mutant: str, x: np.ndarray, n: int) -> list[np.ndarray]:
    """:func:`_host_run` of ``mutant``, resumed from ``text``'s states (what ResumableRun does, for run_host)."""
    from nkieval.cuda import resume as r

    capture = r._Capture()
    nb = (n + 63) // 64
    args = {"x": x, "y": np.full(n, np.nan, np.float32), "total": np.full(nb, np.nan, np.float32), "n": n}
    run = run_host(text, "host", args, time_limit_s=2.0, capture=capture)
    at = resume_point(parse_program(text), parse_program(mutant), [k.kernel for k in run.launches], "host")
    if at is None or at not in capture.states:
        return _host_run(mutant, x, n)

    class Owner:
        credited = 0
    resume = r._Resume(at[0], at[1], capture.states[at], capture.base_buffers, Owner())  # type: ignore[arg-type]
    out = run_host(mutant, "host", args, time_limit_s=2.0, resume=resume)
    return [out.memory["y"], out.memory["total"], out.memory["w"]]


def test_a_resumed_run_is_charged_the_part_it_skipped() -> None:
    """The kept run's work counts the original's up to the state resumed from, exactly a fresh run's, so the
    cause search's budget sees a resumed mutant as a fresh one."""
    task = load_task(BUILTIN_ROOT / "gemm_bf16")
    text = preprocess(task.cuda_file.read_text())
    dims, inputs = _smallest_case(task)
    resumable = ResumableRun(task, text, inputs, dims, task.params)
    old = "c[(size_t)row * N + col] = acc;"
    mutant = text.replace(old, "c[(size_t)row * N + col] = acc + 1.0f;")
    assert resumable.point(mutant) is not None
    resumable.run(mutant, work_units(5.0))  # (the states are captured by a first run)
    state = resumable.capture.states[resumable.point(mutant)]  # type: ignore[union-attr,index]
    assert state.work > 0
    store = KeptRuns(1 << 20)
    outs, took = kept_cuda_run(task, "t", inputs, inputs_digest(inputs), dims, mutant, task.params, work_units(5.0),
                               store=store, resumable=resumable)
    fresh, run = run_task_cuda(task, inputs, dims, dict(task.params), source=mutant)
    assert outs is not None and took == run.work > state.work
    assert all(np.array_equal(a, b) for a, b in zip(outs, fresh))


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.integers(65, 400), st.integers(0, 2**31 - 1))
def test_a_launch_in_several_groups_resumes_its_first_group_only(pick: int, n: int, seed: int) -> None:
    """With groups of two blocks (so 2 to 4 groups per launch), the first group resumes and the others run the
    mutant from its start, on the memory the first left: still the fresh run's result."""
    from unittest.mock import patch

    from nkieval.cuda import interp

    text = preprocess(SOURCE)
    ms = mutations(SOURCE)
    m = ms[pick % len(ms)]
    mutant = m.apply(text)
    x = np.random.default_rng(seed).standard_normal(n).astype(np.float32)
    with patch.object(interp, "MAX_LANES", 128):
        fresh = _outcome(lambda: _host_run(mutant, x, n))
        resumed = _outcome(lambda: _resumed_host_run(text, mutant, x, n))
    assert resumed == fresh, m.what


def test_whether_a_mutant_resumes_is_the_same_under_a_five_times_clock(
        monkeypatch: pytest.MonkeyPatch, fast_cpu_clock: Callable[..., None]) -> None:
    """Whether a mutant resumes (its skipped statements' work against the state's copy, ``MIN_GAIN``) is decided
    in work units: the same mutants resume with the executor's CPU clock five times as fast and jumping at every
    reading (a slower, stalled machine). The CPU-time rule resumed others there: it read the copy's and the
    statements' CPU seconds."""
    task = load_task(BUILTIN_ROOT / "rmsnorm")
    src = task.cuda_file.read_text()
    text = preprocess(src)
    dims, inputs = _smallest_case(task)
    mutants = [m.apply(text) for m in mutations(src)]

    def decisions() -> list[tuple[int, int] | None]:
        resumable = ResumableRun(task, text, inputs, dims, task.params)
        return [resumable.point(mutant) for mutant in mutants]

    normal = decisions()
    allowed = ResumableRun(task, text, inputs, dims, task.params, min_gain=0.0)
    # (the rule decides: some mutants the text allows to resume do, others run fresh)
    assert 0 < sum(d is not None for d in normal) < sum(allowed.point(m) is not None for m in mutants)
    fast_cpu_clock(monkeypatch, 5.0, step_s=0.01)
    assert decisions() == normal
