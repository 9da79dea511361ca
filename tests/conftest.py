"""Shared test setup: the `nki` import shim is active for the whole test session."""

from nkieval import frontends

frontends.install()

