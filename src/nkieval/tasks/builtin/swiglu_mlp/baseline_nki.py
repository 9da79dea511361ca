"""Baseline: three separate tiled GEMM passes with the intermediates in HBM, as the CUDA kernels do.

Pass 1 computes gate and up ([N, H], fp32) into HBM scratch buffers, pass 2 forms
silu(gate) * up into an fp32 HBM buffer, pass 3 runs the down projection, reading act^T with a
transposing (strided) DMA. Weight tiles are reloaded for every output block. Correct for every
shape.
"""

import nki
import nki.isa as nisa
import nki.language as nl

NT = 512


@nki.jit
def swiglu_mlp(x_t, w_gate, w_up, w_down):
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
            for w, dst in ((w_gate, gate), (w_up, up)):
                acc = nl.ndarray((p, NT), dtype=nl.float32, buffer=nl.psum)
                for kk in range((d + p - 1) // p):
                    k0 = kk * p
                    kw = min(p, d - k0)
                    lhs = nl.ndarray((p, p), dtype=x_t.dtype, buffer=nl.sbuf)
                    nisa.dma_copy(dst=lhs[0:kw, 0:rows], src=x_t[k0:k0 + kw, i * p:i * p + rows])
                    rhs = nl.ndarray((p, NT), dtype=w.dtype, buffer=nl.sbuf)
                    nisa.dma_copy(dst=rhs[0:kw, 0:cw], src=w[k0:k0 + kw, c0:c0 + cw])
                    nisa.nc_matmul(dst=acc[0:rows, 0:cw], stationary=lhs[0:kw, 0:rows], moving=rhs[0:kw, 0:cw])
                res = nl.ndarray((p, NT), dtype=nl.float32, buffer=nl.sbuf)
                nisa.tensor_copy(dst=res[0:rows, 0:cw], src=acc[0:rows, 0:cw])
                nisa.dma_copy(dst=dst[i * p:i * p + rows, c0:c0 + cw], src=res[0:rows, 0:cw])
    for i in range((n + p - 1) // p):
        rows = min(p, n - i * p)
        g = nl.ndarray((p, h), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=g[0:rows], src=gate[i * p:i * p + rows])
        u = nl.ndarray((p, h), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=u[0:rows], src=up[i * p:i * p + rows])
        nisa.activation(dst=g[0:rows], op=nl.silu, data=g[0:rows])
        a = nl.ndarray((p, h), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=a[0:rows], data1=g[0:rows], data2=u[0:rows], op=nl.multiply)
        nisa.dma_copy(dst=act[i * p:i * p + rows], src=a[0:rows])
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
            res = nl.ndarray((p, NT), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res[0:rows, 0:cw], src=acc[0:rows, 0:cw])
            nisa.dma_copy(dst=out[i * p:i * p + rows, c0:c0 + cw], src=res[0:rows, 0:cw])
    return out
