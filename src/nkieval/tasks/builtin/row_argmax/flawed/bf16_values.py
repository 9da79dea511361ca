"""Flawed: x is loaded into a bf16 tile before max8: the maxima are rounded and near-ties are broken wrongly."""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def row_argmax(x):
    n, d = x.shape
    values = nl.ndarray((n,), dtype=nl.float32, buffer=nl.shared_hbm)
    indices = nl.ndarray((n,), dtype=nl.int32, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    for i in range((n + p - 1) // p):
        rows = min(p, n - i * p)
        t = nl.ndarray((p, d), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.dma_copy(dst=t[0:rows], src=x[i * p:i * p + rows])
        top = nl.ndarray((p, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.max8(dst=top[0:rows], src=t[0:rows])
        pos = nl.ndarray((p, 8), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.nc_find_index8(dst=pos[0:rows], data=t[0:rows], vals=top[0:rows])
        idx = nl.ndarray((p, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=idx[0:rows], src=pos[0:rows, 0:1])
        nisa.dma_copy(dst=values[i * p:i * p + rows].reshape((rows, 1)), src=top[0:rows, 0:1])
        nisa.dma_copy(dst=indices[i * p:i * p + rows].reshape((rows, 1)), src=idx[0:rows])
    return values, indices
