"""The CUDA port acceptance set (src/nkieval/tasks/ports): shape of the set, every task valid, every kernel.cu
agreeing with its reference, and the migration finding for fusion lost through an HBM round trip.

The full measurement (every flawed port reviewed) is benchmarks/cuda_port_acceptance.py --set ports."""

from __future__ import annotations

import numpy as np
import pytest

from nkieval.cuda import run_task_cuda
from nkieval.review.suite import plan
from nkieval.tasks import PORTS_ROOT, check_task, load_reference, port_tasks, reference_outputs, set_ids
from nkieval.tasks.inputs import generate_inputs

PORT_IDS = set_ids("ports")


def test_the_set_has_ten_tasks_each_with_four_flawed_ports_half_semantic() -> None:
    tasks = port_tasks()
    assert len(tasks) >= 10
    for t in tasks:
        assert t.cuda_file is not None and t.solution_file is not None, t.id
        assert len(t.flawed) >= 4, t.id
        # a semantic flaw is declared by the cause it must produce: a kind or constant at a kernel.cu line
        semantic = [f for f in t.flawed if any("kernel.cu:" in w for w in f.evidence)]
        assert 2 * len(semantic) >= len(t.flawed), t.id
        assert all(f.criterion == "migration" for f in t.flawed), t.id


def test_the_suite_plans_the_ports_set_by_its_root() -> None:
    entries = plan(roles=("expert", "flawed"), all_targets=False, root=PORTS_ROOT)
    assert {e.task for e in entries} == set(PORT_IDS)
    assert sum(e.role == "expert" for e in entries) == len(PORT_IDS)


@pytest.mark.parametrize("task_id", PORT_IDS)
def test_port_task_checks_and_its_cuda_matches_the_reference(task_id: str) -> None:
    rep = check_task(PORTS_ROOT / task_id)
    assert not rep.errors, rep.errors
    t = rep.task
    assert t is not None
    small = min(t.shapes, key=lambda s: sum(s.dims.values()))
    dims = dict(small.dims)
    specs = [(x.name, x.concrete(dims), x.dtype, x.family) for x in t.inputs]
    inp = generate_inputs(specs, t.families[0], 7, "port-test")
    ref = reference_outputs(t, load_reference(t), inp)
    outs, _ = run_task_cuda(t, inp, dims)
    for o, r, spec in zip(outs, ref, t.outputs, strict=True):
        np.testing.assert_allclose(np.asarray(o, np.float64), np.asarray(r, np.float64), rtol=t.rtol, atol=t.atol,
                                   err_msg=f"{task_id} {dims} output {spec.name}")


@pytest.mark.slow
def test_fusion_lost_through_hbm_is_a_migration_finding() -> None:
    from nkieval.review.pipeline import review

    task = PORTS_ROOT / "bias_leaky_gain"
    r = review(str(task), str(task / "flawed" / "hbm_round_trip.py"), seed=5, compare_references=False)
    mig = next(c for c in r.criteria if c.id == "migration")
    lines = [f for f in mig.feedback if f.observed.startswith("fusion lost")]
    assert len(lines) == 1 and lines[0].severity == "error"
    assert lines[0].evidence["value"] > lines[0].evidence["limit"]
    assert mig.level is not None and mig.level < 4
    assert r.verdict == "pass"  # (the values are right: only the dataflow changed)


@pytest.mark.slow
def test_a_port_that_leaves_sequences_unwritten_is_told_so() -> None:
    from nkieval.review.pipeline import review

    task = PORTS_ROOT / "rope_half"
    r = review(str(task), str(task / "flawed" / "first_sequence_only.py"), seed=5, compare_references=False)
    mig = next(c for c in r.criteria if c.id == "migration")
    lines = [f.observed for f in mig.feedback if f.severity != "info" and "unwritten (NaN)" in f.observed]
    assert lines and "where the CUDA kernel writes values" in lines[0]
    assert not [f for f in mig.feedback if f.observed.startswith("semantic infidelity")]  # (no cause guessed)
