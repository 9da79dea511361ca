"""``neuronxcc.nki.compiler`` (Beta 1): ``sbuf``/``psum`` allocators for ``buffer=`` and directives."""

from nkieval.frontends.beta1 import compiler as _impl
from nkieval.frontends.beta1.compiler import *  # noqa: F403

__all__ = list(_impl.__all__)
