"""A reward worker settles the garbage collector once it is warm (``settle_collector``: its first review's
long-lived state frozen, full collections rarer), and only then: after its first answered job, never in the
caller's process, and without changing a review's report. Each check runs in a fresh interpreter, so this test
process's collector is left alone."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

# a worker's job loop (``_serve_jobs``) fed by a stand-in pipe, with a stand-in review: what the collector looks
# like when each answer is sent, and after the loop
_LOOP = textwrap.dedent("""
    import gc, json
    import nkieval.reward.workers as w

    seen = []

    class Conn:
        def __init__(self, jobs):
            self.jobs = list(jobs)

        def recv(self):
            if not self.jobs:
                raise EOFError
            return self.jobs.pop(0)

        def send(self, ans):
            seen.append([ans["status"], gc.get_freeze_count() > 0, list(gc.get_threshold())])

    def job(j):
        if j.get("broken"):
            raise RuntimeError("the harness broke")
        return {"status": "ok"}

    w.run_job = job
    gc.set_threshold(700, 10, 10)
    w._serve_jobs(Conn(JOBS))
    print(json.dumps({"sent": seen, "frozen": gc.get_freeze_count() > 0, "threshold": list(gc.get_threshold())}))
""")


def _loop(jobs: list[dict]) -> dict:
    out = subprocess.run([sys.executable, "-c", f"JOBS = {jobs!r}\n" + _LOOP], capture_output=True, text=True,
                         timeout=120, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_worker_settles_its_collector_after_its_first_answered_job_only() -> None:
    from nkieval.reward.workers import WORKER_GC_THRESHOLDS

    r = _loop([{"task": "a"}, {"task": "b"}])
    # the first answer goes out before the collector is settled (its collection delays no answer), the second after
    assert r["sent"] == [["ok", False, [700, 10, 10]], ["ok", True, list(WORKER_GC_THRESHOLDS)]]
    assert r["frozen"] and r["threshold"] == list(WORKER_GC_THRESHOLDS)


def test_a_harness_error_does_not_settle_the_collector() -> None:
    # a job that broke the harness may have left anything behind: no freezing of it
    r = _loop([{"task": "a", "broken": True}])
    assert r["sent"] == [["harness-error", False, [700, 10, 10]]]
    assert not r["frozen"] and r["threshold"] == [700, 10, 10]
    r = _loop([{"task": "a", "broken": True}, {"task": "b"}, {"task": "c"}])
    assert [s[1] for s in r["sent"]] == [False, False, True] and r["frozen"]


def test_a_settled_collector_changes_no_report() -> None:
    script = textwrap.dedent("""
        import json
        from nkieval.review import review
        from nkieval.reward.workers import settle_collector
        from nkieval.tasks import builtin_tasks

        t = next(t for t in builtin_tasks() if t.id == "vector_add")

        def outcome(f):
            d = review(t, f, seed=3).to_dict()
            d.pop("timings", None)
            for c in d.get("cases", []):
                for k in [k for k in c if k.endswith("_s")]:
                    del c[k]
            return json.dumps(d, sort_keys=True, default=str)

        files = [t.solution_file, t.directory / t.flawed[0].file]
        before = [outcome(f) for f in files]
        settle_collector()
        after = [outcome(f) for f in files]
        print(json.dumps([a == b for a, b in zip(before, after)]))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [True, True]
