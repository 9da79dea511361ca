"""Beta-1 tensors: the simulator's ``NkiTensor`` plus Beta-1 indexing, block dims and operators.

A :class:`B1Tensor` *is* an ``NkiTensor`` (same storage, same views), so the simulator's
instructions take it directly. What it adds:

* ``par_dim`` block tensors: ``nl.ndarray((4, nl.par_dim(128), 512))`` is stored partition-first
  (``[128, 4, 512]``); the logical view is a transpose, and ``t[i]`` yields a tile.
* Advanced indexing with index expressions (``t[i_p, i_f]``, ``t[i*128 + i_p, i_f]``) returns a
  lazy :class:`Access`: it becomes a strided view only when an instruction uses it, after the
  instruction's mask has cut it down, so a masked ragged-edge access never reads out of bounds.
* Dynamic partition indexing of HBM tensors by an SBUF index tile (``t[idx[i_p, 0], i_f]``)
  becomes an indirect DMA access (``.ap(vector_offset=...)``).
* Python operators, numpy ufuncs and ``t[...] = value`` assignment, lowered by
  :mod:`nkieval.frontends.beta1.ops` (registered into :data:`OPERATORS` to keep imports acyclic).
* ``+=`` of a matmul result into PSUM accumulates in place.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from nkieval.frontends.beta1.errors import Beta1Unsupported
from nkieval.frontends.beta1.index import DynIndex, IndexExpr, affine_form, broadcast_shape, fitted_form
from nkieval.sim.errors import NkiValidationError
from nkieval.sim.tensor import DynSlice, NkiTensor, _starts, key_signature

#: name -> implementation, filled by nkieval.frontends.beta1.ops ("binary", "unary", "assign", "iop", "flush")
OPERATORS: dict[str, Callable[..., Any]] = {}

_BINARY_DUNDERS = {
    "add": "add", "sub": "subtract", "mul": "multiply", "truediv": "divide", "pow": "power",
    "lt": "less", "le": "less_equal", "gt": "greater", "ge": "greater_equal", "eq": "equal", "ne": "not_equal",
    "and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor", "mod": "mod", "lshift": "left_shift",
    "rshift": "right_shift",
}


def _oob(name: str, dim: int, lo: int, hi: int, size: int) -> NkiValidationError:
    return NkiValidationError(
        f"Out-of-bound access for tensor `{name}` on dimension {dim}: index range [{lo}, {hi}] exceed dimension size "
        f"of {size}", operand=name, rule="out-of-bounds")


def _refuse_one_index(t: Any, key: Any) -> None:
    """A 2-D tile indexed with one basic key (``buf[0:N]`` of an [N, 1] buffer): NKI Beta 1's known issues say
    such buffers must be indexed with both indices (``buf[0:N, 0]``); a 1-D access does not work there."""
    if isinstance(key, int | np.integer | slice | DynSlice):
        k = _key_text(key)
        name = t.alloc.name
        raise NkiValidationError(
            f"{t.alloc.buffer.kind.upper()} tile{f' {name!r}' if name else ''}{list(t.shape)} indexed with one index [{k}]: "
            f"index a 2-D tile with both, e.g. [{k}, 0] or [{k}, :] (NKI Beta 1 known issues: a 1-D access of an "
            f"[N, 1] or [1, M] buffer does not work)", operand=name or None, rule="indexing")


def _key_text(k: Any) -> str:
    """A basic key as the kernel wrote it: ``0:128``, ``3``, ``nl.ds(0, 128)``."""
    if isinstance(k, slice):
        text = ":".join("" if v is None else str(v) for v in (k.start, k.stop))
        return text if k.step is None else f"{text}:{k.step}"
    if isinstance(k, DynSlice):
        return f"nl.ds({k.start}, {k.size})"
    return str(int(k))


class TileOps:
    """Python operators and numpy ufuncs on tiles (``a + b``, ``np.exp(a)``)."""

    __slots__ = ()

    def __neg__(self) -> Any:
        return OPERATORS["unary"]("negative", self)

    def __abs__(self) -> Any:
        return OPERATORS["unary"]("abs", self)

    def __invert__(self) -> Any:
        return OPERATORS["unary"]("invert", self)

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        from nkieval.sim.ops import _NUMPY_NAMES, BINARY

        name = _NUMPY_NAMES.get(ufunc)
        if method != "__call__" or name is None or kwargs.get("out") is not None:
            raise NkiValidationError(f"numpy {ufunc.__name__}.{method} is not an NKI operation on tiles",
                                     rule="argument")
        if len(inputs) == 2 and name in BINARY:
            return OPERATORS["binary"](name, inputs[0], inputs[1])
        if len(inputs) == 1:
            return OPERATORS["unary"](name, inputs[0])
        raise NkiValidationError(f"numpy {ufunc.__name__} with {len(inputs)} inputs is not supported on tiles",
                                 rule="argument")

    __hash__ = object.__hash__


def _make_binary(op: str, reverse: bool) -> Callable[[Any, Any], Any]:
    def f(self: Any, other: Any) -> Any:
        if isinstance(other, IndexExpr):
            return NotImplemented
        return OPERATORS["binary"](op, other, self) if reverse else OPERATORS["binary"](op, self, other)

    return f


def _make_inplace(op: str) -> Callable[[Any, Any], Any]:
    def f(self: Any, other: Any) -> Any:
        return OPERATORS["iop"](op, self, other)

    return f


for _d, _op in _BINARY_DUNDERS.items():
    setattr(TileOps, f"__{_d}__", _make_binary(_op, False))
    if _d not in ("lt", "le", "gt", "ge", "eq", "ne"):
        setattr(TileOps, f"__r{_d}__", _make_binary(_op, True))
for _d, _op in (("add", "add"), ("sub", "subtract"), ("mul", "multiply"), ("truediv", "divide")):
    setattr(TileOps, f"__i{_d}__", _make_inplace(_op))


class B1Tensor(TileOps, NkiTensor):
    """A Beta-1 tensor view. ``pdim`` is the logical position of the partition dim (block dims first)."""

    __slots__ = ("blocks", "boxes", "pdim", "pending")
    api_generation = "beta1"

    def __init__(self, data: np.ndarray, alloc: Any, dtype: Any, pdim: int = 0) -> None:
        NkiTensor.__init__(self, data, alloc, dtype)
        self.pdim = pdim
        self.pending: Any = None  # a matmul not yet written (see ops.PendingMatmul)
        self.boxes: Any = None  # a masked result: the mask boxes that hold values (see ops.assign)
        self.blocks: dict[tuple[int, ...], B1Tensor] | None = None  # direct allocation: block -> physical tile

    def __repr__(self) -> str:
        nm = self.alloc.name or f"t{self.alloc.id}"
        return f"tensor({nm}{list(self.shape)}, {self.dtype}, {self.buffer})"

    # -- Beta-1 tensor attributes ---------------------------------------------------------
    def astype(self, dtype: Any) -> Any:
        return OPERATORS["cast"](self, dtype)

    def assert_shape(self, shape: Any) -> B1Tensor:
        if tuple(int(s) for s in shape) != tuple(self.shape):
            raise NkiValidationError(f"tensor shape {list(self.shape)} is not the asserted {list(shape)}",
                                     rule="argument")
        return self

    def __len__(self) -> int:
        return self.shape[0]

    def __bool__(self) -> bool:
        if self.alloc.buffer.kind == "hbm":  # ``if bias:`` = "was the optional HBM argument given?" (no
            return True  # Beta-1 arithmetic or comparison yields an HBM tensor, so this is never a value test)
        raise NkiValidationError(
            "control flow cannot depend on a tensor's value (use nl.where / affine_select / predicated ops)",
            operand=self.alloc.name or None, rule="argument")

    # -- indexing -------------------------------------------------------------------------
    def __getitem__(self, key: Any) -> Any:
        if self.pending is not None:
            OPERATORS["flush"](self)
        if not isinstance(key, tuple) and self.pdim == 0 and self.data.ndim == 2 and self.alloc.buffer.on_chip:
            _refuse_one_index(self, key)
        if self.blocks is None:
            # Fast paths: a key of plain ints, int slices and int nl.ds (what loops write). For a tile, whether
            # it is a basic view (not too many indices, no slice past the end) is memoised per (key, shape); for
            # a block tensor (``t[i, :, :]``), the NumPy key and the partition dim's new position.
            sig = key_signature(key)
            if sig is not None:
                if self.pdim == 0:
                    ck = (sig, self.data.shape)
                    basic = _BASIC_KEYS.get(ck)
                    if basic is None:
                        keys = _expand(key, self.ndim) if len(sig) <= self.ndim else None
                        basic = keys is not None and _past_end_as_grids(keys, self.shape) is None
                        _memo(_BASIC_KEYS, ck, basic)
                    if basic:
                        return wrap(self._index(key))
                elif self.alloc.buffer.on_chip:
                    ck = (sig, self.data.shape, self.pdim)
                    hit = _BLOCK_KEYS.get(ck)
                    if hit is None:  # (a bad key raises: nothing is memoised)
                        norm, pdim = self._block_key(_expand(key, self.ndim))
                        hit = (norm, pdim, _starts(norm))
                        _memo(_BLOCK_KEYS, ck, hit)
                    data = self.data
                    out = B1Tensor(data[hit[0]], self.alloc, self.dtype, hit[1])
                    starts = hit[2]
                    if starts is not None:  # the view's byte offset, as NkiTensor._index propagates it (reading it
                        off = self._byte_offset()  # back from NumPy is slow, and every operand's trace needs it)
                        for s_, st in zip(starts, data.strides):
                            off += s_ * st
                        out._off = off
                    return out
        keys = _expand(key, self.ndim)
        if self.blocks is not None:
            return self._block(keys)
        if any(_is_advanced(k) for k in keys):
            return Access(self, keys)
        grids = _past_end_as_grids(keys, self.shape) if self.pdim == 0 else None
        if grids is not None:
            return Access(self, grids)
        return self._basic(keys)

    def _block(self, keys: tuple[Any, ...]) -> Any:
        """``t[b0, b1, ...]`` (then tile indices) of a directly allocated tensor: the block's physical tile."""
        nb = self.pdim
        name = self.alloc.name or "tensor"
        idx = []
        for d, k in enumerate(keys[:nb]):
            if not isinstance(k, int | np.integer):
                raise Beta1Unsupported(
                    f"indexing the block dimensions of '{name}' (placed by nki.compiler alloc/mod_alloc) with "
                    f"{type(k).__name__} is not implemented by nkieval; index each block with an integer (t[b])")
            n = self.shape[d]
            i = int(k) + (n if int(k) < 0 else 0)
            if not 0 <= i < n:
                raise _oob(name, d, int(k), int(k), n)
            idx.append(i)
        if len(idx) < nb:
            raise Beta1Unsupported(f"'{name}' is placed by nki.compiler alloc/mod_alloc: index every block "
                                   "dimension with an integer (t[b]) before using it")
        t = self.blocks[tuple(idx)]
        rest = keys[nb:]
        return t[rest] if rest else t

    def _basic(self, keys: tuple[Any, ...]) -> B1Tensor:
        if self.pdim == 0 or not self.is_on_chip:
            v = self._index(keys)
            return wrap(v)
        norm, pdim = self._block_key(keys)
        return B1Tensor(self.data[norm], self.alloc, self.dtype, pdim)

    def _block_key(self, keys: tuple[Any, ...]) -> tuple[tuple[Any, ...], int]:
        """The NumPy key of a basic index of an on-chip block tensor, and the view's partition dim: ints on
        block dims drop them, and the partition dim moves left accordingly."""
        norm: list[Any] = []
        pdim = self.pdim
        for d, k in enumerate(keys):
            n = self.shape[d]
            if isinstance(k, DynSlice):
                k = k.to_slice()
            if isinstance(k, int | np.integer):
                i = int(k) + (n if int(k) < 0 else 0)
                if not 0 <= i < n:
                    raise _oob(self.alloc.name or "tensor", d, int(k), int(k), n)
                if d == self.pdim:
                    norm.append(slice(i, i + 1))
                else:
                    norm.append(i)
                    if d < self.pdim:
                        pdim -= 1
            elif isinstance(k, slice):
                start = 0 if k.start is None else int(k.start) + (n if int(k.start) < 0 else 0)
                stop = n if k.stop is None else int(k.stop) + (n if int(k.stop) < 0 else 0)
                if start < 0 or stop > n or start >= stop:
                    raise _oob(self.alloc.name or "tensor", d, start, stop - 1, n)
                norm.append(slice(start, stop, 1 if k.step is None else int(k.step)))
            else:
                raise NkiValidationError(f"unsupported index {k!r}", operand=self.alloc.name or None, rule="indexing")
        return tuple(norm), pdim

    def __setitem__(self, key: Any, value: Any) -> None:
        dst = self[key]
        OPERATORS["assign"](dst, value)

    # -- views that keep the Beta-1 type ------------------------------------------------------
    def reshape(self, *shape: Any, **kwargs: Any) -> B1Tensor:  # type: ignore[override]
        if "shape" in kwargs:
            shape = (kwargs.pop("shape"),)
        if self.pdim != 0:
            raise NkiValidationError("reshape of a tensor with block dimensions is not supported", rule="indexing")
        return wrap(NkiTensor.reshape(self, *shape))

    def view(self, dtype: Any) -> B1Tensor:  # type: ignore[override]
        return wrap(NkiTensor.view(self, dtype), self.pdim)

    def broadcast_to(self, shape: Any) -> Any:  # type: ignore[override]
        return OPERATORS["broadcast_to"](self, shape)

    def expand_dims(self, axis: int) -> B1Tensor:  # type: ignore[override]
        return wrap(NkiTensor.expand_dim(self, axis), self.pdim)


