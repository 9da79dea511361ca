"""Build small synthetic traces for the performance-model tests."""

from __future__ import annotations

from typing import Any

from nkieval.sim.trace import AllocationRecord, OperandAccess, Trace, TraceRecord

_ISZ = {"float32": 4, "bfloat16": 2, "float16": 2, "float8_e4m3": 1, "int32": 4}


class TraceBuilder:
    """Allocate tiles and append records with realistic OperandAccess fields."""

    def __init__(self, target: str = "trn1") -> None:
        self.trace = Trace(target=target, kernel="synthetic")
        self.next_id = 1
        self.addr = {"sbuf": 0, "psum": 0}

    def alloc(self, buffer: str, shape: tuple[int, ...], dtype: str = "float32", site: str | None = None,
              address: int | None = None) -> AllocationRecord:
        isz = _ISZ[dtype]
        per = isz
        for d in shape[1:]:
            per *= d
        if buffer == "hbm":
            per *= shape[0]
            addr = 0
        else:
            addr = self.addr[buffer] if address is None else address
            if address is None:
                self.addr[buffer] += max(per, 64)
        a = AllocationRecord(self.next_id, buffer, f"t{self.next_id}", shape, dtype, addr, 0, per, site, 0,
                             len(self.trace.records), kernel_arg=buffer == "hbm")
        self.trace.allocations[a.id] = a
        self.next_id += 1
        return a

    def op(self, a: AllocationRecord, role: str, mode: str, rows: tuple[int, int] | None = None,
           cols: tuple[int, int] | None = None, stride: int = 1) -> OperandAccess:
        """Access rows (partitions / HBM rows) and element columns [c0, c1) of a 2-D allocation."""
        isz = _ISZ[a.dtype]
        r0, r1 = rows or (0, a.shape[0])
        width = a.shape[1] if len(a.shape) > 1 else 1
        c0, c1 = cols or (0, width)
        n = (c1 - c0) // stride
        if a.buffer == "hbm":
            lo = (r0 * width + c0) * isz
            hi = lo + ((r1 - r0 - 1) * width + (n - 1) * stride + 1) * isz
            pattern = ((width, r1 - r0), (stride, n))
            return OperandAccess(role, mode, "hbm", a.id, (r1 - r0, n), a.dtype, 0, 0, lo, hi, (r1 - r0) * n * isz,
                                 n * isz if stride == 1 else isz, pattern)
        lo = a.address + c0 * isz
        hi = lo + ((n - 1) * stride + 1) * isz
        return OperandAccess(role, mode, a.buffer, a.id, (r1 - r0, n), a.dtype, r0, r1 - r0, lo, hi,
                             (r1 - r0) * n * isz, n * isz if stride == 1 else isz, ((stride, n),))

    def rec(self, opcode: str, engine: str, operands: list[OperandAccess], line: int | None = None,
            **attrs: Any) -> TraceRecord:
        r = TraceRecord(0, opcode, engine, operands, attrs, 0, (), "k.py", line or len(self.trace.records) + 1,
                        "kernel")
        self.trace.append(r)
        return r


def over_capacity(target: str = "trn1", width: int = 20 * 1024) -> Trace:
    """Three SBUF tiles computed on chip (``width`` fp32 each per partition), then stored in the order made; the
    trace's SBUF peak set as the simulator would (3 x 80 KiB by default: over trn1's usable 176 KiB)."""
    b = TraceBuilder(target)
    hbm = b.alloc("hbm", (128, 3 * width))
    tiles = [b.alloc("sbuf", (128, width)) for _ in range(3)]
    for i, t in enumerate(tiles):
        b.rec("iota", "gpsimd", [b.op(t, "dst", "w")], line=10 + i)  # computed: exists nowhere else
    for i, t in enumerate(tiles):
        b.rec("dma_copy", "dma", [b.op(hbm, "dst", "w", cols=(i * width, (i + 1) * width)), b.op(t, "src", "r")],
              line=20 + i)
    b.trace.peak_sbuf_bytes = 3 * width * 4
    return b.trace
