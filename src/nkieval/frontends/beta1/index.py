"""Beta-1 index grids: ``nl.arange``, ``nl.mgrid``, affine index expressions and mask predicates.

Beta 1 addressed tiles with *index expressions* — ``i*128 + nl.arange(128)[:, None]`` — and
restricted instructions with *masks* built from comparisons of them. Our loops run eagerly,
so loop variables and ``program_id`` are plain ints; an index expression is therefore a
concrete int64 array (its broadcast shape is the tile shape it addresses) and a predicate a
concrete boolean array. Affinity — what lets the compiler turn an expression into an access
pattern — is checked when an expression is turned into a tensor view
(:func:`affine_form`), not when it is built.
"""

from __future__ import annotations

import dis
import functools
import operator
import sys
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from nkieval.frontends.beta1.errors import Beta1Unsupported
from nkieval.sim.errors import NkiValidationError


def _arr(x: Any) -> np.ndarray:
    if isinstance(x, IndexExpr):
        return x.values
    if isinstance(x, bool | np.bool_):
        raise NkiValidationError("a boolean cannot be used in an index expression", rule="indexing")
    if isinstance(x, int | np.integer):
        return np.asarray(int(x), dtype=np.int64)
    if hasattr(x, "alloc"):  # a tensor value inside an index expression: a runtime (dynamic) index
        raise Beta1Unsupported("this index expression with tensor (runtime) values is not implemented by nkieval; "
                               "supported: an [P, 1] index tile on the first dimension of an HBM tensor, and "
                               "tile[0, i] + grid (a runtime offset added to an nl.arange/nl.mgrid expression)")
    raise NkiValidationError(
        f"index expressions combine nl.arange/nl.mgrid values, loop indices and integers, not "
        f"{type(x).__name__}", rule="indexing")


class DynIndex:
    """``tile[0, i] + nl.arange(n)[None, :]``: an index whose base is a value read from an on-chip [1, 1]
    tile at run time (Beta 1's dynamic offsets for ``tensor_copy_dynamic_src/dst``) plus a static grid.
    The view it selects is an access pattern with ``scalar_offset=tile`` on that dimension."""

    __slots__ = ("tile", "values")

    def __init__(self, tile: Any, values: Any = 0) -> None:
        self.tile = tile
        self.values = np.asarray(values, dtype=np.int64)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.values.shape

    def __add__(self, o: Any) -> DynIndex:
        if isinstance(o, DynIndex):
            raise NkiValidationError("an index can hold only one runtime (tensor) offset", rule="indexing")
        return DynIndex(self.tile, self.values + _arr(o))

    __radd__ = __add__

    def __bool__(self) -> bool:
        raise NkiValidationError("dynamic control-flow depending on tensor value is not supported", rule="indexing")


#: An affine index grid without its values: ``(shape, base, coefs)``, the value at index ``j`` being
#: ``base + Σ_k coefs[k]·j[k]`` (Python ints; ``coefs[k]`` is 0 wherever ``shape[k]`` is 1).
Affine = tuple[tuple[int, ...], int, tuple[int, ...]]

#: Affine forms whose values could reach this magnitude are not kept (the values are made at once, as before): below
#: it, no sum or difference of two of them wraps in int64, so computing from the forms gives NumPy's values exactly.
_AFFINE_LIMIT = 1 << 61


def _bounded(aff: Affine) -> Affine | None:
    shape, base, coefs = aff
    reach = abs(base) + sum(abs(c) * (n - 1) for c, n in zip(coefs, shape))
    return aff if reach < _AFFINE_LIMIT else None


def _affine_int(x: Any) -> int | None:
    """``x`` as an affine constant (a Python or NumPy integer, not a bool, within the kept range), else None."""
    if isinstance(x, int | np.integer) and not isinstance(x, bool | np.bool_):
        v = int(x)
        if -_AFFINE_LIMIT < v < _AFFINE_LIMIT:
            return v
    return None


