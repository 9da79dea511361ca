"""The candidate's side of a review: import it and record its kernel as a program, once per distinct shape.

This module is all that runs the candidate's code. It receives what a compiler sees — the kernel's source,
its input shapes and dtypes, the task's scalar parameters and the target — never an input value, an output,
a seed or a reference; it answers with one program document per shape (``nkieval.sim.program``) or the
error that stopped the trace. The judge validates each program and executes it on the real inputs.

It runs in the review's sandbox: :func:`handle` is called by the sandbox pool with the request bytes, in a fresh
worker process per request. An audit hook (:mod:`nkieval.review.tamper`) reports a candidate that reaches for
the interpreter, the harness, files or processes while it is imported or traced (status ``sandbox-violation``).

Request (JSON): ``{"source", "kernel", "target", "max_instructions", "defer", "shapes": [{"key", "args":
[{"shape", "dtype"}], "params"}]}`` (``defer``: leave the checks the judge's replay makes to it,
``record_program(defer=True)``; a shape whose deferred recording fails is recorded again without). Answer (JSON): ``{"setup_s", "shapes": {key: {"status":
"ok", "program": k, "trace_s"} | {"status", "error_type", "message", "frames", "rule", "location"}}}``, where
``k`` indexes the program documents that follow the JSON header as bytes (:func:`nkieval.review.tracing.pack_message`).
Each shape but the last is streamed ahead of the answer as a part as soon as it is traced (``{"key", "status":
"ok", "program": 0, "trace_s"}`` and its program, or the failure record; :func:`nkieval.review.isolation.send_part`)
and stands in the answer as ``{"status": "sent"}``.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from typing import Any

from nkieval.review.child import _error, _kernel_entry
from nkieval.review.tamper import TamperWatch
from nkieval.review.tracing import STREAMED_STATUSES, pack_message


def handle(request: bytes) -> bytes:
    """Trace every shape of the request; the answer is JSON bytes (never raises for the candidate's faults)."""
    import gc

    from nkieval.review.child import GC_THRESHOLDS

    t0 = time.perf_counter()
    gc.set_threshold(*GC_THRESHOLDS)  # (a recording, like a simulation, makes objects by the hundred thousand)
    req = json.loads(request)
    work = tempfile.mkdtemp(prefix="nkieval-trace-")
    candidate = os.path.join(work, "candidate.py")
    with open(candidate, "w", encoding="utf-8") as fh:
        fh.write(req["source"])
    answer: dict[str, Any] = {"shapes": {}}
    programs: list[bytes] = []  # (the answer's, by the index its shapes name)

    watch = TamperWatch(candidate)

    def fail_all(kind: str, e: BaseException) -> bytes:
        for s in req["shapes"]:
            answer["shapes"][s["key"]] = _error(kind, e, candidate)
        return _answer(answer, programs, watch)

    try:
        import warnings

        # (what _record imports, loaded before the candidate is: a failure here is the harness's)
        from nkieval import frontends
        from nkieval.sim.program import record as program_record

        frontends.install(force=True)
        # warnings of the trace are about placeholder values: the judge's run reports the real ones
        warnings.simplefilter("ignore")
    except BaseException as e:  # the tracer's own imports failed: a harness fault
        return fail_all("infra-error", e)
    watch.install()
    try:
        entry = _kernel_entry(candidate, req["kernel"])
    except MemoryError as e:
        return fail_all("memory-limit", e)
    except BaseException as e:
        return fail_all("import-error", e)
    answer["setup_s"] = time.perf_counter() - t0
    last = req["shapes"][-1]["key"] if req["shapes"] else None
    defer = req.get("defer") is True
    for s in req["shapes"]:
        t1 = time.perf_counter()
        deferred = program_record.DEFERRED[0]
        res, program = _record(entry, s, req, candidate, defer)
        if program is None and program_record.DEFERRED[0] != deferred:
            # (a call was deferred before the failure: recorded again with every instruction run, for the failure
            # a trace without deferring gives)
            res, program = _record(entry, s, req, candidate, False)
        res["trace_s"] = time.perf_counter() - t1
        if s["key"] != last and res["status"] in STREAMED_STATUSES and not watch.events \
                and _stream(s["key"], res, program):
            res = {"status": "sent", "trace_s": res["trace_s"]}
        elif program is not None:
            res["program"] = len(programs)
            programs.append(program)
        answer["shapes"][s["key"]] = res
    return _answer(answer, programs, watch)


def _record(entry: Any, shape: dict[str, Any], req: dict[str, Any], candidate: str, defer: bool
            ) -> tuple[dict[str, Any], bytes | None]:
    """One shape recorded: ``({"status": "ok"}, the program)``, or the failure record and None. ``defer``: the
    checks the judge's replay makes again are left to it (``record_program(defer=True)``)."""
    from nkieval.sim.errors import NkiValidationError
    from nkieval.sim.options import SimOptions
    from nkieval.sim.program import ArgSpec, record_program

    try:
        args = [ArgSpec(tuple(a["shape"]), a["dtype"]) for a in shape["args"]]
        # no trace kept: the program is the answer, and the judge's replay makes the trace it uses (and judges
        # on-chip capacity on it, as record_program leaves it to do); recording is about a fifth cheaper without one
        opts = SimOptions.from_env(max_instructions=int(req["max_instructions"]), record_trace=False,
                                   **entry.options)
        rec = record_program(entry.fn, args, dict(shape["params"]), target=req["target"], options=opts,
                             lnc=entry.lnc, grid=entry.grid, defer=defer)
        return {"status": "ok"}, rec.program.to_json().encode()
    except NkiValidationError as e:
        return _error("instruction-limit" if e.rule == "instruction-budget" else "rule-violation", e, candidate), None
    except MemoryError as e:
        return _error("memory-limit", e, candidate), None
    except BaseException as e:  # SystemExit, KeyboardInterrupt and anything else the candidate raises
        return _error("exception", e, candidate), None


def _stream(key: str, res: dict[str, Any], program: bytes | None) -> bool:
    """Send one shape's outcome to the judge now (a streamed part), so that the judge executes its program while
    the next shape is traced (and knows which shape a run that dies later was tracing). Never the last shape's: the answer, which says whether the candidate reached for the
    harness anywhere, always brings at least one shape, so a reach after the last part still decides the
    review."""
    from nkieval.review.isolation import send_part

    if program is None:
        return send_part(pack_message({"key": key, **res}))
    return send_part(pack_message({"key": key, **res, "program": 0}, [program]))


def _answer(answer: dict[str, Any], programs: list[bytes], watch: TamperWatch) -> bytes:
    """The answer; a reach for the harness anywhere (import or trace) decides every shape."""
    if watch.events:
        ev = watch.events[0]
        for key in answer["shapes"]:
            answer["shapes"][key] = {
                "status": "sandbox-violation", "rule": "tampering", "location": ev["location"],
                "message": f"while traced, the candidate's code did `{ev['event']}` ({ev['location']}): reaching "
                           "for the interpreter, the harness, files or processes is not allowed in a kernel"}
        programs = []
    return pack_message(answer, programs)


def warm_kernel(a: Any) -> Any:
    """Three instructions, for the zygotes' warm-ups (tracer and executor): what the first real kernel would
    otherwise pay for (lazy imports, target tables, first-call caches)."""
    import nkieval.frontends.nki.isa as nisa
    import nkieval.frontends.nki.language as nl

    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.tensor_tensor(dst=t, data1=t, data2=t, op=nl.add)
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def prepare() -> None:
    """Run in each standby worker, sandboxed, before its request arrives (the handler module's ``prepare``, see
    ``nkieval.review.isolation``): :func:`warm_kernel` recorded and encoded as :func:`_record` records a shape.
    A worker is a fresh fork of the zygote, and the first recording in it writes to pages of the zygote's heap
    (reference counts, caches), each write a page copied into the fork: done here, that is off the judge's wait
    for its first program (about 3 ms of a small kernel's 9 ms). Harness code only; never fails."""
    try:
        from nkieval.sim.options import SimOptions
        from nkieval.sim.program import ArgSpec, record_program

        opts = SimOptions.from_env(max_instructions=100, record_trace=False)
        record_program(warm_kernel, [ArgSpec((4, 8), "float32")], {}, target="trn2", options=opts,
                       defer=True).program.to_json()
    except Exception:  # a warm-up only: the request records everything itself anyway
        pass


def warm_up() -> None:
    """Run in the sandbox's zygote before it forks workers: the imports and first-call caches every trace would
    otherwise pay for (the program recorder, the Beta-1 front end the kernel entry tells kernels apart with, the
    target tables, :func:`warm_kernel` recorded and encoded).
    Never fails the zygote's start."""
    try:
        from nkieval import frontends

        frontends.install(force=True)
        import nki.isa
        import nki.language  # noqa: F401

        import nkieval.frontends.beta1.launch  # noqa: F401  (every trace's _kernel_entry: ~9 ms of imports)
        from nkieval.hardware import targets
        from nkieval.sim.options import SimOptions
        from nkieval.sim.program import ArgSpec, record_program

        targets.all_targets()
        record_program(warm_kernel, [ArgSpec((4, 8), "float32")], {}, target="trn2",
                       options=SimOptions.from_env(max_instructions=100)).program.to_json()
        from nkieval.review.tamper import snapshot_harness_modules

        snapshot_harness_modules()  # (last: every module the warm-up loaded is in it)
    except Exception:  # a warm-up only: each worker imports and runs everything itself anyway
        pass
