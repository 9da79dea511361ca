"""The audit's clock for its budgets: CPU seconds of the audit's process tree, so a budget buys the same work
on a loaded machine as on an idle one (a wall-clock budget runs fewer mutants the busier the machine is).

The tree is this process, the children it reaped, and every live descendant with the children it reaped
(the review's sandbox processes: the zygote reaps the tracers and executors it forks). Read from ``/proc``
(Linux); elsewhere the clock is the wall clock.
"""

from __future__ import annotations

import os
import resource
import time


def tree_cpu_s() -> float:
    """CPU seconds (user + system) of this process tree so far; wall seconds where ``/proc`` is missing."""
    if not os.path.isdir("/proc/self"):
        return time.perf_counter()
    me = resource.getrusage(resource.RUSAGE_SELF)
    ch = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = me.ru_utime + me.ru_stime + ch.ru_utime + ch.ru_stime
    parent: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as fh:
                f = fh.read().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        parent[int(d)] = int(f[1])
        ticks[int(d)] = int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])  # utime stime cutime cstime
    me_pid, hz = os.getpid(), os.sysconf("SC_CLK_TCK")
    for pid, t in ticks.items():
        p = parent.get(pid)
        while p is not None and p not in (me_pid, 0, 1):
            p = parent.get(p)
        if p == me_pid:
            total += t / hz
    return total