def _affine_sum(a: Affine, b: Affine, sign: int) -> Affine | None:
    """``a + sign·b`` with NumPy's broadcasting of the two shapes; None where they do not broadcast (the values
    are then made, and NumPy raises its own error)."""
    sa, sb = a[0], b[0]
    n = max(len(sa), len(sb))
    sa, sb = (1,) * (n - len(sa)) + sa, (1,) * (n - len(sb)) + sb
    ca, cb = (0,) * (n - len(a[2])) + a[2], (0,) * (n - len(b[2])) + b[2]
    shape = []
    coefs = []
    for x, y, cx, cy in zip(sa, sb, ca, cb):
        if x != y and x != 1 and y != 1:
            return None
        m = y if x == 1 else x
        shape.append(m)
        coefs.append(0 if m == 1 else cx + sign * cy)
    return _bounded((tuple(shape), a[1] + sign * b[1], tuple(coefs)))


def _affine_values(aff: Affine) -> np.ndarray:
    """The int64 values of an affine grid (a new C-contiguous array, as NumPy's arithmetic would make)."""
    shape, base, coefs = aff
    out = np.empty(shape, dtype=np.int64)
    out[...] = _affine_ramps(shape, base, coefs)
    return out


def _affine_ramps(shape: tuple[int, ...], base: int, coefs: Any) -> Any:
    """``base + Σ c_k·j_k`` built from one small ramp per axis, broadcastable to ``shape``: a single full-size sum
    where it is materialised, not one per axis."""
    expect: Any = np.int64(base)
    for k, (n, c) in enumerate(zip(shape, coefs)):
        if c:
            sh = [1] * len(shape)
            sh[k] = n
            expect = expect + (np.arange(n, dtype=np.int64) * c).reshape(sh)
    return expect


def _grid_affine(values: np.ndarray) -> Affine | None:
    """The affine form of an int64 grid known to be affine (``nl.arange``, an integer ``nl.mgrid``): read from its
    first element and its neighbours along each axis."""
    if values.size == 0:
        return None
    shape = tuple(int(n) for n in values.shape)
    base, coefs = _corner_steps(values, shape)
    return _bounded((shape, base, tuple(coefs)))


def _corner_steps(v: np.ndarray, shape: tuple[int, ...]) -> tuple[int, list[int]]:
    """``v``'s first element and its step along each axis, read from that element's neighbours (0 along an axis
    of one): the form ``v`` has if it is affine."""
    base = int(v[(0,) * len(shape)])
    coefs: list[int] = []
    for k, n in enumerate(shape):
        if n > 1:
            idx = [0] * len(shape)
            idx[k] = 1
            coefs.append(int(v[tuple(idx)]) - base)
        else:
            coefs.append(0)
    return base, coefs


#: what Beta 1 said for a grid indexed with one key, or looped over (its simulator's message)
_ONE_D_SUBSCRIPT = 'Beta 1: "Only support multi-dimensional subscript to arange!"'


