"""Baseline: dequantise-on-load, three tiled GEMM passes joined through HBM.

Pass 1 computes g and u ([N, H], fp32) into HBM scratch with weight tiles widened to bf16 by
the DMA and reloaded for every output block, and the scales applied by separate instructions;
pass 2 forms silu(g) * u; pass 3 is the down projection reading act^T with a transposing DMA.
Correct for every shape.
"""

import nki
import nki.isa as nisa
import nki.language as nl

NT = 512


@nki.jit
def llama_mlp_fp8(x_t, w_gate, s_gate, w_up, s_up, w_down, s_down):
    d, n = x_t.shape
    _, h = w_gate.shape
    out = nl.ndarray((n, d), dtype=nl.float32, buffer=nl.shared_hbm)
    gate = nl.ndarray((n, h), dtype=nl.float32, buffer=nl.hbm)
    up = nl.ndarray((n, h), dtype=nl.float32, buffer=nl.hbm)
    act = nl.ndarray((n, h), dtype=nl.float32, buffer=nl.hbm)
    p = nl.tile_size.pmax
    for i in range((n + p - 1) // p):
        rows = min(p, n - i * p)
        for j in range((h + NT - 1) // NT):
            c0 = j * NT
            cw = min(NT, h - c0)
            for w, sc, dst in ((w_gate, s_gate, gate), (w_up, s_up, up)):
                acc = nl.ndarray((p, NT), dtype=nl.float32, buffer=nl.psum)
                for kk in range((d + p - 1) // p):
                    k0 = kk * p
                    kw = min(p, d - k0)
                    lhs = nl.ndarray((p, p), dtype=x_t.dtype, buffer=nl.sbuf)
                    nisa.dma_copy(dst=lhs[0:kw, 0:rows], src=x_t[k0:k0 + kw, i * p:i * p + rows])
                    rhs = nl.ndarray((p, NT), dtype=nl.bfloat16, buffer=nl.sbuf)
                    nisa.dma_copy(dst=rhs[0:kw, 0:cw], src=w[k0:k0 + kw, c0:c0 + cw])
                    nisa.nc_matmul(dst=acc[0:rows, 0:cw], stationary=lhs[0:kw, 0:rows], moving=rhs[0:kw, 0:cw])
                srow = nl.ndarray((p, NT), dtype=nl.float32, buffer=nl.sbuf)
                nisa.dma_copy(dst=srow[0:rows, 0:cw], src=sc[c0:c0 + cw].reshape((1, cw)).broadcast(0, rows))
                res = nl.ndarray((p, NT), dtype=nl.float32, buffer=nl.sbuf)
                nisa.tensor_tensor(dst=res[0:rows, 0:cw], data1=acc[0:rows, 0:cw], data2=srow[0:rows, 0:cw],
                                   op=nl.multiply)
                nisa.dma_copy(dst=dst[i * p:i * p + rows, c0:c0 + cw], src=res[0:rows, 0:cw])
    for i in range((n + p - 1) // p):
        rows = min(p, n - i * p)
        g = nl.ndarray((p, h), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=g[0:rows], src=gate[i * p:i * p + rows])
        u = nl.ndarray((p, h), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=u[0:rows], src=up[i * p:i * p + rows])
        nisa.activation(dst=g[0:rows], op=nl.silu, data=g[0:rows])
        nisa.tensor_tensor(dst=g[0:rows], data1=g[0:rows], data2=u[0:rows], op=nl.multiply)
        nisa.dma_copy(dst=act[i * p:i * p + rows], src=g[0:rows])
    for i in range((n + p - 1) // p):
        rows = min(p, n - i * p)
        for j in range((d + NT - 1) // NT):
            c0 = j * NT
            cw = min(NT, d - c0)
            acc = nl.ndarray((p, NT), dtype=nl.float32, buffer=nl.psum)
            for hh in range((h + p - 1) // p):
                h0 = hh * p
                hw = min(p, h - h0)
                lhs = nl.ndarray((p, p), dtype=nl.float32, buffer=nl.sbuf)
                nisa.dma_copy(dst=lhs[0:hw, 0:rows], src=act[i * p:i * p + rows, h0:h0 + hw].permute((1, 0)))
                rhs = nl.ndarray((p, NT), dtype=nl.float32, buffer=nl.sbuf)
                nisa.dma_copy(dst=rhs[0:hw, 0:cw], src=w_down[h0:h0 + hw, c0:c0 + cw])
                nisa.nc_matmul(dst=acc[0:rows, 0:cw], stationary=lhs[0:hw, 0:rows], moving=rhs[0:hw, 0:cw])
            srow = nl.ndarray((p, NT), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=srow[0:rows, 0:cw], src=s_down[c0:c0 + cw].reshape((1, cw)).broadcast(0, rows))
            res = nl.ndarray((p, NT), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=res[0:rows, 0:cw], data1=acc[0:rows, 0:cw], data2=srow[0:rows, 0:cw],
                               op=nl.multiply)
            nisa.dma_copy(dst=out[i * p:i * p + rows, c0:c0 + cw], src=res[0:rows, 0:cw])
    return out
