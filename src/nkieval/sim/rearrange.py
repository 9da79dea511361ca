"""einops-style ``NkiTensor.rearrange`` as a composition of the zero-cost view methods.

Why a separate module: parsing the pattern is its own job, and keeping it apart keeps
tensor.py about storage and views. Supported: names, parenthesised groups on either side,
and sizes given as keyword arguments (one unknown per group is inferred). Anything that
would need a copy raises the same error as the underlying view method.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

from nkieval.sim.errors import NkiValidationError

if TYPE_CHECKING:
    from nkieval.sim.tensor import NkiTensor

_TOKEN = re.compile(r"\(|\)|[A-Za-z_][A-Za-z0-9_]*")


def _parse(side: str) -> list[list[str]]:
    """'p (a b) c' -> [['p'], ['a', 'b'], ['c']]."""
    groups: list[list[str]] = []
    cur: list[str] | None = None
    for tok in _TOKEN.findall(side):
        if tok == "(":
            if cur is not None:
                raise ValueError("nested parentheses")
            cur = []
        elif tok == ")":
            if cur is None:
                raise ValueError("unbalanced ')'")
            groups.append(cur)
            cur = None
        elif cur is not None:
            cur.append(tok)
        else:
            groups.append([tok])
    if cur is not None:
        raise ValueError("unbalanced '('")
    return groups


def rearrange_view(t: NkiTensor, pattern: str, sizes: dict[str, int]) -> NkiTensor:
    def bad(why: str) -> NkiValidationError:
        return NkiValidationError(f"rearrange {pattern!r}: {why}", instruction="rearrange", rule="indexing")

    if "->" not in pattern:
        raise bad("pattern needs '->'")
    lhs_s, rhs_s = pattern.split("->")
    try:
        lhs, rhs = _parse(lhs_s), _parse(rhs_s)
    except ValueError as e:
        raise bad(str(e)) from None
    if len(lhs) != t.ndim:
        raise bad(f"left side has {len(lhs)} dimensions, the tensor has {t.ndim}")
    names_l = [n for g in lhs for n in g]
    names_r = [n for g in rhs for n in g]
    if sorted(names_l) != sorted(names_r) or len(set(names_l)) != len(names_l):
        raise bad("both sides must name the same axes, each once")
    dims: dict[str, int] = {}
    for g, n in zip(lhs, t.shape):
        known = [sizes[x] for x in g if x in sizes]
        unknown = [x for x in g if x not in sizes]
        if len(unknown) > 1:
            raise bad(f"group {g} needs sizes for all but one axis")
        prod = math.prod(known)
        if unknown:
            if n % prod:
                raise bad(f"dimension of size {n} is not divisible by {prod}")
            dims[unknown[0]] = n // prod
        elif prod != n:
            raise bad(f"group {g} has {prod} elements, the dimension has {n}")
        dims.update({x: sizes[x] for x in g if x in sizes})
    # split the left groups (from the back so dimension numbers stay valid)
    v = t
    for k in range(len(lhs) - 1, -1, -1):
        if len(lhs[k]) > 1:
            v = v.reshape_dim(k, tuple(dims[x] for x in lhs[k]))
    v = v.permute(tuple(names_l.index(x) for x in names_r))
    # merge the right groups (from the back)
    pos = [0]
    for g in rhs:
        pos.append(pos[-1] + len(g))
    for k in range(len(rhs) - 1, -1, -1):
        if len(rhs[k]) > 1:
            v = v.flatten_dims(pos[k], pos[k + 1] - 1)
        elif not rhs[k]:
            raise bad("empty group")
    return v
