"""Hostile candidates get specific verdicts within their limits, and the next review is unaffected."""

import os
import time

import numpy as np
import pytest

from nkieval.review.sandbox import CaseJob, SandboxLimits, run_candidate
from nkieval.tasks import BUILTIN_ROOT

GOOD = (BUILTIN_ROOT / "vector_add" / "solution_nki.py").read_text()
HEAD = "import nki\nimport nki.isa as nisa\nimport nki.language as nl\n\n"


def _cases(n=2):
    return [CaseJob(f"c{i}", {"a": np.full(300, i, np.float32), "b": np.ones(300, np.float32)}, {}, 1)
            for i in range(n)]


HOSTILE = {
    "loops forever": (HEAD + "@nki.jit\ndef vector_add(a, b):\n    while True:\n        pass\n", "timeout"),
    "allocates 50 GB": (HEAD + "import numpy as np\n\n@nki.jit\ndef vector_add(a, b):\n"
                        "    x = np.ones(50 * 1024**3 // 8)\n    return x\n", "memory-limit"),
    "allocates 50 GB in HBM": (HEAD + "@nki.jit\ndef vector_add(a, b):\n"
                               "    return nl.ndarray((50 * 1024**3 // 4,), dtype=nl.float32, buffer=nl.shared_hbm)\n",
                               "memory-limit"),
    "raises": (HEAD + "@nki.jit\ndef vector_add(a, b):\n    raise ValueError('boom')\n", "exception"),
    "calls os._exit": ("import os\n" + HEAD + "@nki.jit\ndef vector_add(a, b):\n    os._exit(3)\n", "crash"),
    "exits at import": ("import os\nos._exit(0)\n", "crash"),
    "sys.exit": ("import sys\n" + HEAD + "@nki.jit\ndef vector_add(a, b):\n    sys.exit(0)\n", "exception"),
    "breaks a hardware rule": (HEAD + "@nki.jit\ndef vector_add(a, b):\n"
                               "    t = nl.ndarray((256, 4), dtype=nl.float32, buffer=nl.sbuf)\n    return t\n",
                               "rule-violation"),
    "returns nothing": (HEAD + "@nki.jit\ndef vector_add(a, b):\n    return None\n", "bad-output"),
    "returns its input": (HEAD + "@nki.jit\ndef vector_add(a, b):\n    return a\n", "bad-output"),
    "syntax error": ("def vector_add(a, b)\n", "import-error"),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_candidate_gets_specific_verdict(name):
    src, want = HOSTILE[name]
    t = time.monotonic()
    runs = run_candidate(src, "vector_add", _cases(), target="trn2",
                         limits=SandboxLimits(timeout_s=1.5, memory_mb=2048, startup_s=5))
    assert runs[0].status == want, (runs[0].status, runs[0].error)
    assert time.monotonic() - t < 15
    # and the next run, in a fresh child, is unaffected
    ok = run_candidate(GOOD, "vector_add", _cases(1), target="trn2")
    assert ok[0].status == "ok"
    assert np.array_equal(ok[0].outputs[0], np.ones(300, np.float32))


def test_garbage_on_stdout_is_ignored():
    src = "print('{\"status\": \"fail\"}')\nprint('\\x00\\xff' * 1000)\n" + GOOD
    runs = run_candidate(src, "vector_add", _cases(), target="trn2")
    assert [r.status for r in runs] == ["ok", "ok"]
    assert np.array_equal(runs[1].outputs[0], np.full(300, 2, np.float32))


def test_crash_in_one_case_does_not_hide_the_next():
    src = ("import os\n" + HEAD + "@nki.jit\ndef vector_add(a, b):\n"
           "    if a.shape[0] == 7:\n        os._exit(1)\n"
           "    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)\n"
           "    t = nl.ndarray((1, a.shape[0]), dtype=a.dtype, buffer=nl.sbuf)\n"
           "    nisa.dma_copy(dst=t, src=a.reshape((1, a.shape[0])))\n"
           "    nisa.dma_copy(dst=out.reshape((1, a.shape[0])), src=t)\n    return out\n")
    cases = [CaseJob("c7", {"a": np.ones(7, np.float32), "b": np.ones(7, np.float32)}, {}, 1),
             CaseJob("c9", {"a": np.ones(9, np.float32), "b": np.ones(9, np.float32)}, {}, 1)]
    runs = run_candidate(src, "vector_add", cases, target="trn2")
    assert [r.status for r in runs] == ["crash", "ok"]


def test_subprocess_isolation_mode():
    # (isolation is the candidate's own child's: the pipeline before trace-then-execute)
    runs = run_candidate(GOOD, "vector_add", _cases(1), target="trn2", isolation="subprocess", trusted=False)
    assert runs[0].status == "ok" and runs[0].trace_json


def test_crash_and_hang_in_a_later_case_are_that_case_s():
    # the child marks only its first case as started: later cases are timed from the previous result
    body = ("    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)\n"
            "    t = nl.ndarray((1, a.shape[0]), dtype=a.dtype, buffer=nl.sbuf)\n"
            "    nisa.dma_copy(dst=t, src=a.reshape((1, a.shape[0])))\n"
            "    nisa.dma_copy(dst=out.reshape((1, a.shape[0])), src=t)\n    return out\n")
    crash = "import os\n" + HEAD + "@nki.jit\ndef vector_add(a, b):\n    if a.shape[0] == 7:\n        os._exit(1)\n" + body
    hang = HEAD + "@nki.jit\ndef vector_add(a, b):\n    while a.shape[0] == 7:\n        pass\n" + body
    cases = [CaseJob(f"c{n}", {"a": np.ones(n, np.float32), "b": np.ones(n, np.float32)}, {}, 1) for n in (9, 7, 5)]
    runs = run_candidate(crash, "vector_add", cases, target="trn2")
    assert [r.status for r in runs] == ["ok", "crash", "ok"]
    assert "while running this case" in runs[1].error["message"]
    t = time.monotonic()
    runs = run_candidate(hang, "vector_add", cases, target="trn2", limits=SandboxLimits(timeout_s=1.0, startup_s=5))
    # shapes are traced smallest first (5, 7, 9): the hang on 7 skips 9, which was not traced yet
    assert [r.status for r in runs] == ["not-run", "timeout", "ok"]
    # the hanging shape is caught while tracing it (its budget: the start-up allowance plus the case's limit)
    # (timed from when the judge got the part before it, which under load comes a few tenths of a second after the
    # sandbox's own clock for the shape started; a run's whole time, or none, would fall outside these bounds)
    assert 0.5 <= runs[1].wall_s < 8 and time.monotonic() - t < 15


def test_kept_output_files_are_overwritten_and_never_read_stale(tmp_path):
    from nkieval.review import npzio
    from nkieval.review.sandbox import _OUTPUTS

    # in place: a shorter write cuts the file to its own length
    p = tmp_path / "o.arr"
    npzio.dump(p, {"out0": np.arange(1000, dtype=np.float32)}, in_place=True)
    npzio.dump(p, {"out0": np.arange(3, dtype=np.float32)}, in_place=True)
    assert p.stat().st_size == len(npzio.dumps({"out0": np.arange(3, dtype=np.float32)}))
    assert np.array_equal(npzio.load(p)["out0"], np.arange(3, dtype=np.float32))
    # forkserver runs of the candidate's own child write into kept files: a larger case, then a smaller one
    big = run_candidate(GOOD, "vector_add", _cases(1), target="trn2", trusted=False)
    assert big[0].status == "ok" and (_OUTPUTS.dir / "out_0.arr").exists()
    small = run_candidate(GOOD, "vector_add", [CaseJob("s", {"a": np.full(5, 3, np.float32),
                                                              "b": np.ones(5, np.float32)}, {}, 1)], target="trn2",
                          trusted=False)
    assert np.array_equal(small[0].outputs[0], np.full(5, 4, np.float32))
    # a case that fails leaves the previous run's file in the slot: it is not read
    fails = run_candidate(HOSTILE["raises"][0], "vector_add", _cases(1), target="trn2", trusted=False)
    assert fails[0].status == "exception" and not fails[0].outputs


def _busy_candidate(cpu: int | None) -> str:
    """A kernel that computes forever, pinned to ``cpu`` if one is given. (Not in the idle scheduling class: a
    thread that never runs again before the stop has its wait booked late, so it reads as having waited little.)"""
    pin = f"    os.sched_setaffinity(0, {{{cpu}}})\n" if cpu is not None else ""
    return "import os\n" + HEAD + "@nki.jit\ndef vector_add(a, b):\n" + pin + "    while True:\n        pass\n"


@pytest.mark.parametrize("hogs", [8, 0])
def test_an_untrusted_child_starved_at_its_limit_is_a_harness_error_not_a_timeout(hogs):
    """The pipeline before trace-then-execute (``trusted=False``: the candidate runs in the child): a case stopped
    at its wall-clock limit whose child waited for a core most of that time (a core eight busy processes share)
    is the machine's fault, a harness error to retry, and the cases after it are not run; free to take any core,
    the same loop is the candidate's timeout."""
    import subprocess
    import sys

    cpu = min(os.sched_getaffinity(0))
    procs = [subprocess.Popen([sys.executable, "-c", f"import os; os.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass"],
                              start_new_session=True) for _ in range(hogs)]
    cases = [CaseJob(f"c{n}", {"a": np.ones(n, np.float32), "b": np.ones(n, np.float32)}, {}, 1) for n in (5, 9)]
    try:
        time.sleep(0.5 if hogs else 0.0)  # (the hogs started and busy)
        # (the control runs unpinned: on a loaded machine a pinned loop can be starved in earnest)
        runs = run_candidate(_busy_candidate(cpu if hogs else None), "vector_add", cases, target="trn2", trusted=False,
                             limits=SandboxLimits(timeout_s=4.0, startup_s=20))
    finally:
        for p in procs:
            p.kill()
            p.wait()
    if hogs:
        assert [r.status for r in runs] == ["infra-error", "not-run"], [(r.status, r.error) for r in runs]
        assert "waited for a core" in runs[0].error["message"] and "retry" in runs[0].error["message"]
    else:
        assert [r.status for r in runs] == ["timeout", "not-run"], [(r.status, r.error) for r in runs]
