"""Access patterns over storage (``tensor.ap(...)``) and indirect (gather/scatter) views."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from nkieval.sim import dtypes as dt
from nkieval.sim.device_values import NkiScalar
from nkieval.sim.errors import NkiIndexError, NkiValidationError
from nkieval.sim.storage import drop_f32, flag_view, read_bits

if TYPE_CHECKING:
    from nkieval.sim.tensor import NkiTensor


@dataclass
class IndirectAccess:
    """A view whose dim-``indirect_dim`` rows come from an index tensor at run time.

    Row ``r`` of the view starts at element ``offset + index[r] * row_elems`` of the
    storage, where ``row_elems = prod(base_shape[indirect_dim+1:])``; within a row the
    remaining pattern pairs apply.
    """

    flat: np.ndarray
    base_shape: tuple[int, ...]
    pattern: tuple[tuple[int, int], ...]
    offset: int
    index: NkiTensor
    indirect_dim: int
    #: ``vector_select``: rows are ``row_stride`` elements apart (the view's dim-0 stride) and an
    #: index must be below ``rows`` (the view's dim-0 size); ``.ap()`` leaves both None.
    row_stride: int | None = None
    rows: int | None = None

    @property
    def row_elems(self) -> int:
        if self.row_stride is not None:
            return self.row_stride
        return int(math.prod(self.base_shape[self.indirect_dim + 1:]))

    def rows_ok(self, idx: np.ndarray) -> np.ndarray:
        """Which indices are inside the indexed dimension (always true for ``.ap()`` views, whose
        bound is the storage, checked on the element offsets)."""
        if self.rows is None:
            return np.ones(idx.shape, dtype=bool)
        return (idx >= 0) & (idx < self.rows)

    def element_offsets(self, rows: np.ndarray) -> np.ndarray:
        """Storage element offsets for the given row indices: shape (len(rows), *free counts)."""
        free = self.pattern[1:]
        offs = np.zeros([len(rows)] + [c for _, c in free], dtype=np.int64)
        offs += (self.offset + rows.astype(np.int64) * self.row_elems).reshape((-1,) + (1,) * len(free))
        for k, (s, c) in enumerate(free):
            shape = [1] * (len(free) + 1)
            shape[k + 1] = c
            offs += (np.arange(c, dtype=np.int64) * s).reshape(shape)
        return offs


@dataclass
class OutOfBoundsView:
    """An ``.ap(scalar_offset=...)`` view whose run-time start puts it outside the storage. The DMA that
    uses it checks at run time: ``oob_mode.skip`` drops the transfer, ``error`` (the default) raises.
    Any other use raises ``out-of-bounds``."""

    message: str


def _pattern(pattern: Any) -> tuple[tuple[int, int], ...]:
    try:
        pat = tuple((int(p[0]), int(p[1])) for p in pattern)
    except (TypeError, IndexError, ValueError):
        raise NkiValidationError(f"access pattern must be a list of [stride, count] pairs, got {pattern!r}",
                                 instruction="ap", rule="argument") from None
    if not pat:
        raise NkiValidationError("access pattern is empty", instruction="ap", rule="argument")
    for _stride, c in pat:
        if c <= 0:
            raise NkiValidationError(f"access pattern count {c} must be positive", instruction="ap", rule="argument")
    return pat


_INT64_INDEX = ("an nl.int64 tensor cannot be a run-time index or offset directly: a 64-bit value reaches the "
                "sequencer only through nisa.scalar_load (\"Unlike the compute instructions, scalar_load accepts "
                "nl.int64\"); pass the loaded NkiScalar (64-bit offsets address HBM only)")


def _scalar_value(x: Any, on_chip: bool = False) -> int:
    from nkieval.sim.tensor import NkiTensor  # deferred: tensor.py's views call this module

    if isinstance(x, NkiScalar):
        if on_chip and x.bits > 32:
            raise NkiValidationError(f"scalar_offset on an SBUF/PSUM operand must be an int32 NkiScalar, got "
                                     f"{x.dtype} (64-bit offsets address HBM only)", instruction="ap",
                                     operand="scalar_offset", rule="dtype")
        return x.get("scalar_offset")
    if isinstance(x, NkiTensor):
        if x.size != 1:
            raise NkiValidationError(f"scalar_offset tensor must be [1, 1], got {list(x.shape)}",
                                     instruction="ap", rule="argument")
        if x.dtype.itemsize > 4 and x.dtype.is_int:
            raise NkiValidationError(_INT64_INDEX, instruction="ap", operand="scalar_offset", rule="dtype")
        return int(np.asarray(x.data, dtype=np.float64).reshape(-1)[0])
    if hasattr(x, "value"):  # virtual register
        return int(x.value)
    return int(x)


def make_ap(t: NkiTensor, pattern: Any, offset: int = 0, scalar_offset: Any = None, vector_offset: Any = None,
            indirect_dim: int = 0, dtype: Any = None) -> NkiTensor:
    from nkieval.sim.tensor import NkiTensor  # deferred: tensor.py's views call this module

    a = t.alloc
    flat = a.storage.reshape(-1)
    d = t.dtype
    if dtype is not None:
        d = dt.to_dtype(dtype)
        try:
            flat = flat.view(dt.storage_dtype(d))
        except ValueError as e:
            raise NkiValidationError(f"cannot reinterpret storage as {d}: {e}", instruction="ap", rule="indexing") from None
    pat = _pattern(pattern)
    base_shape = a.shape
    off = t.offset if offset is None else int(offset)

    def row_elems(dim: int) -> int:
        """Elements one step of the base tensor's dim ``dim`` moves: the stride of the tensor ``.ap`` is
        called on (for a reshaped HBM view, its own shape, not the allocation's: the DMA scales an
        index by the stride of indirect_dim)."""
        if t.data.dtype.itemsize == flat.dtype.itemsize:
            return int(t.strides[dim])
        return int(math.prod(base_shape[dim + 1:]))

    if scalar_offset is not None or vector_offset is not None:
        if isinstance(indirect_dim, bool) or not isinstance(indirect_dim, int | np.integer) \
                or not 0 <= int(indirect_dim) < t.ndim:
            raise NkiValidationError(f"indirect_dim {indirect_dim!r} is not a dimension of the {t.ndim}-D "
                                     "base tensor", instruction="ap", operand="indirect_dim", rule="argument")
    if scalar_offset is not None:
        off += _scalar_value(scalar_offset, a.buffer.on_chip) * row_elems(int(indirect_dim))
    if a.buffer.on_chip:
        row = int(math.prod(base_shape[1:])) * (a.storage.dtype.itemsize // flat.dtype.itemsize or 1)
        if len(pat) < 2 and vector_offset is None:
            raise NkiValidationError("an on-chip access pattern needs a partition pair and at least one free pair",
                                     instruction="ap", rule="indexing")
        if pat[0][1] > 1 and pat[0][0] != row and vector_offset is None:
            raise NkiValidationError(
                f"partition stride {pat[0][0]} must equal the storage free size {row} (partitions are contiguous)",
                instruction="ap", rule="indexing")
    n = flat.size
    if vector_offset is not None:
        if indirect_dim != 0:
            raise NkiValidationError("vector_offset supports only indirect_dim=0", instruction="ap", rule="argument")
        if not isinstance(vector_offset, NkiTensor) or not vector_offset.is_on_chip:
            raise NkiValidationError("vector_offset must be an on-chip [P, 1] index tensor", instruction="ap",
                                     rule="argument")
        ind = IndirectAccess(flat, tuple(t.shape), pat, off, vector_offset, indirect_dim, row_stride=row_elems(0))
        # The data view is the first row's pattern; DMA resolves rows through `_ap_base`.
        shape = tuple(c for _, c in pat)
        view = np.zeros(shape, dtype=flat.dtype)
        out = NkiTensor(view, a, d)
        out._ap_base = ind
        out._off = off * flat.dtype.itemsize  # (``view`` is scratch: the trace's addresses start at the offset)
        return out
    lo = off + sum((c - 1) * s for s, c in pat if s < 0)
    hi = off + sum((c - 1) * s for s, c in pat if s > 0)
    if lo < 0 or hi >= n:
        msg = (f"access pattern {[list(p) for p in pat]} with offset {off} reaches elements [{lo}, {hi}] outside "
               f"storage of {n} elements")
        if scalar_offset is not None and not a.buffer.on_chip:
            # a run-time start: DMA checks it when it runs (oob_mode), so the view itself is legal
            out = NkiTensor(np.zeros(tuple(c for _, c in pat), dtype=flat.dtype), a, d)
            out._ap_base = OutOfBoundsView(msg + " (run-time scalar_offset)")
            out._off = 0
            _mark_indirect()
            return out
        raise NkiValidationError(msg, instruction="ap", operand=a.name or None, rule="out-of-bounds")
    isz = flat.dtype.itemsize
    view = np.lib.stride_tricks.as_strided(flat[off:], shape=tuple(c for _, c in pat),
                                           strides=tuple(s * isz for s, _ in pat))
    return NkiTensor(view, a, d)


# -- dynamic views: vector_select, select(dim, tensor) ---------------------------------------------
def _mark_indirect(name: str = "") -> None:
    """Tell this program's instruction wrapper to look for indirect operands (it skips the scan otherwise)."""
    from nkieval.sim.context import maybe_current

    ctx = maybe_current()
    if ctx is not None:
        ctx.has_indirect = True


