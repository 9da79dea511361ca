"""Build of the one compiled module: the scheduler's per-record loop, the rotation plan's access-span pass and the
SBUF spill estimate's loops (nkieval.perf._schedule_c).

``optional``: where it cannot be compiled the package installs without it and ``nkieval.perf.schedule``,
``nkieval.perf.rotation`` and ``nkieval.perf.spill`` run their Python loops (the references; the same results).
-ffp-contract=off keeps the C loop's floating-point results those of the Python loop (no fused multiply-add).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("nkieval.perf._schedule_c", ["src/nkieval/perf/_schedule_c.c"],
                             extra_compile_args=["-O2", "-ffp-contract=off"], optional=True)])
