"""The integrity scan's text prefilter never hides an issue the AST walk finds."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nkieval.review import integrity
from nkieval.review.integrity import scan

BUILTIN = Path(integrity.__file__).resolve().parents[1] / "tasks" / "builtin"

HOSTILE = [
    "import os\n",
    "import  os.path as p\n",
    "from os import path\n",
    "from\\\n .helpers import k\n",
    "from . import k\n",
    "from .. import k\n",
    "x = open('f')\n",
    "y = (a\n  .\n  __class__)\n",
    "z = __import__('os')\n",
    "def k(a):\n    return vars(a)\n",
    "import \uff4f\uff53\n",  # full-width o, s: the name os after NFKC folding
    "e = \uff45val('1')\n",  # full-width e: eval
    "import numpy as np\nimport reference\n",
    "import nkieval.review\n",
]


def _full(source: str) -> list:
    """The scan with the prefilter off (every parsed source walked)."""
    saved = integrity._MAY_OFFEND
    integrity._MAY_OFFEND = re.compile("")
    try:
        return scan(source)
    finally:
        integrity._MAY_OFFEND = saved


@pytest.mark.parametrize("source", HOSTILE)
def test_hostile_sources_are_still_caught(source: str) -> None:
    found = scan(source)
    assert found, source
    assert found == _full(source)


def test_every_builtin_candidate_scans_as_with_the_full_walk() -> None:
    files = sorted(BUILTIN.glob("*/*.py")) + sorted(BUILTIN.glob("*/flawed/*.py"))
    assert len(files) > 100
    skipped = 0
    for f in files:
        src = f.read_text()
        assert scan(src) == _full(src), f
        skipped += src.isascii() and integrity._MAY_OFFEND.search(src) is None
    assert skipped > 0  # the prefilter does spare some walks


_TOKENS = ["import", "from", " ", ".", "\n", "os", "x", "(", ")", "__", "class", "open", "=", "\\\n", "np",
           "\uff4f", "\uff53", "a", "def k():\n    return ", "#", "'", "1"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_TOKENS), max_size=30))
def test_random_token_soup_scans_as_with_the_full_walk(tokens: list[str]) -> None:
    src = "".join(tokens)
    assert scan(src) == _full(src)
