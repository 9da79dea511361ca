"""Run an untrusted candidate kernel in a separate process, one case after another, safely.

Why a process and not a thread or ``exec``: a candidate can loop forever, allocate 50 GB,
call ``os._exit``, print garbage, or poke at the harness's objects. Here it runs in a child
process with an address-space limit (``RLIMIT_AS``), a CPU-time backstop (``RLIMIT_CPU``), a
wall-clock timeout per case enforced by the parent, its stdout/stderr sent to files, and a job
directory that holds only its own source and the inputs: reference outputs stay in the parent,
and nothing but files (JSON, inert ``.npz``) crosses back. When the child dies or is killed in
case k, case k gets a specific verdict and a fresh child continues with case k+1, so one bad
shape never hides the others and the next review starts from a clean process.

Isolation modes: ``"forkserver"`` (default) forks each child from a clean zygote process that
has nkieval preloaded (see :mod:`nkieval.review.zygote`; milliseconds per start, no harness
state inherited); ``"subprocess"``
starts ``python -I -m nkieval.review.child`` (a fresh interpreter each time, ~0.5 s).
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from nkieval.review import npzio

Isolation = Literal["forkserver", "subprocess"]

#: Case statuses and what each means (reports quote these ids).
STATUSES: dict[str, str] = {
    "ok": "ran and returned outputs",
    "rule-violation": "broke a hardware/API rule (NkiValidationError)",
    "exception": "raised an exception",
    "import-error": "the candidate file failed to import or lacks the kernel entry point",
    "timeout": "exceeded the wall-clock limit and was killed",
    "memory-limit": "exceeded the memory limit",
    "crash": "the process died without reporting (os._exit, signal, interpreter crash)",
    "bad-output": "returned something other than HBM tensors the kernel wrote",
    "instruction-limit": "issued more instructions than the task allows",
    "not-run": "not run because the candidate could not start",
    "infra-error": "the harness itself failed (retryable)",
}


@dataclass
class CaseJob:
    """One run of the candidate: its inputs and params (the child never sees anything else)."""

    label: str
    inputs: dict[str, np.ndarray]
    params: dict[str, Any]
    n_outputs: int
    want_trace: bool = True
    #: ``npzio.dumps(inputs)`` when the caller already has it (the review's case cache)
    npz: bytes | None = None


@dataclass
class CaseRun:
    """What came back from one case: status, outputs (arrays), trace JSON text, timings, error facts."""

    label: str
    status: str
    outputs: list[np.ndarray] = field(default_factory=list)
    trace_json: str | None = None
    sim_s: float = 0.0
    wall_s: float = 0.0
    n_instructions: int | None = None
    error: dict[str, Any] = field(default_factory=dict)
    warnings: list[dict[str, Any]] = field(default_factory=list)
    #: per output, the mask of elements no instruction wrote (None: all written); None when unknown
    unwritten: list[np.ndarray | None] | None = None


@dataclass(frozen=True)
class SandboxLimits:
    timeout_s: float = 60.0
    memory_mb: int = 4096
    max_instructions: int = 200_000
    #: extra seconds for a fresh child to import the candidate before its first case
    startup_s: float = 20.0


class _Zygote:
    """Handle on a running ``nkieval.review.zygote`` process (one request at a time)."""

    def __init__(self) -> None:
        env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR")}
        env["OPENBLAS_NUM_THREADS"] = env["OMP_NUM_THREADS"] = "1"
        self.p = subprocess.Popen([sys.executable, "-I", "-m", "nkieval.review.zygote"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True, bufsize=1)
        ready = self._read(timeout=60)
        if not ready or not ready.get("ready"):
            self.close()
            raise RuntimeError("the sandbox zygote did not start")

    def alive(self) -> bool:
        return self.p.poll() is None

    def _read(self, timeout: float | None) -> dict[str, Any] | None:
        import select

        assert self.p.stdout is not None
        r, _, _ = select.select([self.p.stdout], [], [], timeout)
        if not r:
            return None
        line = self.p.stdout.readline()
        if not line:
            raise RuntimeError("the sandbox zygote exited")
        return json.loads(line)

    def fork(self, job_dir: Path, case_ids: list[int]) -> int:
        assert self.p.stdin is not None
        self.p.stdin.write(json.dumps({"job": str(job_dir), "cases": case_ids}) + "\n")
        self.p.stdin.flush()
        msg = self._read(timeout=30)
        if not msg or "pid" not in msg:
            raise RuntimeError("the sandbox zygote did not fork")
        return int(msg["pid"])

    def poll_exit(self) -> int | None:
        msg = self._read(timeout=0)
        return None if msg is None else int(msg["exit"])

    def close(self) -> None:
        try:
            self.p.kill()
            self.p.wait(5)
        except Exception:
            pass
        for f in (self.p.stdin, self.p.stdout):
            if f is not None:
                try:
                    f.close()
                except OSError:
                    pass


_ZYGOTE: _Zygote | None = None
_ZYGOTE_LOCK = threading.Lock()


def _zygote() -> _Zygote:
    global _ZYGOTE
    if _ZYGOTE is None or not _ZYGOTE.alive():
        _ZYGOTE = _Zygote()
    return _ZYGOTE


def shutdown() -> None:
    """Stop the zygote (it is restarted on the next run)."""
    global _ZYGOTE
    if _ZYGOTE is not None:
        _ZYGOTE.close()
        _ZYGOTE = None


# The zygote is a child process holding pipes: stop it when the harness exits, so no orphan is left.
atexit.register(shutdown)


class _Proc:
    """A started child (forked by the zygote, or a fresh subprocess) with a uniform poll/kill."""

    def __init__(self, isolation: Isolation, job_dir: Path, case_ids: list[int]) -> None:
        self.isolation = isolation
        self.code: int | None = None
        if isolation == "forkserver":
            self.z = _zygote()
            self.pid = self.z.fork(job_dir, case_ids)
        else:
            env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR")}
            env["OPENBLAS_NUM_THREADS"] = env["OMP_NUM_THREADS"] = "1"
            self.p = subprocess.Popen([sys.executable, "-I", "-m", "nkieval.review.child", str(job_dir),
                                       *map(str, case_ids)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, start_new_session=True, env=env, cwd=job_dir)
            self.pid = self.p.pid

    def exitcode(self) -> int | None:
        if self.code is None:
            self.code = self.z.poll_exit() if self.isolation == "forkserver" else self.p.poll()
        return self.code

    def kill(self) -> None:
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError, OSError):
            pass
        deadline = time.monotonic() + 10
        while self.exitcode() is None and time.monotonic() < deadline:
            time.sleep(0.005)

    def join(self) -> None:
        if self.isolation != "forkserver":
            self.p.wait(5)


class _NullLock:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


_NULL_LOCK = _NullLock()


def _exit_description(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = " (CPU-time limit)" if name == "SIGXCPU" else " (killed: possibly out of memory)" if name == "SIGKILL" else ""
        return f"killed by {name}{hint}"
    return f"exited with code {code}"


def run_candidate(source: str, kernel: str, cases: Sequence[CaseJob], *, target: str,
                  limits: SandboxLimits = SandboxLimits(), isolation: Isolation = "forkserver",
                  on_case: Callable[[CaseRun], None] | None = None, keep_dir: bool = False) -> list[CaseRun]:
    """Run ``source`` (a candidate .py text) on every case in a sandboxed child; never raises for candidate faults."""
    job = Path(tempfile.mkdtemp(prefix="nkieval-review-"))
    try:
        (job / "candidate.py").write_text(source)
        spec = {
            "candidate": "candidate.py", "kernel": kernel, "target": target, "memory_mb": limits.memory_mb,
            "cpu_s": limits.timeout_s * max(1, len(cases)) + limits.startup_s,
            "max_instructions": limits.max_instructions,
            "cases": [],
        }
        for k, c in enumerate(cases):
            (job / f"in_{k}.npz").write_bytes(c.npz if c.npz is not None else npzio.dumps(c.inputs))
            spec["cases"].append({"inputs": f"in_{k}.npz", "input_names": list(c.inputs), "params": c.params,
                                  "n_outputs": c.n_outputs, "want_trace": c.want_trace})
        (job / "job.json").write_text(json.dumps(spec))
        results: dict[int, CaseRun] = {}
        remaining = list(range(len(cases)))
        with _ZYGOTE_LOCK if isolation == "forkserver" else _NULL_LOCK:
            while remaining:
                _run_batch(job, cases, remaining, results, limits, isolation, on_case)
        return [results[k] for k in range(len(cases))]
    finally:
        if not keep_dir:
            shutil.rmtree(job, ignore_errors=True)


def _run_batch(job: Path, cases: Sequence[CaseJob], remaining: list[int], results: dict[int, CaseRun],
               limits: SandboxLimits, isolation: Isolation, on_case: Callable[[CaseRun], None] | None) -> None:
    """Start one child for ``remaining``; return when it finishes or a case fails hard (removing what is done)."""

    def finish(k: int, run: CaseRun) -> None:
        results[k] = run
        remaining.remove(k)
        if on_case is not None:
            on_case(run)

    proc = _Proc(isolation, job, list(remaining))
    t_start = time.monotonic()
    current: int | None = None
    started_at = t_start
    sleep = 0.002
    try:
        while True:
            for k in list(remaining):
                if (job / f"res_{k}.json").exists():
                    finish(k, _collect(job, k, cases[k]))
                    if current == k:
                        current = None
            if not remaining:
                return
            k0 = remaining[0]
            if current != k0 and (job / f"started_{k0}").exists():
                current, started_at = k0, time.monotonic()
            code = proc.exitcode()
            if code is not None:
                # Give the file system a moment: a result may have landed just before exit.
                for k in list(remaining):
                    if (job / f"res_{k}.json").exists():
                        finish(k, _collect(job, k, cases[k]))
                if not remaining:
                    return
                k0 = remaining[0]
                desc = _exit_description(code)
                if (job / f"started_{k0}").exists():
                    finish(k0, CaseRun(cases[k0].label, "crash", error={
                        "message": f"the candidate process {desc} while running this case, without reporting",
                        **_tails(job)}))
                else:
                    for k in list(remaining):
                        finish(k, CaseRun(cases[k].label, "crash" if k == k0 else "not-run", error={
                            "message": f"the candidate process {desc} before running any case (at import)",
                            **_tails(job)}))
                return
            now = time.monotonic()
            if current is not None and now - started_at > limits.timeout_s:
                proc.kill()
                finish(current, CaseRun(cases[current].label, "timeout", wall_s=now - started_at, error={
                    "message": f"no result after {limits.timeout_s:g} s; the process was killed", **_tails(job)}))
                # A kernel that hangs on one shape almost always hangs on the next: do not spend
                # n x timeout on it. The skipped cases are reported as such.
                for k in list(remaining):
                    finish(k, CaseRun(cases[k].label, "not-run", error={
                        "message": f"skipped: case {cases[current].label} timed out"}))
                return
            if current is None and now - t_start > limits.startup_s + limits.timeout_s:
                proc.kill()
                for k in list(remaining):
                    finish(k, CaseRun(cases[k].label, "timeout" if k == remaining[0] else "not-run", error={
                        "message": f"the candidate did not start a case within {limits.startup_s + limits.timeout_s:g}"
                                   " s (hang at import?)", **_tails(job)}))
                return
            time.sleep(sleep)
            sleep = min(sleep * 1.5, 0.005)
    finally:
        if proc.exitcode() is None:
            proc.kill()
        else:
            proc.join()


def _tails(job: Path, n: int = 400) -> dict[str, str]:
    out = {}
    for name in ("stdout", "stderr"):
        p = job / f"{name}.txt"
        if p.exists():
            data = p.read_bytes()[-n:].decode("utf-8", "replace")
            if data.strip():
                out[f"{name}_tail"] = data
    return out


def _mask(m: np.ndarray | None, shape: tuple[int, ...]) -> np.ndarray | None:
    if m is None:
        return None
    if m.dtype != np.bool_ or m.shape != tuple(shape):
        raise npzio.ArrayFileError(f"unwritten-element mask has dtype {m.dtype} and shape {m.shape}")
    return m


def _collect(job: Path, k: int, case: CaseJob) -> CaseRun:
    try:
        res = json.loads((job / f"res_{k}.json").read_text())
        if not isinstance(res, dict) or not isinstance(res.get("status"), str):
            raise ValueError("malformed result")
    except (ValueError, OSError) as e:
        return CaseRun(case.label, "crash", error={"message": f"unreadable result file: {e}"})
    status = res["status"] if res["status"] in STATUSES else "crash"
    run = CaseRun(case.label, status, sim_s=float(res.get("sim_s", 0.0)), wall_s=float(res.get("wall_s", 0.0)),
                  n_instructions=res.get("n_instructions"), warnings=list(res.get("warnings", []))[:50])
    if status != "ok":
        run.error = {k: v for k, v in res.items() if k in ("error_type", "message", "frames", "rule", "instruction",
                                                           "operand", "location")}
        run.error.update(_tails(job))
        return run
    expected = sum(a.nbytes for a in case.inputs.values()) * 10 + (1 << 20)
    try:
        arrays = npzio.load(job / f"out_{k}.npz", max_bytes=max(expected, 64 << 20))
        run.outputs = [arrays[f"out{i}"] for i in range(case.n_outputs)]
        if res.get("written_checked"):
            run.unwritten = [_mask(arrays.get(f"unwritten{i}"), o.shape) for i, o in enumerate(run.outputs)]
    except (npzio.ArrayFileError, KeyError, OSError) as e:
        return CaseRun(case.label, "bad-output", error={"message": f"outputs could not be read back: {e}"})
    tp = job / f"trace_{k}.json"
    if case.want_trace and tp.exists():
        run.trace_json = tp.read_text()
    return run
