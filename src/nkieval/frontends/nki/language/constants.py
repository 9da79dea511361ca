"""``nki.language.constants``: ``sizeinbytes(dtype)`` (as ``neuronxcc.nki.language.constants``)."""

from typing import Any

from nkieval.sim import dtypes as _dt


def sizeinbytes(dtype: Any) -> int:
    """Bytes per element of an NKI dtype."""
    return int(_dt.to_dtype(dtype).itemsize)


__all__ = ["sizeinbytes"]
