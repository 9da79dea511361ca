"""More value-returning ``nl.*`` calls of the current API: ``load_transpose2d``, ``shared_constant``,
``rand`` / ``random_seed``, and ``gather_flattened`` (removed in NKI 0.2), which the simulator refuses with a
clear error. The NKI 0.7 tile/block grids live in :mod:`nkieval.sim.grids`.

Semantics follow ``shared/research/nki-api.md`` §3.1–3.2 and §6.2; each call lowers onto
``nisa`` instructions so the trace shows what the hardware would run.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from nkieval.sim import dtypes as dt
from nkieval.sim import isa as _isa
from nkieval.sim.context import current
from nkieval.sim.errors import NkiValidationError
from nkieval.sim.memory import SHARED_HBM
from nkieval.sim.ops import OPS
from nkieval.sim.tensor import NkiTensor, allocate, as_buffer


def load_transpose2d(src: Any, dtype: Any = None) -> NkiTensor:
    """HBM ``[a, b]`` → new SBUF tile ``[b, a]`` (a DMA with a transposing access pattern)."""
    api = "load_transpose2d"
    if not isinstance(src, NkiTensor):
        raise NkiValidationError(f"src must be an NKI tensor, got {type(src).__name__}", instruction=api,
                                 operand="src", rule="argument")
    if src.buffer.kind != "hbm":
        raise NkiValidationError(f"Expected operand 'src' of 'load_transpose2d' to be in address space 'hbm', but "
                                 f"got a tile in '{src.buffer.kind}' instead.", instruction=api, operand="src",
                                 rule="buffer")
    if src.is_indirect():
        raise NkiValidationError("indirect (runtime) indices are not supported with load_transpose2d",
                                 instruction=api, operand="src", rule="indexing")
    if src.ndim != 2:
        raise NkiValidationError(f"load_transpose2d needs a 2-D source, got {list(src.shape)}", instruction=api,
                                 operand="src", rule="argument")
    out = allocate((src.shape[1], src.shape[0]), dtype if dtype is not None else src.dtype, None, instruction=api)
    _isa.dma_copy(out, src.permute((1, 0)))
    return out


def shared_constant(constant: Any, dtype: Any = None) -> NkiTensor:
    """A constant (NumPy array, or a ``.npy`` path) placed in shared HBM.

    Without ``dtype``, float64 data becomes float32 and int64 becomes int32 (no compute instruction takes
    ``nl.int64``, and NKI has no 64-bit float); ``dtype=nl.int64`` keeps 64-bit integers."""
    api = "shared_constant"
    if isinstance(constant, str | os.PathLike):
        try:
            arr = np.load(constant)
        except (OSError, ValueError) as e:
            raise NkiValidationError(f"cannot load constant from {os.fspath(constant)!r}: {e}", instruction=api,
                                     operand="constant", rule="argument") from None
    else:
        arr = np.asarray(constant)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if dtype is None:
        dtype = {"float64": "float32", "int64": "int32", "uint64": "uint32"}.get(arr.dtype.name, arr.dtype)
    d = dt.to_dtype(dtype)  # an UnknownDTypeError (rule dtype) for object/complex/... data
    if arr.dtype.kind not in "biuf":
        arr = arr.astype(np.float32)  # ml_dtypes formats go through fp32 like any cast
    out = allocate(arr.shape, d, SHARED_HBM, api, instruction=api, fill=arr)
    out.alloc.written = True  # baked into the NEFF: initialised before the kernel runs
    return out


def rand(shape: Any, dtype: Any = dt.float32, buffer: Any = None) -> NkiTensor:
    """Uniform random values in [0, 1): ``nisa.rand2`` on trn3, else Vector-engine ``rng`` bits scaled
    (top 24 bits × 2**-24, so 1.0 is never produced)."""
    api = "rand"
    buf = as_buffer(buffer)
    if not buf.on_chip:
        raise NkiValidationError(f"nl.rand writes SBUF or PSUM, not {buf.name}", instruction=api, operand="buffer",
                                 rule="buffer")
    d = dt.to_dtype(dtype)
    if not d.is_float:
        raise NkiValidationError(f"nl.rand produces floats in [0, 1); dtype {d} is not a float type",
                                 instruction=api, operand="dtype", rule="dtype")
    out = allocate(shape, d, buf, instruction=api)
    if current().target.has("rand2"):
        _isa.rand2(out, 0.0, 1.0)
        return out
    bits = allocate(out.shape, dt.uint32, buf, instruction=api)
    _isa.rng(bits)
    top = allocate(out.shape, dt.uint32, buf, instruction=api)
    _isa.tensor_scalar(top, bits, OPS["right_shift"], 8)
    _isa.tensor_scalar(out, top, OPS["multiply"], 2.0**-24)
    return out


def random_seed(seed: Any) -> None:
    """Seed the PRNG that ``nl.rand`` / ``nl.dropout`` use, from a [1, 1] SBUF/PSUM tensor."""
    if not isinstance(seed, NkiTensor):
        raise NkiValidationError(f"nl.random_seed takes a [1, 1] SBUF/PSUM tensor; a {type(seed).__name__} is not "
                                 "accepted (documented NKI 0.4 limitation: memset a [1, 1] tile first)",
                                 instruction="random_seed", operand="seed", rule="argument")
    _isa.set_rng_seed(seed)


def gather_flattened(data: Any, indices: Any, axis: int = 0, dtype: Any = None) -> NkiTensor:
    """Beta-1 only: NKI 0.2 replaced it with ``nisa.nc_n_gather``."""
    raise NkiValidationError("nl.gather_flattened is not part of the current nki API (NKI 0.2 replaced it with "
                             "nisa.nc_n_gather(dst, data, indices)); it exists only in neuronxcc.nki (Beta 1)",
                             instruction="gather_flattened", rule="argument")


__all__ = ["gather_flattened", "load_transpose2d", "rand", "random_seed",
           "shared_constant"]
