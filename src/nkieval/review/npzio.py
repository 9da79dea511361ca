"""Arrays across the sandbox boundary: ``.npz`` with ml_dtypes (bf16, fp8) stored as raw bytes.

Why not pickle: the parent must never unpickle anything a candidate process wrote (pickle runs
code). ``np.load(..., allow_pickle=False)`` of plain numeric arrays is inert. NumPy cannot name
ml_dtypes in an npz, so those arrays travel as uint8 bytes plus a small metadata array.
"""

from __future__ import annotations

import io
from pathlib import Path

import ml_dtypes
import numpy as np

_ML = {name: np.dtype(getattr(ml_dtypes, name)) for name in
       ("bfloat16", "float8_e4m3", "float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu") if hasattr(ml_dtypes, name)}
_PLAIN_KINDS = "fiub"


class ArrayFileError(ValueError):
    """An array file that is not what the harness wrote or expects (size, dtype, layout)."""


def dumps(arrays: dict[str, np.ndarray]) -> bytes:
    bio = io.BytesIO()
    packed: dict[str, np.ndarray] = {}
    for name, a in arrays.items():
        a = np.ascontiguousarray(a)
        if a.dtype.name in _ML:
            packed[name] = a.view(np.uint8).reshape(-1)
            packed[name + "__dtype"] = np.array([a.dtype.name])
            packed[name + "__shape"] = np.array(a.shape, dtype=np.int64)
        else:
            packed[name] = a
    np.savez(bio, **packed)
    return bio.getvalue()


def load(path: str | Path, max_bytes: int | None = None) -> dict[str, np.ndarray]:
    """Read an npz written by :func:`dumps`, refusing pickles, odd dtypes and oversize files."""
    p = Path(path)
    if max_bytes is not None and p.stat().st_size > max_bytes:
        raise ArrayFileError(f"{p.name} is {p.stat().st_size} bytes, more than the {max_bytes} expected")
    out: dict[str, np.ndarray] = {}
    try:
        with np.load(p, allow_pickle=False) as z:
            raw = {k: z[k] for k in z.files}
    except (ValueError, OSError) as e:
        raise ArrayFileError(f"{p.name} is not a readable array file: {e}") from None
    for name, a in raw.items():
        if name.endswith(("__dtype", "__shape")):
            continue
        if name + "__dtype" in raw:
            dname = str(raw[name + "__dtype"][0])
            if dname not in _ML:
                raise ArrayFileError(f"{p.name}:{name} has unknown dtype {dname!r}")
            shape = tuple(int(s) for s in raw[name + "__shape"])
            out[name] = a.view(_ML[dname]).reshape(shape)
        else:
            if a.dtype.kind not in _PLAIN_KINDS:
                raise ArrayFileError(f"{p.name}:{name} has unsupported dtype {a.dtype}")
            out[name] = a
    return out
