"""The judge's side of tracing: the candidate's programs, one per distinct shape, recorded in the sandboxed
tracer (:mod:`nkieval.review.tracer`) and handed to the executor as each one arrives.

One tracer run records every shape (one worker, one import of the candidate). Each shape's program but the
last is streamed back as soon as it is recorded (a sandbox part), so the executor replays shape k on the inputs
while the tracer records shape k+1: on a machine with a core to spare, a review costs about one trace of one
shape more than the simulation alone, not a trace of every shape. Parts are the tracer's words like its answer:
untrusted, validated by the executor before anything runs. Only shapes the judge asked for are taken, the first
answer for a shape wins, and the last shape comes only with the answer, which reports a reach for the harness
anywhere in the trace (so such a reach always decides the review).

Each shape's outcome, a failed trace's too, is streamed as soon as it is known, so when the tracer run dies or
hangs, the first shape it did not answer is the one it was tracing: that shape gets the failure, and the shapes
after it are traced again in a fresh run (after a hang, skipped; after a harness fault the sandbox reports, such
as a worker starved of a core, they get that fault too). A fault of the judge's own making answers every open
shape with ``infra-error`` (the review fails closed).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nkieval.review.sandbox import CaseJob, SandboxLimits

#: ``--unsafe-no-sandbox``: trace candidates without OS isolation (trusted code only; reports say so).
UNSAFE_NO_SANDBOX = [False]
#: Whether the tracer leaves to the judge's replay the checks the replay makes anyway (``record_program(defer=True)``;
#: the benchmark's ``--compare-defer`` turns it off to compare). A case whose replay of such a program fails with one
#: of :data:`RETRACE_STATUSES` is settled by tracing its shape again with every instruction run (``retrace``).
DEFER_CHECKS = [True]
#: the replay failures a check the tracer deferred may be behind (see ``nkieval.review.sandbox``)
RETRACE_STATUSES = frozenset({"rule-violation", "exception", "instruction-limit", "memory-limit"})
_POOLS: dict[tuple[int, bool], Any] = {}
_POOL_LOCK = threading.Lock()

_SANDBOX_STATUS = {"timeout": "timeout", "memory-limit": "memory-limit", "crash": "crash",
                   "output-limit": "bad-program", "violation": "sandbox-violation", "harness-error": "infra-error"}
#: tracer outcomes that are the candidate's deed whichever shape it was in: every open shape gets them
_DECIDES_ALL = ("sandbox-violation", "bad-program")
#: the outcomes a tracer may stream for a shape, ahead of its answer: the statuses of a shape's own trace (never
#: ``infra-error``: a harness fault is not the candidate's to claim, nor a violation, which the answer reports)
STREAMED_STATUSES = frozenset({"ok", "rule-violation", "instruction-limit", "memory-limit", "exception"})


#: a kernel every healthy tracer records (the check of a tracer's claim that the harness failed)
KNOWN_GOOD_KERNEL = """
import nki.isa as nisa
import nki.language as nl


