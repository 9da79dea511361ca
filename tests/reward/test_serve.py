"""``nkieval serve``: the HTTP API in process (FastAPI's test client), and a crash test on a real server:
``kill -9`` mid-batch, restart on the same database, every accepted request comes back exactly once."""

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time

import pytest
from reward_helpers import SEED

pytest.importorskip("fastapi", reason="the 'serve' extra (fastapi, uvicorn, httpx) is not installed")
pytest.importorskip("httpx", reason="the 'serve' extra (fastapi, uvicorn, httpx) is not installed")

from fastapi.testclient import TestClient

from nkieval.reward.serve.app import create_app
from nkieval.reward.serve.client import RewardClient
from nkieval.reward.serve.service import MAX_TEXT_CHARS, RewardService


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    svc = RewardService(tmp_path_factory.mktemp("serve") / "db.sqlite3", workers=1, max_queue=2)
    with TestClient(create_app(svc, token="s3cret")) as c:
        c.headers["authorization"] = "Bearer s3cret"
        yield c, svc


def test_review_waits_for_its_result(api, responses, scored):
    c, _ = api
    r = c.post("/review?wait=120", json={"task": "vector_add", "response": responses["flawed"], "seed": SEED})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["state"] == "done" and body["result"]["reward"] == scored("flawed").reward
    again = c.post("/review", json={"task": "vector_add", "response": responses["flawed"], "seed": SEED})
    assert again.status_code == 200 and again.json()["id"] == body["id"]  # idempotent: answered from the store
    got = c.get(f"/results/{body['id']}").json()
    assert got["result"] == body["result"]


def test_a_brief_request_gets_the_same_reward_without_findings(api, responses, scored):
    c, _ = api
    r = c.post("/review?wait=120", json={"task": "vector_add", "response": responses["flawed"], "seed": SEED,
                                         "feedback": False})
    assert r.status_code == 200, r.text
    full = scored("flawed")
    res = r.json()["result"]
    assert (res["reward"], res["verdict"], res["levels"]) == (full.reward, full.verdict, full.levels)
    assert res["feedback"].splitlines()[0] == full.feedback.splitlines()[0] and "→" not in res["feedback"]
    assert r.json()["id"] != c.post("/review", json={"task": "vector_add", "response": responses["flawed"],
                                                     "seed": SEED}).json()["id"]


def test_no_kernel_is_answered_at_once(api, responses):
    c, _ = api
    r = c.post("/review", json={"task": "vector_add", "response": responses["none"], "request_id": "nk-1"})
    assert r.status_code == 200 and r.json()["result"]["status"] == "no-kernel" and r.json()["id"] == "nk-1"


def test_errors_have_their_status(api, responses):
    c, _ = api
    assert c.post("/review", json={"task": "no_such_task", "response": "x"}).status_code == 400
    assert c.post("/review", json={"task": "vector_add", "response": "x", "target": "trn9"}).status_code == 400
    assert c.post("/review", json={"task": "vector_add"}).status_code == 400
    from reward_helpers import VECTOR_ADD

    r = c.post("/review", json={"task": str(VECTOR_ADD), "response": "x"})  # a directory: not without --task-root
    assert r.status_code == 400 and "--task-root" in r.text
    assert c.post("/review", json={"response": "x"}).status_code == 422
    assert c.post("/review", json={"task": "vector_add", "response": "x", "request_id": "a/b"}).status_code == 422
    assert c.post("/review", json={"task": "vector_add", "response": "x" * (MAX_TEXT_CHARS + 1)}).status_code == 413
    assert c.get("/results/nope").status_code == 404
    assert c.get("/metrics", headers={"authorization": "Bearer wrong"}).status_code == 401
    assert c.get("/health", headers={"authorization": ""}).status_code == 200  # health needs no token