def wrap(t: NkiTensor, pdim: int = 0) -> B1Tensor:
    """The Beta-1 face of a simulator tensor (shares its storage, and the caches that follow from it)."""
    if isinstance(t, B1Tensor) and t.pdim == pdim:
        return t
    b = B1Tensor(t.data, t.alloc, t.dtype, pdim)
    b._ap_base = t._ap_base
    b._off = t._off  # the same array: the same byte offset and trace operands (NkiTensor.access)
    b._acc = t._acc
    return b


_BASIC_KEYS: dict[Any, bool] = {}  # (key signature, shape) -> whether the key is a plain in-bounds view
# (key signature, shape, partition dim) of a block tensor -> (NumPy key, partition dim of the view, first index per
# dimension or None: nkieval.sim.tensor._starts) of _basic
_BLOCK_KEYS: dict[Any, tuple[tuple[Any, ...], int, tuple[int, ...] | None]] = {}
_KEYS_MAX = 1 << 14


def _memo(table: dict[Any, Any], key: Any, value: Any) -> None:
    if len(table) >= _KEYS_MAX:
        table.clear()
    table[key] = value



def _expand(key: Any, ndim: int) -> tuple[Any, ...]:
    keys = key if isinstance(key, tuple) else (key,)
    if any(k is Ellipsis for k in keys):
        i = next(j for j, k in enumerate(keys) if k is Ellipsis)
        keys = keys[:i] + (slice(None),) * (ndim - (len(keys) - 1)) + keys[i + 1:]
    if len(keys) > ndim:
        raise NkiValidationError(f"too many indices ({len(keys)}) for a tensor of rank {ndim}", rule="indexing")
    return keys


