"""``neuronxcc.nki.typing``: ``nt.tensor[shape, dtype]`` / ``nt.mutable_tensor`` annotations.

No runtime checks. An annotation with a shape can also stand in for a kernel argument, as Beta-1
benchmark drivers pass ``nt.tensor[[K, M], nl.bfloat16]`` placeholders: the launcher turns it into
a zero-filled array of that shape and dtype.
"""

from __future__ import annotations

from typing import Any


class TensorType:
    """``tensor``, ``tensor[128, 512]``, ``tensor[[K, M], nl.bfloat16]``."""

    def __init__(self, name: str, shape: tuple[int, ...] | None = None, dtype: Any = None) -> None:
        self.name = name
        self.shape = shape
        self.dtype = dtype

    def __getitem__(self, params: Any) -> TensorType:
        items = params if isinstance(params, tuple) else (params,)
        dtype = None
        if items and not isinstance(items[-1], int | list | tuple) and not hasattr(items[-1], "__index__"):
            dtype, items = items[-1], items[:-1]
        if len(items) == 1 and isinstance(items[0], list | tuple):
            items = tuple(items[0])
        try:
            shape = tuple(int(s) for s in items)
        except (TypeError, ValueError):
            shape = None
        return TensorType(self.name, shape, dtype)

    def __repr__(self) -> str:
        return f"nki.typing.{self.name}" + (f"[{list(self.shape)}, {self.dtype}]" if self.shape is not None else "")


tensor = TensorType("tensor")
mutable_tensor = TensorType("mutable_tensor")
scalar = TensorType("scalar")

__all__ = ["TensorType", "mutable_tensor", "scalar", "tensor"]