class IndexExpr:
    """An index expression over ``nl.arange`` / ``nl.mgrid`` grids (concrete int64 values).

    An expression built from grids by adding, subtracting and scaling by integers keeps its affine form
    (``aff``) and makes its values only when something reads them: ``affine_select``'s predicate
    (``q0 + i_q >= k0 + i_k``, every tile pair of an attention kernel) needs only the form, and making the
    [128, 128] int64 grids and their comparison was a few per cent of such a kernel. The values, when made,
    are those NumPy's arithmetic on the grids gives (no sum wraps: :data:`_AFFINE_LIMIT`)."""

    __slots__ = ("_values", "aff")
    __array_priority__ = 2000  # our operators win over numpy scalars'

    def __init__(self, values: np.ndarray | None, aff: Affine | None = None) -> None:
        self._values = None if values is None else np.asarray(values, dtype=np.int64)
        self.aff = aff

    @property
    def values(self) -> np.ndarray:
        v = self._values
        if v is None:
            v = self._values = _affine_values(self.aff)  # type: ignore[arg-type]
        return v

    @property
    def shape(self) -> tuple[int, ...]:
        return self.aff[0] if self._values is None else self._values.shape  # type: ignore[index]

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __repr__(self) -> str:
        v = self.values
        lo, hi = (int(v.min()), int(v.max())) if v.size else (0, -1)
        return f"IndexExpr(shape={list(v.shape)}, range=[{lo}, {hi}])"

    def __getitem__(self, key: Any) -> IndexExpr:
        """``nl.arange(n)[:, None]`` places the grid on an axis: a tuple of ``:``/``None`` (and ints). A single
        key (``nl.arange(n)[i]``, which ``for i in nl.arange(n)`` also asks for) is refused, as Beta 1 refused it."""
        if not isinstance(key, tuple):
            raise NkiValidationError(f"an index grid takes only a multi-dimensional subscript such as [:, None] or "
                                     f"[None, :], got [{key!r}] ({_ONE_D_SUBSCRIPT})", rule="indexing")
        keys = key
        for k in keys:
            if not (k is None or k is Ellipsis or isinstance(k, slice | int | np.integer)):
                raise NkiValidationError(f"an index grid can only be reshaped with ':' and None, got {k!r}",
                                         rule="indexing")
        return IndexExpr(self.values[key], _placed_affine(self.aff, keys))

    def __setitem__(self, key: Any, value: Any) -> None:
        raise NkiValidationError("an index grid (nl.arange, nl.mgrid) does not support item assignment: make a tile "
                                 "of its values with nisa.iota(grid, dtype=...) first (Beta 1: cannot-assign-to-index)",
                                 rule="indexing")

    def __len__(self) -> int:
        return len(self.values)

    def __iter__(self) -> Any:
        raise NkiValidationError(f"an index grid (nl.arange, nl.mgrid) is not a loop range: loop over "
                                 f"nl.affine_range(n) or nl.sequential_range(n) ({_ONE_D_SUBSCRIPT})", rule="indexing")

    def __bool__(self) -> bool:
        raise NkiValidationError("Control-flow depending on nl.arange or nl.mgrid is not supported", rule="indexing")

    def __index__(self) -> int:
        raise NkiValidationError("an nl.arange/nl.mgrid expression is not an integer; use it to index a tensor",
                                 rule="indexing")

    # arithmetic: affine combinations (and // % which the compiler rejects unless they fold away)
    def _bin(self, other: Any, fn: Callable[[Any, Any], Any], reverse: bool = False) -> Any:
        if hasattr(other, "alloc") and fn is operator.add:
            return DynIndex(other, self.values)  # runtime offset + static grid (tensor_copy_dynamic_*)
        if isinstance(other, DynIndex) and fn is operator.add:
            return DynIndex(other.tile, other.values + self.values)
        aff = self.aff
        if aff is not None and fn in _AFFINE_OPS:
            lazy = _affine_bin(aff, other, fn, reverse)
            if lazy is not None:
                return IndexExpr(None, lazy)
        a, b = self.values, _arr(other)
        return IndexExpr(fn(b, a) if reverse else fn(a, b))

    def __add__(self, o: Any) -> IndexExpr:
        return self._bin(o, operator.add)

    def __radd__(self, o: Any) -> IndexExpr:
        return self._bin(o, operator.add, True)

    def __sub__(self, o: Any) -> IndexExpr:
        return self._bin(o, operator.sub)

    def __rsub__(self, o: Any) -> IndexExpr:
        return self._bin(o, operator.sub, True)

    def __mul__(self, o: Any) -> IndexExpr:
        return self._bin(o, operator.mul)

    def __rmul__(self, o: Any) -> IndexExpr:
        return self._bin(o, operator.mul, True)

    def __floordiv__(self, o: Any) -> IndexExpr:
        return self._bin(o, operator.floordiv)

    def __mod__(self, o: Any) -> IndexExpr:
        return self._bin(o, operator.mod)

    def __neg__(self) -> IndexExpr:
        if self.aff is not None:
            shape, base, coefs = self.aff
            return IndexExpr(None, (shape, -base, tuple(-c for c in coefs)))
        return IndexExpr(-self.values)

    def __pos__(self) -> IndexExpr:
        return self

    # comparisons build mask predicates
    def _cmp(self, other: Any, fn: Callable[[Any, Any], Any]) -> Predicate:
        diff = None if self.aff is None else _affine_bin(self.aff, other, operator.sub, False)
        if diff is not None:  # values and difference made when read (Predicate.values, .diff)
            p = Predicate(None, cmp=_CMP_NAMES[fn], aff=diff)
        else:
            o = _arr(other)
            p = Predicate(fn(self.values, o), diff=self.values - o, cmp=_CMP_NAMES[fn])
        return _joined(p, sys._getframe(2)) if _PENDING.items else p

    def __lt__(self, o: Any) -> Predicate:  # type: ignore[override]
        return self._cmp(o, operator.lt)

    def __le__(self, o: Any) -> Predicate:  # type: ignore[override]
        return self._cmp(o, operator.le)

    def __gt__(self, o: Any) -> Predicate:  # type: ignore[override]
        return self._cmp(o, operator.gt)

    def __ge__(self, o: Any) -> Predicate:  # type: ignore[override]
        return self._cmp(o, operator.ge)

    def __eq__(self, o: Any) -> Predicate:  # type: ignore[override]
        return self._cmp(o, operator.eq)

    def __ne__(self, o: Any) -> Predicate:  # type: ignore[override]
        return self._cmp(o, operator.ne)

    __hash__ = object.__hash__


