"""Synthetic traces whose schedules are pinned bit for bit (test_schedule_regression.py).

Each builder exercises a different part of the scheduler: DMA queues and the engine pool, rotating
buffers, Trn1 shared ports, PSUM accumulation, hwdge/swdge issue, mixed HBM row pitches, partial
overlaps, dead entries and compaction of the byte-range tables, two cores.
"""

from __future__ import annotations

import hashlib
import random

from perf_helpers import TraceBuilder

from nkieval.perf.schedule import Schedule
from nkieval.sim.trace import Trace


def pipeline(target: str, n_iters: int, slots: int = 0) -> Trace:
    """load -> activation -> vector -> store per iteration (the perf_speed.py shape, smaller); ``slots`` > 0
    places the tiles in that many fixed buffers (physical reuse), else every tile gets fresh addresses."""
    b = TraceBuilder(target)
    src = b.alloc("hbm", (128, 512 * 8))
    out = b.alloc("hbm", (128, 512 * 8))
    for i in range(n_iters):
        at = (i % slots) * 2048 if slots else None
        t = b.alloc("sbuf", (128, 512), site="p.py:1", address=at)
        u = b.alloc("sbuf", (128, 512), site="p.py:2", address=None if at is None else 65536 + at)
        c = (i % 8) * 512
        b.rec("dma_copy", "dma", [b.op(t, "dst", "w"), b.op(src, "src", "r", cols=(c, c + 512))], line=1)
        b.rec("activation", "scalar", [b.op(u, "dst", "w"), b.op(t, "data", "r")], line=2, op="exp")
        b.rec("tensor_scalar", "vector", [b.op(u, "dst", "w"), b.op(u, "data", "r")], line=3, op0="multiply")
        b.rec("dma_copy", "dma", [b.op(out, "dst", "w", cols=(c, c + 512)), b.op(u, "src", "r")], line=4)
        t.free_seq = u.free_seq = len(b.trace.records)
    return b.trace


def matmul(target: str) -> Trace:
    """Tiled matmul: HBM tiles, PSUM accumulation over K, Vector/Scalar evictions, Gpsimd memsets, stores."""
    b = TraceBuilder(target)
    lhs = b.alloc("hbm", (512, 256), "bfloat16")  # [K, M]
    rhs = b.alloc("hbm", (512, 1024), "bfloat16")  # [K, N]
    out = b.alloc("hbm", (256, 1024), "float32")
    for m in range(2):
        for n in range(2):
            ps = b.alloc("psum", (128, 512), "float32", site="mm.py:5")
            for k in range(4):
                lt = b.alloc("sbuf", (128, 128), "bfloat16", site="mm.py:1")
                rt = b.alloc("sbuf", (128, 512), "bfloat16", site="mm.py:2")
                b.rec("dma_copy", "dma", [b.op(lt, "dst", "w"),
                                          b.op(lhs, "src", "r", rows=(k * 128, k * 128 + 128),
                                               cols=(m * 128, m * 128 + 128))], line=1)
                b.rec("dma_copy", "dma", [b.op(rt, "dst", "w"),
                                          b.op(rhs, "src", "r", rows=(k * 128, k * 128 + 128),
                                               cols=(n * 512, n * 512 + 512))], line=2)
                b.rec("nc_matmul", "tensor", [b.op(ps, "dst", "w" if k == 0 else "rw"), b.op(lt, "stationary", "r"),
                                              b.op(rt, "moving", "r")], line=3, M=128, N=512)
                lt.free_seq = rt.free_seq = len(b.trace.records)
            res = b.alloc("sbuf", (128, 512), "float32", site="mm.py:6")
            b.rec("memset", "gpsimd", [b.op(res, "dst", "w")], line=7, value=0.0)
            b.rec("tensor_tensor", "vector", [b.op(res, "dst", "w"), b.op(ps, "data0", "r"), b.op(res, "data1", "r")],
                  line=8, op="add")
            b.rec("activation", "scalar", [b.op(res, "dst", "w", cols=(0, 256)), b.op(ps, "data", "r", cols=(0, 256))],
                  line=9, op="copy")
            b.rec("dma_copy", "dma", [b.op(out, "dst", "w", rows=(m * 128, m * 128 + 128),
                                             cols=(n * 512, n * 512 + 512)), b.op(res, "src", "r")], line=10,
                  dge_mode=2)
            ps.free_seq = res.free_seq = len(b.trace.records)
    return b.trace


