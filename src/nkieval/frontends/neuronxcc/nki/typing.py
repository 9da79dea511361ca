"""``neuronxcc.nki.typing``: ``nt.tensor[shape, dtype]`` / ``nt.mutable_tensor`` annotations (no runtime checks)."""

from nkieval.frontends.nki.typing import mutable_tensor, scalar, tensor

__all__ = ["mutable_tensor", "scalar", "tensor"]