def test_full_queue_is_429_with_retry_after(api, responses):
    c, svc = api
    reqs = [{"task": "vector_add", "response": responses["expert"], "seed": 100 + i} for i in range(3)]
    r = c.post("/batch", json={"items": reqs})
    assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1
    assert svc.health()["queue_depth"] == 0  # all or nothing: none of the three was admitted
    ok = c.post("/batch?wait=120", json={"items": reqs[:2]})
    assert ok.status_code == 200 and [x["status"] for x in ok.json()["results"]] == ["scored", "scored"]


def test_metrics_are_prometheus_text(api):
    c, _ = api
    r = c.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    lines = dict(ln.rsplit(" ", 1) for ln in r.text.splitlines() if ln and not ln.startswith("#"))
    assert int(lines['nkieval_requests_rejected_total{reason="queue-full"}']) >= 1
    assert int(lines['nkieval_results_total{status="scored"}']) >= 3
    assert int(lines["nkieval_requests_deduplicated_total"]) >= 1
    assert float(lines["nkieval_review_seconds_count"]) >= 3
    # the worker's case cache: the reviews above share a task and seed, so later ones found its cases
    assert int(lines['nkieval_case_cache_lookups_total{outcome="hit"}']) >= 1
    assert int(lines["nkieval_case_cache_entries"]) >= 1 and int(lines["nkieval_case_cache_bytes"]) > 0
    assert {"nkieval_case_cache_evictions_total", "nkieval_case_cache_checks_dropped_total"} <= lines.keys()


# ------------------------------------------------------------------------------------ crash test
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(db, port):
    proc = subprocess.Popen([sys.executable, "-m", "nkieval.cli", "serve", "--port", str(port), "--db", str(db),
                             "--workers", "2"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    client = RewardClient(f"http://127.0.0.1:{port}", timeout_s=120)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            client.health()
            return proc, client
        except Exception:
            if proc.poll() is not None:
                raise AssertionError(f"the server exited: {proc.stderr.read().decode()[-2000:]}") from None
            time.sleep(0.2)
    proc.kill()
    raise AssertionError("the server did not start in 60 s")


def _stop(proc, sig=signal.SIGKILL):
    if proc.poll() is None:
        os.kill(proc.pid, sig)
    proc.wait(30)


def test_kill_9_mid_batch_loses_and_duplicates_nothing(tmp_path, responses):
    db = tmp_path / "serve.sqlite3"
    port = _free_port()
    kinds = ["flawed", "expert", "baseline", "hostile"]
    items = [{"task": "vector_add", "response": responses[k], "seed": 300 + i, "request_id": f"crash-{i}"}
             for i, k in enumerate(kinds)]
    proc, client = _start(db, port)
    try:
        ids = client.submit_many(items)
        assert ids == [it["request_id"] for it in items]
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:  # wait until some are done and some are not
            states = [client._call("GET", f"/results/{i}")[1]["state"] for i in ids]
            if "done" in states:
                break
            time.sleep(0.2)
        assert "done" in states and any(s != "done" for s in states), states
    finally:
        _stop(proc)  # kill -9 mid-batch
    proc2, client2 = _start(db, port)
    try:
        results = [client2.result(i, wait_s=120) for i in ids]
        assert [r["status"] for r in results] == ["scored"] * 4
        assert [r["verdict"] for r in results][:3] == ["fail", "pass", "pass"] and results[3]["reward"] == 0.0
        again = client2.submit_many(items)  # a retry of the whole batch: the same ids, nothing re-run
        assert again == ids
        metrics = client2.metrics()
        assert "nkieval_requests_recovered_total " in metrics
        recovered = int(next(ln.split()[-1] for ln in metrics.splitlines()
                             if ln.startswith("nkieval_requests_recovered_total ")))
        assert recovered >= 1
        assert int(next(ln.split()[-1] for ln in metrics.splitlines()
                        if ln.startswith("nkieval_requests_deduplicated_total "))) == 4
    finally:
        _stop(proc2, signal.SIGTERM)
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT id, state, result FROM requests ORDER BY id").fetchall()
    assert [r[0] for r in rows] == sorted(ids) and all(r[1] == "done" for r in rows)
    assert [json.loads(r[2])["status"] for r in rows] == ["scored"] * 4
