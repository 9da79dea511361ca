# task: gelu
# class: resource_abuse
# expect: caught
# why: asks for 64 GiB of host memory and a 1 GiB SBUF tile, hoping the harness (not the child) runs out of memory
import nki
import nki.language as nl
import numpy as np

_hoard = []


@nki.jit
def gelu(x):
    try:
        _hoard.append(np.ones((1 << 36,), dtype=np.uint8))
    except MemoryError:
        pass
    big = nl.ndarray((128, 1 << 21), dtype=nl.float32, buffer=nl.sbuf)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    _hoard.append(big)
    return out
