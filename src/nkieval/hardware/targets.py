"""Load per-generation hardware facts from TOML data files."""

from __future__ import annotations

import functools
import os
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Literal

TARGET_ENV_VAR = "NEURON_PLATFORM_TARGET_OVERRIDE"
DEFAULT_TARGET = "trn2"

FactStatus = Literal["documented", "derived", "assumed", "fitted"]


class UnknownTargetError(ValueError):
    """Raised for a target name that is not trn1/trn2/trn3 or one of their aliases."""


@dataclass(frozen=True)
class Fact:
    """One hardware fact: its value, where it comes from, and how sure we are of it."""

    name: str
    value: Any
    source: str
    status: FactStatus
    note: str = ""


@dataclass(frozen=True)
class Target:
    """A NeuronCore generation. Attribute access ``target.partitions`` reads a fact's value."""

    name: str
    generation: int
    aliases: tuple[str, ...]
    description: str
    facts: dict[str, Fact] = field(repr=False)

    def __getattr__(self, item: str) -> Any:
        # Only called when normal lookup fails: expose fact values as attributes.
        facts = self.__dict__.get("facts", {})
        if item in facts:
            value = facts[item].value
            if not item.startswith("_") and isinstance(value, int | float | str | bool):
                self.__dict__[item] = value  # facts are fixed: later reads are plain attribute lookups
            return value
        raise AttributeError(f"target {self.__dict__.get('name')!r} has no fact {item!r}")

    def fact(self, name: str) -> Fact:
        try:
            return self.facts[name]
        except KeyError:
            raise KeyError(f"target {self.name!r} has no fact {name!r}") from None

    @functools.cached_property
    def feature_set(self) -> frozenset[str]:
        flags = self.facts["features"].value
        return frozenset(f.split(":")[0] for f in flags if f.endswith(":yes"))

    @functools.cached_property
    def known_features(self) -> frozenset[str]:
        return frozenset(f.split(":")[0] for f in self.facts["features"].value)

    def has(self, feature: str) -> bool:
        """Whether this generation has a feature (e.g. ``double_row``, ``mx``)."""
        if feature not in self.known_features:
            raise KeyError(f"unknown hardware feature {feature!r}")
        return feature in self.feature_set

    @property
    def nc_version(self) -> int:
        return self.generation


def _load(filename: str) -> Target:
    text = resources.files("nkieval.hardware").joinpath("data", filename).read_text()
    data = tomllib.loads(text)
    t = data["target"]
    facts: dict[str, Fact] = {}
    for section in ("facts", "perf"):
        for name, raw in data.get(section, {}).items():
            if name in facts:
                raise ValueError(f"{filename}: fact {name!r} defined twice")
            facts[name] = Fact(
                name=name,
                value=raw["value"],
                source=raw["source"],
                status=raw["status"],
                note=raw.get("note", ""),
            )
    return Target(
        name=t["name"],
        generation=int(t["generation"]),
        aliases=tuple(t["aliases"]),
        description=t["description"],
        facts=facts,
    )


@functools.cache
def all_targets() -> dict[str, Target]:
    """Every known target by canonical name."""
    return {t.name: t for t in (_load(f"{n}.toml") for n in ("trn1", "trn2", "trn3"))}


def resolve_target_name(name: str | int | None = None) -> str:
    """Canonical target name for an alias (``gen3`` → ``trn2``), an nc_version int, or the
    ``NEURON_PLATFORM_TARGET_OVERRIDE`` environment variable when ``name`` is None."""
    if name is None:
        name = os.environ.get(TARGET_ENV_VAR) or DEFAULT_TARGET
    if isinstance(name, int):
        for t in all_targets().values():
            if t.generation == name:
                return t.name
        raise UnknownTargetError(f"unknown NeuronCore version {name}; known: 2, 3, 4")
    key = str(name).strip().lower()
    for t in all_targets().values():
        if key == t.name or key in t.aliases:
            return t.name
    known = sorted({a for t in all_targets().values() for a in t.aliases})
    raise UnknownTargetError(f"unknown target {name!r}; known: {', '.join(known)}")


def get_target(name: str | int | None = None) -> Target:
    """The :class:`Target` for a name, alias or generation (default: environment, then trn2)."""
    return all_targets()[resolve_target_name(name)]
