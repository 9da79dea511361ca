"""``nki.language``: dtypes, memory regions, operator objects and the value-returning ``nl.*`` API."""

from __future__ import annotations

from nkieval.sim import dtypes as _dt
from nkieval.sim import language as _lang
from nkieval.sim.language import *  # noqa: F403 - the nl.* API is defined in the simulator
from nkieval.sim.ops import OPS as _OPS

_DTYPES = {d.name if d.name != "bool" else "bool_": d for d in _dt.ALL_DTYPES}
globals().update(_DTYPES)  # nl.float32, nl.bfloat16, ...
globals().update(_OPS)  # nl.add, nl.exp, ... operator objects (callable as value-returning wrappers)
# A name that is both an operator and a wrapper (nl.copy, nl.add …) stays the Op object: calling it runs the
# wrapper registered in nkieval.sim.ops.LANGUAGE_IMPL.
globals().update({n: getattr(_lang, n) for n in _lang.__all__ if n not in _OPS})

from . import constants  # noqa: E402, F401 - ``nki.language.constants`` (``from nki.language.constants import sizeinbytes``)
from ._objects import NKIObject  # noqa: E402, F401 - user classes in kernels (the NKI class rule is documented there)

__all__ = sorted({*_lang.__all__, *_OPS, *_DTYPES, "NKIObject", "constants"})
