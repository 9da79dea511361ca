"""``nvcuda::wmma``: warp-level matrix fragments (one matrix per warp; the warp's threads act together).

A tensor core's fp32 accumulation order is not specified by NVIDIA: ``mma_sync`` here forms the exact
products and sums them in fp64, rounding once to fp32 (within the hardware's error, not bitwise)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from nkieval.cuda.arith import cast
from nkieval.cuda.values import F32, F64, ArrRef, CudaError, Frag, Ptr, Unsupported

if TYPE_CHECKING:
    from nkieval.cuda.interp import Frame, Interpreter

Mask = np.ndarray | None


def _warp_lanes(fr: Frame) -> np.ndarray:
    L = fr.L
    nw = (L.nt + 31) // 32
    w = np.arange(L.nb * nw)
    return (w // nw) * L.nt + (w % nw) * 32  # the first thread of each warp


def _base(fr: Frame, p: Any, line: int) -> tuple[Ptr, np.ndarray]:
    from nkieval.cuda.interp import decay

    if isinstance(p, ArrRef):
        p = decay(p)
    if not isinstance(p, Ptr) or p.buf is None:
        raise CudaError("wmma: expected a pointer", line)
    off = np.broadcast_to(np.asarray(p.off, np.int64), (fr.L.T,))
    return p, off[_warp_lanes(fr)]


def _index(rows: int, cols: int, ld: int, col_major: bool) -> np.ndarray:
    i, j = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    return (i + j * ld) if col_major else (i * ld + j)


def call(it: Interpreter, name: str, args: list[Any], line: int) -> Callable[[Frame, Mask], Any]:
    def run(fr: Frame, m: Mask) -> Any:
        a = [f(fr, m) for f in args]
        if name == "fill_fragment":
            fr_ = a[0]
            v = np.asarray(a[1])
            fr_.data[...] = (v if v.ndim == 0 else v[_warp_lanes(fr)][:, None, None]).astype(fr_.data.dtype)
            return np.int32(0)
        if name == "load_matrix_sync":
            frag: Frag = a[0]
            p, base = _base(fr, a[1], line)
            ld = int(a[2])
            t = frag.ftype
            col = (t.layout == "col_major") if t.use != "accumulator" else int(a[3]) == 1
            idx = base[:, None, None] + _index(t.rows, t.cols, ld, col)[None]
            data = p.buf.data  # type: ignore[union-attr]
            if idx.size and (idx.min() < 0 or idx.max() >= data.size):
                raise CudaError("wmma::load_matrix_sync reads out of bounds", line)
            frag.data = cast(data[idx], frag.data.dtype)
            return np.int32(0)
        if name == "mma_sync":
            d, fa, fb, fc = a
            prod = np.matmul(fa.data.astype(F64), fb.data.astype(F64))
            d.data = (prod + fc.data.astype(F64)).astype(F32)
            return np.int32(0)
        if name == "store_matrix_sync":
            p, base = _base(fr, a[0], line)
            frag = a[1]
            ld = int(a[2])
            col = int(a[3]) == 1
            t = frag.ftype
            idx = base[:, None, None] + _index(t.rows, t.cols, ld, col)[None]
            data = p.buf.data  # type: ignore[union-attr]
            if idx.size and (idx.min() < 0 or idx.max() >= data.size):
                raise CudaError("wmma::store_matrix_sync writes out of bounds", line)
            data[idx.reshape(-1)] = cast(frag.data.reshape(-1), data.dtype)
            return np.int32(0)
        raise Unsupported(f"wmma::{name}", line)
    return run
