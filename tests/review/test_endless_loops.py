"""Loop-bound mutations proved endless without a run (review/stages/endless_loops.py), and the cause search that
skips their runs (review/stages/mutation_causes.py): the same causes, fewer executor runs.

The kernels here are written for these tests: a warp and a block tree reduction, and variants of the warp
loop that a proof must not call endless (each ends, or may end)."""

from __future__ import annotations

import numpy as np
import pytest

from nkieval.cuda import ExecutorTimeout, run_host
from nkieval.cuda.mutate import mutations
from nkieval.cuda.program import preprocess
from nkieval.review.stages.endless_loops import never_ends

REDUCE = """\
__device__ float warp_total(float v) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

__global__ void totals(const float* __restrict__ x, float* __restrict__ y, int n) {
    __shared__ float part[64];
    const float v = warp_total(x[blockIdx.x * 64 + threadIdx.x]);
    part[threadIdx.x] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) y[blockIdx.x] = part[0] / (float)n;
}

void run(const float* x, float* y, int rows, int n) { totals<<<rows, 64>>>(x, y, n); }
"""

WARP_LOOP = "for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);"
#: the warp loop changed so that its bound mutation ends, or may end: no proof may call it endless
ENDS = {
    "break": "for (int off = 16; off > 0; off >>= 1) { v += __shfl_xor_sync(0xffffffffu, v, off); "
             "if (v > 1e30f) break; }",
    "counts down": "for (int off = 16; off > 0; off -= 1) v += __shfl_xor_sync(0xffffffffu, v, off);",
    "starts at a parameter": "for (int off = start; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);",
    "body writes the counter": "for (int off = 16; off > 0; off >>= 1) { v += __shfl_xor_sync(0xffffffffu, v, off); "
                               "if (v > 1e30f) off = -2; }",
    "counter by reference": "for (int off = 16; off > 0; off >>= 1) { v += __shfl_xor_sync(0xffffffffu, v, off); "
                            "halve(off); }",
    "returns": "for (int off = 16; off > 0; off >>= 1) { v += __shfl_xor_sync(0xffffffffu, v, off); "
               "if (v > 1e30f) return v; }",
}


def _variant(kind: str) -> str:
    src = REDUCE.replace(WARP_LOOP, ENDS[kind])
    if kind == "starts at a parameter":
        src = src.replace("float warp_total(float v)", "float warp_total(float v, int start = 16)")
    if kind == "counter by reference":
        src = "__device__ void halve(int& k) { k = k / 2 - 1; }\n" + src
    return src


def _bound_mutations(src: str) -> list[object]:
    return [m for m in mutations(src) if m.kind == "indexing" and "bound off by one" in m.what]


def _run(src: str, limit_s: float) -> np.ndarray:
    x = np.random.default_rng(3).standard_normal(2 * 64).astype(np.float32)
    return run_host(src, "run", {"x": x, "y": np.zeros(2, np.float32), "rows": 2, "n": 64},
                    time_limit_s=limit_s).memory["y"]


def test_the_reductions_shrinking_bounds_below_zero_are_proved_endless_and_nothing_else() -> None:
    text = preprocess(REDUCE)
    proved = [m for m in mutations(REDUCE) if never_ends(text, m)]
    assert sorted(m.what for m in proved) == ["`off > 0` as `off > 0 - 1` (bound off by one)",
                                              "`s > 0` as `s > 0 - 1` (bound off by one)"]
    for m in proved:  # what the proof stands for: a run of each is stopped at its limit
        with pytest.raises(ExecutorTimeout):
            _run(m.apply(text), 0.3)
    ends = next(m for m in _bound_mutations(REDUCE) if m.what == "`off > 0` as `off > 0 + 1` (bound off by one)")
    assert not never_ends(text, ends)
    assert np.all(np.isfinite(_run(ends.apply(text), 5.0)))