def vector_select(t: NkiTensor, dim: int, offsets: Any) -> NkiTensor:
    """``t.vector_select(0, offsets)``: row ``r`` of the view is ``t[offsets[r], ...]``, resolved by DMA
    at run time (an HBM gather/scatter operand; ``oob_mode`` applies). Dim 0 of HBM tensors only."""
    from nkieval.sim.tensor import NkiTensor  # deferred: tensor.py's views call this module

    if isinstance(dim, bool) or not isinstance(dim, int | np.integer) or int(dim) != 0:
        raise NkiValidationError(f"vector_select supports only dim 0, got {dim!r}", instruction="vector_select",
                                 operand="dim", rule="indexing")
    if t.is_on_chip:
        raise NkiValidationError(f"vector_select needs an HBM tensor; {t.buffer.kind.upper()} tensors cannot be "
                                 "indexed by a vector of offsets (use .indirect() on trn3 compute instructions)",
                                 instruction="vector_select", rule="indexing")
    if t._ap_base is not None:
        raise NkiValidationError("vector_select of a view that is already indirect", instruction="vector_select",
                                 rule="indexing")
    if not isinstance(offsets, NkiTensor) or offsets.buffer.kind != "sbuf":
        raise NkiValidationError("offsets must be an SBUF [P, 1] index tensor", instruction="vector_select",
                                 operand="offsets", rule="argument")
    if not offsets.dtype.is_int:
        raise NkiValidationError(f"offsets dtype must be an integer type, got {offsets.dtype}",
                                 instruction="vector_select", operand="offsets", rule="dtype")
    if offsets.ndim < 2 or offsets.size != offsets.shape[0]:
        raise NkiValidationError(f"offsets must be a [P, 1] tensor, got {list(offsets.shape)}",
                                 instruction="vector_select", operand="offsets", rule="shape-mismatch")
    rows = offsets.shape[0]
    pattern = ((t.strides[0], rows), *((s, n) for s, n in zip(t.strides[1:], t.shape[1:], strict=True)))
    a = t.alloc
    ind = IndirectAccess(a.storage.reshape(-1), tuple(t.shape), pattern, t.offset, offsets, 0,
                         row_stride=t.strides[0], rows=t.shape[0])
    out = NkiTensor(np.zeros((rows, *t.shape[1:]), dtype=t.data.dtype), a, t.dtype)
    out._ap_base = ind
    out._off = t._byte_offset()
    _mark_indirect()
    return out


