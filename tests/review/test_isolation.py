"""The sandbox stops every escape attempt in nkieval.review.isolation_probes, with a specific status.

These tests need the machine to allow full isolation (user/net/pid/mount namespaces, seccomp): where
it does not, they FAIL, unless NKIEVAL_ALLOW_NO_SANDBOX=1 is set (then the sandboxed ones skip)."""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

import nkieval
from nkieval.review.isolation import (
    ENV_ALLOW_NO_SANDBOX,
    IsolationReport,
    SandboxPolicy,
    SandboxPool,
    SandboxResult,
    SandboxUnavailable,
    probe,
)

HANDLER = "nkieval.review.isolation_probes:handle"
REPO = Path(__file__).resolve().parents[2]
SECRET = "judge-secret-" + uuid.uuid4().hex


@pytest.fixture(scope="module")
def report() -> IsolationReport:
    return probe()


@pytest.fixture(scope="module")
def full(report: IsolationReport) -> None:
    if report.level != "full":
        if os.environ.get(ENV_ALLOW_NO_SANDBOX) == "1":
            pytest.skip(f"no full isolation here ({ENV_ALLOW_NO_SANDBOX}=1): {report.missing}")
        pytest.fail(f"this machine cannot sandbox candidate code: {report.missing}")


@pytest.fixture(scope="module")
def pool(full: None):
    os.environ["NKIEVAL_TEST_SECRET"] = SECRET  # the judge's environment must not reach the worker
    with SandboxPool(HANDLER, policy=SandboxPolicy()) as p:
        yield p
    os.environ.pop("NKIEVAL_TEST_SECRET", None)


def run(pool: SandboxPool, timeout_s: float = 10.0, **req: object) -> SandboxResult:
    return pool.run(json.dumps(req).encode(), timeout_s=timeout_s)


def ok_payload(res: SandboxResult) -> dict:
    assert res.status == "ok", (res.status, res.detail, res.stderr_tail)
    assert res.payload is not None
    return json.loads(res.payload)


def test_ci_machine_has_full_isolation(report: IsolationReport) -> None:
    if report.level != "full" and os.environ.get(ENV_ALLOW_NO_SANDBOX) != "1":
        pytest.fail(f"sandbox unavailable (set {ENV_ALLOW_NO_SANDBOX}=1 to allow): {report.missing}")
    d = report.to_dict()
    assert d["level"] in ("full", "none") and isinstance(d["missing"], list)


def test_isolation_recorded(pool: SandboxPool) -> None:
    res = run(pool, probe="echo")
    assert res.status == "ok" and res.payload == b'{"probe": "echo"}'
    assert res.isolation["level"] == "full"
    assert "socket" in res.isolation["seccomp"]["blocked"]
    assert res.wall_s > 0


@pytest.mark.parametrize("name", ["socket", "fork", "subprocess", "system", "ctypes_system", "execv"])
def test_blocked_system_calls_are_violations(pool: SandboxPool, name: str) -> None:
    res = run(pool, probe=name)
    assert res.status == "violation", (res.status, res.detail, res.stderr_tail)
    assert res.signal == signal.SIGSYS
    assert "blocked system call" in res.detail
    assert res.payload is None


@pytest.mark.parametrize("name, event", [("system", "os.system"), ("fork", "os.fork")])
def test_a_violation_names_the_last_audited_operation(pool: SandboxPool, name: str, event: str) -> None:
    res = run(pool, probe=name)
    assert res.status == "violation"
    assert f"last audited operation: {event}" in res.detail, res.detail


