"""Load a versioned rubric (criteria, weights, level descriptors, gates, thresholds) from TOML."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

DEFAULT_RUBRIC = "nki-review-v1"


class RubricError(ValueError):
    """A malformed rubric file (names the key)."""


@dataclass(frozen=True)
class Criterion:
    id: str
    title: str
    weight: float
    what: str
    why: str
    evidence: str
    levels: dict[int, str]
    applies_when: str | None = None


@dataclass(frozen=True)
class Gate:
    criterion: str
    below: int
    cap: dict[str, int]
    reason: str


@dataclass(frozen=True)
class Rubric:
    id: str
    version: str
    title: str
    criteria: tuple[Criterion, ...]
    gates: tuple[Gate, ...]
    thresholds: dict[str, dict[str, Any]] = field(default_factory=dict)

    def criterion(self, cid: str) -> Criterion:
        for c in self.criteria:
            if c.id == cid:
                return c
        raise KeyError(f"rubric {self.id} has no criterion {cid!r}")

    def t(self, criterion: str, key: str) -> Any:
        try:
            return self.thresholds[criterion][key]
        except KeyError:
            raise RubricError(f"rubric {self.id}: missing threshold [thresholds.{criterion}].{key}") from None


_GATE_RE = re.compile(r"^\s*([a-z_]+)\s*<\s*([0-4])\s*$")


def load_rubric(name_or_path: str | Path = DEFAULT_RUBRIC) -> Rubric:
    """A bundled rubric by id (``nki-review-v1``) or a TOML file path."""
    p = Path(name_or_path)
    if p.suffix == ".toml" and p.is_file():
        text = p.read_text()
    else:
        try:
            text = resources.files("nkieval.review").joinpath("rubrics", f"{name_or_path}.toml").read_text()
        except FileNotFoundError:
            raise RubricError(f"no rubric named {name_or_path!r}") from None
    data = tomllib.loads(text)
    crits = []
    for i, c in enumerate(data.get("criteria", [])):
        try:
            levels = {int(k): str(v) for k, v in c["levels"].items()}
            if sorted(levels) != [0, 1, 2, 3, 4]:
                raise RubricError(f"criteria[{i}] ({c.get('id')}): levels must describe 0..4, got {sorted(levels)}")
            crits.append(Criterion(id=c["id"], title=c["title"], weight=float(c["weight"]), what=c["what"],
                                   why=c["why"], evidence=c["evidence"], levels=levels,
                                   applies_when=c.get("applies_when")))
        except KeyError as e:
            raise RubricError(f"criteria[{i}]: missing key {e}") from None
    ids = {c.id for c in crits}
    gates = []
    for i, g in enumerate(data.get("gates", [])):
        m = _GATE_RE.match(g.get("when", ""))
        if not m or m.group(1) not in ids:
            raise RubricError(f"gates[{i}].when must be '<criterion> < <0-4>', got {g.get('when')!r}")
        cap = {str(k): int(v) for k, v in g.get("cap", {}).items()}
        if set(cap) - ids:
            raise RubricError(f"gates[{i}].cap names unknown criteria {sorted(set(cap) - ids)}")
        gates.append(Gate(m.group(1), int(m.group(2)), cap, g.get("reason", "")))
    return Rubric(id=data["id"], version=data["version"], title=data.get("title", data["id"]),
                  criteria=tuple(crits), gates=tuple(gates), thresholds=data.get("thresholds", {}))
