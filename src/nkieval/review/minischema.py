"""A small JSON Schema checker for the review report's own schemas, so ``validate_report`` works without
the ``jsonschema`` package (a dev extra).

It checks the keywords those schemas use — ``type`` (one or a list), ``required``, ``properties``,
``additionalProperties`` (false or a schema), ``const``, ``enum``, ``pattern``, ``minimum``, ``maximum``,
``minLength``, ``items``, ``minItems``, ``minProperties`` and ``$ref`` to ``#/$defs/...`` — and refuses a
schema with any other keyword rather than skip it silently. ``tests/review/test_reports.py`` holds it to
jsonschema's answers on valid and broken reports.
"""

from __future__ import annotations

import re
from typing import Any

_TYPES: dict[str, Any] = {
    "object": dict, "array": list, "string": str, "boolean": bool, "null": type(None),
    "integer": int, "number": (int, float),
}
_ANNOTATIONS = {"$schema", "$id", "title", "description", "$defs"}
KEYWORDS = {"type", "required", "properties", "additionalProperties", "const", "enum", "pattern", "minimum",
            "maximum", "minLength", "items", "minItems", "minProperties", "$ref"} | _ANNOTATIONS


def _is(v: Any, t: str) -> bool:
    if t in ("integer", "number") and isinstance(v, bool):
        return False
    if t == "integer" and isinstance(v, float):
        return v.is_integer()
    return isinstance(v, _TYPES[t])


def validate(doc: Any, schema: dict[str, Any]) -> str | None:
    """None when ``doc`` follows ``schema``; else the first problem, with its path in the document."""
    return _check(doc, schema, schema, "$")


def _check(v: Any, s: dict[str, Any], root: dict[str, Any], path: str) -> str | None:
    unknown = set(s) - KEYWORDS
    if unknown:
        raise ValueError(f"schema keyword(s) {sorted(unknown)} at {path} are not supported by minischema")
    if "$ref" in s:
        ref = s["$ref"]
        if not ref.startswith("#/$defs/"):
            raise ValueError(f"unsupported $ref {ref!r}")
        return _check(v, root["$defs"][ref.removeprefix("#/$defs/")], root, path)
    if "type" in s:
        ts = s["type"] if isinstance(s["type"], list) else [s["type"]]
        if not any(_is(v, t) for t in ts):
            return f"{path}: {v!r:.60} is not of type {' or '.join(ts)}"
    if "const" in s and v != s["const"]:
        return f"{path}: {v!r:.60} is not {s['const']!r}"
    if "enum" in s and v not in s["enum"]:
        return f"{path}: {v!r:.60} is not one of {s['enum']}"
    if isinstance(v, str):
        if "pattern" in s and not re.search(s["pattern"], v):
            return f"{path}: {v!r:.60} does not match {s['pattern']!r}"
        if len(v) < s.get("minLength", 0):
            return f"{path}: shorter than {s['minLength']}"
    if isinstance(v, int | float) and not isinstance(v, bool):
        if "minimum" in s and v < s["minimum"]:
            return f"{path}: {v} is less than the minimum {s['minimum']}"
        if "maximum" in s and v > s["maximum"]:
            return f"{path}: {v} is greater than the maximum {s['maximum']}"
    if isinstance(v, list):
        if len(v) < s.get("minItems", 0):
            return f"{path}: fewer than {s['minItems']} items"
        if "items" in s:
            for i, x in enumerate(v):
                p = _check(x, s["items"], root, f"{path}[{i}]")
                if p:
                    return p
    if isinstance(v, dict):
        if len(v) < s.get("minProperties", 0):
            return f"{path}: fewer than {s['minProperties']} properties"
        for k in s.get("required", []):
            if k not in v:
                return f"{path}: {k!r} is a required property"
        props = s.get("properties", {})
        extra = s.get("additionalProperties", True)
        for k, x in v.items():
            if k in props:
                p = _check(x, props[k], root, f"{path}.{k}")
            elif extra is False:
                return f"{path}: additional property {k!r} is not allowed"
            elif isinstance(extra, dict):
                p = _check(x, extra, root, f"{path}.{k}")
            else:
                p = None
            if p:
                return p
    return None
