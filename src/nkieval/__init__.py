"""nkieval: evaluate NKI kernels without Trainium hardware."""

import os as _os

# The simulator multiplies small tiles (at most 128x512); multi-threaded BLAS only adds
# contention for them, and on a shared 2-core machine it made matmul-heavy kernels 20-60x
# slower. Only a default: an explicit setting, or numpy imported earlier, wins.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    _os.environ.setdefault(_var, "1")

__version__ = "0.1.0"