def _past_end_as_grids(keys: tuple[Any, ...], shape: tuple[int, ...]) -> tuple[Any, ...] | None:
    """Slices that run past the end of the tensor (``x[0:128, 0:64]`` of a 64-row ``x``), as the equivalent index
    grids, so that a ``mask=`` cuts them before they are bounds-checked, as Beta 1 did (the mask box is what is
    accessed). None when every slice is inside the tensor, or fewer than two are slices (the grid needs an axis
    per slice)."""
    sl = [k.to_slice() if isinstance(k, DynSlice) else k for k in keys]
    sl += [slice(None)] * (len(shape) - len(sl))  # (trailing dims not indexed are whole: ``x[b, :, 8:12]`` of 4-D x)
    if sum(isinstance(k, slice) for k in sl) < 2:
        return None
    past = False
    resolved: list[Any] = []
    for k, n in zip(sl, shape):
        if not isinstance(k, slice):
            resolved.append(k)
            continue
        step = 1 if k.step is None else int(k.step)
        start = 0 if k.start is None else int(k.start) + (n if int(k.start) < 0 else 0)
        stop = n if k.stop is None else int(k.stop) + (n if int(k.stop) < 0 else 0)
        if step <= 0 or start < 0 or start >= stop:
            return None
        past = past or stop > n
        resolved.append(np.arange(start, stop, step, dtype=np.int64))
    if not past:
        return None
    nslices = sum(isinstance(k, np.ndarray) for k in resolved)
    out: list[Any] = []
    j = 0
    for k in resolved:
        if isinstance(k, np.ndarray):
            shp = [1] * nslices
            shp[j] = k.size
            j += 1
            out.append(IndexExpr(k.reshape(shp)))
        else:
            out.append(k)
    return tuple(out)


