"""Shared fixtures: built-in candidates wrapped as model responses, and their scores (once per session)."""

import pytest
from reward_helpers import HOSTILE, SEED, VECTOR_ADD, as_response


@pytest.fixture(scope="session")
def responses() -> dict[str, str]:
    return {"expert": as_response(VECTOR_ADD / "solution_nki.py"),
            "baseline": as_response(VECTOR_ADD / "baseline_nki.py"),
            "flawed": as_response(VECTOR_ADD / "flawed" / "skips_tail.py"),
            "hostile": as_response(HOSTILE),
            "none": "I would tile the vector into 128 partitions, but I will not write the code."}


@pytest.fixture(scope="session")
def scored(responses):
    from nkieval.reward import score

    cache: dict = {}

    def get(kind: str, **kw):
        key = (kind, tuple(sorted(kw.items())))
        if key not in cache:
            cache[key] = score("vector_add", responses[kind], seed=SEED, **kw)
        return cache[key]

    return get
