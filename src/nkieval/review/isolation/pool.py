"""The judge's side of the sandbox: :class:`SandboxPool` and :func:`probe`."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from nkieval.review.isolation._frames import FrameError, read_frame, write_frame

Status = Literal["ok", "timeout", "crash", "memory-limit", "output-limit", "violation", "harness-error"]

_META_CAP = 1 << 20
_HANDLER_RE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
ENV_ALLOW_NO_SANDBOX = "NKIEVAL_ALLOW_NO_SANDBOX"

#: The checks :func:`probe` reports, in order; all must pass for level "full".
CHECKS: tuple[str, ...] = (
    "user_ns", "net_ns", "pid_ns", "mount_ns", "ipc_ns", "uts_ns", "hidden_paths", "readonly_root",
    "readable_install", "non_dumpable", "private_tmp_and_proc", "rlimits", "capabilities_dropped",
    "no_new_privs", "seccomp",
)


class SandboxUnavailable(RuntimeError):
    """Sandboxing was requested but this machine does not allow part of it."""

    def __init__(self, missing: list[str]) -> None:
        super().__init__("sandbox unavailable; missing: " + "; ".join(missing)
                         + " (run `nkieval doctor`; --unsafe-no-sandbox only for trusted code)")
        self.missing = missing


class PartHandlerError(RuntimeError):
    """The judge's own handler of streamed parts raised (a harness fault, never the candidate's)."""


class SandboxBroken(RuntimeError):
    """The zygote died and could not be restarted."""


@dataclass(frozen=True)
class SandboxPolicy:
    """Limits for every request. Sizes in bytes unless the name says otherwise."""

    memory_mb: int = 2048  # RLIMIT_AS of the worker
    cpu_s: int | None = None  # RLIMIT_CPU; None: the request's timeout + 2 s
    max_file_bytes: int = 8 << 20  # RLIMIT_FSIZE: caps the captured stdout/stderr and any file
    tmp_mb: int = 64  # size of the private /tmp (and /dev/shm) tmpfs
    #: directories each worker covers with an empty read-only tmpfs, even inside what is exposed (the built-in
    #: tasks' reference code and expert solutions, which live inside the package)
    hide_in_worker: tuple[str, ...] = ()
    max_open_files: int = 64  # RLIMIT_NOFILE
    max_threads: int = 64  # RLIMIT_NPROC (threads count; per user namespace)
    max_request_bytes: int = 64 << 20
    max_response_bytes: int = 32 << 20
    stderr_tail_bytes: int = 4096
    hide_paths: tuple[str, ...] = ("/home", "/root", "/var/tmp", "/run", "/mnt", "/media", "/srv")
    env: tuple[tuple[str, str], ...] = ()  # extra environment for the zygote (and so the worker)
    seccomp: bool = True  # False only to test the other layers on their own; level is then not "full"
    grace_s: float = 15.0  # how long past the timeout the judge waits before declaring the zygote hung
    start_timeout_s: float = 120.0


@dataclass
class SandboxResult:
    """One request's outcome. ``exit_code``/``signal``: how the worker ended; both None once it answered (it is
    then stopped, not waited for)."""

    status: Status
    payload: bytes | None
    exit_code: int | None
    signal: int | None
    stderr_tail: str
    isolation: dict[str, Any]
    wall_s: float
    detail: str = ""


@dataclass
class IsolationReport:
    """What this machine allows. ``checks[name] = (ok, reason-if-not)``."""

    checks: dict[str, tuple[bool, str]] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def missing(self) -> list[str]:
        return [f"{name}: {reason}" for name, (ok, reason) in self.checks.items() if not ok]

    @property
    def level(self) -> Literal["full", "none"]:
        return "full" if self.checks and not self.missing else "none"

    def to_dict(self) -> dict[str, Any]:
        return {"level": self.level, "missing": self.missing,
                "checks": {k: {"ok": ok, "reason": reason} for k, (ok, reason) in self.checks.items()},
                "details": self.details}


def _zygote_env(policy: SandboxPolicy) -> dict[str, str]:
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": "/tmp", "TMPDIR": "/tmp",
           "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    env.update(dict(policy.env))
    return env


def _hide_list(policy: SandboxPolicy) -> list[str]:
    home = os.path.expanduser("~")
    return [*policy.hide_paths, *([home] if home not in ("/", "") else [])]


def _spawn(cfg: dict[str, Any], policy: SandboxPolicy, stderr: Any) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-I", "-m", "nkieval.review.isolation._zygote", json.dumps(cfg)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, env=_zygote_env(policy),
        cwd="/", start_new_session=True, close_fds=True)


def probe(policy: SandboxPolicy | None = None, handler: str = "nkieval.review.isolation_probes:handle") -> IsolationReport:
    """Try every isolation layer in a throw-away process and report what works, and why not."""
    policy = policy or SandboxPolicy()
    cfg = {"mode": "probe", "handler": handler, "policy": asdict(policy), "hide": _hide_list(policy)}
    report = IsolationReport()
    with tempfile.TemporaryFile() as err:
        try:
            proc = _spawn(cfg, policy, err)
        except OSError as e:
            report.checks = {name: (False, f"cannot start the probe: {e}") for name in CHECKS}
            return report
        assert proc.stdout is not None
        try:
            data = json.loads(read_frame(proc.stdout.fileno(), _META_CAP, time.monotonic() + policy.start_timeout_s))
        except (FrameError, ValueError) as e:
            proc.kill()
            proc.wait()
            err.seek(0)
            tail = err.read()[-2000:].decode(errors="replace")
            report.checks = {name: (False, f"probe failed: {e}: {tail}") for name in CHECKS}
            return report
        proc.wait()
    steps = data["steps"]
    if not steps.get("preload", [True])[0]:
        report.checks = {name: (False, "preload failed: " + steps["preload"][1]) for name in CHECKS}
        return report
    for name in CHECKS:
        ok, reason = steps.get(name, [False, "not reached"])
        report.checks[name] = (bool(ok), str(reason))
    if not policy.seccomp:
        report.checks["seccomp"] = (False, "disabled by the policy")
    report.details = {"uid": os.getuid(), "kernel": os.uname().release, **data.get("extra", {})}
    return report


class SandboxPool:
    """Runs ``handler(request: bytes) -> bytes`` in a fresh, isolated worker per request.

    ``run`` is thread-safe and serialised: one request at a time per pool (use several pools
    for parallel work). ``unsafe_no_sandbox=True`` keeps the protocol and rlimits but no
    namespaces or seccomp (trusted code only); results then say ``isolation["level"] == "none"``.
    """

    def __init__(self, handler: str, *, policy: SandboxPolicy | None = None,
                 unsafe_no_sandbox: bool = False) -> None:
        if not _HANDLER_RE.match(handler):
            raise ValueError(f"handler must be 'module:function', got {handler!r}")
        self.handler = handler
        self.policy = policy or SandboxPolicy()
        self.unsafe_no_sandbox = unsafe_no_sandbox
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._stderr: Any = None
        self._closed = False
        self._broken = ""
        self.isolation: dict[str, Any] = {}
        self.zygote_pid = 0
        self.zygote_start_s = 0.0
        self._start()

    # -- zygote life cycle
    def _start(self) -> None:
        mode = "none" if self.unsafe_no_sandbox else "sandbox"
        cfg = {"mode": mode, "handler": self.handler, "policy": asdict(self.policy),
               "hide": _hide_list(self.policy)}
        t0 = time.monotonic()
        self._stderr = tempfile.TemporaryFile()
        self._proc = _spawn(cfg, self.policy, self._stderr)
        assert self._proc.stdout is not None
        try:
            ready = json.loads(read_frame(self._proc.stdout.fileno(), _META_CAP,
                                          time.monotonic() + self.policy.start_timeout_s))
        except (FrameError, ValueError) as e:
            tail = self._kill_zygote()
            raise RuntimeError(f"the sandbox zygote did not start: {e}\n{tail}") from e
        if not ready.get("ready"):
            tail = self._kill_zygote()
            if ready.get("step") == "preload":
                raise RuntimeError(f"the sandbox zygote could not load {self.handler}: {ready.get('error')}\n{tail}")
            report = probe(self.policy, self.handler)
            missing = report.missing or [f"{ready.get('step')}: {ready.get('error')}"]
            raise SandboxUnavailable(missing)
        iso = dict(ready["isolation"])
        if mode == "sandbox":
            from nkieval.review.isolation import _seccomp

            iso.update({
                "namespaces": {"zygote": ["user", "net", "mount", "ipc", "uts"],
                               "worker": ["pid (own, worker is pid 1)", "mount (fresh /proc, /tmp, /dev/shm)"]},
                "filesystem": "read-only; private tmpfs /tmp and /dev/shm per request",
                "network": "none (empty network namespace)",
                "seccomp": ({"action": "kill-process", "blocked": _seccomp.blocked_names(),
                             "clone": "CLONE_THREAD only", "clone3": "ENOSYS"}
                            if self.policy.seccomp else "disabled by the policy"),
                "capabilities": "none", "no_new_privs": True,
            })
            if not self.policy.seccomp:
                iso["level"] = "partial"
        iso["rlimits"] = {"memory_mb": self.policy.memory_mb, "cpu_s": self.policy.cpu_s or "timeout+2",
                          "max_file_bytes": self.policy.max_file_bytes,
                          "max_open_files": self.policy.max_open_files,
                          "max_threads": self.policy.max_threads if mode == "sandbox" else None, "core": 0}
        self.isolation = iso
        self.zygote_pid = int(ready["pid"])
        self.zygote_start_s = time.monotonic() - t0

    def _kill_zygote(self) -> str:
        tail = ""
        proc = self._proc
        if proc is not None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            proc.kill()
            proc.wait()
            for stream in (proc.stdin, proc.stdout):
                try:
                    if stream is not None:
                        stream.close()
                except OSError:
                    pass
        if self._stderr is not None:
            self._stderr.seek(0)
            tail = self._stderr.read()[-4000:].decode(errors="replace")
            self._stderr.close()
            self._stderr = None
        self._proc = None
        return tail

    # -- requests
    def run(self, request: bytes, *, timeout_s: float, hide: Sequence[str] = (),
            on_part: Callable[[bytes], None] | None = None,
            part_timeout_s: tuple[float, float] | None = None) -> SandboxResult:
        """Run one request. ``hide``: directories this request's worker covers with an empty read-only tmpfs
        (the task under review), on top of the policy's. ``on_part`` gets each part the handler streams
        (``_worker.send_part``) as it arrives, before the result: untrusted bytes, like the payload. An
        exception it raises is raised here once the request is over (the zygote stays in step).
        ``part_timeout_s`` = (first, next): the worker is also stopped (status ``timeout``, the detail saying which
        part it was on) when its first part, or its result, takes longer than ``first`` seconds from the start,
        or a later part or the result longer than ``next`` from the part before: a budget per streamed step."""
        if len(request) > self.policy.max_request_bytes:
            raise ValueError(f"request of {len(request)} bytes exceeds max_request_bytes")
        if timeout_s <= 0:
            raise ValueError("timeout_s must be positive")
        with self._lock:
            if self._closed:
                raise RuntimeError("the pool is closed")
            if self._broken:
                raise SandboxBroken(self._broken)
            t0 = time.monotonic()
            try:
                return self._exchange(request, timeout_s, list(hide), on_part, part_timeout_s)
            except (FrameError, OSError, ValueError, KeyError) as e:
                tail = self._kill_zygote()
                detail = f"the sandbox zygote failed ({type(e).__name__}: {e}); restarted"
                try:
                    self._start()
                except Exception as e2:
                    self._broken = f"zygote restart failed: {e2}"
                    detail = f"the sandbox zygote failed ({e}); restart failed: {e2}"
                return SandboxResult("harness-error", None, None, None, tail[-self.policy.stderr_tail_bytes:],
                                     dict(self.isolation), time.monotonic() - t0, detail)

    def _exchange(self, request: bytes, timeout_s: float, hide: list[str],
                  on_part: Callable[[bytes], None] | None,
                  part_timeout_s: tuple[float, float] | None) -> SandboxResult:
        proc = self._proc
        assert proc is not None and proc.stdin is not None and proc.stdout is not None
        meta: dict[str, Any] = {"timeout_s": timeout_s, "hide": hide}
        if part_timeout_s is not None:
            meta["part_timeout_s"] = [float(part_timeout_s[0]), float(part_timeout_s[1])]
        write_frame(proc.stdin.fileno(), json.dumps(meta).encode())
        write_frame(proc.stdin.fileno(), request)
        deadline = time.monotonic() + timeout_s + self.policy.grace_s
        out = proc.stdout.fileno()
        failed: BaseException | None = None
        while True:
            meta = json.loads(read_frame(out, _META_CAP, deadline))
            payload = read_frame(out, self.policy.max_response_bytes, deadline)
            if "part" not in meta:
                break
            if on_part is not None and failed is None:
                try:
                    on_part(payload)
                except Exception as e:  # (the stream is read to its end either way)
                    failed = e
        if failed is not None:
            raise PartHandlerError(f"the part handler failed: {failed}") from failed
        status = meta["status"]
        return SandboxResult(status=status, payload=payload if status == "ok" else None,
                             exit_code=meta.get("exit_code"), signal=meta.get("signal"),
                             stderr_tail=str(meta.get("stderr_tail", ""))[-self.policy.stderr_tail_bytes:],
                             isolation=dict(self.isolation), wall_s=float(meta.get("wall_s", 0.0)),
                             detail=str(meta.get("detail", "")))

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._proc is not None and self._proc.stdin is not None:
                try:
                    self._proc.stdin.close()
                    self._proc.wait(timeout=5)
                except (OSError, subprocess.TimeoutExpired):
                    pass
            self._kill_zygote()

    def __enter__(self) -> SandboxPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            if not self._closed and self._proc is not None:
                self._kill_zygote()
        except Exception:
            pass
