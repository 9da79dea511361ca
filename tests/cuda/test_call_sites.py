"""A mutation of a device function called from several sites, made at one call only (cuda/mutate.py,
``call_site_variants``; review/stages/mutation_causes.py, ``_call_site_hypotheses``).

The "port" is layernorm_block's CUDA kernel with its block reduction's bound off by one in the variance's call
only (a copy of the helper for that call), run by the executor: the test knows the mistake, the search does not."""

from __future__ import annotations

import numpy as np
import pytest

from nkieval.cuda import run_task_cuda
from nkieval.cuda.mutate import call_site_variants, mutations
from nkieval.cuda.program import preprocess
from nkieval.tasks.loader import PORTS_ROOT, load_task


def test_a_mutation_inside_a_helper_called_twice_has_one_variant_per_call() -> None:
    task = load_task("scaled_masked_softmax")
    src = task.cuda_file.read_text()
    m = next(m for m in mutations(src) if m.what.startswith("the statement `v = IsMax ? fmaxf(v, o) : v + o;`"))
    variants = call_site_variants(src, m)
    assert [v.what.split(", in the call of ")[1] for v in variants] == [
        "`block_reduce` at kernel.cu:37 only (its other 1 call unchanged)",
        "`block_reduce` at kernel.cu:40 only (its other 1 call unchanged)"]
    x = np.random.default_rng(0).standard_normal((4, 40)).astype(np.float32)
    dims = {"N": 4, "S": 40}
    gpu, _ = run_task_cuda(task, {"x": x}, dims)
    every, _ = run_task_cuda(task, {"x": x}, dims, source=m.apply(preprocess(src)))
    at_max, _ = run_task_cuda(task, {"x": x}, dims, source=variants[0].apply(preprocess(src)))
    at_sum, _ = run_task_cuda(task, {"x": x}, dims, source=variants[1].apply(preprocess(src)))
    # (the max's shift leaves a softmax unchanged up to rounding; the sum's call is where the statement matters)
    assert np.abs(at_max[0] - gpu[0]).max() < 1e-6 < np.abs(every[0] - gpu[0]).max()
    assert np.allclose(at_sum[0], every[0], rtol=1e-5, atol=1e-7)  # (up to the max shift's rounding)
    host = [m for m in mutations(src) if m.line == 36]  # (the kernel's max loop)
    assert host and all(call_site_variants(src, m) == [] for m in host)  # (a kernel's own code: no calls to vary)


@pytest.mark.slow
def test_a_mistake_in_one_call_of_a_helper_is_named_with_that_call() -> None:
    """Fails without the one-call hypotheses: the bound changed at both calls breaks the mean, which the port
    computes right, so no mutation of every call reproduces it."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from test_mutation_causes import _runs

    from nkieval.review.stages.mutation_causes import mutation_causes

    task = load_task(PORTS_ROOT / "layernorm_block")
    src = task.cuda_file.read_text()
    helper = src[src.index("__device__ float block_sum"):src.index("__global__")]
    port = src.replace("__global__", helper.replace("block_sum", "block_sum_q").replace("s > 0;", "s > 1;")
                       + "\n__global__", 1).replace("block_sum(q, smem)", "block_sum_q(q, smem)")
    task, src, runs = _runs("layernorm_block", port)
    causes = mutation_causes(task, src, runs, ["y", "rstd"])
    assert len(causes) == 1, causes
    c = causes[0]
    assert (c["kind"], c["cuda_line"]) == ("indexing", 11), c["summary"]
    assert "in the call of `block_sum` at kernel.cu:34 only" in c["summary"]