_CMP_NAMES = {operator.lt: "less", operator.le: "less_equal", operator.gt: "greater",
              operator.ge: "greater_equal", operator.eq: "equal", operator.ne: "not_equal"}
_CMP_FNS = {name: fn for fn, name in _CMP_NAMES.items()}
_AFFINE_OPS = (operator.add, operator.sub, operator.mul)


def _affine_bin(aff: Affine, other: Any, fn: Callable[[Any, Any], Any], reverse: bool) -> Affine | None:
    """The affine form of ``fn(expr, other)`` (``fn(other, expr)`` when ``reverse``) for an expression of form
    ``aff``: ``other`` an integer, or (not for ``mul``) another expression with an affine form; else None (the
    values are made, as before, and NumPy's rules apply)."""
    if isinstance(other, IndexExpr):
        b = other.aff
        if b is None or fn is operator.mul:
            return None
        x, y = (b, aff) if reverse else (aff, b)
        return _affine_sum(x, y, -1 if fn is operator.sub else 1)
    k = _affine_int(other)
    if k is None:
        return None
    shape, base, coefs = aff
    if fn is operator.mul:
        return _bounded((shape, base * k, tuple(0 if n == 1 else c * k for c, n in zip(coefs, shape))))
    if fn is operator.add:
        return _bounded((shape, base + k, coefs))
    if reverse:  # k - expr
        return _bounded((shape, k - base, tuple(-c for c in coefs)))
    return _bounded((shape, base - k, coefs))


def _placed_affine(aff: Affine | None, keys: tuple[Any, ...]) -> Affine | None:
    """The affine form of ``expr[keys]`` when the keys only place the grid (``None`` and whole-axis ``:``, one per
    axis: ``nl.arange(n)[:, None]``); None for anything else (the values are indexed as before)."""
    if aff is None:
        return None
    shape, base, coefs = aff
    out_shape: list[int] = []
    out_coefs: list[int] = []
    axis = 0
    for k in keys:
        if k is None:
            out_shape.append(1)
            out_coefs.append(0)
        elif type(k) is slice and k.start is None and k.stop is None and k.step is None and axis < len(shape):
            out_shape.append(shape[axis])
            out_coefs.append(coefs[axis])
            axis += 1
        else:
            return None
    if axis != len(shape):
        return None
    return tuple(out_shape), base, tuple(out_coefs)


