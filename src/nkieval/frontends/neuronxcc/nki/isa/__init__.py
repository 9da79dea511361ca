"""``neuronxcc.nki.isa`` (Beta 1)."""

from nkieval.frontends.beta1 import isa as _impl
from nkieval.frontends.beta1.isa import *  # noqa: F403 - the Beta-1 nisa.* API

__all__ = list(_impl.__all__)
