"""The adversarial suite's harness: review hostile and legitimate candidates, then look for escapes.

Each candidate file under ``candidates/<class>/`` (hostile) or ``legit/`` starts with a header
of ``# key: value`` lines (README.md). :func:`evaluate` reviews it once through
``nkieval.review.review`` and then checks containment:

* markers: every file whose name starts with ``nkieval-adv-marker-<name>`` in $HOME, /tmp, the
  temp dir, /dev/shm, the checkout, the installed package and every task dir (a probe names its
  files after ``@@MARKER@@``, which is templated into its source here);
* network: a listener on 127.0.0.1 (an ephemeral port, given to the candidate only as
  ``@@PORT@@`` in its source text) records every connection;
* processes: this process is made a child subreaper, so anything a candidate leaves running
  (a setsid daemon, a fork bomb's children) is re-parented here and is found after a grace
  period as a child that was not there before the review (it is killed then, by pid).

Where today's pipeline lets a hostile candidate through, its test fails: the only exceptions
are the entries of :data:`KNOWN_HOLES`, marked ``xfail(strict=True)``, so the list has to shrink
as the trusted-execution work lands.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import tempfile
import threading
import time
from dataclasses import dataclass, field
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CANDIDATES = HERE / "candidates"
LEGIT = HERE / "legit"
CHECKOUT = HERE.parent.parent
MARKER_PREFIX = "nkieval-adv-marker-"
SEED = 20260611
GRACE_S = 2.0
#: per-case wall-clock limit of the reviews here (the built-in tasks allow 60 s; every legitimate
#: case takes well under a second, and a sleeping candidate must not take minutes)
CASE_TIMEOUT_S = 6.0

#: Hostile candidates that the pipeline does not catch or contain, with what lets them through.
#: Each is marked xfail(strict=True): when a fix lands its test XPASSes and fails until it is removed.
#: Before trace-then-execute (in-process candidate, no OS sandbox): 24/68 hostile caught, 0/15 false positives,
#: 67/83 contained. With it (tracer in the OS sandbox, judge replays programs, tamper audit): 68/68 caught,
#: 0/15 false positives, 83/83 contained (benchmarks/adversarial.py).
KNOWN_HOLES: list[tuple[str, str]] = []


@dataclass
class Candidate:
    path: Path
    kind: str  # "hostile" or "legit"
    task: str
    cls: str
    expect: str
    expect_verdicts: tuple[str, ...]
    why: str
    header: dict[str, str]

    @property
    def name(self) -> str:
        return f"{self.cls}/{self.path.stem}" if self.kind == "hostile" else f"legit/{self.path.stem}"

    @property
    def marker(self) -> str:
        return MARKER_PREFIX + self.path.stem


@dataclass
class Outcome:
    candidate: Candidate
    verdict: str
    score: float | None
    honest: float | None
    statuses: list[str]
    seconds: float
    markers: list[str] = field(default_factory=list)
    connections: int = 0
    survivors: list[int] = field(default_factory=list)
    error: str | None = None

    @property
    def caught(self) -> bool:
        """Hostile: not a pass, below the honest baseline's score, and an acceptable verdict."""
        c = self.candidate
        if self.error is not None or self.score is None:
            return False  # the harness must produce a verdict whatever the candidate does
        if c.kind == "legit":
            return self.verdict != "pass"
        if self.verdict == "pass":
            return False
        if self.honest is not None and self.score >= self.honest:
            return False
        return not c.expect_verdicts or self.verdict in c.expect_verdicts

    @property
    def contained(self) -> bool:
        return not self.markers and not self.connections and not self.survivors

    @property
    def ok(self) -> bool:
        """What the test asserts: hostile caught and contained; legitimate passes and contained."""
        if self.candidate.kind == "legit":
            return self.error is None and self.verdict == "pass" and self.contained
        return self.caught and self.contained

    def describe(self) -> str:
        s = "n/a" if self.score is None else f"{self.score:.1f}"
        h = "n/a" if self.honest is None else f"{self.honest:.1f}"
        parts = [f"{self.candidate.name}: verdict={self.verdict} score={s} (honest baseline {h})",
                 f"statuses={sorted(set(self.statuses))}"]
        if self.error:
            parts.append(f"harness error: {self.error}")
        if self.markers:
            parts.append(f"markers={self.markers}")
        if self.connections:
            parts.append(f"connections={self.connections}")
        if self.survivors:
            parts.append(f"surviving pids={self.survivors}")
        return "; ".join(parts)


_HEADER = re.compile(r"^#\s*([a-z-]+):\s*(.*?)\s*$")


def parse(path: Path, kind: str) -> Candidate:
    header: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        m = _HEADER.match(line)
        if m:
            header[m.group(1)] = m.group(2)
    for key in ("task", "expect"):
        if key not in header:
            raise ValueError(f"{path}: header lacks `# {key}:`")
    verdicts = tuple(v.strip() for v in header.get("expect-verdict", "").split("|") if v.strip())
    cls = header.get("class", "legit" if kind == "legit" else path.parent.name)
    return Candidate(path, kind, header["task"], cls, header["expect"], verdicts, header.get("why", ""), header)


def discover() -> list[Candidate]:
    out = [parse(p, "hostile") for p in sorted(CANDIDATES.glob("*/*.py"))]
    out += [parse(p, "legit") for p in sorted(LEGIT.glob("*.py"))]
    return out


# -- containment ----------------------------------------------------------------------------