class Predicate:
    """A mask: comparisons of index expressions joined with ``&``, ``|`` and ``~``."""

    __slots__ = ("_diff", "_values", "aff", "cmp")
    __array_priority__ = 2000

    def __init__(self, values: np.ndarray | None, diff: np.ndarray | None = None, cmp: str | None = None,
                 aff: Affine | None = None) -> None:
        self._values = None if values is None else np.asarray(values, dtype=bool)
        # a single comparison keeps its affine form: ``diff cmp 0`` (what nisa.affine_select needs); ``aff``: the
        # difference's affine form, its values (and the comparison's) made only when read
        self._diff = diff
        self.cmp = cmp
        self.aff = aff

    @property
    def diff(self) -> np.ndarray | None:
        d = self._diff
        if d is None and self.aff is not None:
            d = self._diff = _affine_values(self.aff)
        return d

    @property
    def values(self) -> np.ndarray:
        v = self._values
        if v is None:  # (a - b cmp 0 is a cmp b: the difference does not wrap, _AFFINE_LIMIT)
            v = self._values = np.asarray(_CMP_FNS[self.cmp](self.diff, 0), dtype=bool)
        return v

    @property
    def shape(self) -> tuple[int, ...]:
        return self.aff[0] if self._values is None else self._values.shape  # type: ignore[index]

    def __repr__(self) -> str:
        return f"Predicate(shape={list(self.shape)}, true={int(self.values.sum())})"

    def _other(self, o: Any) -> np.ndarray:
        if isinstance(o, Predicate):
            return o.values
        if isinstance(o, bool | np.bool_):
            return np.asarray(bool(o))
        raise NkiValidationError(f"a mask combines comparisons of index expressions, not {type(o).__name__}",
                                 rule="indexing")

    def __and__(self, o: Any) -> Predicate:
        return Predicate(self.values & self._other(o))

    __rand__ = __and__

    def __or__(self, o: Any) -> Predicate:
        return Predicate(self.values | self._other(o))

    __ror__ = __or__

    def __invert__(self) -> Predicate:
        return Predicate(~self.values)

    def __bool__(self) -> bool:
        """``mask=(i_p < n and i_f < m)``: Python's ``and`` / ``or`` between masks joins them (as ``&`` / ``|``),
        as the Beta-1 compiler read the kernel's expression; any other truth test is control flow."""
        frame = sys._getframe(1)
        found = _bool_operator(frame.f_code, frame.f_lasti)
        if found is None:
            raise NkiValidationError("Control-flow depending on nl.arange or nl.mgrid is not supported",
                                     rule="indexing")
        op, end = found
        _PENDING.items = [*(_PENDING.items or [])[-7:], (op, self, frame, frame.f_lasti, end)]
        return op == "and"  # evaluate the right operand, whose comparisons join this one


class _Pending(threading.local):
    items: list[tuple[str, Predicate, Any, int, int]] | None = None


_PENDING = _Pending()  # left operands of ``and`` / ``or``: (operator, predicate, frame, from, to bytecode offset)


def _joined(p: Predicate, frame: Any) -> Predicate:
    """``p`` joined with the left operands of the ``and`` / ``or`` whose right operand (in ``frame``) it is in.

    Each comparison of the right operand is joined, which joins the whole right operand when it combines
    comparisons with ``&`` and ``|`` (distributivity)."""
    keep = []
    live = set()
    f = frame
    while f is not None:
        live.add(id(f))
        f = f.f_back
    for item in _PENDING.items or []:
        op, left, f, start, end = item
        if f is not frame:
            if id(f) in live:
                keep.append(item)  # a caller's operator (this frame builds part of its right operand)
        elif start < frame.f_lasti < end:
            p = Predicate(p.values & left.values if op == "and" else p.values | left.values)
            keep.append(item)
        # else: this frame has left that operator's right operand
    _PENDING.items = keep or None
    return p


@functools.lru_cache(maxsize=256)
def _instructions(code: Any) -> tuple[dict[int, int], list[dis.Instruction]]:
    ins = list(dis.get_instructions(code))
    return {x.offset: i for i, x in enumerate(ins)}, ins


def _bool_operator(code: Any, lasti: int) -> tuple[str, int] | None:
    """(``and`` | ``or``, end offset of the right operand) when the truth test at ``lasti`` is a boolean operator's
    (3.11: ``JUMP_IF_FALSE_OR_POP``; 3.12+: ``COPY 1`` then the conditional jump), else None."""
    index, ins = _instructions(code)
    i = index.get(lasti)
    if i is None:
        return None
    name = ins[i].opname
    if name in ("JUMP_IF_FALSE_OR_POP", "JUMP_IF_TRUE_OR_POP"):
        return ("and" if "FALSE" in name else "or"), int(ins[i].argval)
    j = i + 1 if name == "TO_BOOL" else i  # 3.13+: the truth test is its own instruction
    if j >= len(ins) or i < 1 or ins[i - 1].opname != "COPY" or ins[i - 1].arg != 1:
        return None
    jump = ins[j].opname
    if jump.startswith("POP_JUMP") and jump.endswith(("IF_FALSE", "IF_TRUE")):
        return ("and" if jump.endswith("IF_FALSE") else "or"), int(ins[j].argval)
    return None