def known_good(a):
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out
"""


#: Largest answer the judge accepts from a tracer (programs of every shape together).
MAX_ANSWER_BYTES = 256 * 1024 * 1024


def pack_message(doc: dict[str, Any], blobs: Sequence[bytes] = ()) -> bytes:
    """A tracer's answer or part: a JSON header line, then the program documents it carries, each as its own bytes
    (``doc`` names them by index, ``{"program": k}``; the header lists their sizes). A program inside the JSON as
    a string would be escaped by the tracer and unescaped by the judge: 15 ms for a 1.6 MB program."""
    header = json.dumps({**doc, "blobs": [len(b) for b in blobs]}, default=str).encode()
    return b"".join((header, b"\n", *blobs))  # (compact JSON has no raw newline: the first one ends the header)


def unpack_message(data: bytes) -> tuple[dict[str, Any], list[bytes]]:
    """The header and the blobs of a :func:`pack_message` (untrusted bytes: a malformed one raises ``ValueError``)."""
    end = data.find(b"\n")
    if end < 0:
        raise ValueError("no header line")
    header = json.loads(data[:end])
    sizes = header.get("blobs") if isinstance(header, dict) else None
    if not isinstance(sizes, list) or not all(type(n) is int and n >= 0 for n in sizes) \
            or sum(sizes) != len(data) - end - 1:
        raise ValueError("the blob sizes do not match the message")
    blobs, at, view = [], end + 1, memoryview(data)
    for n in sizes:
        blobs.append(bytes(view[at:at + n]))
        at += n
    return header, blobs


def with_program(res: Any, blobs: Sequence[bytes]) -> Any:
    """A shape's outcome with its program's bytes in place of the blob index the tracer sent (an ``ok`` outcome
    whose index names no blob is not a program: ``bad-program``)."""
    if not isinstance(res, dict) or res.get("status") != "ok":
        return res
    k = res.get("program")
    if type(k) is not int or not 0 <= k < len(blobs):
        return {"status": "bad-program", "message": "the tracer's answer names a program it did not send"}
    return {**res, "program": blobs[k]}


def tracer_pool(memory_mb: int) -> Any:
    """The sandbox pool that runs tracers (one per memory limit; started on first use)."""
    from nkieval.review import malloc
    from nkieval.review.isolation import SandboxPolicy, SandboxPool

    key = (int(memory_mb), UNSAFE_NO_SANDBOX[0])
    with _POOL_LOCK:
        pool = _POOLS.get(key)
        if pool is None:
            pool = _POOLS[key] = SandboxPool("nkieval.review.tracer:handle",
                                             policy=SandboxPolicy(memory_mb=int(memory_mb),
                                                                 env=tuple(malloc.tracer_env().items()),
                                                                 max_response_bytes=MAX_ANSWER_BYTES,
                                                                 hide_in_worker=(_builtin_tasks_dir(),)),
                                             unsafe_no_sandbox=UNSAFE_NO_SANDBOX[0])
        return pool


def _builtin_tasks_dir() -> str:
    """The built-in suite's task directories (references, expert solutions): a tracer has no use for them."""
    from nkieval.tasks.loader import BUILTIN_ROOT

    return str(BUILTIN_ROOT)


def pool_pids() -> set[int]:
    """The process ids of this process's live tracer zygotes (the judge's own children, not a candidate's)."""
    with _POOL_LOCK:
        procs = [getattr(pool, "_proc", None) for pool in _POOLS.values()]
    return {p.pid for p in procs if p is not None and p.poll() is None}


def isolation_in_force() -> dict[str, Any]:
    """What isolated the tracers of this process's reviews (empty before the first one)."""
    return dict(next(iter(_POOLS.values())).isolation) if _POOLS else {}


def run_tracer(request: dict[str, Any], limits: SandboxLimits, n_shapes: int, hide: Sequence[str] = (),
               on_part: Callable[[bytes], None] | None = None) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Run the tracer on ``request`` in the sandbox: (answer per shape key, or a failure for every shape).
    ``on_part`` gets each part the tracer streams ahead of its answer (untrusted bytes)."""
    budget = limits.startup_s + limits.timeout_s * max(1, n_shapes)
    t0 = time.perf_counter()
    # each shape has the case's time limit (the first one, the start-up allowance too, for the import)
    res = tracer_pool(limits.memory_mb).run(json.dumps(request).encode(), timeout_s=budget, hide=hide,
                                            on_part=on_part,
                                            part_timeout_s=(limits.startup_s + limits.timeout_s, limits.timeout_s))
    wall = time.perf_counter() - t0
    if res.status != "ok" or res.payload is None:
        status = _SANDBOX_STATUS.get(res.status, "crash")
        what = {"timeout": f"tracing the kernel took more than its time limit ({res.detail or f'{budget:g} s'}); "
                           "the process was killed",
                "sandbox-violation": f"the candidate did something the sandbox forbids: {res.detail}",
                "crash": "the candidate process died while running this case, without reporting"}.get(
            status, f"the tracer ended without answering ({res.status}{': ' + res.detail if res.detail else ''})")
        err: dict[str, Any] = {"status": status, "message": what, "wall_s": wall}
        if res.stderr_tail.strip():
            err["stderr_tail"] = res.stderr_tail[-400:]
        return {}, err
    try:
        answer, blobs = unpack_message(res.payload)
        shapes = answer["shapes"]
        if not isinstance(shapes, dict):
            raise ValueError("shapes is not an object")
    except (ValueError, KeyError, TypeError) as e:
        return {}, {"status": "bad-program", "message": f"the tracer's answer is not readable: {e}"}
    return {k: with_program(v, blobs) for k, v in shapes.items()}, None


def shape_key(c: CaseJob) -> str:
    """What a trace depends on: the inputs' names, shapes and dtypes, and the parameters."""
    return json.dumps([[n, list(a.shape), a.dtype.name] for n, a in c.inputs.items()] + [c.params],
                      sort_keys=True, default=str)


