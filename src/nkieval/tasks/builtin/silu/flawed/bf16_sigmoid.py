"""Flawed: sigmoid(x) is written to a bf16 tile and multiplied by x afterwards (precision loss)."""

import nki
import nki.isa as nisa
import nki.language as nl

FMAX = 2048


@nki.jit
def silu(x):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    total = n * d
    xf = x.reshape((total,))
    of = out.reshape((total,))
    p = nl.tile_size.pmax
    m = total // p
    bulk = m * p
    if m > 0:
        x2 = xf[0:bulk].reshape((p, m))
        o2 = of[0:bulk].reshape((p, m))
        for j in range((m + FMAX - 1) // FMAX):
            lo = j * FMAX
            w = min(FMAX, m - lo)
            t = nl.ndarray((p, FMAX), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t[:, 0:w], src=x2[:, lo:lo + w])
            s = nl.ndarray((p, FMAX), dtype=nl.bfloat16, buffer=nl.sbuf)
            nisa.activation(dst=s[:, 0:w], op=nl.sigmoid, data=t[:, 0:w])
            nisa.tensor_tensor(dst=t[:, 0:w], data1=t[:, 0:w], data2=s[:, 0:w], op=nl.multiply)
            nisa.dma_copy(dst=o2[:, lo:lo + w], src=t[:, 0:w])
    r = total - bulk
    if r > 0:
        t = nl.ndarray((1, r), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=xf[bulk:total].reshape((1, r)))
        s = nl.ndarray((1, r), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.activation(dst=s, op=nl.sigmoid, data=t)
        nisa.tensor_tensor(dst=t, data1=t, data2=s, op=nl.multiply)
        nisa.dma_copy(dst=of[bulk:total].reshape((1, r)), src=t)
    return out