def _is_advanced(k: Any) -> bool:
    return isinstance(k, IndexExpr | NkiTensor | Access | DynIndex)


class Access(TileOps):
    """A tensor indexed with index expressions; turned into a view by :meth:`view` (after masking).

    ``items`` holds, per tensor dimension, an int, an affine index expression (its form is read, never its
    values), an int64 index array (any other index expression), or an index tile (dynamic partition index into
    HBM).
    """

    __slots__ = ("dyn", "items", "scalar", "shape", "tensor")

    def __init__(self, tensor: B1Tensor, keys: tuple[Any, ...]) -> None:
        name = tensor.alloc.name or "tensor"
        self.tensor = tensor
        if len(keys) < tensor.ndim and all(n == 1 for n in tensor.shape[len(keys):]):
            keys = keys + (0,) * (tensor.ndim - len(keys))  # trailing size-1 dims need no index
        if len(keys) < tensor.ndim or any(isinstance(k, slice | DynSlice) for k in keys):
            raise NkiValidationError(
                f"Mixing basic tensor indexing and advanced tensor indexing is not supported (indexing "
                f"'{name}'{list(tensor.shape)}: index every dimension with nl.arange/nl.mgrid expressions or "
                "integers, or use only slices)", operand=name, rule="indexing")
        self.tensor = tensor
        items: list[Any] = []
        self.dyn: int | None = None
        self.scalar: tuple[int, Any] | None = None  # (dim, [1, 1] tile): a runtime offset on that dim
        arrays = []
        for d, k in enumerate(keys):
            if isinstance(k, NkiTensor | Access) and tensor.is_on_chip and d != tensor.pdim:
                k = DynIndex(k, 0)  # t[i_p, offs[0, j], i_z]: a runtime offset on a free dim
            if isinstance(k, DynIndex):
                if not tensor.is_on_chip or d == tensor.pdim or self.scalar is not None:
                    raise Beta1Unsupported(
                        f"a runtime (tensor) offset is supported on one free dimension of an on-chip tile "
                        f"(tensor_copy_dynamic_src/dst); indexing '{name}'{list(tensor.shape)} on dimension {d} in "
                        f"{tensor.buffer} is not implemented by nkieval")
                off = k.tile.view() if isinstance(k.tile, Access) else k.tile
                if int(np.prod(off.shape)) != 1 or not off.is_on_chip:
                    raise NkiValidationError(
                        f"a dynamic offset must be a single value in SBUF (a [1, 1] tile), got "
                        f"{list(off.shape)} in {off.buffer}", operand=name, rule="indexing")
                self.scalar = (d, off)
                items.append(k.values)
                arrays.append(k.values)
                continue
            if isinstance(k, IndexExpr):
                if (k.ndim < 2 and tensor.ndim > 1) or k.ndim < 1:
                    raise NkiValidationError(
                        f"indexing tensor '{name}' with 1d arange is not supported: place the grid on an axis, e.g. "
                        "nl.arange(n)[:, None] for the partition axis or nl.arange(n)[None, :] for a free axis",
                        operand=name, rule="indexing")
                items.append(k if k.aff is not None else k.values)  # (an affine grid: its form, no values made)
                arrays.append(k)
            elif isinstance(k, NkiTensor | Access):
                if tensor.is_on_chip or self.dyn is not None:
                    raise Beta1Unsupported(
                        f"dynamic (tensor) indices are supported on one dimension of an HBM tensor (indexing "
                        f"'{name}' on dimension {d} in {tensor.buffer}); nkieval does not implement other "
                        "dynamic indices yet")
                shp = tuple(k.shape)
                if len(shp) != 2 or shp[1] != 1:
                    raise NkiValidationError(f"an index tile must be [P, 1], got {list(shp)}", operand=name,
                                             rule="indexing")
                self.dyn = d
                items.append(k)
                arrays.append(np.zeros(shp, dtype=np.int64))
            else:
                try:
                    items.append(int(k))
                except (TypeError, ValueError):
                    raise NkiValidationError(f"unsupported index {k!r}", operand=name, rule="indexing") from None
        self.items = items
        self.shape = broadcast_shape(arrays) if arrays else ()

    def _scalar_base(self) -> tuple[int, int] | None:
        """(dim, value) of the runtime offset, read now (the simulation is eager, like the hardware's register read)."""
        if self.scalar is None:
            return None
        d, off = self.scalar
        OPERATORS["flush"](off)
        return d, int(np.asarray(off.data, dtype=np.float64).reshape(-1)[0])

    @property
    def dtype(self) -> Any:
        return self.tensor.dtype

    @property
    def buffer(self) -> Any:
        return self.tensor.buffer

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def is_on_chip(self) -> bool:
        return self.tensor.is_on_chip

    def __repr__(self) -> str:
        return f"{self.tensor!r}[<{list(self.shape)} access>]"

    def __getitem__(self, key: Any) -> Any:
        return self.view()[key]

    def __setitem__(self, key: Any, value: Any) -> None:
        self.view()[key] = value

    def broadcast_to(self, shape: Any) -> Any:
        """``t[i_p, 0].broadcast_to((P, F))``: the accessed tile, broadcast (as ``B1Tensor.broadcast_to``)."""
        return self.view().broadcast_to(shape)

    def view(self, box: tuple[slice, ...] | None = None) -> B1Tensor:
        """The strided (or indirect) view addressed by this access, restricted to ``box`` of its shape."""
        t = self.tensor
        name = t.alloc.name or "tensor"
        shape = self.shape
        sub = tuple(np.empty(shape, dtype=np.int8)[box].shape) if box is not None else shape
        vals: list[np.ndarray | tuple[int, list[int]] | None] = []
        base = self._scalar_base()
        for d, it in enumerate(self.items):
            if isinstance(it, IndexExpr):
                form = _placed_form(it.aff, shape, box, sub)  # type: ignore[arg-type]
                if form is None:  # (a box of another kind, or an empty view: read the values)
                    it = it.values
                else:
                    lo, hi = _form_range(form, sub)
                    if base is not None and base[0] == d:
                        lo, hi = lo + base[1], hi + base[1]
                    if lo < 0 or hi >= t.shape[d]:
                        raise _oob(name, d, lo, hi, t.shape[d])
                    vals.append(form)
                    continue
            if isinstance(it, np.ndarray):
                v = np.broadcast_to(it, shape)
                if box is not None:
                    v = v[box]
                lo, hi = int(v.min()), int(v.max())
                if base is not None and base[0] == d:
                    lo, hi = lo + base[1], hi + base[1]
                if lo < 0 or hi >= t.shape[d]:
                    raise _oob(name, d, lo, hi, t.shape[d])
                vals.append(v)
            elif isinstance(it, int):
                n = t.shape[d]
                i = it + (n if it < 0 else 0)
                if not 0 <= i < n:
                    raise _oob(name, d, it, it, n)
                vals.append((i, [0] * len(sub)))
            else:
                vals.append(None)
        forms = []
        for d, v in enumerate(vals):
            if v is None:
                forms.append((0, [0] * len(sub)))
                continue
            if isinstance(v, tuple):
                forms.append(v)
                continue
            f = affine_form(v, sub)
            if f is None:
                raise NkiValidationError(
                    f"index expression on dimension {d} of '{name}' is not affine in nl.arange/nl.mgrid indices; "
                    "only expressions like a*i + b can become an access pattern", operand=name, rule="indexing")
            forms.append(f)
        if t.is_on_chip:
            _check_partition_axis(t, forms, sub, name)
        if self.dyn is not None:
            return _indirect_view(t, self.items[self.dyn], forms, sub, box, name, self.dyn)
        if self.scalar is not None:
            return _scalar_offset_view(t, self.scalar, forms, sub)
        return _strided_view(t, forms, sub)


