"""Flawed: the products a[r, j] * x[j] are stored in a bf16 tile before the row sum."""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def matvec(a, x):
    m, k = a.shape
    y = nl.ndarray((m,), dtype=nl.float32, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    xb = nl.ndarray((p, k), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=xb, src=x.reshape((1, k)).broadcast(0, p))
    for i in range((m + p - 1) // p):
        rows = min(p, m - i * p)
        t = nl.ndarray((p, k), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t[0:rows], src=a[i * p:i * p + rows])
        prod = nl.ndarray((p, k), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=prod[0:rows], data1=t[0:rows], data2=xb[0:rows], op=nl.multiply)
        s = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation_reduce(dst=prod[0:rows], op=nl.copy, data=prod[0:rows], reduce_op=nl.add,
                               reduce_res=s[0:rows])
        nisa.dma_copy(dst=y[i * p:i * p + rows].reshape((rows, 1)), src=s[0:rows])
    return y
