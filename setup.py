"""Build of the one compiled module: the scheduler's per-record loop (nkieval.perf._schedule_c).

``optional``: where it cannot be compiled the package installs without it and ``nkieval.perf.schedule`` runs its
Python loop (the reference; the same schedules). -ffp-contract=off keeps the C loop's floating-point results
those of the Python loop (no fused multiply-add).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("nkieval.perf._schedule_c", ["src/nkieval/perf/_schedule_c.c"],
                             extra_compile_args=["-O2", "-ffp-contract=off"], optional=True)])