def arange(*args: Any) -> IndexExpr:
    """``nl.arange(stop)`` / ``nl.arange(start, stop)``: a 1-D grid; place it with ``[:, None]`` / ``[None, :]``."""
    if not 1 <= len(args) <= 2:
        raise NkiValidationError(f"nl.arange takes (stop) or (start, stop), got {len(args)} arguments",
                                 instruction="arange", rule="argument")
    try:
        ints = [int(a) for a in args]
    except (TypeError, NkiValidationError):
        raise NkiValidationError(f"nl.arange bounds must be compile-time integers, got {args!r}",
                                 instruction="arange", rule="argument") from None
    start, stop = (0, ints[0]) if len(ints) == 1 else ints
    if stop <= start:
        raise NkiValidationError(f"nl.arange({start}, {stop}) is empty", instruction="arange", rule="argument")
    values = np.arange(start, stop, dtype=np.int64)
    return IndexExpr(values, _grid_affine(values))


class MGridResult(tuple):
    """What ``nl.mgrid[...]`` returns: unpack it (``i_p, i_f = ...``) or use ``.p``, ``.x``, ``.y``, ``.z``."""

    _FIELDS = ("p", "x", "y", "z")

    def __getattr__(self, name: str) -> IndexExpr:
        if name in self._FIELDS and self._FIELDS.index(name) < len(self):
            return self[self._FIELDS.index(name)]
        raise AttributeError(f"mgrid result has no field {name!r} (it has {', '.join(self._FIELDS[:len(self)])})")


class _MGrid:
    """``nl.mgrid[0:128, 0:512]``: dense index grids, like ``numpy.mgrid`` (integer steps only)."""

    def __getitem__(self, key: Any) -> MGridResult:
        keys = key if isinstance(key, tuple) else (key,)
        for k in keys:
            if not isinstance(k, slice) or isinstance(k.step, complex):
                raise NkiValidationError(f"nl.mgrid takes integer slices such as 0:128, got {k!r}",
                                         instruction="mgrid", rule="argument")
        grids = _mgrid(keys)
        # (integer bounds: each grid is affine; a float bound's grid is truncated to int64, so no form is kept)
        affine = all(type(v) is int or v is None for k in keys for v in (k.start, k.stop, k.step))
        if len(keys) == 1:
            return MGridResult((IndexExpr(grids, _grid_affine(grids) if affine else None),))
        return MGridResult(IndexExpr(g, _grid_affine(g) if affine else None) for g in grids)

    def __repr__(self) -> str:
        return "nl.mgrid"


mgrid = _MGrid()


def _mgrid(keys: tuple[slice, ...]) -> np.ndarray:
    """``numpy.mgrid`` over ``keys``, read-only and kept by the slices' bounds: kernels build the same grid on
    every loop iteration, and the index expressions over it never write into it."""
    # typed: 0:128.0 makes a float grid, though 128.0 == 128
    sig = tuple((type(v), v) for k in keys for v in (k.start, k.stop, k.step))
    try:
        grids = _MGRIDS.get(sig)
    except TypeError:  # an unhashable bound: numpy says what is wrong with it
        return np.mgrid[keys if len(keys) > 1 else keys[0]]
    if grids is None:
        grids = np.mgrid[keys if len(keys) > 1 else keys[0]]
        grids.flags.writeable = False
        if grids.size <= _MGRID_CACHED_ELEMENTS:
            if len(_MGRIDS) >= 64:
                _MGRIDS.pop(next(iter(_MGRIDS)))
            _MGRIDS[sig] = grids
    return grids


_MGRIDS: dict[tuple[tuple[type, Any], ...], np.ndarray] = {}
_MGRID_CACHED_ELEMENTS = 1 << 20  # a grid larger than this (8 MiB of int64) is made afresh


