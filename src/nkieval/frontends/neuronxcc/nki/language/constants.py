"""``neuronxcc.nki.language.constants``: ``sizeinbytes(dtype)`` (the same as ``nki.language.constants``)."""

from nkieval.frontends.nki.language.constants import sizeinbytes

__all__ = ["sizeinbytes"]
