"""Trace, then execute, through the review: the candidate's process sees no data, and what it does to its own
process's memory changes nothing the judge sees (outputs and the trace come from the judge's replay)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from nkieval.review import review, tracing

HOST_WRITE = '''
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def vector_add(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    out.data[...] = a.data + b.data          # host NumPy into the output's backing array
    t = nl.ndarray((1, 1), dtype=a.dtype, buffer=nl.sbuf)
    nisa.memset(dst=t, value=0.0)
    nisa.dma_copy(dst=out[0:1], src=t.reshape((1,)))   # one cheap DMA "writes" the output
    return out
'''

PATCH_NUMPY = '''
import numpy as np
import pytest
import nki
import nki.language as nl

# if the judge shared this process, these would make every comparison pass
np.allclose = np.array_equal = lambda *a, **k: True
np.isclose = lambda a, b, *r, **k: np.ones(np.shape(a), dtype=bool)


@nki.jit
def vector_add(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    n = a.shape[0]
    p = 128
    for i in range((n + p - 1) // p):
        rows = min(p, n - i * p)
        ta = nl.load(a[i * p:i * p + rows].reshape((rows, 1)))
        nl.store(out[i * p:i * p + rows].reshape((rows, 1)), nl.add(ta, ta))   # a + a, not a + b
    return out
'''


def test_host_writes_into_backing_arrays_do_not_reach_the_judge():
    r = review("vector_add", HOST_WRITE, seed=3)
    assert r.verdict != "pass"
    ok = [c for c in r.cases if c.status == "ok"]
    assert ok, "the program replays (one DMA), so the judge sees its real effect: an output barely written"
    assert all(not c.correct for c in ok)


def test_the_tracer_gets_shapes_and_parameters_only(monkeypatch):
    seen: list[dict] = []
    real = tracing.run_tracer

    def spy(request, limits, n_shapes, hide=(), on_part=None):
        seen.append(json.loads(json.dumps(request)))
        return real(request, limits, n_shapes, hide, on_part)

    monkeypatch.setattr(tracing, "run_tracer", spy)
    review("vector_add", PATCH_NUMPY, seed=4)
    assert seen
    for req in seen:
        assert set(req) == {"source", "kernel", "target", "max_instructions", "defer", "shapes"}
        assert type(req["defer"]) is bool  # (how to record: leave the replay's checks to it, or not)
        for s in req["shapes"]:
            assert set(s) == {"key", "args", "params"}
            for a in s["args"]:
                assert set(a) == {"shape", "dtype"}  # no values, no seed, no file names
    # one trace per distinct shape in the whole review (the evidence and differential stages re-run shapes the
    # cases ran: they reuse those programs), however many input families run on it
    keys = [s["key"] for req in seen for s in req["shapes"]]
    assert len(set(keys)) == len(keys)


def test_patching_numpy_in_the_tracer_changes_nothing_the_judge_computes():
    r = review("vector_add", PATCH_NUMPY, seed=5)
    assert all(c.status == "ok" for c in r.cases)  # the program replays in the judge
    assert r.verdict != "pass" and not any(c.correct for c in r.cases)


def test_reading_tile_values_in_python_fails_with_the_rule_and_line():
    src = HOST_WRITE.replace("out.data[...] = a.data + b.data", "x = np.asarray(a)").replace(
        "import nki\n", "import numpy as np\nimport nki\n", 1)
    r = review("vector_add", src, seed=6)
    assert r.verdict != "pass"
    bad = [c for c in r.cases if c.status == "rule-violation"]
    assert bad and all("trace-time-value" in json.dumps(c.error) for c in bad)
    assert np.isfinite(r.score)



REACH = '''
import numpy as np
import pytest
import nki
import nki.language as nl


@nki.jit
def vector_add(a, b):
    np.testing._private.utils.gc.get_objects()   # look for the judge's objects (none are here)
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    n = a.shape[0]
    p = 128
    for i in range((n + p - 1) // p):
        rows = min(p, n - i * p)
        ta = nl.load(a[i * p:i * p + rows].reshape((rows, 1)))
        tb = nl.load(b[i * p:i * p + rows].reshape((rows, 1)))
        nl.store(out[i * p:i * p + rows].reshape((rows, 1)), nl.add(ta, tb))
    return out
'''


def test_reaching_for_the_harness_is_a_sandbox_violation_even_when_harmless():
    """The payload finds nothing (the tracer holds no data), but the attempt earns nothing either; the same
    kernel without it passes."""
    r = review("vector_add", REACH, seed=8)
    assert r.verdict == "sandbox-violation" and r.score == 0
    assert "gc.get_objects" in json.dumps([c.error for c in r.cases])
    honest = review("vector_add", REACH.replace("    np.testing._private.utils.gc.get_objects()", "    pass"), seed=8)
    assert honest.verdict == "pass"


COPY_EXPERT = '''
import numpy as np
import pytest
import nki

_src = np.lib.npyio.DataSource(None).open("{expert}").read()   # (numpy's own open: no audit from this line)


@nki.jit
def vector_add(a, b):
    return a
'''


def test_builtin_tasks_are_hidden_from_the_tracer():
    """The built-in expert solutions live in the package: a tracer that could read one could run it."""
    from nkieval.tasks.loader import BUILTIN_ROOT

    expert = BUILTIN_ROOT / "vector_add" / "solution_nki.py"
    assert expert.is_file()
    r = review("vector_add", COPY_EXPERT.replace("{expert}", str(expert)), seed=9)
    assert r.verdict != "pass"
    msgs = json.dumps([c.error for c in r.cases])
    assert "not found" in msgs or "No such file" in msgs, msgs[:500]


PROBE_TASK_DIR = '''
import numpy as np
import pytest
import nki
import nki.language as nl

if np.lib.npyio.DataSource(None).exists("{task}" + "/refer" + "ence.py"):   # (a stat: no audit event)
    raise RuntimeError("the tracer can see the task's reference")


@nki.jit
def vector_add(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    n = a.shape[0]
    for i in range((n + 127) // 128):
        rows = min(128, n - i * 128)
        ta = nl.load(a[i * 128:i * 128 + rows].reshape((rows, 1)))
        tb = nl.load(b[i * 128:i * 128 + rows].reshape((rows, 1)))
        nl.store(out[i * 128:i * 128 + rows].reshape((rows, 1)), nl.add(ta, tb))
    return out
'''


def test_a_task_directory_given_by_path_is_hidden_from_the_tracer():
    """A task outside the package (here: a copy of vector_add inside the checkout, a world-readable place that
    no policy path covers) is covered in the tracer's sandbox for its own review: the candidate cannot find
    the reference or solutions it is judged against."""
    import shutil
    import uuid
    from pathlib import Path

    from nkieval.tasks.loader import BUILTIN_ROOT

    where = Path(__file__).resolve().parent / f".task-{uuid.uuid4().hex[:8]}"
    try:
        shutil.copytree(BUILTIN_ROOT / "vector_add", where)
        reference = where / "reference.py"
        assert reference.is_file()
        r = review(where, PROBE_TASK_DIR.replace("{task}", str(where)), seed=10)
        assert r.verdict == "pass", json.dumps([c.error for c in r.cases])[:500]
    finally:
        shutil.rmtree(where, ignore_errors=True)


@pytest.mark.parametrize("task_id", ["relu", "row_sum"])
def test_a_beta1_kernel_is_reviewed_as_its_front_end_launches_it(task_id):
    """A legacy ``neuronxcc.nki`` kernel (here the task's own Beta-1 expert) is traced and executed as the
    Beta-1 front end launches it (Beta-1 tensors, index grids, its notes for copy elision replayed by the
    executor): it passes, where calling its bare function rejected every index grid."""
    from nkieval.tasks.loader import BUILTIN_ROOT

    r = review(task_id, BUILTIN_ROOT / task_id / "solution_beta1.py", seed=11)
    assert r.verdict == "pass", [(c.status, c.error) for c in r.cases if c.status != "ok"][:2]


def test_the_known_good_kernel_traces_in_the_real_tracer():
    """The check of a tracer's claim that the harness failed is only worth something if a healthy tracer records
    the known-good kernel."""
    from nkieval.review.sandbox import SandboxLimits

    probe = {"key": "k", "args": [{"shape": [4, 8], "dtype": "float32"}], "params": {}}
    answer, failure = tracing.run_tracer({"source": tracing.KNOWN_GOOD_KERNEL, "kernel": "known_good",
                                          "target": "trn2", "max_instructions": 100, "shapes": [probe]},
                                         SandboxLimits(), n_shapes=1)
    assert failure is None and answer["k"]["status"] == "ok", (answer, failure)


LATE_REACH = '''
import numpy as np
import pytest
import nki
import nki.language as nl

TRACED = [0]


@nki.jit
def vector_add(a, b):
    TRACED[0] += 1
    if TRACED[0] == N_SHAPES:   # only while the last shape is traced: every earlier one is streamed and executed
        np.testing._private.utils.gc.get_objects()
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    n = a.shape[0]
    p = 128
    for i in range((n + p - 1) // p):
        rows = min(p, n - i * p)
        ta = nl.load(a[i * p:i * p + rows].reshape((rows, 1)))
        tb = nl.load(b[i * p:i * p + rows].reshape((rows, 1)))
        nl.store(out[i * p:i * p + rows].reshape((rows, 1)), nl.add(ta, tb))
    return out
'''


def test_a_reach_for_the_harness_after_the_streamed_shapes_still_decides_the_review():
    from nkieval.review.stages.load import plan_cases
    from nkieval.tasks import load_task

    task = load_task("vector_add")
    n_shapes = len({tuple(sorted(c.dims.items())) for c in plan_cases(task, 9, task.families, "all")})
    assert n_shapes > 1
    r = review(task, LATE_REACH.replace("N_SHAPES", str(n_shapes)), seed=9)
    statuses = [c.status for c in r.cases]
    assert "ok" in statuses, "the earlier shapes were streamed and executed"
    assert r.verdict == "sandbox-violation" and r.score == 0, statuses


def test_a_later_review_of_the_same_source_replays_its_kept_programs_without_a_tracer_run(monkeypatch):
    """The tracer sees no seed and no value, so the programs of a source are the same on the next seed (an RL
    loop's next step): that review replays them (``review.cache.TRACES``) and decides as the first did."""
    from nkieval.tasks import load_task

    runs: list[int] = []
    real = tracing.run_tracer

    def spy(request, *a, **k):
        runs.append(len(request["shapes"]))
        return real(request, *a, **k)

    monkeypatch.setattr(tracing, "run_tracer", spy)
    source = load_task("vector_add").solution_file.read_text()
    first = review("vector_add", source, seed=5)
    traced = len(runs)
    again = review("vector_add", source, seed=6)
    assert traced >= 1 and len(runs) == traced
    assert first.verdict == again.verdict == "pass" and again.score == first.score
    review("vector_add", source + "\n# another source\n", seed=6)
    assert len(runs) == traced + 1