def _runtime_index(x: Any, what: str, on_chip: bool = False) -> int:
    from nkieval.sim.tensor import NkiTensor  # deferred: tensor.py's views call this module

    if isinstance(x, NkiTensor):
        if not x.is_on_chip:
            raise NkiValidationError(f"a runtime index tensor must be in SBUF or PSUM, not {x.buffer.kind}",
                                     instruction=what, operand="index", rule="buffer")
        if not x.dtype.is_int:
            raise NkiValidationError(f"a runtime index tensor must have an integer dtype, got {x.dtype}",
                                     instruction=what, operand="index", rule="dtype")
        if x.dtype.itemsize > 4:
            raise NkiValidationError(_INT64_INDEX, instruction=what, operand="index", rule="dtype")
        if x.size != 1:
            raise NkiValidationError(f"a runtime index tensor must be [1, 1], got {list(x.shape)}",
                                     instruction=what, operand="index", rule="shape-mismatch")
        return int(read_bits(x).reshape(-1)[0])
    if isinstance(x, NkiScalar):
        if on_chip and x.bits > 32:
            raise NkiValidationError(f"a run-time index into an SBUF/PSUM tensor must be an int32 NkiScalar, got "
                                     f"{x.dtype} (\"on an SBUF or PSUM operand the offset must be nl.int32\")",
                                     instruction=what, operand="index", rule="dtype")
        return x.get("index")
    get = getattr(x, "get", None)
    if callable(get) and hasattr(x, "frozen"):  # VirtualRegister
        return int(get("index"))
    raise NkiValidationError(f"index must be an int, a [1, 1] tensor, a register or an NkiScalar, got "
                             f"{type(x).__name__}",
                             instruction=what, operand="index", rule="argument")


