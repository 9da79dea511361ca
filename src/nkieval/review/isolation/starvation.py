"""Was a run stopped by its wall-clock limit starved by the machine? Then the stop is the machine's fault (a harness
error to retry), not the candidate's timeout: an RL reward or a score must not depend on how loaded the judge was.

The kernel counts, per thread, the time it spent runnable but waiting for a core (its run queue delay,
``/proc/<pid>/task/<tid>/schedstat``). A run that sleeps or blocks waits on no run queue; one that computes and
got its core has little delay. A run whose threads waited for a core at least :data:`STARVED_SHARE` of its wall
time was starved. At a load of twice the cores a busy thread waits about half its time, so only a machine
loaded about four times over its cores crosses the share. The kernel adds a wait to the delay when the thread
next runs, so a thread starved to nothing (never run again before the stop) reads as having waited little: the
rule then errs on the side of the old one (a timeout), never the other way.
"""

from __future__ import annotations

import os

#: the share of a run's wall time spent waiting for a core past which the run was starved
STARVED_SHARE = 0.75


def run_queue_delays(pid: int | str = "self") -> dict[str, float]:
    """Seconds each thread of ``pid`` has spent runnable but waiting for a core, by thread id (empty where the
    kernel keeps no schedstat, or the process is gone)."""
    out: dict[str, float] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                out[tid] = int(f.read().split()[1]) / 1e9
        except (OSError, ValueError, IndexError):
            continue
    return out


def longest_wait(pid: int | str = "self") -> float | None:
    """The longest a thread of ``pid`` has waited for a core in all, or None where there is no schedstat."""
    return max(run_queue_delays(pid).values(), default=None)


def longest_wait_since(before: dict[str, float], pid: int | str = "self") -> float | None:
    """The longest a thread of ``pid`` has waited for a core since ``before`` (its :func:`run_queue_delays` then;
    a thread started since counts from zero), or None where there is no schedstat."""
    now = run_queue_delays(pid)
    return max((w - before.get(tid, 0.0) for tid, w in now.items()), default=None)


def starved(delay_s: float | None, elapsed_s: float) -> bool:
    """Whether a run that waited ``delay_s`` for a core over ``elapsed_s`` of wall time was starved."""
    return delay_s is not None and elapsed_s > 0 and delay_s >= STARVED_SHARE * elapsed_s


def starved_process(cpu_s: float, elapsed_s: float) -> bool:
    """Whether a run that never sleeps (the judge's replay of a program: one of its threads always computes) was
    starved: its whole process ran less than ``1 - STARVED_SHARE`` of the run's ``elapsed_s`` of wall time
    (``cpu_s``: the process's CPU seconds meanwhile, ``time.process_time``; any other thread's CPU counts too, so
    a starved run is never taken for a slow one, only the reverse). One clock read per run, where the run-queue
    delays cost a file read per thread."""
    return elapsed_s > 0 and cpu_s < (1.0 - STARVED_SHARE) * elapsed_s
