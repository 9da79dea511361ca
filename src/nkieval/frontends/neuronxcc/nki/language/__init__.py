"""``neuronxcc.nki.language`` (Beta 1)."""

from nkieval.frontends.beta1 import language as _impl
from nkieval.frontends.beta1.language import *  # noqa: F403 - the Beta-1 nl.* API
from nkieval.sim.ops import OPS as _OPS

# operator objects Beta 1 code passes as op= (nl.add ...) are the value-returning functions
# themselves; the instructions accept them through their names.
for _name in _OPS:
    if _name not in globals():
        globals()[_name] = _OPS[_name]

__all__ = list(_impl.__all__)