@pytest.mark.parametrize("kind", sorted(ENDS))
def test_a_loop_that_may_end_is_not_proved_endless(kind: str) -> None:
    src = _variant(kind)
    text = preprocess(src)
    warp = [m for m in _bound_mutations(src) if m.what.startswith("`off > 0` as `off > 0 - 1`")]
    assert len(warp) == 1
    assert not never_ends(text, warp[0])
    # (the block loop's proof does not depend on the warp loop)
    assert any(never_ends(text, m) for m in _bound_mutations(src) if m.what.startswith("`s > 0` as `s > 0 - 1`"))


@pytest.mark.parametrize("kind", ["counter by reference", "body writes the counter"])
def test_a_loop_the_proof_refuses_does_end_when_its_body_changes_the_counter(kind: str) -> None:
    """Why the body is read: the same bound mutation with a body that moves the counter below zero ends."""
    src = _variant(kind).replace("1e30f", "-1e30f")  # (the body's escape taken on the first iteration)
    text = preprocess(src)
    m = next(m for m in _bound_mutations(src) if m.what.startswith("`off > 0` as `off > 0 - 1`"))
    assert not never_ends(text, m)
    _run(m.apply(text), 5.0)  # (returns: no ExecutorTimeout)


def test_a_source_that_does_not_parse_again_to_itself_proves_nothing() -> None:
    m = next(m for m in _bound_mutations(REDUCE) if m.what.startswith("`off > 0` as `off > 0 - 1`"))
    assert never_ends(preprocess(REDUCE), m)
    assert not never_ends("#define X 1\n" + preprocess(REDUCE), m)  # (offsets would point elsewhere)


@pytest.mark.slow
def test_the_cause_search_names_the_same_cause_without_running_the_endless_mutants(monkeypatch) -> None:
    """layernorm_block's port with the unbiased variance: the search tries the block reduction's endless bound
    (a timeout of a quarter second) before it reaches the cause. Without the proof and with it: the same cause;
    with it, that mutant is never run and no run times out."""
    import nkieval.cuda as cuda
    from nkieval.review.stages import mutation_causes as mc
    from nkieval.tasks.inputs import generate_inputs
    from nkieval.tasks.loader import PORTS_ROOT, load_task

    task = load_task(PORTS_ROOT / "layernorm_block")
    src = task.cuda_file.read_text()
    port_src = src.replace("block_sum(q, smem) / (float)n_cols", "block_sum(q, smem) / (float)(n_cols - 1)")
    runs = []
    for s in sorted(task.shapes, key=lambda s: sum(s.dims.values()))[:2]:
        dims = dict(s.dims)
        specs = [(x.name, x.concrete(dims), x.dtype, x.family) for x in task.inputs]
        inp = generate_inputs(specs, "normal", 11, str(dims))
        runs.append((str(dims), dims, inp, cuda.run_task_cuda(task, inp, dims)[0],
                     cuda.run_task_cuda(task, inp, dims, source=port_src)[0]))
    real = cuda.run_task_cuda
    seen: list[str] = []

    def spy(*a, **k):
        try:
            return real(*a, **k)
        except ExecutorTimeout:
            seen.append("timeout")
            raise
        finally:
            seen.append("run")

    monkeypatch.setattr(cuda, "run_task_cuda", spy)
    searches = {}
    for proof in (False, True):
        seen.clear()
        if not proof:
            monkeypatch.setattr(mc, "never_ends", lambda text, m: False)
        else:
            monkeypatch.setattr(mc, "never_ends", never_ends)
        searches[proof] = (mc.mutation_causes(task, src, runs, [s.name for s in task.outputs], keep=False), seen.count("run"),
                           seen.count("timeout"))
    (before, runs_before, timeouts_before), (after, runs_after, timeouts_after) = searches[False], searches[True]
    assert after == before and len(after) == 1 and after[0]["cuda_line"] == 34, after
    assert timeouts_before == 1 and timeouts_after == 0
    assert runs_after == runs_before - 1
