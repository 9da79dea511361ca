"""The legacy Beta-1 (``neuronxcc.nki``) front end over nkieval's simulator.

Modules: :mod:`.index` (arange/mgrid grids, masks, SPMD grid helpers), :mod:`.tensor` (Beta-1
tensors: block dims, advanced indexing, operators), :mod:`.ops` (lowering onto the simulator's
instructions), :mod:`.language` / :mod:`.isa` (the ``nl.*`` / ``nisa.*`` APIs), :mod:`.compiler`
(direct-allocation helpers), :mod:`.launch` (jit modes, SPMD grids, simulate_kernel) and
:mod:`.state` (affine_range write-conflict detection). The importable names
``neuronxcc.nki...`` are served from :mod:`nkieval.frontends.neuronxcc`.
"""

from nkieval.frontends.beta1 import ops as _ops  # noqa: F401 - registers the tile operators
from nkieval.frontends.beta1.errors import Beta1Unsupported

__all__ = ["Beta1Unsupported"]