def dynamic_select(t: NkiTensor, dim: int, index: Any) -> NkiTensor:
    """``t.select(dim, tensor_or_register)``: drop ``dim`` at an index read at run time.

    The simulator reads the index when the view is made (kernels make such views right before
    the instruction that uses them). Allowed once per view, and never on the partition dim of
    an on-chip tensor."""
    nd = t.ndim
    d = int(dim)
    if not -nd <= d < nd:
        raise NkiValidationError(f"select dim {dim} out of range for rank {nd}", instruction="select",
                                 operand="dim", rule="indexing")
    d %= nd
    if t.is_on_chip and d == 0:
        raise NkiValidationError("dynamic select on the partition dimension of an on-chip tensor is not allowed",
                                 instruction="select", operand="dim", rule="indexing")
    if getattr(t, "_dyn", None) is not None:
        raise NkiValidationError("a view can be selected with a runtime index only once", instruction="select",
                                 operand="index", rule="indexing")
    if t._ap_base is not None:
        raise NkiValidationError("dynamic select of an indirect view", instruction="select", rule="indexing")
    i = _runtime_index(index, "select", t.is_on_chip)
    n = t.shape[d]
    if not 0 <= i < n:
        nm = t.alloc.name or "tensor"
        raise NkiIndexError(f"index {i} is out of bounds for axis {d} with size {n} (runtime index of `{nm}`)",
                            instruction="select", operand="index")
    key: list[Any] = [slice(None)] * nd
    key[d] = i
    if t.is_on_chip and nd == 2:  # on-chip tensors stay 2-D
        key[d] = slice(i, i + 1)
    out = t._new(t.data[tuple(key)])
    out._dyn = d
    return out


# -- tensor indirection (.indirect(), NeuronCore-v4 compute instructions) ------------------------------
#: partitions that share one list of offsets, per engine (documented: 16 for V/S/G, 32 for the PE array)
TI_GROUP = {"vector": 16, "scalar": 16, "gpsimd": 16, "tensor": 32}
#: instructions that resolve ``.ap(vector_offset=)`` / ``vector_select`` views themselves
DMA_INDIRECT = frozenset({"dma_copy", "dma_compute"})


@dataclass
class TensorIndirection:
    """``t.indirect(index, num_elem)``: columns of an on-chip tensor chosen at run time.

    Row ``p`` of the dense operand is ``base[p, offsets[p, :num_elem]]`` (flattened free position).
    Every partition of a group (16 on V/S/G, 32 on the Tensor engine) uses the same offsets."""

    base: NkiTensor
    index: NkiTensor
    num_elem: int


