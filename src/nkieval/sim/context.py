"""The running simulation: target, options, memories, trace, program id, engine state.

One ``SimContext`` per program (LNC core or SPMD instance), kept thread-locally so that
LNC-2 programs can run as two threads. Programs of one launch share a ``Launch``: the trace,
the id counter and shared HBM.
"""

from __future__ import annotations

import os
import sys
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nkieval.hardware import Target
from nkieval.sim.errors import NkiSimulatorWarning, NkiValidationError
from nkieval.sim.memory import IdCounter, OnChipAllocator
from nkieval.sim.options import SimOptions
from nkieval.sim.trace import AllocationRecord, Trace
from nkieval.sim.turns import Turns

_LOCAL = threading.local()

#: How many kernels are being recorded as programs now (nkieval.sim.program): the hooks that only a
#: recording needs look at this first, so an eager run pays one list read for them.
RECORDING = [0]


class ForcedFrame:
    """The kernel source line a replayed instruction came from (a program carries it; no Python frame has it)."""

    __slots__ = ("f_code", "f_lineno")

    def __init__(self, file: str | None, line: int | None, function: str | None) -> None:
        self.f_code = _Code(file or "", function or "")
        self.f_lineno = line


class _Code:
    __slots__ = ("co_filename", "co_name")

    def __init__(self, file: str, name: str) -> None:
        self.co_filename = file
        self.co_name = name


def kernel_recorder() -> Any:
    """The recorder of this thread's program when the kernel's own code (not an instruction it called) is
    running under a recording; None otherwise (``nkieval.sim.program``)."""
    if not RECORDING[0]:
        return None
    ctx = getattr(_LOCAL, "ctx", None)
    rec = ctx.recorder if ctx is not None else None
    return rec if rec is not None and not rec.depth else None


def force_location(frame: ForcedFrame | None) -> ForcedFrame | None:
    """Make ``frame`` the kernel line of this thread's simulator calls (``None`` restores frame walking)."""
    prev = _LOCAL.__dict__.get("forced")
    _LOCAL.forced = frame
    return prev

# Frames from these directories are the simulator itself, not kernel source.
_SIM_DIRS = tuple(
    os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), d) + os.sep
    for d in ("sim", "frontends", "hardware")
)


def user_frame(depth: int = 2):
    """The innermost frame outside the simulator: the kernel line that issued the call."""
    # (the thread's own dict: getattr with a default pays for an AttributeError whenever nothing is forced)
    forced = _LOCAL.__dict__.get("forced")
    if forced is not None:
        return forced
    f = sys._getframe(depth)
    inside = _SIM_MODULES
    while f is not None:
        # (a frame's module is told by its globals' file, not its code: reading ``f_code`` is an audit event, and
        # the sandboxed tracer's audit hook would run a few times for every instruction recorded)
        file = f.f_globals.get("__file__")
        sim = inside.get(file) if type(file) is str else None
        if sim is None:
            sim = _classify_file(file)
        if not sim:
            return f
        f = f.f_back
    return f


def _classify_file(file: Any) -> bool:
    """Whether a module's ``__file__`` is the simulator's, remembered for the next walks."""
    if type(file) is not str:  # (no file, or a module that set something else)
        file = None
    inside = _SIM_MODULES
    if len(inside) > 4096:  # kernels loaded afresh (a judge's many candidates) add new files
        inside.clear()
    sim = inside[file] = file is not None and file.startswith(_SIM_DIRS)
    return sim


# a module's file -> whether it is the simulator's (every instruction and allocation walks up to the kernel line)
_SIM_MODULES: dict[Any, bool] = {}


def user_location() -> tuple[str | None, int | None, str | None]:
    f = user_frame(3)
    if f is None:
        return None, None, None
    loc = frame_location(f)
    if not loc[0]:
        return None, None, None
    return loc


def frame_location(f: Any) -> tuple[str, int, str]:
    """``(file, line, function)`` of a kernel frame (or of a :class:`ForcedFrame`)."""
    return frame_code_location(f)[1]


