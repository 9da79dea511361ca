"""``nki.lnc``: the LNC (logical NeuronCore) instructions under their newer namespace.

NKI 0.8 announces that ``sendrecv`` and ``core_barrier`` move from ``nki.isa`` to ``nki.lnc``;
the current docs already list ``nki.lnc.core_barrier``. These are the same instructions as in
``nki.isa`` (same validation, same trace records). ``sendrecv_compute`` is not modelled.
"""

from __future__ import annotations

from nkieval.sim.isa import INSTRUCTIONS as _INSTRUCTIONS

core_barrier = _INSTRUCTIONS["core_barrier"].fn
sendrecv = _INSTRUCTIONS["sendrecv"].fn

__all__ = ["core_barrier", "sendrecv"]
