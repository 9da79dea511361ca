"""The performance model's one compiled module (``_schedule_c``) and the switch that turns it off.

``_schedule_c`` holds the scheduler's per-record loop, the rotation plan's access-span pass and the SBUF spill
estimate's loops; it is built with the package where a C compiler exists (``setup.py``, optional). Each module
that uses it (schedule, rotation, spill) keeps its own ``_NATIVE`` flag, defaulting to :data:`ENABLED`, so that a
test can hold one compiled loop at a time to its Python reference.
"""

from __future__ import annotations

import os

try:
    from nkieval.perf import _schedule_c as module
except ImportError:  # pragma: no cover - a build without a C compiler: the Python loops run
    module = None

# NKIEVAL_PURE_PYTHON_SCHEDULER=1 runs every Python loop instead
ENABLED = os.environ.get("NKIEVAL_PURE_PYTHON_SCHEDULER", "") in ("", "0")