def trace_order(keys: Sequence[str], cases: Sequence[CaseJob]) -> list[str]:
    """The distinct shapes, smallest first (elements over every input; ties in case order).

    Tracing and replaying form a two-stage pipeline: the tracer records shape k+1 while the executor replays
    shape k on each of its cases, and a recording costs less than the replays of its shape (it computes no
    values, and a shape has one or more cases). For such a pipeline the order that finishes first is the one
    of increasing first-stage time (Johnson's rule): the judge's wait for its first program is then the
    smallest shape's trace, not the public shape's, and each later program is recorded while the judge
    replays the one before. A shape's elements stand in for its recording time."""
    size: dict[str, int] = {}
    for k, c in zip(keys, cases):
        size.setdefault(k, sum(int(a.size) for a in c.inputs.values()))
    return sorted(size, key=size.__getitem__)  # (a stable sort over first appearance: ties keep case order)


def _cache_base(base: dict[str, Any], limits: SandboxLimits, hide: Sequence[str]) -> bytes:
    """What every shape's ``review.cache.TRACES`` key shares: a digest of the tracer request's fixed part, the sandbox's
    limits and hidden paths and the isolation in force (the install is the process's own: the cache lives in
    memory only)."""
    doc = [base, [limits.timeout_s, limits.startup_s, limits.memory_mb], sorted(hide), UNSAFE_NO_SANDBOX[0]]
    return hashlib.blake2b(json.dumps(doc, sort_keys=True, default=str).encode(), digest_size=32).digest()


def _shape_request(c: CaseJob, key: str) -> dict[str, Any]:
    return {"key": key, "args": [{"shape": list(a.shape), "dtype": a.dtype.name} for a in c.inputs.values()],
            "params": c.params}


def _shape_label(shape: dict[str, Any]) -> str:
    return ",".join(str(tuple(a["shape"])) for a in shape["args"])