def _strided_view(t: B1Tensor, forms: list[tuple[int, list[int]]], sub: tuple[int, ...]) -> B1Tensor:
    """The view of ``t`` whose element ``k`` is at ``sum(forms[d][0] + forms[d][1] . k)`` along each dimension ``d``
    (the forms checked in range), over the allocation's storage."""
    data = t.data
    ds = data.strides
    offset = sum(s * b for s, (b, _) in zip(ds, forms))
    strides = tuple([sum(s * f[1][k] for s, f in zip(ds, forms)) for k in range(len(sub))])
    storage = t.alloc.storage
    if storage.flags.c_contiguous and storage.dtype == data.dtype:
        # (the storage as the buffer: NumPy checks the view's extent against it; one call instead of a slice,
        # two dtype views and ``as_strided``'s array-interface round trip)
        at = t._byte_offset() + offset
        out = B1Tensor(np.ndarray(sub, data.dtype, storage, at, strides), t.alloc, t.dtype, 0)
        out._off = at
        return out
    start = data[tuple(slice(b, b + 1) for b, _ in forms)] if data.ndim else data
    # as_strided cannot rebuild ml_dtypes (bf16/fp8) arrays: stride over same-size raw ints instead
    raw = start.view(f"u{start.dtype.itemsize}")
    view = np.lib.stride_tricks.as_strided(raw, shape=sub, strides=strides).view(data.dtype)
    return B1Tensor(view, t.alloc, t.dtype, 0)