def make_indirect(t: NkiTensor, index: Any, num_elem: Any = None) -> NkiTensor:
    from nkieval.sim.context import current
    from nkieval.sim.tensor import NkiTensor  # deferred: tensor.py's views call this module

    ctx = current()
    if not ctx.target.has("indirect"):
        raise NkiValidationError(f"tensor indirection (.indirect()) needs trn3 (NeuronCore-v4); target is "
                                 f"{ctx.target.name}", instruction="indirect", rule="generation")
    if not t.is_on_chip:
        raise NkiValidationError("tensor indirection applies to SBUF/PSUM tensors; index HBM tensors with "
                                 "vector_select(0, offsets) or .ap(vector_offset=...) and DMA",
                                 instruction="indirect", rule="buffer")
    if t._ap_base is not None:
        raise NkiValidationError("the view is already indirect", instruction="indirect", rule="indexing")
    if not isinstance(index, NkiTensor) or index.buffer.kind != "sbuf":
        raise NkiValidationError("index must be an SBUF tensor of uint16 offsets", instruction="indirect",
                                 operand="index", rule="argument" if not isinstance(index, NkiTensor) else "buffer")
    if index.dtype.name != "uint16":
        raise NkiValidationError(f"index dtype must be uint16, got {index.dtype}", instruction="indirect",
                                 operand="index", rule="dtype")
    if index.shape[0] != t.shape[0]:
        raise NkiValidationError(f"index has {index.shape[0]} partitions, the data view {t.shape[0]}",
                                 instruction="indirect", operand="index", rule="partition-mismatch")
    k = index.size // index.shape[0]
    if num_elem is None:
        n = k
    elif isinstance(num_elem, bool) or not isinstance(num_elem, int | np.integer) or not 1 <= int(num_elem) <= k:
        raise NkiValidationError(f"num_elem must be an int in [1, {k}] (offsets per partition in index), got "
                                 f"{num_elem!r}", instruction="indirect", operand="num_elem", rule="argument")
    else:
        n = int(num_elem)
    out = NkiTensor(np.zeros((t.shape[0], n), dtype=t.data.dtype), t.alloc, t.dtype)
    out._ap_base = TensorIndirection(t, index, n)
    out._off = t._byte_offset()
    ctx.has_indirect = True
    return out