def overlaps(target: str, seed: int, n: int = 400, two_cores: bool = False) -> Trace:
    """Random partial reads/writes of a few large tiles and HBM tensors (mixed row pitches, single rows)."""
    rng = random.Random(seed)
    b = TraceBuilder(target)
    hbm = [b.alloc("hbm", (64, 1024), "float32"), b.alloc("hbm", (256, 256), "bfloat16")]
    # the two SBUF tiles alias in physical mode (the second starts inside the first)
    sb = [b.alloc("sbuf", (128, 2048), "float32", address=0), b.alloc("sbuf", (128, 4096), "bfloat16", address=4096)]
    ps = b.alloc("psum", (128, 2048), "float32")
    engines = ("vector", "scalar", "gpsimd", "tensor", "sync")

    def span(size: int) -> tuple[int, int]:
        w = rng.choice((1, 2, 8, 32, 64, 128, 256, 512, size))
        w = min(w, size)
        s = rng.randrange(0, size - w + 1)
        if rng.random() < 0.5:
            s -= s % w
        return s, s + w

    def onchip(mode: str):
        a = rng.choice((*sb, ps))
        return b.op(a, "dst" if "w" in mode else "data", mode, rows=span(128), cols=span(a.shape[1]))

    for i in range(n):
        kind = rng.random()
        if kind < 0.3:  # DMA between HBM and SBUF, either way
            h = rng.choice(hbm)
            hop = b.op(h, "src", "r", rows=span(h.shape[0]), cols=span(h.shape[1]))
            t = rng.choice(sb)
            rows = (0, min(128, hop.shape[0]))
            if rng.random() < 0.5:
                ops = [b.op(t, "dst", "w", rows=rows, cols=(0, hop.shape[1])), hop]
            else:
                hop.mode, hop.role = "w", "dst"
                ops = [hop, b.op(t, "src", "r", rows=rows, cols=(0, hop.shape[1]))]
            extra = {"dge_mode": 2} if rng.random() < 0.2 else ({"indirect": True} if rng.random() < 0.1 else {})
            r = b.rec("dma_copy", "dma", ops, line=100 + rng.randrange(6), **extra)
        else:
            eng = rng.choice(engines)
            ops = [onchip(rng.choice(("w", "rw"))), onchip("r")]
            if rng.random() < 0.3:
                ops.append(onchip("r"))
            opc = {"tensor": "nc_matmul", "scalar": "activation", "sync": "memset"}.get(eng, "tensor_tensor")
            r = b.rec(opc, eng, ops, line=200 + i % 7, op="add", M=64, N=ops[0].shape[1])
        if two_cores:
            r.program = i % 2
    if two_cores:
        b.trace.num_programs = 2
    return b.trace


def digest(s: Schedule) -> str:
    """SHA-1 of every per-record output of a schedule (starts, ends, occupancies, waits, reasons, preds, tracks)."""
    h = hashlib.sha1()
    for arr in (s.start, s.end, s.occ, s.wait, s.pred):
        h.update(arr.tobytes())
    h.update("|".join(r or "" for r in s.reason).encode())
    h.update("|".join(s.track).encode())
    h.update(repr(sorted(s.dma_slot.items())).encode())
    h.update(repr(sorted(s.issue_busy.items())).encode())
    return h.hexdigest()


def same_record_overlaps(target: str) -> Trace:
    """Records that add two overlapping entries to one table at once (a fresh tile written and read by the
    same instruction, a write and a read of overlapping slices), then readers and writers of those boxes."""
    b = TraceBuilder(target)
    src = b.alloc("hbm", (128, 512))
    for _ in range(6):
        t = b.alloc("sbuf", (128, 512), site="s.py:1")
        u = b.alloc("sbuf", (128, 512), site="s.py:2")
        b.rec("tensor_tensor", "vector", [b.op(t, "dst", "w"), b.op(t, "data0", "r"), b.op(t, "data1", "r", cols=(0, 256))],
              line=1, op="add")
        b.rec("activation", "scalar", [b.op(u, "dst", "w"), b.op(t, "data", "r")], line=2, op="exp")
        b.rec("dma_copy", "dma", [b.op(t, "dst", "w", cols=(256, 512)), b.op(src, "src", "r", cols=(0, 256))], line=3)
        b.rec("tensor_copy", "gpsimd", [b.op(u, "dst", "w", cols=(0, 256)), b.op(t, "data", "r")], line=4)
        b.rec("tensor_scalar", "vector", [b.op(t, "dst", "w"), b.op(u, "data", "r")], line=5, op0="multiply")
        t.free_seq = u.free_seq = len(b.trace.records)
    return b.trace


def reference_box(o) -> tuple[int, int, int, int, int]:
    """(pitch, r0, r1, c0, c1): rows × byte columns an operand touches (pitch -1: partitions), from the
    operand's own fields: the definition the scheduler's per-class row geometry must reproduce."""
    if o.buffer != "hbm":
        return -1, o.partition_start, o.partition_start + max(1, o.partitions), o.addr_lo, o.addr_hi
    pat = o.pattern
    lo, hi = o.addr_lo, o.addr_hi
    if len(pat) >= 2 and pat[0][1] > 1:
        ne = 1
        for d in o.shape:
            ne *= d
        isz = max(1, o.nbytes // ne) if ne else 1
        pitch = pat[0][0] * isz
        rows = pat[0][1]
        if pitch > 0:
            width = hi - lo - (rows - 1) * pitch
            r0, c0 = divmod(lo, pitch)
            if 0 < width and c0 + width <= pitch:
                return pitch, r0, r0 + rows, c0, c0 + width
    return 0, 0, 1, lo, hi
