"""The built-in task suite, checked statically and on one small shape per task (issue 7).

Why these and not the full review: the whole suite through the review takes minutes of CPU (it
is ``nkieval suite run``, a benchmark); these tests keep every task honest at commit time. Each
task must validate with the task checker, ship everything a porting task needs (CUDA source
with launch code, baseline, expert, >= 2 flawed candidates with a named criterion, a ragged
hidden shape), and its expert solution must reproduce the reference on one small ragged shape
in the simulator. Expert solutions with a Beta-1 twin (``solution_beta1.py``) are run through
the ``neuronxcc.nki`` front end on the same shape.
"""

from __future__ import annotations

import runpy
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from nkieval.review.compare import compare_outputs
from nkieval.tasks import builtin_ids, check_task, load_reference, load_task, reference_outputs
from nkieval.tasks.inputs import generate_inputs
from nkieval.tasks.schema import CRITERIA, ShapeCase, Task

TASK_IDS = builtin_ids()
BETA1 = [t for t in TASK_IDS if (load_task(t).directory / "solution_beta1.py").is_file()]


def _small_case(task: Task) -> ShapeCase:
    """The cheapest shape that still has a ragged dimension larger than one tile, else the cheapest."""
    def cost(s: ShapeCase) -> int:
        return sum(int(np.prod(t.concrete(s.dims))) for t in task.inputs)

    ragged = [s for s in task.shapes if any(v > 128 and v % 128 for v in s.dims.values())]
    return min(ragged or list(task.shapes), key=cost)


def _inputs(task: Task, case: ShapeCase) -> dict[str, np.ndarray]:
    specs = [(t.name, t.concrete(case.dims), t.dtype, t.family) for t in task.inputs]
    return generate_inputs(specs, task.families[0], 7, case.label)


def _as_list(out: object) -> list[np.ndarray]:
    return [np.asarray(o) for o in out] if isinstance(out, tuple | list) else [np.asarray(out)]


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_task_validates_and_is_complete(task_id: str) -> None:
    rep = check_task(task_id)
    assert rep.ok, rep.errors
    t = rep.task
    assert t is not None
    assert t.cuda_file and t.baseline_file and t.solution_file, "CUDA source, baseline and expert solution"
    cu = t.cuda_file.read_text()
    assert "__global__" in cu and "<<<" in cu, "a CUDA kernel with its launch code"
    assert len(t.flawed) >= 2, "at least two flawed candidates"
    for fl in t.flawed:
        assert fl.criterion in CRITERIA and len(fl.flaw) > 20, fl
    assert any(any(v > 1 and v % 128 for v in s.dims.values()) for s in t.hidden_shapes), \
        "a hidden shape with a size that is not a multiple of 128"
    assert t.targets, "declared target generations"


def test_suite_has_the_required_size() -> None:
    levels = Counter(load_task(t).level for t in TASK_IDS)
    assert levels[1] >= 16 and levels[2] >= 16 and levels[3] >= 8, dict(levels)
    assert len(TASK_IDS) >= 40
    assert len(BETA1) >= 10, BETA1


def _check_kernel(task: Task, fn: object, run: object) -> None:
    case = _small_case(task)
    ins = _inputs(task, case)
    got = _as_list(run(fn, [ins[t.name] for t in task.inputs], dict(task.params)))
    want = reference_outputs(task, load_reference(task), ins)
    assert len(got) == len(task.outputs), f"{len(got)} outputs"
    mismatch = compare_outputs(got, want, task.outputs, task.rtol, task.atol)
    assert mismatch is None, (case.describe(), mismatch)


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_expert_solution_matches_reference_on_a_small_shape(task_id: str) -> None:
    import nki

    task = load_task(task_id)
    assert task.solution_file is not None
    fn = runpy.run_path(str(task.solution_file))[task.kernel]

    def run(f, args, params):
        return nki.simulate(f, target=task.default_target)(*args, **params)

    _check_kernel(task, fn, run)


@pytest.mark.parametrize("task_id", BETA1)
def test_beta1_expert_solution_matches_reference(task_id: str) -> None:
    import neuronxcc.nki as nki_b1

    task = load_task(task_id)
    path = Path(task.directory) / "solution_beta1.py"
    src = path.read_text()
    assert "neuronxcc.nki" in src and "import nki\n" not in src, "a Beta-1 (neuronxcc.nki) kernel"
    fn = runpy.run_path(str(path))[task.kernel]

    def run(f, args, params):
        return nki_b1.simulate_kernel(f, *args, **params)

    _check_kernel(task, fn, run)
