"""Bundled example kernels (written by the nkieval authors) used by ``nkieval demo`` and the tests."""