def test_no_network_even_without_seccomp(full: None) -> None:
    """The network namespace on its own: no interface is up, not even loopback."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.2)
    port = listener.getsockname()[1]
    with SandboxPool(HANDLER, policy=SandboxPolicy(seccomp=False)) as p:
        assert p.isolation["level"] == "partial"
        out = ok_payload(run(p, probe="tcp", port=port))
    assert out["ok"] is False and out["errno"] == 101, out  # ENETUNREACH: no interface is up
    with pytest.raises(TimeoutError):
        listener.accept()
    listener.close()


def _targets() -> dict[str, Path]:
    return {
        "judge home": Path(os.path.expanduser("~")),
        "etc": Path("/etc"),
        "repo checkout": REPO,
        "installed package": Path(nkieval.__file__).parent,
    }


@pytest.mark.parametrize("where", list(_targets()))
def test_cannot_write_outside_private_tmp(pool: SandboxPool, where: str) -> None:
    marker = _targets()[where] / f"nkieval-escape-{uuid.uuid4().hex}"
    out = ok_payload(run(pool, probe="write", path=str(marker)))
    private = any(str(marker).startswith(t + "/") for t in ("/tmp", "/dev/shm"))
    if not private:  # (a checkout under /tmp: the write lands in the worker's private tmpfs)
        assert out["ok"] is False and out["errno"] in (30, 13), out  # EROFS / EACCES
    assert not marker.exists()


@pytest.mark.parametrize("host_dir", ["/tmp", "/dev/shm"])
def test_tmp_and_shm_are_private(pool: SandboxPool, host_dir: str) -> None:
    if not os.path.isdir(host_dir):
        pytest.skip(f"no {host_dir} here")
    marker = Path(host_dir) / f"nkieval-escape-{uuid.uuid4().hex}"
    out = ok_payload(run(pool, probe="write", path=str(marker)))
    assert out["ok"] is True  # a private tmpfs: writable inside ...
    assert not marker.exists()  # ... and invisible outside


def test_proc_shows_only_the_worker(pool: SandboxPool) -> None:
    out = ok_payload(run(pool, probe="proc"))
    assert out["pids"] == [1] and out["pid"] == 1 and out["ppid"] == 0
    assert out["hostname"] == "nkieval-sandbox"
    mem = ok_payload(run(pool, probe="read", path=f"/proc/{os.getpid()}/mem"))
    assert mem["ok"] is False and mem["error"] == "FileNotFoundError"
    env = ok_payload(run(pool, probe="read", path="/proc/1/environ"))
    assert SECRET not in json.dumps(env)
    zyg = ok_payload(run(pool, probe="read", path=f"/proc/{pool.zygote_pid}/environ"))
    assert zyg["ok"] is False


def test_worker_has_no_privileges(pool: SandboxPool) -> None:
    out = ok_payload(run(pool, probe="status"))
    assert int(out["CapEff"], 16) == 0 and int(out["CapBnd"], 16) == 0
    assert out["NoNewPrivs"] == "1" and out["Seccomp"] == "2"


def test_memory_limit(pool: SandboxPool) -> None:
    res = run(pool, probe="alloc", bytes=4 << 30)
    assert res.status == "memory-limit", (res.status, res.detail)


def test_busy_loop_times_out(pool: SandboxPool) -> None:
    res = run(pool, timeout_s=1.0, probe="busy")
    assert res.status == "timeout"
    assert res.wall_s < 3.0
    assert run(pool, probe="echo").status == "ok"


def test_a_starved_worker_is_a_harness_fault_not_a_timeout(pool: SandboxPool) -> None:
    """A busy loop on a core that eight busy processes share, each in a session of its own: the worker waits for the
    core about 8/9 of its wall time, so its stop is the machine's fault (a retry), not the candidate's timeout.
    The same loop with a core to run on is a timeout (test_busy_loop_times_out). (Not a starved-to-nothing
    worker: the kernel adds a wait to the run-queue delay only when the task runs again, so a task that never
    does reads as having waited little, and its stop stays a timeout.)"""
    import subprocess
    import sys

    cpu = min(os.sched_getaffinity(0))
    # (each hog in a session of its own: where the scheduler shares a core between sessions first, the worker's
    # gets one share in nine)
    hogs = [subprocess.Popen([sys.executable, "-c", f"import os; os.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass"],
                             start_new_session=True) for _ in range(8)]
    try:
        res = run(pool, timeout_s=6.0, probe="busy_on_cpu", cpu=cpu)
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    assert res.status == "harness-error", (res.status, res.detail)
    assert "waiting for a core" in res.detail and "retry" in res.detail, res.detail


def test_the_starvation_share() -> None:
    from nkieval.review.isolation.starvation import (
        STARVED_SHARE,
        longest_wait,
        longest_wait_since,
        run_queue_delays,
        starved,
        starved_process,
    )

    assert starved(STARVED_SHARE * 4.0, 4.0) and not starved(STARVED_SHARE * 4.0 - 0.01, 4.0)
    assert not starved(None, 4.0) and not starved(0.0, 0.0)
    delays = run_queue_delays()
    assert all(d >= 0.0 for d in delays.values())
    longest = longest_wait()
    assert longest is None or longest >= max(delays.values())
    assert longest_wait(pid=2**22 + 7) is None  # (no such process)
    since = longest_wait_since(delays)
    assert since is None or since >= 0.0  # (a thread's wait only grows)
    assert longest_wait_since({tid: d + 5.0 for tid, d in delays.items()}) < 0.0 or since is None
    assert longest_wait_since(delays, pid=2**22 + 7) is None

    assert starved_process(0.2, 1.0) and not starved_process((1 - STARVED_SHARE) * 1.0, 1.0)
    assert not starved_process(0.0, 0.0)


def test_printing_a_gigabyte_is_contained(pool: SandboxPool) -> None:
    out = ok_payload(run(pool, probe="print", mb=1024))
    assert out["written"] <= pool.policy.max_file_bytes
    assert out.get("errno") == 27  # EFBIG: RLIMIT_FSIZE on the capture file


def test_oversized_response_is_output_limit(pool: SandboxPool) -> None:
    res = run(pool, probe="big_response", bytes=100 << 20)
    assert res.status == "output-limit" and res.payload is None


def _run_parts(pool: SandboxPool, timeout_s: float = 10.0, on_part=None, **req: object) -> tuple[SandboxResult, list]:
    parts: list[tuple[bytes, float]] = []
    res = pool.run(json.dumps({"probe": "parts", **req}).encode(), timeout_s=timeout_s,
                   on_part=on_part or (lambda b: parts.append((b, time.monotonic()))))
    return res, parts


def test_streamed_parts_arrive_in_order_before_the_result(pool: SandboxPool) -> None:
    res, parts = _run_parts(pool, n=5)
    assert ok_payload(res) == {"ok": True, "sent": True}
    assert [b for b, _ in parts] == [f"part {i};".encode() for i in range(5)]


def test_parts_reach_the_judge_while_the_worker_still_runs(pool: SandboxPool) -> None:
    t0 = time.monotonic()
    res, parts = _run_parts(pool, timeout_s=1.5, n=2, then="hang")
    assert res.status == "timeout"
    assert [b for b, _ in parts] == [b"part 0;", b"part 1;"]
    assert all(t - t0 < 1.0 for _, t in parts), "parts were held back until the worker ended"


def test_a_worker_that_goes_quiet_between_parts_is_stopped_by_the_per_part_budget(pool: SandboxPool) -> None:
    parts: list[bytes] = []
    t0 = time.monotonic()
    res = pool.run(json.dumps({"probe": "parts", "n": 2, "then": "hang"}).encode(), timeout_s=20,
                   on_part=parts.append, part_timeout_s=(5.0, 0.5))
    assert res.status == "timeout" and len(parts) == 2
    assert "no part within 0.5 s (after 2 parts)" in res.detail
    assert time.monotonic() - t0 < 5, "stopped by the total limit, not the per-part one"
    res = pool.run(json.dumps({"probe": "sleep", "s": 3}).encode(), timeout_s=20, part_timeout_s=(0.5, 0.5))
    assert res.status == "timeout" and "no part within 0.5 s (after 0 parts)" in res.detail
    res = pool.run(json.dumps({"probe": "parts", "n": 3}).encode(), timeout_s=20, part_timeout_s=(5.0, 0.5))
    assert res.status == "ok", "a worker that keeps sending in time is not stopped"


def test_too_many_or_too_large_parts_are_an_output_limit(pool: SandboxPool) -> None:
    from nkieval.review.isolation._worker import MAX_PARTS

    res, parts = _run_parts(pool, n=MAX_PARTS + 1)
    assert res.status == "output-limit" and len(parts) == MAX_PARTS
    res, parts = _run_parts(pool, n=8, repeat=(SandboxPolicy().max_response_bytes // 3) // len("part 0;"))
    assert res.status == "output-limit" and len(parts) < 8


def test_a_failing_part_handler_is_a_harness_fault_and_the_pool_stays_usable(pool: SandboxPool) -> None:
    from nkieval.review.isolation import PartHandlerError

    def boom(_: bytes) -> None:
        raise KeyError("judge bug")

    with pytest.raises(PartHandlerError):
        _run_parts(pool, n=3, on_part=boom)
    res, parts = _run_parts(pool, n=1)
    assert res.status == "ok" and len(parts) == 1


def test_send_part_outside_a_worker_sends_nothing() -> None:
    from nkieval.review.isolation import send_part

    assert send_part(b"x") is False


def test_worker_cannot_kill_the_zygote(pool: SandboxPool) -> None:
    zygote = pool.zygote_pid
    out = ok_payload(run(pool, probe="kill", pid=zygote))
    assert out == {str(zygote): "ProcessLookupError", "-1": "ProcessLookupError"}
    assert run(pool, probe="echo").status == "ok"
    assert pool.zygote_pid == zygote  # not restarted: it never died


def test_threads_numpy_and_lazy_imports_work(pool: SandboxPool) -> None:
    assert ok_payload(run(pool, probe="thread"))["results"] == [0, 1, 4, 9]
    assert ok_payload(run(pool, probe="numpy"))["sum"] == 1134.0
    assert ok_payload(run(pool, probe="import", module="colorsys"))["ok"] is True


def test_tmp_is_fresh_per_request(pool: SandboxPool) -> None:
    first = ok_payload(run(pool, probe="tmp", name="left-behind"))
    assert first["tempdir"] == "/tmp" and first["home"] == "/tmp"
    second = ok_payload(run(pool, probe="tmp", name="other"))
    assert "left-behind" not in second["before"]
    assert os.path.basename(first["mkstemp"]) not in second["before"]


def test_the_standby_worker_prepares_once_already_sandboxed(pool: SandboxPool) -> None:
    # the handler module's prepare() ran before the request, in this request's own worker, after the worker lost
    # its privileges and got its seccomp filter (so the handler's preparation is as confined as the handler)
    for _ in range(2):
        prepared = ok_payload(run(pool, probe="prepared"))["prepared"]
        assert len(prepared) == 1 and prepared[0]["pid"] == 1
        assert int(prepared[0]["CapEff"], 16) == 0 and int(prepared[0]["CapBnd"], 16) == 0
        assert prepared[0]["NoNewPrivs"] == "1" and prepared[0]["Seccomp"] == "2"


def test_a_request_hides_its_paths_from_its_worker_only(pool: SandboxPool) -> None:
    task = Path(nkieval.__file__).parent / "tasks" / "builtin" / "vector_add"
    seen = ok_payload(run(pool, probe="read", path=str(task / "task.toml")))
    assert seen["ok"] is True and "vector_add" in seen["data"]
    res = pool.run(json.dumps({"probe": "read", "path": str(task / "task.toml")}).encode(), timeout_s=10.0,
                   hide=[str(task)])
    assert ok_payload(res)["ok"] is False
    assert ok_payload(run(pool, probe="read", path=str(task / "task.toml")))["ok"] is True  # the next worker's view


def test_a_request_whose_paths_cannot_be_hidden_is_a_harness_error(pool: SandboxPool) -> None:
    # the worker is given nothing to run when the supervisor could not cover what the request hides: the request
    # fails closed, as the harness's fault (retry), never as the candidate's, and the pool goes on
    from nkieval.review.isolation._worker import MAX_REQUEST_HIDES

    too_many = [f"/nonexistent-{i}" for i in range(MAX_REQUEST_HIDES + 1)]
    res = pool.run(json.dumps({"probe": "echo"}).encode(), timeout_s=10.0, hide=too_many)
    assert res.status == "harness-error" and res.payload is None
    assert res.detail.startswith("worker set-up failed: hiding the request's paths failed")
    assert ok_payload(run(pool, probe="echo")) == {"probe": "echo"}


def test_a_whole_result_is_answered_without_waiting_for_the_worker_to_exit(pool: SandboxPool) -> None:
    # the final record is the answer: what the worker does after it (here: sleeps past the time limit) neither
    # delays nor changes it, and the worker does not outlive it
    t0 = time.monotonic()
    res = run(pool, timeout_s=8.0, probe="answer_then_linger", s=30)
    assert time.monotonic() - t0 < 4.0
    assert ok_payload(res) == {"ok": True, "early": True}
    assert ok_payload(run(pool, probe="echo")) == {"probe": "echo"}


def test_exceptions_and_exits_are_crashes(pool: SandboxPool) -> None:
    res = run(pool, probe="raise")
    assert res.status == "crash" and "probe raised" in res.detail
    res = run(pool, probe="exit", code=5)
    assert res.status == "crash" and res.exit_code == 5


def test_worker_that_closes_its_pipe_still_times_out(pool: SandboxPool) -> None:
    res = run(pool, timeout_s=1.0, probe="close_and_spin")
    assert res.status == "timeout" and res.wall_s < 3.0


def test_candidate_cannot_claim_a_harness_error(pool: SandboxPool) -> None:
    res = run(pool, probe="forge")
    assert res.status not in ("harness-error", "ok"), res
    res = run(pool, probe="swap_output")
    assert res.status == "crash" and res.exit_code == 9
    assert run(pool, probe="echo").status == "ok"


def test_concurrent_runs_are_serialised(pool: SandboxPool) -> None:
    results: list[SandboxResult] = []
    threads = [threading.Thread(target=lambda: results.append(run(pool, probe="echo"))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [r.status for r in results] == ["ok"] * 4


def test_request_cap(pool: SandboxPool) -> None:
    with pytest.raises(ValueError):
        pool.run(b"x" * (pool.policy.max_request_bytes + 1), timeout_s=1)


def test_zygote_death_is_harness_error_then_restart(full: None) -> None:
    with SandboxPool(HANDLER) as p:
        old = p.zygote_pid
        os.kill(old, signal.SIGKILL)
        res = run(p, probe="echo")
        assert res.status == "harness-error"
        assert p.zygote_pid != old
        assert run(p, probe="echo").status == "ok"


def test_unsafe_no_sandbox_keeps_protocol_and_rlimits() -> None:
    with SandboxPool(HANDLER, unsafe_no_sandbox=True) as p:
        res = run(p, probe="echo")
        assert res.status == "ok" and res.isolation["level"] == "none"
        assert run(p, probe="alloc", bytes=4 << 30).status == "memory-limit"
        assert run(p, timeout_s=1.0, probe="busy").status == "timeout"


def test_bad_handler_spec() -> None:
    with pytest.raises(ValueError):
        SandboxPool("not a handler")


def test_unavailable_names_what_is_missing() -> None:
    err = SandboxUnavailable(["seccomp: libseccomp not found", "user_ns: EPERM"])
    assert "seccomp: libseccomp not found" in str(err) and err.missing[1] == "user_ns: EPERM"


def test_doctor_exit_codes(monkeypatch: pytest.MonkeyPatch, report: IsolationReport) -> None:
    from nkieval.cli import main
    from nkieval.review import isolation

    monkeypatch.setattr(isolation, "probe", lambda: report)
    res = CliRunner().invoke(main, ["doctor"])
    assert res.exit_code == (0 if report.level == "full" else 2), res.output
    bad = IsolationReport(checks={"user_ns": (False, "EPERM"), "seccomp": (True, "")})
    monkeypatch.setattr(isolation, "probe", lambda: bad)
    res = CliRunner().invoke(main, ["doctor", "--json"])
    assert res.exit_code == 2 and json.loads(res.output)["missing"] == ["user_ns: EPERM"]
