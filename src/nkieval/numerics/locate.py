"""Where mismatches sit in an output: a few rows or columns, a diagonal, a 128-periodic pattern, the last
partial tile, or spread out (the words of a numerics verdict)."""

from __future__ import annotations

import numpy as np


def _few(v: np.ndarray) -> np.ndarray | None:
    """``np.unique(v)`` when it has at most two values (every value is the min or the max), else
    None: the pattern tests below only ever ask whether there are at most two, and which. Two
    reductions and one comparison instead of a sort or hash of every index."""
    if v.size == 0:
        return np.unique(v)
    lo, hi = v.min(), v.max()
    if lo == hi:
        return np.array([lo], dtype=v.dtype)
    if np.all((v == lo) | (v == hi)):
        return np.array([lo, hi], dtype=v.dtype)
    return None


def _where(indices: list[np.ndarray], total_mismatch: int, shape: tuple[int, ...], n: int) -> str:
    """Describe where mismatches sit: a few rows/columns, a diagonal, a 128-periodic pattern,
    the last tile, or spread out."""
    if not indices or total_mismatch == 0:
        return ""
    flat = np.concatenate(indices)
    if not shape or len(shape) == 0:
        return "the scalar output"
    sub = np.unravel_index(flat, shape)
    parts = []
    if len(shape) >= 2:
        rows, cols = sub[-2], sub[-1]
        ur, uc = _few(rows), _few(cols)
        nr, nc = shape[-2], shape[-1]
        if uc is not None and nr > 1 and total_mismatch >= min(nr, 4) and uc.size < nc:
            parts.append(f"confined to column(s) {', '.join(map(str, uc[:2]))}")
        elif ur is not None and nc > 1 and total_mismatch >= min(nc, 4) and ur.size < nr:
            parts.append(f"confined to row(s) {', '.join(map(str, ur[:2]))}")
        elif total_mismatch >= 4 and (diag := _few(cols - rows)) is not None:
            parts.append(f"along the diagonal(s) col−row = {', '.join(map(str, diag[:2]))}")
        for name, v, size in (("columns", cols, nc), ("rows", rows, nr)):
            if size > 128 and v.size >= 4:
                res = _few(v % 128)
                if res is not None and v.min() != v.max():
                    parts.append(f"periodic in the {name} with period 128 (residue {res[0]}): a tile-edge pattern")
                    break
                if v.min() >= (size // 128) * 128 and size % 128:
                    parts.append(f"only in the last partial 128-{name[:-1]} tile")
                    break
    else:
        v = sub[-1]
        size = shape[-1]
        if size > 128 and v.size >= 2 and _few(v % 128) is not None:
            parts.append("periodic with period 128: a tile-edge pattern")
    if not parts:
        frac = 100.0 * total_mismatch / max(n, 1)
        parts.append(f"spread over the output ({frac:.3g}% of elements)")
    return "; ".join(parts)
