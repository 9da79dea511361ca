"""Every process of a review that simulates keeps freed memory for reuse (``nkieval.review.malloc``).

The replay worker replays most of a trusted review's cases. Started as a plain ``python -m`` process it had glibc's
default allocator, which hands large freed blocks back to the kernel at once: each replay faulted every page of
its tiles in again (measured: 4,757 page faults in the worker per warm review of gemm_bf16's expert, against 726
with the judge's settings). What must hold: a worker replaying the same case again faults in a small part of what
its tiles take, and ``NKIEVAL_REVIEW_MALLOPT=0`` (the control, which shows the measure sees the difference)
leaves it faulting them all in again.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import nkieval.frontends

nkieval.frontends.install(force=True)

import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402

from nkieval.review import malloc, replay_worker  # noqa: E402
from nkieval.review.runs import CaseJob, SandboxLimits  # noqa: E402
from nkieval.sim.program import ArgSpec, record_program  # noqa: E402

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="page faults read from /proc")

TILES = 8


def k_tiles(a):
    """Eight tiles of the input's size, one after the other, all held until the kernel returns (so that all are
    freed at its end: a tile dropped at once is freed at once in a replay, and glibc's default allocator, whose mmap
    threshold then rises to the tile's size, serves the next tile from the freed one's memory)."""
    n, d = a.shape
    out = nl.ndarray((n, d), dtype=a.dtype, buffer=nl.shared_hbm)
    held = []
    for _ in range(TILES):
        t = nl.ndarray((n, d), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        nisa.tensor_tensor(dst=t, data1=t, data2=t, op=nl.add)
        nisa.dma_copy(dst=out, src=t)
        held.append(t)
    return out


def _minor_faults(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[7])


def _faults_per_replay(monkeypatch, mallopt: str) -> tuple[float, int]:
    """(minor page faults of the worker per replay once warm, pages its tiles take per replay)."""
    monkeypatch.setenv(malloc.ENV_OFF, mallopt)  # (the worker inherits the judge's environment)
    a = np.ones((128, 2048), np.float32)
    text = record_program(k_tiles, [ArgSpec(a.shape, "float32")], {}, target="trn2").program.to_json()
    case = CaseJob("c", {"a": a}, {}, 1, want_trace=False)
    w = replay_worker.ReplayWorker()
    w.start()
    try:
        assert w.ready.wait(120), "the replay worker did not start"
        pid = w._proc.pid  # type: ignore[union-attr]
        counted = 5
        for i in range(3 + counted):
            if i == 3:  # (the first replays parse the program and warm the worker's caches)
                before = _minor_faults(pid)
            run = w.submit(text, case, "trn2", SandboxLimits(), mode="untraced").result()  # type: ignore[union-attr]
            assert run.status == "ok", run.error
            np.testing.assert_array_equal(run.outputs[0], a + a)
        return (_minor_faults(pid) - before) / counted, TILES * a.nbytes // os.sysconf("SC_PAGE_SIZE")
    finally:
        w._stop()


def test_the_replay_worker_reuses_freed_memory(monkeypatch):
    tuned, pages = _faults_per_replay(monkeypatch, "1")
    default, _ = _faults_per_replay(monkeypatch, "0")
    assert default > pages / 2, f"control: the default allocator faulted {default:.0f} pages per replay of {pages}"
    assert tuned < pages / 10, f"{tuned:.0f} page faults per replay of {pages} pages of tiles"


_ZEROS_IN_A_FORK = """
import os, resource
import numpy as np
for _ in range(2):  # blocks made, touched and freed, as the zygote's warm-up leaves them
    a = np.zeros(16 << 20, np.uint8)
    a[::4096] = 1
    del a
r, w = os.pipe()
if os.fork() == 0:  # a worker, forked from that process: a recording's zeroed storage, never touched
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    b = np.zeros(16 << 20, np.uint8)
    os.write(w, str(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before).encode())
    os._exit(0)
os.close(w)
print(os.read(r, 100).decode())
os.wait()
"""


@pytest.mark.parametrize("tuned", [True, False])
def test_the_tracers_zeroed_storage_stays_untouched(tuned):
    # with the tracer's setting, zeroed storage is mapped: untouched zero pages. glibc's default (its threshold
    # risen to the blocks freed before the fork) takes it from the heap and clears it, copying each page of it
    # from the process the worker was forked from
    import subprocess

    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    if tuned:
        env.update(malloc.tracer_env())
    out = subprocess.run([sys.executable, "-c", _ZEROS_IN_A_FORK], env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    faults = int(out.stdout)
    if tuned:
        assert faults < 100, f"{faults} page faults for untouched zeros"
    else:  # the control: the measure sees the difference (16 MiB is 4,096 pages)
        assert faults > 2048, faults


def test_the_tracer_pool_runs_with_the_tracers_setting():
    from nkieval.review import tracing

    # (the reviews' own memory limit: the pool the review tests start, not one more zygote)
    assert set(malloc.tracer_env().items()) <= set(tracing.tracer_pool(SandboxLimits().memory_mb).policy.env)