def _placed_form(aff: tuple[tuple[int, ...], int, tuple[int, ...]], shape: tuple[int, ...],
                 box: tuple[Any, ...] | None, sub: tuple[int, ...]) -> tuple[int, list[int]] | None:
    """The affine form ``(base, coefs per axis of sub)`` of an affine grid ``aff`` broadcast to an access of
    ``shape`` (:func:`fitted_form`) and restricted to ``box`` (of shape ``sub``): what :func:`affine_form` reads
    from the grid's values, worked out from the form alone. None for a box that is not slices, or an empty view."""
    form = fitted_form(aff, shape)
    if form is None or 0 in sub:
        return None
    base, c = form
    if box is not None:
        for k, s in enumerate(box):
            if not isinstance(s, slice):
                return None
            start, _, step = s.indices(shape[k])
            base += c[k] * start
            c[k] *= step
    return int(base), [0 if n == 1 else ck for n, ck in zip(sub, c)]


def _form_range(form: tuple[int, list[int]], sub: tuple[int, ...]) -> tuple[int, int]:
    """The least and greatest value of an affine form over a view of shape ``sub``."""
    base, coefs = form
    lo = hi = base
    for n, c in zip(sub, coefs):
        if c < 0:
            lo += c * (n - 1)
        else:
            hi += c * (n - 1)
    return lo, hi