# -- affine analysis --------------------------------------------------------------------
def broadcast_shape(exprs: list[Any]) -> tuple[int, ...]:
    """The broadcast shape of index arrays or expressions (anything with a ``shape``): NumPy's rule, worked out
    here (``np.broadcast_shapes`` makes an array per shape, several microseconds for every access)."""
    shapes = [tuple(e.shape) for e in exprs]
    out = [1] * max(len(s) for s in shapes)
    for s in shapes:
        at = len(out) - len(s)
        for i, n in enumerate(s):
            have = out[at + i]
            if n != have:
                if have == 1:
                    out[at + i] = n
                elif n != 1:
                    raise NkiValidationError(
                        f"index expressions of shapes {', '.join(str(list(x)) for x in shapes)} do not broadcast "
                        "together", rule="indexing")
    return tuple(out)


def affine_form(values: np.ndarray, shape: tuple[int, ...]) -> tuple[int, list[int]] | None:
    """``values`` (broadcast to ``shape``) as ``base + Σ_k coef_k · j_k``; None if not affine."""
    v = np.broadcast_to(values, shape)
    if v.size == 0:
        return 0, [0] * len(shape)
    base, coefs = _corner_steps(v, shape)
    if not np.array_equal(np.broadcast_to(_affine_ramps(shape, base, coefs), shape), v):
        return None
    return base, coefs


def fitted_form(aff: Any, shape: tuple[int, ...]) -> tuple[int, list[int]] | None:
    """What :func:`affine_form` gives for an affine form ``aff`` (an index grid's, or a predicate's difference)
    fitted to the tile or access ``shape`` as broadcasting fits it (leading unit dimensions dropped, then
    broadcast, right-aligned), worked out from the form alone; None where the fitting would fail or the shape is
    empty (the values path then raises or answers as before)."""
    dshape, base, coefs = aff
    n = len(shape)
    if len(dshape) > n:
        if any(d != 1 for d in dshape[:len(dshape) - n]):
            return None
        dshape, coefs = dshape[len(dshape) - n:], coefs[len(coefs) - n:]
    pad = n - len(dshape)
    dshape, coefs = (1,) * pad + tuple(dshape), (0,) * pad + tuple(coefs)
    out = []
    for d, c, m in zip(dshape, coefs, shape):
        if m <= 0 or (d != m and d != 1):
            return None
        out.append(c if d == m and m > 1 else 0)
    return base, out


def mask_array(mask: Any, shape: tuple[int, ...], where: str) -> np.ndarray | None:
    """A mask broadcast to an instruction's tile ``shape``; None means "no mask"."""
    if mask is None:
        return None
    if isinstance(mask, bool | np.bool_):
        return None if mask else np.zeros(shape, dtype=bool)
    if not isinstance(mask, Predicate):
        raise NkiValidationError(
            f"mask of '{where}' must be a predicate over nl.arange/nl.mgrid indices (e.g. i_p < n), got "
            f"{type(mask).__name__}; masks must be affine in static loop indices", instruction=where,
            operand="mask", rule="indexing")
    m = mask.values
    if m.ndim > len(shape):
        extra = m.shape[: m.ndim - len(shape)]
        if any(s != 1 for s in extra):
            raise NkiValidationError(f"mask of shape {list(m.shape)} does not fit the tile shape {list(shape)}",
                                     instruction=where, operand="mask", rule="indexing")
        m = m.reshape(m.shape[m.ndim - len(shape):])
    try:
        return np.broadcast_to(m, shape)
    except ValueError:
        raise NkiValidationError(f"mask of shape {list(m.shape)} does not fit the tile shape {list(shape)}",
                                 instruction=where, operand="mask", rule="indexing") from None


