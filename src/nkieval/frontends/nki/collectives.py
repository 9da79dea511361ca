"""``nki.collectives``: cross-device collectives are not simulated.

The module exists so that kernels which import it (``from nki.collectives import ReplicaGroup``)
load and run their non-collective paths; any collective operation raises
:class:`CollectivesUnsupported`, a ``NotImplementedError`` that says so. (The LNC-2 ``nisa.sendrecv``
/ ``nisa.core_barrier`` between the two cores of one logical core *are* simulated.)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class CollectivesUnsupported(NotImplementedError):
    """A ``nki.collectives`` operation: multi-device collectives are not simulated by nkieval."""


class ReplicaGroup:
    """A list of replica groups (each a list of ranks); carried as given."""

    def __init__(self, replica_groups: Sequence[Sequence[int]] = ()) -> None:
        self.replica_groups = [list(g) for g in replica_groups]

    def __repr__(self) -> str:
        return f"ReplicaGroup({self.replica_groups!r})"


def _unsupported(name: str) -> Any:
    def op(*args: Any, **kwargs: Any) -> Any:
        raise CollectivesUnsupported(
            f"nki.collectives.{name} is not simulated by nkieval (multi-device collectives need several ranks; "
            "nkieval simulates one logical core)")

    op.__name__ = op.__qualname__ = name
    return op


_OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "collective_permute",
        "collective_permute_implicit", "collective_permute_implicit_current_processing_rank_id",
        "collective_permute_implicit_reduce", "send", "recv", "rank_id")
globals().update({n: _unsupported(n) for n in _OPS})

__all__ = ["CollectivesUnsupported", "ReplicaGroup", *_OPS]
