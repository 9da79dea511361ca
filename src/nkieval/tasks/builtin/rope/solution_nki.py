"""Expert solution: tokens on partitions, all heads per instruction, tables broadcast across heads.

Per 128-token tile: one DMA for x ([rows, H, D], all heads contiguous), one each for cos and sin.
swap_halves(x) * sin is two half-width products with a stride-0 broadcast of the table over the
head axis; x * cos is one full-width product and one add combines them: four Vector
instructions per tile, whatever H is.
"""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def rope(x, cos, sin):
    t, h, d = x.shape
    half = d // 2
    out = nl.ndarray((t, h, d), dtype=nl.float32, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    for i in range((t + p - 1) // p):
        rows = min(p, t - i * p)
        xt = nl.ndarray((p, h, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=xt[0:rows], src=x[i * p:i * p + rows])
        c = nl.ndarray((p, 1, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=c[0:rows, 0, :], src=cos[i * p:i * p + rows])
        s = nl.ndarray((p, 1, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=s[0:rows, 0, :], src=sin[i * p:i * p + rows])
        rot = nl.ndarray((p, h, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=rot[0:rows, :, 0:half], data1=xt[0:rows, :, half:d],
                           data2=s[0:rows, :, 0:half].broadcast(1, h), op=nl.multiply)
        nisa.tensor_tensor(dst=rot[0:rows, :, half:d], data1=xt[0:rows, :, 0:half],
                           data2=s[0:rows, :, half:d].broadcast(1, h), op=nl.multiply)
        o = nl.ndarray((p, h, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=o[0:rows], data1=xt[0:rows], data2=c[0:rows].broadcast(1, h), op=nl.multiply)
        nisa.tensor_tensor(dst=o[0:rows], data1=o[0:rows], data2=rot[0:rows], op=nl.add)
        nisa.dma_copy(dst=out[i * p:i * p + rows], src=o[0:rows])
    return out