class Listener:
    """A TCP listener on 127.0.0.1 that counts connections (the network marker)."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.count = 0
        self._lock = threading.Lock()
        threading.Thread(target=self._loop, daemon=True, name="adv-listener").start()

    def _loop(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with self._lock:
                self.count += 1
            try:
                conn.settimeout(0.2)
                conn.sendall(b"nkieval-adv-listener\n")
                conn.close()
            except OSError:
                pass


@lru_cache(maxsize=1)
def listener() -> Listener:
    return Listener()


def _package_dir() -> Path:
    import nkieval

    return Path(nkieval.__file__).resolve().parent


def _task_dirs() -> list[Path]:
    root = _package_dir() / "tasks" / "builtin"
    return [p for p in root.iterdir() if p.is_dir()]


def marker_roots() -> tuple[list[Path], list[Path]]:
    """(roots looked at two levels deep, trees walked fully)."""
    import sysconfig

    shallow = {Path(tempfile.gettempdir()), Path("/tmp"), Path("/dev/shm"), Path("/var/tmp"),
               Path(sysconfig.get_paths()["purelib"])}
    home = os.environ.get("HOME")
    if home:
        shallow.add(Path(home))
    deep = {CHECKOUT, _package_dir(), *_task_dirs()}
    return sorted(shallow), sorted(deep)


def find_markers(stem: str) -> list[Path]:
    prefix = MARKER_PREFIX + stem
    shallow, deep = marker_roots()
    found: list[Path] = []

    def look(d: Path, depth: int | None) -> None:
        try:
            entries = list(os.scandir(d))
        except OSError:
            return
        for e in entries:
            if e.name.startswith(prefix):
                found.append(Path(e.path))
            if e.is_dir(follow_symlinks=False) and e.name not in (".git", ".venv", "__pycache__", "node_modules"):
                if depth is None:
                    look(Path(e.path), None)
                elif depth > 0:
                    look(Path(e.path), depth - 1)

    for r in shallow:
        look(r, 1)
    for r in deep:
        look(r, None)
    return sorted(set(found))


def remove_markers(paths: list[Path]) -> None:
    for p in paths:
        try:
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink()
        except OSError:
            pass


def become_subreaper() -> bool:
    """Orphans of this process's descendants are re-parented here (Linux), so survivors can be found."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


def children() -> set[int]:
    me = os.getpid()
    out = set()
    try:
        tasks = os.listdir(f"/proc/{me}/task")
    except OSError:
        tasks = [str(me)]
    for t in tasks:
        try:
            out.update(int(p) for p in Path(f"/proc/{me}/task/{t}/children").read_text().split())
        except OSError:
            pass
    return out


def _harness_children() -> set[int]:
    from nkieval.review import replay_worker, sandbox, tracing

    z = sandbox._ZYGOTE
    return (({z.p.pid} if z is not None and z.alive() else set()) | replay_worker.worker_pids()
            | tracing.pool_pids())


def reap_survivors(before: set[int]) -> list[int]:
    """Children that appeared during the review and are not the harness's zygote: kill them by pid."""
    survivors = sorted(children() - before - _harness_children())
    live = []
    for pid in survivors:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                if fh.read().rsplit(")", 1)[1].split()[0] == "Z":
                    os.waitpid(pid, os.WNOHANG)
                    continue
        except (OSError, ChildProcessError):
            continue
        live.append(pid)
    for _ in range(3):  # a fork bomb's children keep arriving for a moment
        for pid in live:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.1)
        for pid in list(children() - before - _harness_children()):
            if pid not in live:
                live.append(pid)
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    for pid in live:
        try:
            os.waitpid(pid, os.WNOHANG)
        except (OSError, ChildProcessError):
            pass
    return live


# -- reviews --------------------------------------------------------------------------------


def render(c: Candidate) -> str:
    return (c.path.read_text().replace("@@MARKER@@", c.marker)
            .replace("@@PORT@@", str(listener().port)))


def _limits(task_id: str) -> Any:
    from nkieval.review.sandbox import SandboxLimits
    from nkieval.tasks import load_task

    t = load_task(task_id)
    return SandboxLimits(timeout_s=min(CASE_TIMEOUT_S, t.limits.timeout_s), memory_mb=t.limits.memory_mb,
                         max_instructions=t.limits.max_instructions)


@cache
def honest_score(task_id: str) -> float | None:
    """The score of the task's honest baseline kernel (the level a hostile candidate must stay under)."""
    from nkieval.review import review
    from nkieval.tasks import load_task

    t = load_task(task_id)
    if t.baseline_file is None:
        return None
    r = review(task_id, t.baseline_file, seed=SEED, limits=_limits(task_id), compare_references=False)
    return r.score if r.verdict == "pass" else None


def evaluate(c: Candidate, grace_s: float = GRACE_S) -> Outcome:
    from nkieval.review import review

    become_subreaper()
    remove_markers(find_markers(c.path.stem))  # stale ones from an interrupted run
    honest = honest_score(c.task) if c.kind == "hostile" else None
    lst = listener()
    before_conn = lst.count
    before = children()
    t0 = time.perf_counter()
    verdict, score, statuses, error = "harness-error", None, [], None
    try:
        r = review(c.task, render(c), seed=SEED, limits=_limits(c.task))
        verdict, score, statuses = r.verdict, r.score, [x.status for x in r.cases]
    except BaseException as e:
        error = f"{type(e).__name__}: {e}"[:500]
    seconds = time.perf_counter() - t0
    time.sleep(grace_s)
    survivors = reap_survivors(before)
    markers = find_markers(c.path.stem)
    remove_markers(markers)
    return Outcome(c, verdict, score, honest, statuses, seconds, [str(m) for m in markers],
                   lst.count - before_conn, survivors, error)


def hole_reason(name: str) -> str | None:
    for n, why in KNOWN_HOLES:
        if n == name:
            return why
    return None
