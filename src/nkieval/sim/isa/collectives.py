"""LNC-2 collectives between the two NeuronCores of a logical core: sendrecv, core_barrier (v3+).

The runner executes an LNC-2 launch as two threads sharing a ``Launch`` (its barrier counters and
``mailboxes``), one at a time (its ``turns``: nkieval.sim.turns). ``sendrecv`` posts the sent tile in a
per-(pipe, from, to) mailbox and waits for its peer's; ``core_barrier`` waits until both cores have arrived.
A waiting core hands the turn to its peer and checks again when the turn comes back. A peer that never
arrives (it finished or failed without arriving, or is itself blocked waiting for something else —
undefined on hardware) ends the wait with a validation error as soon as that is known.
"""

from __future__ import annotations

import queue
from collections.abc import Callable
from typing import Any

import numpy as np

from nkieval.sim.errors import NkiValidationError
from nkieval.sim.isa.core import (
    check_buffer,
    check_partitions,
    free_size,
    instruction,
    mark_written,
    record,
    resolve_engine,
    tensor_arg,
)
from nkieval.sim.isa.enums import dma_engine as DmaEngine

_NOTHING = object()


def _wait_for_peer(ctx: Any, poll: Callable[[], Any], what: str) -> Any:
    """Call ``poll()`` until it returns something other than ``_NOTHING``, handing the turn to the peer core
    between checks (nkieval.sim.turns: one program runs at a time); fail once the peer core finished without
    arriving, or both cores wait with neither getting further (a deadlock)."""
    launch, me = ctx.launch, ctx.program_id
    peer = 1 - me
    first = True
    while True:
        got = poll()
        if got is not _NOTHING:
            return got
        with launch.lock:
            peer_done = peer in launch.finished
        if peer_done:
            e = NkiValidationError(f"core {me} {what}: core {peer} finished the kernel without arriving "
                                   "(divergent control flow between cores)", rule="kernel")
            e.peer_consequence = True  # type: ignore[attr-defined]  # the runner reports the peer's own error
            raise e
        if not first and launch.turns.stuck():
            raise NkiValidationError(f"core {me} {what}: core {peer} is blocked waiting too (mismatched "
                                     "sendrecv / core_barrier calls between cores: a deadlock)", rule="kernel")
        launch.turns.wait(me, progressed=first)
        first = False


def _require_lnc2(ctx: Any, what: str) -> None:
    if ctx.launch.turns is None:
        raise NkiValidationError(f"{what} needs a kernel launched with LNC 2 (kernel[2](...)); this launch has "
                                 f"{ctx.launch.num_programs} program(s) without an LNC-2 pair", rule="kernel")


def _mailbox(ctx: Any, key: tuple[Any, ...]) -> queue.Queue[np.ndarray]:
    with ctx.launch.lock:
        box = ctx.launch.mailboxes.get(key)
        if box is None:
            box = ctx.launch.mailboxes[key] = queue.Queue()
        return box


def _rank(x: Any, role: str) -> int:
    if isinstance(x, bool) or not isinstance(x, int | np.integer) or int(x) not in (0, 1):
        raise NkiValidationError(f"{role} must be 0 or 1 (the two cores of an LNC-2 pair), got {x!r}", operand=role,
                                 rule="argument")
    return int(x)


