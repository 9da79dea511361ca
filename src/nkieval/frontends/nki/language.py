"""``nki.language``: dtypes, memory regions, operator objects and the value-returning ``nl.*`` API."""

from __future__ import annotations

from nkieval.sim import language as _lang
from nkieval.sim.dtypes import (
    bfloat16,
    bool_,
    float8_e4m3,
    float8_e4m3fn,
    float8_e5m2,
    float8_e8m0fnu,
    float16,
    float32,
    int8,
    int16,
    int32,
    tfloat32,
    uint8,
    uint16,
    uint32,
)
from nkieval.sim.language import *  # noqa: F403 - the nl.* API is defined in the simulator
from nkieval.sim.ops import OPS as _OPS

globals().update(_OPS)  # nl.add, nl.exp, ... operator objects (callable as value-returning wrappers)
# A name that is both an operator and a wrapper (nl.copy, nl.add …) stays the Op object: calling it runs the
# wrapper registered in nkieval.sim.ops.LANGUAGE_IMPL.
globals().update({n: getattr(_lang, n) for n in _lang.__all__ if n not in _OPS})

__all__ = sorted({*_lang.__all__, *_OPS, "bfloat16", "bool_", "float8_e4m3", "float8_e4m3fn", "float8_e5m2",
                  "float8_e8m0fnu", "float16", "float32", "int8", "int16", "int32", "tfloat32", "uint8", "uint16",
                  "uint32"})
