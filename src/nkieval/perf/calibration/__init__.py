"""Calibration and validation of the performance model as code.

``published.toml`` holds the published measurements (with sources); ``kernels.py`` our own
kernels reproducing each published optimisation step; :mod:`.validate` simulates them,
estimates them and compares predicted with published ratios, ranks and bottleneck classes.
"""

from __future__ import annotations

import tomllib
from functools import cache
from importlib import resources
from typing import Any


@cache
def published() -> dict[str, Any]:
    """The published measurements (``ladders`` and ``micro`` tables of published.toml)."""
    text = resources.files("nkieval.perf.calibration").joinpath("published.toml").read_text()
    return tomllib.loads(text)