def _ti_positions(ctx: Any, ti: TensorIndirection, group: int, role: str) -> tuple[np.ndarray, ...]:
    """Fancy-index tuple into ``ti.base.data`` for the [P, num_elem] dense operand."""
    base = ti.base
    p = base.shape[0]
    offs = read_bits(ti.index).reshape(p, -1)[:, :ti.num_elem]
    a = base.alloc
    row = a.row_bytes or base.data.dtype.itemsize
    p0 = a.partition_offset + ((base.data.__array_interface__["data"][0] - a.base_ptr) // row)
    absolute = p0 + np.arange(p)
    for g in np.unique(absolute // group):
        rows = offs[absolute // group == g]
        if (rows != rows[0]).any():
            raise NkiValidationError(
                f"{role}: partitions {int(g) * group}-{int(g) * group + group - 1} form one tensor-indirection group "
                f"of {group} partitions and must use the same offsets, but their index rows differ",
                operand=role, rule="argument")
    free_shape = base.shape[1:]
    nfree = int(math.prod(free_shape))
    bad = (offs < 0) | (offs >= nfree)
    if bad.any():
        r, c = (int(v[0]) for v in np.nonzero(bad))
        raise NkiValidationError(f"{role}: offset {int(offs[r, c])} (partition {r}, position {c}) is outside the "
                                 f"{nfree} free elements of the data view (undefined on hardware)", operand=role,
                                 rule="out-of-bounds")
    parts = np.broadcast_to(np.arange(p)[:, None], offs.shape)
    return (parts, *np.unravel_index(offs, free_shape))


def _dense_operand(ctx: Any, ti: TensorIndirection, pos: tuple[np.ndarray, ...]) -> NkiTensor:
    from nkieval.sim.memory import Allocation
    from nkieval.sim.tensor import NkiTensor  # deferred: tensor.py's views call this module

    base = ti.base
    a = base.alloc
    vals = np.ascontiguousarray(base.data[pos])
    row = a.row_bytes or base.data.dtype.itemsize
    p0 = (base.data.__array_interface__["data"][0] - a.base_ptr) // row
    tmp = Allocation(id=a.id, buffer=a.buffer, name=a.name, dtype=a.dtype, shape=vals.shape, storage=vals,
                     site=a.site, program=a.program, address=a.address, partition_offset=a.partition_offset + p0,
                     written=a.written)
    if a.mm_written is not None:
        tmp.mm_written = np.ascontiguousarray(flag_view(base, a.mm_written)[pos])
        tmp.other_written = np.ascontiguousarray(flag_view(base, a.other_written)[pos])
    return NkiTensor(vals, tmp, base.dtype)


def _scatter_back(ti: TensorIndirection, pos: tuple[np.ndarray, ...], dense: NkiTensor) -> None:
    base = ti.base
    a = base.alloc
    base.data[pos] = dense.data
    drop_f32(a)  # the storage changed under any cached fp32 copy
    if dense.alloc.written:
        a.written = True
    if a.mm_written is not None:
        flag_view(base, a.mm_written)[pos] = dense.alloc.mm_written
        flag_view(base, a.other_written)[pos] = dense.alloc.other_written


def _is_output(role: str) -> bool:
    return role.startswith("dst") or role.endswith("_dst") or role == "reduce_res"


_SIGNATURES: dict[Any, Any] = {}


def indirect_call(ctx: Any, name: str, engine: str, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Run instruction ``fn`` with its indirect operands resolved.

    ``.indirect()`` operands become dense [P, num_elem] operands gathered before the instruction
    and (outputs) scattered back after it. DMA-style indirect views (``.ap(vector_offset=)``,
    ``vector_select``) go through to the DMA instructions that resolve them and are refused elsewhere."""
    import inspect

    from nkieval.sim.tensor import NkiTensor  # deferred: tensor.py's views call this module

    sig = _SIGNATURES.get(fn)
    if sig is None:
        sig = _SIGNATURES[fn] = inspect.signature(fn)
    try:
        bound = sig.bind(ctx, *args, **kwargs)
    except TypeError as e:
        raise NkiValidationError(str(e), rule="argument") from None
    names = list(bound.arguments)
    resolved: list[tuple[str, TensorIndirection, tuple[np.ndarray, ...], NkiTensor]] = []
    for role in names[1:]:
        val = bound.arguments[role]
        items = val if isinstance(val, list | tuple) else (val,)
        for v in items:
            if not isinstance(v, NkiTensor) or v._ap_base is None:
                continue
            ind = v._ap_base
            if isinstance(ind, OutOfBoundsView):
                if name not in DMA_INDIRECT:
                    raise NkiValidationError(f"{role}: {ind.message}", operand=role, rule="out-of-bounds")
                continue
            if isinstance(ind, IndirectAccess):
                if name not in DMA_INDIRECT:
                    raise NkiValidationError(
                        f"{role} is a DMA indirect view (.ap(vector_offset=...) / vector_select); only dma_copy and "
                        "dma_compute resolve it (compute instructions take .indirect() views on trn3)",
                        operand=role, rule="indexing")
                continue
            if engine == "dma" or name in DMA_INDIRECT:
                raise NkiValidationError(f"{role} is a tensor-indirection view (.indirect()); DMA instructions take "
                                         "vector_select / .ap(vector_offset=...) views instead", operand=role,
                                         rule="indexing")
            if not isinstance(val, NkiTensor):
                raise NkiValidationError(f"{role}: .indirect() views are not supported inside a list of operands",
                                         operand=role, rule="indexing")
            eng = bound.arguments.get("engine")
            eng = getattr(eng, "name", eng)
            group = TI_GROUP.get(str(eng), TI_GROUP.get(engine, 16)) if eng not in (None, "unknown", 0) else \
                TI_GROUP.get(engine, 16)
            if name in ("nc_matmul", "nc_matmul_mx"):
                tp = bound.arguments.get("tile_position")
                if tp not in (None, ()) and tuple(int(x) for x in tp) != (0, 0):
                    raise NkiValidationError(f"{role}: with .indirect() operands tile_position must be (0, 0), got "
                                             f"{tuple(tp)}", operand="tile_position", rule="argument")
            pos = _ti_positions(ctx, ind, group, role)
            dense = _dense_operand(ctx, ind, pos)
            bound.arguments[role] = dense
            resolved.append((role, ind, pos, dense))
    if not resolved:
        return fn(*bound.args, **bound.kwargs)
    result = fn(*bound.args, **bound.kwargs)
    for role, ind, pos, dense in resolved:
        if _is_output(role):
            _scatter_back(ind, pos, dense)
    recs = ctx.trace.records if ctx.options.record_trace else []
    if recs and recs[-1].opcode == name:
        recs[-1].attrs["tensor_indirection"] = [r for r, *_ in resolved]
    return result