class ProgramStream:
    """The programs of ``cases``' distinct shapes, traced in a background thread; :meth:`get` waits for one.

    ``memo`` (shape key -> program document, bytes) holds the programs of this review's earlier runs: a shape found there is
    not traced again (the evidence and differential stages re-run shapes the cases ran), and every program traced
    here is added to it."""

    def __init__(self, source: str, kernel: str, cases: Sequence[CaseJob], target: str, limits: SandboxLimits,
                 hide: Sequence[str] = (), memo: dict[str, bytes] | None = None) -> None:
        self.keys = [shape_key(c) for c in cases]
        self.order = trace_order(self.keys, cases)
        self._shapes = {k: _shape_request(c, k) for k, c in zip(self.keys, cases)}
        #: whether the programs were recorded with the replay's checks deferred (``DEFER_CHECKS``)
        self.deferred = DEFER_CHECKS[0]
        self._base = {"source": source, "kernel": kernel, "target": target,
                      "max_instructions": limits.max_instructions, "defer": self.deferred}
        self._retraced_full: dict[str, dict[str, Any]] = {}
        self._limits, self._hide = limits, tuple(hide)
        self._cache_base = _cache_base(self._base, limits, self._hide)
        self._retraced = False  # (a tracer run died and the rest were traced again: nothing is kept)
        self._memo = memo if memo is not None else {}
        self._done: dict[str, dict[str, Any]] = {}
        self._cv = threading.Condition()
        #: the tracer's own wall time (it overlaps the executor)
        self.trace_s = 0.0
        self._run_started = 0.0
        self._last_part_at: float | None = None  # seconds into the current tracer run
        self._thread = threading.Thread(target=self._run, name="nkieval-trace", daemon=True)
        self._thread.start()

    def get(self, key: str) -> dict[str, Any]:
        """The tracer's outcome for shape ``key``: ``{"status": "ok", "program": bytes}`` or a failure record."""
        with self._cv:
            while key not in self._done:
                self._cv.wait()
            return self._done[key]

    def ready(self, key: str) -> bool:
        """Whether :meth:`get` would answer for ``key`` without waiting."""
        with self._cv:
            return key in self._done

    def join(self) -> None:
        self._thread.join()

    def retrace(self, key: str) -> dict[str, Any]:
        """Shape ``key``'s outcome from a tracer run that runs every instruction (no deferred checks), as
        :meth:`get` gives it: what settles a case whose replay of a deferred program failed (once per shape). The
        run's failure record is the one a trace without deferring gives (with the candidate's frames); a program
        means that the recording raised nothing the deferred one did not (the same program: the failure is the
        replay's own)."""
        if key not in self._retraced_full:
            answer, failure = run_tracer({**self._base, "defer": False, "shapes": [self._shapes[key]]},
                                         self._limits, n_shapes=1, hide=self._hide)
            res = answer.get(key) if failure is None else failure
            self._retraced_full[key] = self._checked(res) if isinstance(res, dict) else {
                "status": "bad-program", "message": "the tracer gave no answer for this shape"}
        return self._retraced_full[key]

    def all_traced(self) -> bool:
        """Whether every shape's outcome is in: the tracer records nothing more (its core is free)."""
        with self._cv:
            return all(k in self._done for k in self.order)

    # -- the tracing thread
    def _publish(self, key: str, res: dict[str, Any]) -> None:
        if res.get("status") == "ok" and isinstance(res.get("program"), bytes):
            self._memo.setdefault(key, res["program"])
        elif res.get("status") == "sent":  # only a tampered tracer says so of a part it never sent
            res = {"status": "bad-program", "message": "the tracer's answer names a program it never sent"}
        with self._cv:
            if key not in self._done:  # (the first answer for a shape wins)
                self._done[key] = res
                self._cv.notify_all()

    def _run(self) -> None:
        t0 = time.perf_counter()
        try:
            self._trace()
        except BaseException as e:  # the judge's own fault: every open shape fails closed
            for key in self.order:
                self._publish(key, {"status": "infra-error",
                                    "message": f"tracing failed in the harness: {type(e).__name__}: {e}"})
        finally:
            self.trace_s = time.perf_counter() - t0

    def _cache_key(self, key: str) -> bytes:
        return hashlib.blake2b(key.encode(), digest_size=20, key=self._cache_base).digest()

    def _trace(self) -> None:
        from nkieval.review.cache import TRACES

        for k in self.order:
            if k not in self._memo:
                program = TRACES.get(self._cache_key(k))
                if program is not None:
                    self._memo[k] = program
        open_keys = [k for k in self.order if k not in self._memo]
        for k in self.order:
            if k in self._memo:
                self._publish(k, {"status": "ok", "program": self._memo[k]})
        while open_keys:
            self._run_started, self._last_part_at = time.perf_counter(), None
            answer, failure = run_tracer({**self._base, "shapes": [self._shapes[k] for k in open_keys]},
                                         self._limits, n_shapes=len(open_keys), hide=self._hide,
                                         on_part=self._on_part(set(open_keys[:-1])))
            open_keys = [k for k in open_keys if k not in self._done]
            if not open_keys:
                return
            if failure is None:
                for k in open_keys:
                    res = answer.get(k)
                    self._publish(k, self._checked(res) if isinstance(res, dict) else {
                        "status": "bad-program", "message": "the tracer gave no answer for this shape"})
                self._keep(answer)
                return
            if failure.get("status") in _DECIDES_ALL or failure.get("status") == "infra-error":
                # (a harness fault, the supervisor's word: a starved or failed sandbox; any case with it makes the
                # review a harness error, so the shapes left are not traced again, on what may be an overloaded
                # machine, only to be discarded)
                for k in open_keys:
                    self._publish(k, failure)
                return
            # The run died or hung while tracing the first shape it had not streamed (shapes are traced in
            # order, and each one's outcome is streamed as soon as it is known): that shape's failure. A kernel
            # that hangs on one shape almost always hangs on the next, so after a hang the rest are skipped;
            # after anything else they are traced again, in a fresh run.
            self._retraced = True
            culprit, open_keys = open_keys[0], open_keys[1:]
            if self._last_part_at is not None and "wall_s" in failure:  # (the culprit's own time)
                failure = {**failure, "wall_s": max(0.0, failure["wall_s"] - self._last_part_at)}
            self._publish(culprit, failure)
            if failure.get("status") == "timeout":
                for k in open_keys:
                    self._publish(k, {"status": "not-run", "message": "skipped: tracing shape "
                                      f"{_shape_label(self._shapes[culprit])} timed out"})
                return

    def _keep(self, answer: dict[str, Any]) -> None:
        """The programs of a tracer run that answered, into ``review.cache.TRACES``, if the whole run is clean: its answer
        names no reach for the harness and no malformed part, and every shape asked for is in (so none of them
        depended on a run that died)."""
        if self._retraced or any(not isinstance(r, dict) or r.get("status") in _DECIDES_ALL
                                 for r in answer.values()):
            return
        with self._cv:
            done = {k: self._done.get(k) for k in self.order}
        if any(r is None or r.get("status") in _DECIDES_ALL for r in done.values()):
            return
        from nkieval.review.cache import TRACES

        for k, r in done.items():
            if r is not None and r.get("status") == "ok" and isinstance(r.get("program"), bytes):
                TRACES.put(self._cache_key(k), r["program"])

    def _checked(self, res: dict[str, Any]) -> dict[str, Any]:
        """A tracer's answer that the harness failed (``infra-error``: a retry, never the candidate's fault) comes
        from the candidate's process, which can say anything: it stands only if a known-good kernel fails in a
        tracer too."""
        if res.get("status") != "infra-error":
            return res
        probe = {"key": "k", "args": [{"shape": [4, 8], "dtype": "float32"}], "params": {}}
        answer, failure = run_tracer({**self._base, "source": KNOWN_GOOD_KERNEL, "kernel": "known_good",
                                      "shapes": [probe]}, self._limits, n_shapes=1)
        healthy = failure is None and isinstance(answer.get("k"), dict) and answer["k"].get("status") == "ok"
        if not healthy:
            return res
        return {"status": "crash", "message": "the tracer reported a harness fault that a known-good kernel does "
                                              "not reproduce: the candidate's process said so"}

    def _on_part(self, streamable: set[str]) -> Callable[[bytes], None]:
        """The handler of the run's parts: a shape's outcome, for shapes asked for and not the last one."""
        def on_part(data: bytes) -> None:
            try:
                part, blobs = unpack_message(data)
            except ValueError:
                return  # (an unreadable part is ignored: the shape then comes with the answer, or fails there)
            if part.get("key") not in streamable or part.get("status") not in STREAMED_STATUSES:
                return
            part = with_program(part, blobs)
            if part["status"] not in STREAMED_STATUSES:
                return  # (an index that names no blob)
            self._last_part_at = time.perf_counter() - self._run_started
            self._publish(part["key"], {k: v for k, v in part.items() if k not in ("key", "blobs")})
        return on_part