def frame_code_location(f: Any) -> tuple[Any, tuple[str, int, str]]:
    """A kernel frame's code object and its ``(file, line, function)`` (:func:`frame_location`): the code is read
    once here (each read of ``f_code`` is an audit event in the sandboxed tracer), for a caller that needs it too.

    A frame's line is remembered per (code, last instruction): CPython 3.11 works ``f_lineno`` out by scanning
    the code's line table from its start on every read, several microseconds deep in a long kernel function,
    and the kernel line is read for every instruction and every allocation. The few code objects met last are
    found by identity (``_RECENT``), the others by their id (``_LINES``; ``id()`` is an audit event too); each
    entry holds its code object, so its id cannot be reused while it is remembered."""
    code = f.f_code
    if type(f) is not _FRAME_TYPE:  # a ForcedFrame: its line is an attribute
        return code, (code.co_filename, f.f_lineno, code.co_name)
    lasti = f.f_lasti
    for entry in _RECENT:
        if entry[0] is code:
            lines = entry[1]
            break
    else:
        entry = _LINES.get(id(code))
        if entry is None or entry[0] is not code:
            if len(_LINES) >= _CODES_MAX:
                _LINES.clear()
            entry = _LINES[id(code)] = (code, {})
        _RECENT.insert(0, entry)
        del _RECENT[_RECENT_MAX:]
        lines = entry[1]
    loc = lines.get(lasti)
    if loc is None:
        if len(lines) >= _LINES_MAX:
            lines.clear()
        loc = lines[lasti] = (code.co_filename, f.f_lineno, code.co_name)
    return code, loc


_FRAME_TYPE = type(sys._getframe())
# id of a code object -> (the code object, {last instruction: its (file, line, function)}): frame_code_location
_LINES: dict[int, tuple[Any, dict[int, tuple[str, int, str]]]] = {}
_CODES_MAX = 1 << 12
_LINES_MAX = 1 << 15
# the entries of ``_LINES`` met last, most recent first
_RECENT: list[tuple[Any, dict[int, tuple[str, int, str]]]] = []
_RECENT_MAX = 4


def location_str(depth: int = 2) -> str | None:
    """``file.py:LINE`` of the kernel line that issued the call (every allocation records its site); ``depth``:
    the first frame that may be the kernel's (2: the caller's caller; a caller that knows more of the simulator's
    frames above it skips them)."""
    f = user_frame(depth)
    if f is None:
        return None
    loc = frame_location(f)
    site = _SITES.get(loc)
    if site is None:
        file = loc[0]
        if not file:
            return None
        if len(_SITES) >= _LINES_MAX:
            _SITES.clear()
        site = _SITES[loc] = f"{os.path.basename(file)}:{loc[1]}"
    return site


_SITES: dict[tuple[str, int, str], str] = {}  # a kernel line's (file, line, function) -> "file.py:LINE"


@dataclass
class Launch:
    """State shared by all programs of one kernel launch."""

    target: Target
    options: SimOptions
    trace: Trace
    ids: IdCounter = field(default_factory=IdCounter)
    num_programs: int = 1
    grid: tuple[int, ...] = ()
    # which program runs now, when the programs run as threads (nkieval.sim.turns: one at a time, so a run is
    # the same sequence of steps whatever the thread timing); None when they run one after another (no LNC-2
    # pair and no concurrent grid: sendrecv, core_barrier and all_reduce have no peer to wait for)
    turns: Turns | None = None
    # an LNC-2 pair's accesses to shared memory since it last synchronised (nkieval.sim.races.RaceMarks); None
    # otherwise
    races: Any = None
    mailboxes: dict[Any, Any] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    # LNC-2 pair state for sendrecv / core_barrier (nkieval.sim.isa.collectives)
    finished: set[int] = field(default_factory=set)  # programs that returned or raised
    cond: threading.Condition = field(default_factory=threading.Condition)
    barrier_count: int = 0
    barrier_gen: int = 0
    shared_allocs: list[Any] = field(default_factory=list)
    n_instructions: int = 0  # issued so far (SimOptions.max_instructions)
    deadline: float | None = None  # time.perf_counter() past which the run stops (SimOptions.time_limit_s)
    hbm_bytes: int = 0  # bytes of the HBM tensors the run made (SimOptions.max_bytes)
    # run on the trace when every program has returned, before the capacity check: a front end's lowering
    # that needs the whole run (nkieval.frontends.beta1.elide)
    after_run: list[Callable[[Trace], Any]] = field(default_factory=list)