def _check_partition_axis(t: B1Tensor, forms: list[tuple[int, list[int]]], shape: tuple[int, ...], name: str) -> None:
    """On-chip accesses keep the partition dim on tile axis 0, unit-stride, and nothing else varies along it."""
    pd = t.pdim
    coefs = forms[pd][1]
    if len(shape) < 2:
        raise NkiValidationError(f"an on-chip tile of '{name}' needs at least 2 dimensions, got {list(shape)}",
                                 operand=name, rule="indexing")
    if any(c != 0 for c in coefs[1:]):
        raise NkiValidationError(
            f"Failed to infer tile from tensor '{name}': the partition dimension must be indexed along the first "
            "axis of the tile (partition and free axes cannot be swapped on chip)", operand=name, rule="indexing")
    if shape[0] > 1 and coefs[0] != 1:
        raise NkiValidationError(
            f"partition index of '{name}' has stride {coefs[0]}; on-chip partition accesses must be contiguous",
            operand=name, rule="indexing")
    for d, (_, c) in enumerate(forms):
        if d != pd and shape[0] > 1 and c[0] != 0:
            raise NkiValidationError(
                f"dimension {d} of '{name}' varies along the partition axis; every partition must use the same "
                "free-dimension access pattern", operand=name, rule="indexing")


