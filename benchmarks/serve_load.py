"""Load test of ``nkieval serve`` on localhost: throughput, latency percentiles, and no result lost or
duplicated under twice the service's concurrency limit, with good, flawed, hostile and timing-out candidates.

It starts a server (``--workers W``, ``--max-queue Q``, ``--timeout T``) on a free localhost port with a fresh
database, and ``2 x W`` client threads that each send their share of the requests one at a time (POST /review,
then GET /results/{id}?wait until done; a 429 is waited out by its Retry-After and sent again with the same
request id). Every request carries a distinct ``request_id``. At the end it reads the database: one row per
request id, every one ``done``, and each client saw exactly the stored result.

Mix (``--requests N``, cycled): expert and baseline kernels (good), the task's flawed kernels, hostile candidates
from tests/adversarial (integrity), a response without code (no-kernel) and a kernel that sleeps past every
limit (``time.sleep``: stopped by the server's ``--timeout``, a harness-error by design).

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/serve_load.py [--requests 40] [--workers 2] [--timeout 20]

Bounded: at most ``--requests`` requests (400 at most) and ``--max-seconds`` of wall time; localhost only.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
ADV = ROOT / "tests" / "adversarial" / "candidates"
SLEEPER = '''import time

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def vector_add(a, b):
    time.sleep(3600)
    return a
'''


def mix() -> list[tuple[str, str, str]]:
    """(kind, task, response) in the order they are cycled."""
    from nkieval.tasks import BUILTIN_ROOT

    va = BUILTIN_ROOT / "vector_add"

    def fenced(p: Path | str) -> str:
        text = p if isinstance(p, str) else p.read_text()
        return f"My kernel:\n\n```python\n{text}```\n"

    return [("good", "vector_add", fenced(va / "solution_nki.py")),
            ("flawed", "vector_add", fenced(va / "flawed" / "skips_tail.py")),
            ("good", "vector_add", fenced(va / "baseline_nki.py")),
            ("hostile", "vector_add", fenced(ADV / "output_cheat" / "return_input_vector_add.py")),
            ("flawed", "vector_add", fenced(va / "flawed" / "narrow_columns.py")),
            ("hostile", "vector_add", fenced(ADV / "process_escape" / "etc_passwd_vector_add.py")),
            ("no-code", "vector_add", "I would rather not write code today."),
            ("flawed", "vector_add", fenced(va / "flawed" / "thread_port.py")),
            ("timeout", "vector_add", fenced(SLEEPER)),
            ("hostile", "vector_add", fenced(ADV / "persistence" / "cache_tmp_home_shm_vector_add.py"))]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pct(xs: list[float], q: float) -> float:
    ys = sorted(xs)
    return ys[min(len(ys) - 1, max(0, round(q * (len(ys) - 1))))] if ys else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, default=40)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--max-queue", type=int, default=None, help="default: the workers (so 2x clients meet 429s)")
    ap.add_argument("--timeout", type=float, default=20.0, help="the server's time limit per review")
    ap.add_argument("--max-seconds", type=float, default=600.0)
    args = ap.parse_args()
    n = max(1, min(400, args.requests))
    from nkieval.reward.serve.client import RewardClient

    port = free_port()
    tmp = Path(tempfile.mkdtemp(prefix="nkieval-serve-load-"))
    db = tmp / "serve.sqlite3"
    mq = args.max_queue or args.workers
    server = subprocess.Popen([sys.executable, "-m", "nkieval.cli", "serve", "--host", "127.0.0.1", "--port", str(port),
                               "--db", str(db), "--workers", str(args.workers), "--max-queue", str(mq),
                               "--timeout", str(args.timeout)], stderr=subprocess.PIPE, start_new_session=True)
    client = RewardClient(f"http://127.0.0.1:{port}", timeout_s=args.max_seconds)
    t_start = time.monotonic()
    while True:
        try:
            client.health()
            break
        except Exception:
            if server.poll() is not None or time.monotonic() - t_start > 60:
                print(server.stderr.read().decode()[-2000:] if server.stderr else "", file=sys.stderr)
                raise SystemExit("the server did not start") from None
            time.sleep(0.2)
    print(f"server up in {time.monotonic() - t_start:.1f} s: {args.workers} workers, queue {mq}, "
          f"time limit {args.timeout:g} s; {2 * args.workers} client threads; {n} requests")
    m = mix()
    work = [(f"load-{i}", *m[i % len(m)]) for i in range(n)]
    seen: dict[str, dict[str, Any]] = {}
    lat: dict[str, list[float]] = collections.defaultdict(list)
    retries = [0]
    lock = threading.Lock()
    deadline = time.monotonic() + args.max_seconds

    def worker(k: int) -> None:
        c = RewardClient(f"http://127.0.0.1:{port}", timeout_s=args.max_seconds)
        for rid, kind, task, resp in work[k::2 * args.workers]:
            if time.monotonic() > deadline:
                return
            t0 = time.perf_counter()
            while True:
                try:
                    c.submit(task, resp, seed=11, request_id=rid)
                    break
                except Exception as e:  # a 429 past the client's own retry budget: count and go on
                    with lock:
                        retries[0] += 1
                    if time.monotonic() > deadline:
                        raise SystemExit(f"gave up on {rid}: {e}") from e
            res = c.result(rid, wait_s=max(1.0, deadline - time.monotonic()))
            with lock:
                lat[kind].append(time.perf_counter() - t0)
                seen[rid] = res

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(2 * args.workers)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wall = time.perf_counter() - t0
    metrics = client.metrics()
    server.send_signal(signal.SIGTERM)
    try:
        server.wait(30)
    except subprocess.TimeoutExpired:
        server.kill()
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT id, state, result FROM requests").fetchall()
    ids = [r[0] for r in rows]
    stored = {r[0]: json.loads(r[2]) if r[2] else None for r in rows}
    lost = [rid for rid, *_ in work if rid not in seen or stored.get(rid) is None]
    dup = len(ids) - len(set(ids))
    mismatch = [rid for rid in seen if seen[rid] != stored.get(rid)]
    extra = sorted(set(ids) - {rid for rid, *_ in work})
    status = collections.Counter((k, (seen.get(rid) or {}).get("status"), (seen.get(rid) or {}).get("verdict"))
                                 for rid, k, *_ in work)
    all_lat = [x for xs in lat.values() for x in xs]
    rejected = next((ln.split()[-1] for ln in metrics.splitlines()
                     if ln.startswith('nkieval_requests_rejected_total{reason="queue-full"}')), "?")
    print(f"done {len(seen)}/{n} in {wall:.1f} s: {len(seen) / wall * 60:.1f} reviews/min; "
          f"latency p50 {pct(all_lat, 0.5):.2f} s, p99 {pct(all_lat, 0.99):.2f} s (submit to result, queueing included)")
    for kind, xs in sorted(lat.items()):
        print(f"  {kind:<8} n={len(xs):<3} p50 {pct(xs, 0.5):6.2f} s  p99 {pct(xs, 0.99):6.2f} s")
    print("outcomes (kind, status, verdict): " + "; ".join(f"{k}: {v}" for k, v in sorted(status.items(), key=str)))
    print(f"429 answers: {rejected}; client-side resubmits after a 429 budget ran out: {retries[0]}")
    print(f"stored rows {len(rows)}; lost {len(lost)}; duplicated {dup}; result mismatches {len(mismatch)}; "
          f"unexpected ids {len(extra)}")
    ok = not lost and not dup and not mismatch and not extra and len(seen) == n
    print("OK: nothing lost or duplicated" if ok else f"FAILED: lost {lost[:5]} mismatched {mismatch[:5]}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