@instruction("sendrecv", "dma", min_generation=3)
def sendrecv(ctx: Any, src: Any, dst: Any, send_to_rank: Any, recv_from_rank: Any, pipe_id: Any,
             dma_engine: Any = DmaEngine.dma, name: str | None = None) -> None:
    """Send ``src`` to core ``send_to_rank`` while receiving core ``recv_from_rank``'s tile into ``dst``."""
    src = tensor_arg(src, "src")
    dst = tensor_arg(dst, "dst")
    for role, t in (("src", src), ("dst", dst)):
        check_buffer(t, role, ("sbuf",), "sendrecv moves SBUF tiles")
        check_partitions(ctx, t, role)
    if src.dtype != dst.dtype or src.shape != dst.shape:
        raise NkiValidationError(f"src {list(src.shape)} {src.dtype} and dst {list(dst.shape)} {dst.dtype} must have "
                                 "the same shape and dtype", operand="dst", rule="shape-mismatch")
    to, frm = _rank(send_to_rank, "send_to_rank"), _rank(recv_from_rank, "recv_from_rank")
    try:
        eng = DmaEngine(int(getattr(dma_engine, "value", dma_engine)))
    except (TypeError, ValueError, OverflowError):
        raise NkiValidationError(f"dma_engine must be nisa.dma_engine.dma or .gpsimd_dma, got {dma_engine!r}",
                                 operand="dma_engine", rule="argument") from None
    if eng == DmaEngine.gpsimd_dma and free_size(src) > ctx.target.sendrecv_gpsimd_dma_max_elems:
        lim = ctx.target.sendrecv_gpsimd_dma_max_elems
        raise NkiValidationError(f"gpsimd_dma moves at most {lim * src.dtype.itemsize} bytes per partition for "
                                 f"{src.dtype}; src has {free_size(src) * src.dtype.itemsize}", operand="src",
                                 rule="instruction-limit")
    _require_lnc2(ctx, "sendrecv")
    try:
        pipe = int(pipe_id)
    except (TypeError, ValueError):
        raise NkiValidationError(f"pipe_id must be an int, got {pipe_id!r}", operand="pipe_id",
                                 rule="argument") from None
    me = ctx.program_id
    _mailbox(ctx, (pipe, me, to)).put(np.array(src.data, copy=True))
    box = _mailbox(ctx, (pipe, frm, me))

    def take() -> Any:
        try:
            return box.get_nowait()
        except queue.Empty:
            return _NOTHING

    got = _wait_for_peer(ctx, take, f"waited on pipe {pipe} for a tile from core {frm} that never sent one")
    if got.shape != dst.shape or got.dtype != dst.data.dtype:
        raise NkiValidationError(f"core {frm} sent {list(got.shape)} {got.dtype} but dst is {list(dst.shape)} "
                                 f"{dst.dtype}", operand="dst", rule="shape-mismatch")
    dst.data[...] = got
    mark_written(dst, matmul=False)
    if ctx.launch.races is not None:
        ctx.launch.races.synchronised()  # (the peer's stores before its send are ordered before this core's next)
    record(ctx, "sendrecv", "gpsimd" if eng == DmaEngine.gpsimd_dma else "dma",
           [(dst, "dst", "w"), (src, "src", "r")], send_to=to, recv_from=frm, pipe_id=pipe,
           dma_engine=eng.name)


@instruction("core_barrier", "gpsimd", min_generation=3)
def core_barrier(ctx: Any, data: Any, cores: Any, engine: Any = None, name: str | None = None) -> None:
    """Block until both cores of the LNC-2 pair reach the barrier (``data`` is the tensor guarded).

    The documentation (``nki.isa.core_barrier`` since NKI 0.3, ``nki.lnc.core_barrier``) describes ``data`` as
    shared HBM and ``cores=(0, 1)``; AWS's own NKI Library also passes SBUF tiles as the token, and
    ``cores=(0)`` / ``(0,)`` when a kernel runs unsharded. Both are accepted: any tensor is the token, and a
    barrier of one core waits for nobody."""
    data = tensor_arg(data, "data")
    try:
        cs = tuple(int(c) for c in cores) if isinstance(cores, tuple | list) else (int(cores),)
    except (TypeError, ValueError):
        cs = ()
    if cs not in ((0, 1), (0,)):
        raise NkiValidationError(f"cores must be (0, 1) (or (0,): one core), got {cores!r}", operand="cores",
                                 rule="argument")
    eng = resolve_engine(engine, "gpsimd", ("gpsimd", "vector", "scalar", "tensor", "sync"), "core_barrier")
    if cs == (0,):
        record(ctx, "core_barrier", eng, [(data, "data", "r")], cores=list(cs))
        return
    _require_lnc2(ctx, "core_barrier")
    launch = ctx.launch
    with launch.cond:
        gen = launch.barrier_gen
        launch.barrier_count += 1
        if launch.barrier_count == 2:
            launch.barrier_count = 0
            launch.barrier_gen += 1
            if launch.races is not None:
                launch.races.synchronised()

    def passed() -> Any:
        with launch.cond:
            return True if launch.barrier_gen != gen else _NOTHING

    _wait_for_peer(ctx, passed, "waited at core_barrier for its peer")
    record(ctx, "core_barrier", eng, [(data, "data", "r")], cores=list(cs))
