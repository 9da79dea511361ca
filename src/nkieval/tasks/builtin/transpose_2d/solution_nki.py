"""Expert solution: Tensor-engine transposes of 128x128 blocks, four blocks per PSUM bank.

Up to four 128-row blocks of x are loaded with one wide DMA each and stay in SBUF. For every
128-column slice, nc_transpose writes the four [128, 128] transposes side by side into one
[128, 512] fp32 PSUM tile (one 2 KiB bank), a single tensor_copy evacuates it to SBUF and a
single DMA stores a [128, 512] block of out (2 KiB per partition). Ragged edges are handled by
clamping every block with min(); the PE transpose is exact for finite fp32 values.
"""

import nki
import nki.isa as nisa
import nki.language as nl

GROUP = 4  # row blocks of x per PSUM bank (4 x 128 fp32 = 2 KiB)


@nki.jit
def transpose_2d(x):
    m, n = x.shape
    out = nl.ndarray((n, m), dtype=x.dtype, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    nrb = (m + p - 1) // p
    ncb = (n + p - 1) // p
    for g0 in range(0, nrb, GROUP):
        gk = min(GROUP, nrb - g0)
        blocks = []
        for k in range(gk):
            r0 = (g0 + k) * p
            rk = min(p, m - r0)
            xt = nl.ndarray((p, n), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=xt[0:rk], src=x[r0:r0 + rk])
            blocks.append((xt, rk))
        width = (gk - 1) * p + blocks[gk - 1][1]
        for j in range(ncb):
            c0 = j * p
            cw = min(p, n - c0)
            ps = nl.ndarray((p, GROUP * p), dtype=nl.float32, buffer=nl.psum)
            for k in range(gk):
                xt, rk = blocks[k]
                nisa.nc_transpose(dst=ps[0:cw, k * p:k * p + rk], data=xt[0:rk, c0:c0 + cw])
            ot = nl.ndarray((p, GROUP * p), dtype=x.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=ot[0:cw, 0:width], src=ps[0:cw, 0:width])
            nisa.dma_copy(dst=out[c0:c0 + cw, g0 * p:g0 * p + width], src=ot[0:cw, 0:width])
    return out
