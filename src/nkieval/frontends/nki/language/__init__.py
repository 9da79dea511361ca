"""``nki.language``: dtypes, memory regions, operator objects and the value-returning ``nl.*`` API."""

from __future__ import annotations

import inspect as _inspect

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


class NKIObject:
    """Base of user classes passed to / used inside kernels (``@dataclass class Cfg(nl.NKIObject)``, or a plain
    annotated class constructed with keywords: ``Dims(B=4, H=128)``; fields not given stay unset until assigned).

    The compiler converts such objects via their ``__dict__``; in the simulator they are plain Python objects.
    A ``@dataclass`` subclass keeps its generated ``__init__``.
    """

    def __init__(self, *args: object, **kwargs: object) -> None:
        fields: list[str] = []
        for klass in reversed(type(self).__mro__):
            for name, ann in _inspect.get_annotations(klass).items():
                if name not in fields and "ClassVar" not in str(ann):
                    fields.append(name)
        if len(args) > len(fields):
            raise TypeError(f"{type(self).__name__}() takes {len(fields)} positional arguments but {len(args)} were "
                            "given")
        for name, value in zip(fields, args):
            setattr(self, name, value)
        for name, value in kwargs.items():
            if fields and name not in fields:
                raise TypeError(f"{type(self).__name__}() got an unexpected keyword argument '{name}'")
            setattr(self, name, value)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in vars(self).items())})"


from . import constants  # noqa: E402, F401 - ``nki.language.constants`` (``from nki.language.constants import sizeinbytes``)

__all__ = sorted({*_lang.__all__, *_OPS, *_DTYPES, "NKIObject", "constants"})