class SimContext:
    """Per-program simulation state."""

    def __init__(self, launch: Launch, program_id: int = 0, grid_index: tuple[int, ...] = (0,)) -> None:
        self.launch = launch
        self.target = launch.target
        self.options = launch.options
        self.trace = launch.trace
        self.program_id = program_id
        self.grid_index = grid_index
        t = launch.target
        defer = launch.options.record_trace  # capacity is then judged by live range after the run
        self.sbuf = OnChipAllocator("sbuf", t.sbuf_bytes_per_partition, t.sbuf_alloc_alignment_bytes,
                                    launch.options.capacity_check, self._on_alloc_event, defer=defer,
                                    partitions=t.partitions, bank_bytes=t.psum_bank_bytes)
        self.psum = OnChipAllocator("psum", t.psum_bytes_per_partition, t.psum_alloc_granularity_bytes,
                                    launch.options.capacity_check, self._on_alloc_event, defer=defer,
                                    partitions=t.partitions, bank_bytes=t.psum_bank_bytes)
        self.shared_count = 0
        self.dry = not launch.options.compute_values  # a record-only run (SimOptions.compute_values)
        # ids of this program's live tiles whose sentinel fill is deferred (nkieval.sim.tensor.fill_deferred):
        # while any lives, each instruction fills those among its operands first
        self.unfilled: set[int] = set()
        self.recorder: Any = None  # a nkieval.sim.program Recorder while the kernel is being recorded
        self.loc: tuple[str | None, int | None, str | None] = (None, None, None)
        self.loops: list[list[Any]] = []
        self._loops_tuple: tuple[tuple[str, int, int], ...] = ()
        # Engine accumulator registers (fp32 per partition) and PRNG state.
        self.scalar_acc = np.zeros(t.partitions, dtype=np.float32)
        self.vector_acc = np.zeros(t.partitions, dtype=np.float32)
        self.rng = np.random.default_rng(0)

    # -- allocation bookkeeping -------------------------------------------------
    def _on_alloc_event(self, kind: str, rec: AllocationRecord) -> None:
        """An on-chip tile's block was allocated (``rec``, the allocator's record of it, becomes the trace's) or
        released (its record gets the free's place in the trace)."""
        tr = self.trace
        if kind == "alloc":
            with tr._lock:
                rec.alloc_seq = len(tr.records)  # (Trace.next_seq)
                tr.allocations[rec.id] = rec
                if self.sbuf.peak_bytes > tr.peak_sbuf_bytes:
                    tr.peak_sbuf_bytes = self.sbuf.peak_bytes
                if self.psum.peak_bytes > tr.peak_psum_bytes:
                    tr.peak_psum_bytes = self.psum.peak_bytes
        else:
            aid = rec.id
            if self.unfilled:
                self.unfilled.discard(aid)
            if rec.free_seq is None:  # (a tile refused for capacity is released before it is published: unread)
                rec.free_seq = len(tr.records)  # (Trace.next_seq)
            if self.recorder is not None:
                self.recorder.free(aid)

    # -- loops ------------------------------------------------------------------
    def push_loop(self, kind: str, trip: int) -> list[Any]:
        frame = [kind, 0, trip]
        self.loops.append(frame)
        return frame

    def set_loop_index(self, frame: list[Any], i: int) -> None:
        frame[1] = i
        self._loops_tuple = tuple((k, j, n) for k, j, n in self.loops)

    def pop_loop(self, frame: list[Any]) -> None:
        if frame in self.loops:
            self.loops.remove(frame)
        self._loops_tuple = tuple((k, j, n) for k, j, n in self.loops)

    @property
    def loop_context(self) -> tuple[tuple[str, int, int], ...]:
        return self._loops_tuple

    # -- warnings ---------------------------------------------------------------
    def warn(self, message: str, *, rule: str, instruction: str | None = None) -> None:
        loc = location_str()
        w = NkiSimulatorWarning(message, rule=rule, instruction=instruction, location=loc)
        self.trace.warnings.append({"rule": rule, "instruction": instruction, "location": loc,
                                    "message": str(w), "program": self.program_id})
        if self.options.emit_warnings:
            warnings.warn(w, stacklevel=4)


def current() -> SimContext:
    ctx = getattr(_LOCAL, "ctx", None)
    if ctx is None:
        raise NkiValidationError(
            "NKI instructions can only run inside a kernel launched through nki.simulate / "
            "@nki.jit (with nkieval's simulator) or nkieval.sim.run_kernel",
            rule="kernel")
    return ctx


def maybe_current() -> SimContext | None:
    return getattr(_LOCAL, "ctx", None)


def dry_run() -> bool:
    """Whether this thread runs a record-only simulation (``SimOptions.compute_values`` False): element values
    are neither computed nor stored."""
    ctx = getattr(_LOCAL, "ctx", None)
    return ctx is not None and ctx.dry


def set_current(ctx: SimContext | None) -> SimContext | None:
    prev = getattr(_LOCAL, "ctx", None)
    _LOCAL.ctx = ctx
    return prev
