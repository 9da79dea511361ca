"""The judge's replays (review/executor.py): a replay stopped at its time limit because the judge was starved of a
core is a harness error to retry, never a timeout charged to the candidate (review/isolation/starvation.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import nkieval.frontends

nkieval.frontends.install(force=True)

import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402

from nkieval.review import executor  # noqa: E402
from nkieval.review.runs import CaseJob, SandboxLimits  # noqa: E402
from nkieval.sim.program import ArgSpec, record_program  # noqa: E402

N = 256 * 2000


def k_many_small(a):
    """One [1, 256] tile at a time: many small instructions, so the run checks its time limit often."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in range(a.shape[0] // 256):
        t = nl.ndarray((1, 256), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[i * 256:(i + 1) * 256].reshape((1, 256)))
        nisa.tensor_tensor(dst=t, data1=t, data2=t, op=nl.add)
        nisa.dma_copy(dst=out[i * 256:(i + 1) * 256].reshape((1, 256)), src=t)
    return out


@pytest.fixture(scope="module")
def program():
    text = record_program(k_many_small, [ArgSpec((N,), "float32")], {}, target="trn2").program.to_json()
    return executor.PROGRAMS.get(text)


def _job() -> CaseJob:
    return CaseJob("big", {"a": np.ones(N, np.float32)}, {}, 1)


def _starved_replay(prog, limits: SandboxLimits):
    """The replay in a thread of the idle scheduling class on a core that eight busy processes share."""
    cpu = min(os.sched_getaffinity(0))
    hogs = [subprocess.Popen([sys.executable, "-c", f"import os; os.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass"],
                             start_new_session=True) for _ in range(8)]
    out = []
    time.sleep(1.0)  # (the hogs started and busy)

    def run() -> None:
        os.sched_setaffinity(0, {cpu})
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        out.append(executor._replay(prog, _job(), "trn2", limits, traced=False))

    try:
        t = threading.Thread(target=run)
        t.start()
        t.join()
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    return out[0]


def test_a_replay_past_its_limit_with_a_core_is_a_timeout(program) -> None:
    run = executor._replay(program, _job(), "trn2", SandboxLimits(timeout_s=0.01), traced=False)
    assert run.status == "timeout", run.error


def test_a_starved_replay_past_its_limit_is_a_harness_error(program) -> None:
    run = _starved_replay(program, SandboxLimits(timeout_s=0.3))
    assert run.status == "infra-error", (run.status, run.error)
    assert "waited for a core" in run.error["message"] and "retry" in run.error["message"], run.error

