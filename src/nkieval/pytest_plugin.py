"""pytest plugin: ``--nki-sim`` serves ``import nki`` from nkieval for the whole run; the
``nki_sim`` fixture does it for one test (and removes the shim afterwards)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("nkieval")
    group.addoption("--nki-sim", action="store_true", default=False,
                    help="serve `import nki` from nkieval's NKI simulator for this test run")


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("--nki-sim", default=False):
        from nkieval import frontends

        frontends.install()


@pytest.fixture
def nki_sim() -> Iterator[object]:
    """Install the nki shim for one test; yields the simulated ``nki`` module."""
    import importlib

    from nkieval import frontends

    was = frontends.installed()
    frontends.install()
    try:
        yield importlib.import_module("nki")
    finally:
        if not was:
            frontends.uninstall()
