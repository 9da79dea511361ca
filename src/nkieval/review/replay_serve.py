"""The replay worker's process (started by :mod:`nkieval.review.replay_worker`, which holds the protocol and the
replay modes): frames in on stdin, answers out on stdout, one job at a time, each replayed by the judge's own
executor."""

from __future__ import annotations

import json
import os
import sys
from collections import OrderedDict
from typing import IO, Any

from nkieval.review import executor, malloc, npzio
from nkieval.review.child import GC_THRESHOLDS
from nkieval.review.replay_worker import WorkerFailed, read_frame, write_frame
from nkieval.review.runs import CaseJob, SandboxLimits

#: programs a worker keeps parsed (each may be tens of MB; the judge keeps its own)
_KEPT_PROGRAMS = 4
#: by program digest, this process's passed traced run of a static program (counts and masks, no outputs): what
#: its ``auto`` cases take (kept as long as the programs are)
_TRACED: OrderedDict[bytes, Any] = OrderedDict()


def serve(inp: IO[bytes], out: IO[bytes]) -> None:
    """Answer jobs until the judge closes the pipe."""
    import gc

    executor.PROGRAMS.size = _KEPT_PROGRAMS
    malloc.tune_this_process()  # (as the judge's replays and the sandbox's children run: without it every tile
    # the replays allocate and free faults its pages in again)
    gc.set_threshold(*GC_THRESHOLDS)
    gc.freeze()  # (the imports: no collection walks them again)
    write_frame(out, [json.dumps({"ready": True}).encode(), b"", b""])
    while True:
        try:
            header, text, arrays = read_frame(inp)
        except WorkerFailed:
            return  # (the judge is gone)
        try:
            answer = _replay(header, text, arrays)
        except Exception as e:  # (reported; the judge replays the case itself)
            answer = [json.dumps({"worker_error": f"{type(e).__name__}: {e}"}).encode(), b"", b""]
        write_frame(out, answer)


def _replay(header: dict[str, Any], text: bytes, arrays: bytes) -> list[bytes]:
    inputs = npzio.loads(arrays, "replay worker inputs")
    names = header["names"]
    case = CaseJob(str(header["label"]), {n: inputs[n] for n in names}, dict(header["params"]),
                   int(header["n_outputs"]), want_trace=False)
    timeout_s, memory_mb, max_instructions = header["limits"]
    limits = SandboxLimits(timeout_s=float(timeout_s), memory_mb=int(memory_mb),
                           max_instructions=int(max_instructions))
    digest = executor.program_digest(text)  # (once a job: a program of thousands of instructions is megabytes)
    try:
        prog = executor.PROGRAMS.get(text, digest)
    except Exception as e:  # (a worker fault: the judge parses it itself, and a program it refuses is the case's)
        raise RuntimeError(f"the program did not parse here: {e}") from e
    run = _run(prog, digest, case, str(header["target"]), limits, str(header.get("mode", "untraced")))
    answer = {"status": run.status, "sim_s": run.sim_s, "post_s": run.post_s, "wall_s": run.wall_s,
              "warnings": run.warnings, "error": run.error, "n_instructions": run.n_instructions,
              "unwritten": None if run.unwritten is None else [m is not None for m in run.unwritten]}
    arrays = {f"out{i}": o for i, o in enumerate(run.outputs)}
    arrays.update({f"unwritten{i}": m for i, m in enumerate(run.unwritten or []) if m is not None})
    return [json.dumps(answer, default=str).encode(), b"", npzio.dumps(arrays) if arrays else b""]


def _run(prog: Any, digest: bytes, case: CaseJob, target: str, limits: SandboxLimits, mode: str) -> Any:
    """A case replayed in ``mode`` (see :mod:`nkieval.review.replay_worker`)."""
    from nkieval.sim.program import is_static

    if mode == "untraced":  # (the judge completes it from its own traced run)
        return executor.replay_untraced(prog, case, target, limits)
    like = _TRACED.get(digest) if mode == "auto" else None
    run = executor.replay_case(prog, case, target, limits, like=like)
    if like is None and run.status == "ok" and is_static(prog):
        _TRACED[digest] = executor.counts_of(run)
        while len(_TRACED) > _KEPT_PROGRAMS:
            _TRACED.popitem(last=False)
    return run


def main() -> None:
    """Frames on the real stdout; anything else written to stdout goes to stderr."""
    frames = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    serve(sys.stdin.buffer, frames)


if __name__ == "__main__":
    main()