def mask_boxes(m: np.ndarray) -> list[tuple[slice, ...]]:
    """Split a boolean mask into disjoint boxes (tuples of slices) covering exactly its true elements.

    The usual Beta-1 masks (``i_p < n``, ``(i_p < n) & (i_f < m)``) are one box, so the
    instruction runs once on a smaller tile, as the compiler lowers them. Other shapes are
    split along the leading axis into runs of equal sub-masks, recursively.
    """
    if m.ndim == 0:
        return [()] if bool(m) else []
    if m.all():
        return [tuple(slice(0, n) for n in m.shape)]
    if not m.any():
        return []
    # one box?
    proj = [np.any(m, axis=tuple(a for a in range(m.ndim) if a != k)) for k in range(m.ndim)]
    ranges = []
    for p in proj:
        nz = np.nonzero(p)[0]
        ranges.append((int(nz[0]), int(nz[-1]) + 1))
    box = tuple(slice(lo, hi) for lo, hi in ranges)
    if m[box].all() and int(m.sum()) == int(np.prod([hi - lo for lo, hi in ranges])):
        return [box]
    boxes: list[tuple[slice, ...]] = []
    i, n = 0, m.shape[0]
    while i < n:
        j = i + 1
        while j < n and np.array_equal(m[j], m[i]):
            j += 1
        for sub in mask_boxes(m[i]):
            boxes.append((slice(i, j), *sub))
        i = j
    return boxes


# -- SPMD grid helpers -------------------------------------------------------------------
class nc:
    """``nl.nc(n)``: a launch-grid dimension spread over ``n`` physical NeuronCores (trn2+)."""

    def __init__(self, n: int) -> None:
        self.n = int(n)

    def __mul__(self, other: Any) -> spmd_dim:
        return spmd_dim(self, other)

    def __rmul__(self, other: Any) -> spmd_dim:
        return spmd_dim(other, self)

    def __int__(self) -> int:
        return self.n

    def __index__(self) -> int:
        return self.n

    def __repr__(self) -> str:
        return f"nl.nc({self.n})"


class spmd_dim:
    """``nl.spmd_dim(nl.nc(2), 2)``: one grid dimension of size ``Π sizes``, tiled over cores."""

    def __init__(self, *sizes: Any) -> None:
        if not sizes:
            raise NkiValidationError("nl.spmd_dim needs at least one size", rule="argument")
        self.sizes = sizes

    @property
    def size(self) -> int:
        return int(np.prod([int(s) for s in self.sizes]))

    @property
    def cores(self) -> int:
        return int(np.prod([s.n for s in self.sizes if isinstance(s, nc)] or [1]))

    def __int__(self) -> int:
        return self.size

    def __index__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return f"nl.spmd_dim({', '.join(map(repr, self.sizes))})"


def grid_dims(key: Any) -> tuple[tuple[int, ...], int]:
    """Normalise ``kernel[...]`` to (grid sizes, physical cores requested)."""
    keys = key if isinstance(key, tuple) else (key,)
    sizes: list[int] = []
    cores = 1
    for k in keys:
        if isinstance(k, nc):
            sizes.append(k.n)
            cores *= k.n
        elif isinstance(k, spmd_dim):
            sizes.append(k.size)
            cores *= k.cores
        else:
            try:
                sizes.append(int(k))
            except (TypeError, ValueError):
                raise NkiValidationError(f"SPMD grid dimension {k!r} is not an integer", instruction="launch",
                                         rule="kernel") from None
    if any(s <= 0 for s in sizes):
        raise NkiValidationError(f"SPMD grid {sizes} has a non-positive dimension", instruction="launch",
                                 rule="kernel")
    return tuple(sizes), cores


class par_dim:
    """``nl.par_dim(n)``: marks the partition dimension of a shape (block dimensions may come first)."""

    def __init__(self, n: int) -> None:
        self.n = int(n)

    def __int__(self) -> int:
        return self.n

    def __index__(self) -> int:
        return self.n

    def __repr__(self) -> str:
        return f"nl.par_dim({self.n})"


def split_par_dim(shape: Any) -> tuple[tuple[int, ...], int]:
    """(plain shape, index of the partition dimension) for a shape that may contain ``par_dim``."""
    if isinstance(shape, int | np.integer | par_dim):
        shape = (shape,)
    dims = list(shape)
    marked = [i for i, d in enumerate(dims) if isinstance(d, par_dim)]
    if len(marked) > 1:
        raise NkiValidationError(f"shape {dims} marks more than one partition dimension", rule="argument")
    try:
        plain = tuple(int(d) for d in dims)
    except (TypeError, ValueError):
        raise NkiValidationError(f"shape must contain integers, got {dims!r}", rule="argument") from None
    return plain, (marked[0] if marked else 0)
