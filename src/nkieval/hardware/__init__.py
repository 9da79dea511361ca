"""Per-generation NeuronCore facts (trn1/trn2/trn3) as data, and their loader.

Every hardware limit or cost parameter used anywhere in nkieval is defined once, in
``hardware/data/<target>.toml``, with its source and a status (documented, derived,
assumed, fitted). Code reads facts through :func:`get_target`.
"""

from nkieval.hardware.targets import (
    TARGET_ENV_VAR,
    Fact,
    Target,
    UnknownTargetError,
    all_targets,
    get_target,
    resolve_target_name,
)

__all__ = [
    "TARGET_ENV_VAR",
    "Fact",
    "Target",
    "UnknownTargetError",
    "all_targets",
    "get_target",
    "resolve_target_name",
]
