"""NumPy floating-point error states for the simulator's arithmetic: what ``np.errstate`` does, at a quarter of its
cost.

The engines' arithmetic runs with NumPy's floating-point errors ignored (overflow to inf, NaN from invalid
operations are the hardware's results, not errors), so nearly every instruction enters ``np.errstate`` once or
twice: 2 µs each in NumPy 2 (an object with six fields, a keyword call making the error-state capsule, two method
calls), about 5 % of a small instruction. ``np.errstate(...)`` sets NumPy's error-state context variable to a
capsule that ``_make_extobj`` derives from the current one and the errors given, and resets it on exit; an
:class:`Errors` mode does the same, remembering the derived capsule per current capsule (capsules never change,
and the one remembered is kept alive by the memo, so its identity is never reused). Without those NumPy internals
a mode is ``np.errstate`` itself.

Use: ``IGNORE_ALL = Errors(all="ignore")`` once, then ``with IGNORE_ALL():`` (a fresh context manager per use, so
nested and concurrent uses each reset their own token).
"""

from __future__ import annotations

from typing import Any

import numpy as np

try:  # (NumPy 2: the error state is a context variable holding a capsule)
    from numpy._core._ufunc_config import _extobj_contextvar, _make_extobj
except ImportError:  # pragma: no cover - another NumPy: np.errstate itself
    _extobj_contextvar = _make_extobj = None

_MEMO_MAX = 64  # error states remembered per mode (one per distinct enclosing state: a handful)


class Errors:
    """A floating-point error mode, ``np.errstate``'s keywords (``all``, ``divide``, ``over``, ``under``,
    ``invalid``); calling it gives a context manager that sets the mode."""

    __slots__ = ("_derived", "_kwargs")

    def __init__(self, *, all: str | None = None, divide: str | None = None, over: str | None = None,
                 under: str | None = None, invalid: str | None = None) -> None:
        # (the keywords np.errstate.__enter__ passes to _make_extobj, unspecified ones as None)
        self._kwargs = {"all": all, "divide": divide, "over": over, "under": under, "invalid": invalid}
        self._derived: dict[Any, Any] = {}  # enclosing state's capsule -> this mode's capsule within it

    def __call__(self) -> Any:
        if _extobj_contextvar is None:
            return np.errstate(**self._kwargs)
        return _Entered(self)

    def _within(self, current: Any) -> Any:
        ext = self._derived.get(current)
        if ext is None:
            ext = _make_extobj(**self._kwargs)  # (derived from the current state, as np.errstate's is)
            if len(self._derived) >= _MEMO_MAX:
                self._derived.clear()
            self._derived[current] = ext
        return ext


class _Entered:
    __slots__ = ("_mode", "_token")

    def __init__(self, mode: Errors) -> None:
        self._mode = mode

    def __enter__(self) -> None:
        self._token = _extobj_contextvar.set(self._mode._within(_extobj_contextvar.get()))

    def __exit__(self, *exc: object) -> None:
        _extobj_contextvar.reset(self._token)


IGNORE_ALL = Errors(all="ignore")
IGNORE_INVALID = Errors(invalid="ignore")
IGNORE_OVER = Errors(over="ignore")
IGNORE_OVER_INVALID = Errors(over="ignore", invalid="ignore")
