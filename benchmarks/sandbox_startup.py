"""Sandbox overhead: median wall time per request of a SandboxPool running a trivial handler, next
to a plain ``multiprocessing`` fork of the same trivial function, in the same run; plus the
zygote's start time. Run: ``.venv/bin/python benchmarks/sandbox_startup.py [N]``.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import statistics
import sys
import time

from nkieval.review.isolation import SandboxPool, probe
from nkieval.review.isolation_probes import handle

REQUEST = json.dumps({"probe": "echo"}).encode()


def _child(conn) -> None:  # type: ignore[no-untyped-def]
    conn.send_bytes(handle(REQUEST))
    conn.close()


def _plain_fork() -> float:
    ctx = mp.get_context("fork")
    t0 = time.perf_counter()
    parent, child = ctx.Pipe(duplex=False)
    p = ctx.Process(target=_child, args=(child,))
    p.start()
    child.close()
    parent.recv_bytes()
    p.join()
    return time.perf_counter() - t0


def _pool_times(pool: SandboxPool, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        res = pool.run(REQUEST, timeout_s=10)
        out.append(time.perf_counter() - t0)
        assert res.status == "ok", res
    return out


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    sandboxed = probe().level == "full"
    plain = statistics.median(_plain_fork() for _ in range(n))
    rows = []
    for unsafe in ([False, True] if sandboxed else [True]):
        t0 = time.perf_counter()
        with SandboxPool("nkieval.review.isolation_probes:handle", unsafe_no_sandbox=unsafe) as pool:
            start = time.perf_counter() - t0
            _pool_times(pool, 3)  # warm
            med = statistics.median(_pool_times(pool, n))
        rows.append(("unsafe-no-sandbox" if unsafe else "sandbox", start, med))
    print(f"plain multiprocessing fork: median {plain * 1e3:.2f} ms per request (n={n})")
    for label, start, med in rows:
        print(f"pool ({label}): zygote start {start:.2f} s; median {med * 1e3:.2f} ms per request; "
              f"{med / plain:.2f}x the plain fork")


if __name__ == "__main__":
    main()
