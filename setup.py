"""Build of the compiled modules: the scheduler's per-record loop (nkieval.perf._schedule_c) and the SBUF spill
estimate's eviction walk (nkieval.perf._spill_c).

``optional``: where they cannot be compiled the package installs without them and ``nkieval.perf.schedule`` /
``nkieval.perf.spill`` run their Python loops (the references; the same results). -ffp-contract=off keeps the C
loop's floating-point results those of the Python loop (no fused multiply-add).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("nkieval.perf._schedule_c", ["src/nkieval/perf/_schedule_c.c"],
                             extra_compile_args=["-O2", "-ffp-contract=off"], optional=True),
                   Extension("nkieval.perf._spill_c", ["src/nkieval/perf/_spill_c.c"],
                             extra_compile_args=["-O2", "-Wall"], optional=True)])
