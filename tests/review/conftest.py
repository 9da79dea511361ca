"""Shared helpers: reviews are cached per (task, candidate) for the session to keep the suite fast."""

import pytest

from nkieval.review import review
from nkieval.tasks import BUILTIN_ROOT, load_task

_CACHE: dict = {}


@pytest.fixture(scope="session")
def reviewed():
    def get(task_id: str, rel: str, **kw):
        key = (task_id, rel, tuple(sorted(kw.items())))
        if key not in _CACHE:
            task = load_task(task_id)
            _CACHE[key] = review(task, BUILTIN_ROOT / task_id / rel, seed=7, **kw)
        return _CACHE[key]

    return get
