"""``nl.NKIObject``: the base of user classes used inside kernels, built the way the NKI compiler builds them.

Rule (NKI Language Guide, "Class Support", Neuron 2.27.0 / NKI 0.1.0 and every release since): "The @dataclass
decorator is optional; classes with and without the @dataclass decorator will be compiled in the same way by the
NKI compiler. The compiler will create the initializer functions __init__ and __post_init__, if they are not
provided by the user", and the default initializer takes every declared field as a keyword defaulting to its
declared default, else ``None`` (``def __init__(self, x=None, y=False)``), then calls ``__post_init__``.
So a ``@dataclass`` subclass built without a field gets ``None`` for it, as a plain annotated class does, instead
of Python's ``TypeError``; the base's documented signature is ``NKIObject.__init__(**kwargs)``, so a class that
declares no annotated field takes any keyword. Release notes of NKI 0.4.0 (Neuron 2.30.0): a
``@dataclass(frozen=True)`` subclass "can now be constructed normally", so the initializer writes past a frozen
``__setattr__``. An ``__init__`` written in the class body is the user's and is kept.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

_NO_DEFAULT = object()


def _declared_fields(cls: type) -> dict[str, Any]:
    """Annotated, non-``ClassVar`` names from the base down, each with its ``default_factory`` if it has one."""
    fields: dict[str, Any] = {}
    dataclass_fields = getattr(cls, "__dataclass_fields__", {})
    for klass in reversed(cls.__mro__):
        for name, ann in inspect.get_annotations(klass).items():
            if name in fields or "ClassVar" in str(ann):
                continue
            spec = dataclass_fields.get(name)
            has_factory = spec is not None and spec.default_factory is not dataclasses.MISSING
            fields[name] = spec.default_factory if has_factory else _NO_DEFAULT
    return fields


def _user_init(cls: type) -> bool:
    """Whether the nearest ``__init__`` below ``NKIObject`` was written in a class body (not generated)."""
    for klass in cls.__mro__:
        if klass is NKIObject:
            return False
        if "__init__" in klass.__dict__:
            return bool(klass.__dict__.get("_nki_body_defines_init", False))
    return False


def _nki_initialize(obj: NKIObject, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    cls = type(obj)
    fields = _declared_fields(cls)
    if len(args) > len(fields):
        raise TypeError(f"{cls.__name__}() takes {len(fields)} positional arguments but {len(args)} were given")
    values: dict[str, Any] = dict(zip(fields, args))
    for name, value in kwargs.items():
        if fields and name not in fields:
            raise TypeError(f"{cls.__name__}() got an unexpected keyword argument '{name}'")
        if name in values:
            raise TypeError(f"{cls.__name__}() got multiple values for argument '{name}'")
        values[name] = value
    for name, factory in fields.items():
        if name not in values:
            values[name] = factory() if factory is not _NO_DEFAULT else getattr(cls, name, None)
    for name, value in values.items():
        object.__setattr__(obj, name, value)  # past a frozen dataclass's __setattr__ (NKI 0.4.0)
    post_init = getattr(obj, "__post_init__", None)
    if post_init is not None:
        post_init()


class _NKIClass(type):
    """Builds instances with NKI's default initializer unless the class body wrote its own ``__init__``."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if _user_init(cls):
            return super().__call__(*args, **kwargs)
        obj = cls.__new__(cls)
        _nki_initialize(obj, args, kwargs)
        return obj


class NKIObject(metaclass=_NKIClass):
    """Base of user classes passed to / used inside kernels (``@dataclass class Cfg(nl.NKIObject)``, or a plain
    annotated class constructed with keywords: ``Dims(B=4, H=128)``; fields not given are ``None``).

    The compiler converts such objects via their ``__dict__``; in the simulator they are plain Python objects.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # Runs before any class decorator: an __init__ present now was written in the class body.
        cls._nki_body_defines_init = "__init__" in cls.__dict__

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _nki_initialize(self, args, kwargs)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in vars(self).items())})"


__all__ = ["NKIObject"]
