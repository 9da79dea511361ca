"""The rounding beam extends a combination by a rounding nested with one of its own (mutation_causes.py):
rmsnorm_warp's bf16_square_sum port rounds the mean of squares, then the mean plus eps, then the output. On
rows whose mean square is near eps the middle rounding shows, but on its own it comes no closer to the port
(bf16(mean + eps) double-rounds unlike bf16(bf16(mean) + eps)), so only the nested extension tries it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import nkieval
from nkieval.cuda import run_task_cuda
from nkieval.review.stages.mutation_causes import mutation_causes
from nkieval.tasks.loader import load_task

TASK = Path(nkieval.__file__).parent / "tasks" / "ports" / "rmsnorm_warp"


@pytest.fixture(scope="module")
def runs() -> tuple[object, list[tuple[object, ...]]]:
    from nkieval.frontends import install
    from nkieval.sim.runner import run_kernel

    install()
    task = load_task(TASK)
    spec = importlib.util.spec_from_file_location("bf16_square_sum", TASK / "flawed" / "bf16_square_sum.py")
    assert spec is not None and spec.loader is not None
    port = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(port)
    rng = np.random.default_rng(0)
    out = []
    for n in (64, 96):
        x = (rng.standard_normal((n, 96)) * 1e-3).astype(np.float32)  # (a mean square of ~1e-6: eps shows)
        w = rng.standard_normal(96).astype(np.float32)
        y = run_kernel(port.rmsnorm_warp, (x, w)).outputs
        gpu, _ = run_task_cuda(task, {"x": x, "w": w}, {"N": n, "D": 96})
        out.append((f"tiny/{n}", {"N": n, "D": 96}, {"x": x, "w": w}, gpu, [np.asarray(y)]))
    return task, out


def test_the_three_roundings_of_the_port_are_found(runs) -> None:
    task, tiny = runs
    causes = mutation_causes(task, task.cuda_file.read_text(), tiny, ["y"])
    assert len(causes) == 1
    summary = causes[0]["summary"]
    for what in ("`ss / (float)n_cols + 1e-6f` rounded to bf16", "`ss / (float)n_cols` rounded to bf16",
                 "`xr[c] * inv_rms * (1.0f + w[c])` rounded to bf16"):
        assert what in summary
    assert summary.count("rounded to bf16") == 3
