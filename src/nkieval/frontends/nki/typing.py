"""``nki.typing``: annotation helpers (``nt.tensor[shape, dtype]``); carry no runtime checks."""

from __future__ import annotations

from typing import Any


class _Annotation:
    def __init__(self, name: str) -> None:
        self.name = name

    def __getitem__(self, params: Any) -> _Annotation:
        return self

    def __repr__(self) -> str:
        return f"nki.typing.{self.name}"


tensor = _Annotation("tensor")
mutable_tensor = _Annotation("mutable_tensor")
scalar = _Annotation("scalar")

__all__ = ["mutable_tensor", "scalar", "tensor"]
