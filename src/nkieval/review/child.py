"""The sandboxed side of a candidate run: import the candidate, run it on each case, write files.

This module runs in a separate process (forked from a clean forkserver, or a fresh ``python
-I -m nkieval.review.child JOB_DIR CASE...``). It never sees reference outputs: the job
directory holds only the candidate's source and the inputs. Every result goes back through
files written atomically (write to a temporary name, then rename), so garbage on stdout, a
crash, ``os._exit`` or a kill leaves either a complete result file or none.

Files in JOB_DIR: ``job.json`` (what to run), ``in_<k>.arr`` (inputs of case k, :mod:`npzio`
format), ``notify`` (a FIFO the parent reads). Written here: ``started_<k>`` for the first case
only (the import is done: the parent times that case from this marker, and each later case
from the previous case's result), ``res_<k>.json``, ``out_<k>.arr``, ``trace_<k>.json``, and
``stdout.txt``/``stderr.txt`` (the candidate's prints). After each marker or result file the
child writes a line to ``notify`` (``s<k>``, ``r<k>``) so the parent wakes at once and knows
which file to look at instead of polling the directory. The line is only a hint (the parent
then reads the file, and looks at every file on its own now and then), so a candidate that
writes there too can only cause a spurious look.

Timings in ``res_<k>.json`` (seconds, this process's clock): ``load_s`` (reading the inputs),
``sim_s`` (``run_kernel`` alone: from inputs loaded to outputs returned, the only part the
benchmark counts as simulation), ``post_s`` (checking, unwritten masks, writing outputs and
the trace), ``wall_s`` (all three), and on the first case a child runs, ``setup_s`` (from the
process's entry to its first case: redirection, limits, importing the candidate).
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)


def _limit_resources(memory_mb: int, cpu_s: float) -> None:
    import resource

    mem = int(memory_mb) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    cpu = int(cpu_s) + 1
    _soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if hard == resource.RLIM_INFINITY or hard > cpu:
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))


def _redirect_output(job: Path) -> None:
    """Send fd 1 and 2 to files: the candidate may print anything; the harness never parses it."""
    for fd, name in ((1, "stdout.txt"), (2, "stderr.txt")):
        f = os.open(job / name, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(f, fd)
        os.close(f)


def _candidate_frames(tb: Any, candidate: str) -> list[str]:
    """Traceback lines inside the candidate file only (the simulator's frames are noise to an author)."""
    lines = []
    for fs in traceback.extract_tb(tb):
        if os.path.abspath(fs.filename) == candidate:
            lines.append(f"candidate.py:{fs.lineno} in {fs.name}: {fs.line}")
    return lines[-5:]


def _error(kind: str, exc: BaseException, candidate: str) -> dict[str, Any]:
    d: dict[str, Any] = {"status": kind, "error_type": type(exc).__name__, "message": str(exc)[:2000],
                         "frames": _candidate_frames(exc.__traceback__, candidate)}
    for key in ("rule", "instruction", "operand", "location"):
        v = getattr(exc, key, None)
        if v is not None:
            d[key] = str(v)
    return d


def _load_candidate(path: str, kernel: str) -> Any:
    import importlib.util

    sys.dont_write_bytecode = True  # (a job directory is used once: caching its bytecode is wasted work)
    spec = importlib.util.spec_from_file_location("candidate", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["candidate"] = mod
    spec.loader.exec_module(mod)
    fn = getattr(mod, kernel, None)
    if fn is None:
        raise AttributeError(f"the candidate defines no `{kernel}` (the task's kernel entry point)")
    return fn


@dataclass(frozen=True)
class KernelEntry:
    """How to launch the candidate's kernel: the function ``run_kernel`` calls, its LNC degree, its SPMD grid,
    and what its front end changes in the simulator's options."""

    fn: Any
    lnc: int = 1
    grid: tuple[int, ...] = ()
    options: dict[str, Any] = field(default_factory=dict)


def _kernel_entry(path: str, kernel: str) -> KernelEntry:
    """The candidate's kernel as it is launched. An ``@nki.jit`` Kernel of the current API wraps the function
    (and its LNC degree); a Beta-1 (``neuronxcc.nki``) kernel is launched as its front end launches it: its
    arguments become Beta-1 tensors, its grid is the SPMD grid, and on-chip capacity is judged as a warning
    (Beta 1's compiler freed tiles after their last use; ours live until Python drops them)."""
    from nkieval.frontends.beta1.launch import Kernel as Beta1Kernel
    from nkieval.frontends.beta1.launch import _Entry as Beta1Entry

    obj = _load_candidate(path, kernel)
    if isinstance(obj, Beta1Kernel):
        return KernelEntry(Beta1Entry(obj.fn), 1, tuple(obj.grid), {"capacity_check": "warn"})
    lnc = int(getattr(obj, "lnc", 1) or 1)
    fn = getattr(obj, "fn", obj)
    if not callable(fn) or not hasattr(fn, "__code__"):
        raise TypeError(f"`{kernel}` is not a function")
    return KernelEntry(fn, lnc)


class _Capture:
    """Calls the kernel and keeps its raw return value, so the child can check where outputs live."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        self.__code__ = fn.__code__  # run_kernel names arguments from the kernel's own parameters
        self.__qualname__ = getattr(fn, "__qualname__", "kernel")
        self.__name__ = getattr(fn, "__name__", "kernel")
        self.raw: Any = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.raw = self.fn(*args, **kwargs)
        return self.raw


def _check_outputs(raw: Any, n_outputs: int, args: list[Any]) -> str | None:
    """Outputs must be HBM tensors the kernel allocated and wrote (not host arrays, not an input)."""
    from nkieval.sim.tensor import NkiTensor

    vals = list(raw) if isinstance(raw, tuple | list) else [raw]
    if raw is None:
        return "the kernel returned None: outputs must be returned as shared-HBM tensors"
    if len(vals) != n_outputs:
        return f"the kernel returned {len(vals)} value(s); the task expects {n_outputs} output(s)"
    for i, v in enumerate(vals):
        if not isinstance(v, NkiTensor):
            return (f"output {i} is a {type(v).__module__}.{type(v).__name__}, not an HBM tensor written by the "
                    "kernel: outputs computed outside NKI instructions are not accepted")
        if v.alloc.buffer.kind != "hbm":
            return f"output {i} lives in {v.alloc.buffer.kind}, not HBM"
        if v.alloc.is_kernel_arg:
            return f"output {i} is one of the kernel's inputs (in-place aliasing is not what the task asks)"
    return None


def _unwritten_masks(trace: Any, raw: Any) -> dict[str, Any] | None:
    """Per output, a bool mask of elements no instruction wrote (only outputs with such elements).

    Read off the trace's HBM write accesses (byte offset and element pattern of each DMA
    destination), so the harness can tell "never written" from "computed NaN" (e.g. exp
    overflow) although both read back as NaN. None if a write's geometry cannot be replayed.
    Writes are grouped by output and pattern: one index computation per group (a kernel that
    writes one element per instruction issues thousands of writes of the same pattern), and
    a strided view of the mask for a group of one.
    """
    import numpy as np
    from numpy.lib.stride_tricks import as_strided

    vals = list(raw) if isinstance(raw, tuple | list) else [raw]
    ids = {v.alloc.id: i for i, v in enumerate(vals)}
    written = [np.zeros(v.alloc.storage.size, dtype=bool) for v in vals]
    isz = [v.alloc.storage.dtype.itemsize for v in vals]
    groups: dict[tuple[int, tuple[tuple[int, int], ...]], list[int]] = {}
    for rec in trace.records:
        for o in rec.operands:
            i = ids.get(o.alloc)  # (most operands are on-chip tiles: one lookup turns them away)
            if i is None or o.buffer != "hbm" or "w" not in o.mode:
                continue
            if o.addr_lo % isz[i]:
                return None
            key = (i, o.pattern)
            try:
                starts = groups.get(key)
            except TypeError:  # a pattern of lists (not what the simulator records, but replayable)
                key = (i, tuple(tuple(p) for p in o.pattern))
                starts = groups.get(key)
            if starts is None:
                starts = groups[key] = []
            starts.append(o.addr_lo // isz[i])
    for (i, pattern), starts in groups.items():
        if any(stride < 0 for stride, _ in pattern):
            return None
        if any(n <= 0 for _, n in pattern):
            continue  # writes nothing
        w = written[i]
        last = sum(stride * (n - 1) for stride, n in pattern)
        if min(starts) < 0 or max(starts) + last >= w.size:
            return None
        counts = tuple(n for _, n in pattern)
        strides = tuple(stride for stride, _ in pattern)
        if len(starts) <= 4 or not counts:
            for start in starts:
                if counts:
                    as_strided(w[start:], shape=counts, strides=strides, writeable=True)[...] = True
                else:
                    w[start] = True
            continue
        offs = np.zeros(1, dtype=np.int64)
        for stride, n in pattern:
            offs = (offs[:, None] + stride * np.arange(n, dtype=np.int64)[None, :]).reshape(-1)
        st = np.asarray(starts, dtype=np.int64)
        step = max(1, (1 << 22) // offs.size)  # at most ~4M indices at a time
        for j in range(0, st.size, step):
            w[(st[j:j + step, None] + offs[None, :]).reshape(-1)] = True
    return {f"unwritten{i}": ~w.reshape(vals[i].alloc.storage.shape) for i, w in enumerate(written) if not w.all()}


def _open_notify(job: Path) -> int | None:
    """The write end of the parent's wake-up FIFO (None if there is none: the parent then polls)."""
    try:
        return os.open(job / "notify", os.O_WRONLY | os.O_NONBLOCK)
    except OSError:
        return None


def _notify(fd: int | None, what: str) -> None:
    """Tell the parent which file just appeared: ``s<k>`` (started_k), ``r<k>`` (res_k)."""
    if fd is not None:
        try:
            os.write(fd, f"{what}\n".encode())
        except OSError:  # full (the parent is behind: it will look anyway) or gone
            pass


#: The child's collector thresholds: a simulation makes objects by the hundred thousand (trace records, views),
#: few of them garbage cycles; with the default (700, 10, 10) collections walk them again and again.
GC_THRESHOLDS = (20_000, 50, 50)


def run_cases(job_dir: str, case_ids: list[int]) -> None:
    """Entry point in the sandboxed process."""
    import gc

    t_entry = time.perf_counter()
    gc.set_threshold(*GC_THRESHOLDS)
    job = Path(job_dir)
    spec = json.loads((job / "job.json").read_text())
    os.chdir(job)
    _redirect_output(job)
    _limit_resources(spec["memory_mb"], spec["cpu_s"])
    note = _open_notify(job)
    candidate = str((job / spec["candidate"]).resolve())

    def fail_all(kind: str, e: BaseException) -> None:
        for k in case_ids:
            _atomic_write(job / f"res_{k}.json", json.dumps(_error(kind, e, candidate)).encode())
            _notify(note, f"r{k}")

    try:
        from nkieval import frontends
        from nkieval.review import npzio
        from nkieval.sim.errors import NkiValidationError
        from nkieval.sim.options import SimOptions
        from nkieval.sim.runner import run_kernel

        frontends.install(force=True)
        import numpy as np
    except BaseException as e:  # infrastructure: the harness's own imports failed
        fail_all("infra-error", e)
        return
    try:
        entry = _kernel_entry(candidate, spec["kernel"])
    except MemoryError as e:
        fail_all("memory-limit", e)
        return
    except BaseException as e:
        fail_all("import-error", e)
        return

    setup_s: float | None = time.perf_counter() - t_entry
    for k in case_ids:
        case = spec["cases"][k]
        if k == case_ids[0]:  # the parent times each later case from the previous one's result
            _atomic_write(job / f"started_{k}", b"")
            _notify(note, f"s{k}")
        t0 = time.perf_counter()
        t_loaded = t_sim = None
        try:
            arrays = npzio.load(job / case["inputs"], mapped=True)
            args = [arrays[name] for name in case["input_names"]]
            # the simulator stops a runaway kernel at the limit (rule instruction-budget) instead of
            # letting it run to the wall-clock timeout
            opts = SimOptions.from_env(max_instructions=int(spec["max_instructions"]), **entry.options)
            cap = _Capture(entry.fn)
            t_loaded = time.perf_counter()
            result = run_kernel(cap, args, dict(case["params"]), target=spec["target"], lnc=entry.lnc,
                                grid=entry.grid, options=opts)
            raw = cap.raw
            t_sim = time.perf_counter()
            sim_s = t_sim - t_loaded
            problem = _check_outputs(raw, case["n_outputs"], args)
            if problem is not None:
                res: dict[str, Any] = {"status": "bad-output", "message": problem, "sim_s": sim_s}
            elif len(result.trace) > spec["max_instructions"]:
                res = {"status": "instruction-limit", "sim_s": sim_s,
                       "message": f"{len(result.trace)} instructions exceed the task's limit of "
                                  f"{spec['max_instructions']}"}
            else:
                outs = result.outputs if isinstance(result.outputs, tuple | list) else [result.outputs]
                masks = _unwritten_masks(result.trace, raw)
                arrs = {f"out{i}": np.asarray(o) for i, o in enumerate(outs)}
                arrs.update(masks or {})
                if "outputs" in case:  # a file kept from run to run: overwritten in place
                    npzio.dump(job / case["outputs"], arrs, in_place=True)
                else:
                    npzio.dump(job / f"out_{k}.arr", arrs)
                if case["want_trace"]:
                    _atomic_write(job / f"trace_{k}.json", result.trace.to_compact().encode())
                res = {"status": "ok", "sim_s": sim_s, "n_instructions": len(result.trace),
                       "written_checked": masks is not None,
                       "warnings": result.trace.warnings[:50]}
        except NkiValidationError as e:
            res = _error("instruction-limit" if e.rule == "instruction-budget" else "rule-violation", e, candidate)
        except MemoryError as e:
            res = _error("memory-limit", e, candidate)
        except RecursionError as e:
            res = _error("exception", e, candidate)
        except BaseException as e:  # SystemExit, KeyboardInterrupt and anything else the candidate raises
            res = _error("exception", e, candidate)
        t_end = time.perf_counter()
        if t_loaded is None:  # failed while reading the inputs
            t_loaded = t_end
        if t_sim is None:  # the kernel raised: it simulated until then
            t_sim = t_end
        res.setdefault("sim_s", t_sim - t_loaded)
        res["load_s"] = t_loaded - t0
        res["post_s"] = t_end - t_sim
        res["wall_s"] = t_end - t0
        if setup_s is not None:
            res["setup_s"] = setup_s
            setup_s = None
        _atomic_write(job / f"res_{k}.json", json.dumps(res, default=str).encode())
        _notify(note, f"r{k}")


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    run_cases(args[0], [int(a) for a in args[1:]])


if __name__ == "__main__":  # pragma: no cover - exercised through the subprocess isolation mode
    main()