def _scalar_offset_view(t: B1Tensor, scalar: tuple[int, Any], forms: list[tuple[int, list[int]]],
                        shape: tuple[int, ...]) -> B1Tensor:
    """``sbuf[i_p, offs[0, j] + i_f]``: the affine view shifted by a runtime value along one dimension
    (an access pattern with ``scalar_offset``, as the current API's ``tensor_copy`` + ``.ap`` writes it)."""
    d, off = scalar
    st = t.strides
    offset = t.offset + sum(st[k] * forms[k][0] for k in range(t.ndim))
    pattern = [[int(sum(st[k] * forms[k][1][j] for k in range(t.ndim))), shape[j]] for j in range(len(shape))]
    if pattern[0][1] == 1:
        pattern[0][0] = math.prod(t.alloc.shape[1:])
    if st[d] == math.prod(t.alloc.shape[d + 1:]):
        return wrap(t.ap(pattern, offset=offset, scalar_offset=off, indirect_dim=d))
    # a permuted / strided view: make_ap would scale the offset by the storage row, so add it ourselves
    val = int(np.asarray(off.data, dtype=np.float64).reshape(-1)[0])
    return wrap(t.ap(pattern, offset=offset + val * st[d]))


def _indirect_view(t: B1Tensor, index: Any, forms: list[tuple[int, list[int]]], shape: tuple[int, ...],
                   box: tuple[slice, ...] | None, name: str, dim: int = 0) -> B1Tensor:
    """``hbm[idx_tile, i_f]`` / ``hbm[b, idx_tile, i_f]``: the index tile's values (one per tile partition)
    choose positions along dimension ``dim`` at run time (DMA with vector_offset)."""
    idx = index.view() if isinstance(index, Access) else index
    OPERATORS["flush"](idx)
    if box is not None:
        idx = idx[box[0], 0:1] if isinstance(idx, B1Tensor) else idx
    if not idx.is_on_chip:
        raise NkiValidationError("the index tile of a dynamic access must be in SBUF (load the indices first)",
                                 operand=name, rule="buffer")
    row_elems = math.prod(t.alloc.shape[1:])
    if dim == 0 and (t.ndim < 1 or t.strides[0] != row_elems):
        raise NkiValidationError(f"dynamic indexing of '{name}' needs the whole tensor's first dimension",
                                 operand=name, rule="indexing")
    rest = [d for d in range(t.ndim) if d != dim]
    offset = t.offset + sum(t.strides[d] * forms[d][0] for d in rest)
    pattern = [[row_elems if dim == 0 else int(t.strides[dim]), shape[0]]]
    for k in range(1, len(shape)):
        pattern.append([int(sum(t.strides[d] * forms[d][1][k] for d in rest)), shape[k]])
    v = t.ap(pattern, offset=offset, vector_offset=idx, indirect_dim=0)
    if dim != 0:  # the index steps along ``dim`` and must stay inside it (not only inside the storage)
        v._ap_base.row_stride = int(t.strides[dim])
        v._ap_base.rows = int(t.shape[dim])
    return wrap(v)
