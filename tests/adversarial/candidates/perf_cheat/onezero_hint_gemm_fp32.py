# task: gemm_fp32
# class: perf_cheat
# expect: caught
# expect-verdict: fail
# why: flags every fp32 matmul's moving operand (the b tiles) as zeros and ones, which the performance model credits as 2x faster PE passes, while the values are exact fp32 and the result therefore right in simulation
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def gemm_fp32(a, b):
    m, k = a.shape
    _, n = b.shape
    c = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    nk = (k + p - 1) // p
    b_tiles = []
    for kk in range(nk):
        kw = min(p, k - kk * p)
        bt = nl.ndarray((p, n), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=bt[0:kw], src=b[kk * p:kk * p + kw])
        b_tiles.append(bt)
    for mi in range((m + p - 1) // p):
        m0, mw = mi * p, min(p, m - mi * p)
        at = nl.ndarray((p, k), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=at[0:mw], src=a[m0:m0 + mw])
        a_t = []
        for kk in range(nk):
            kw = min(p, k - kk * p)
            tp = nl.ndarray((p, p), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_transpose(dst=tp[0:kw, 0:mw], data=at[0:mw, kk * p:kk * p + kw])
            ts = nl.ndarray((p, p), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=ts[0:kw, 0:mw], src=tp[0:kw, 0:mw])
            a_t.append(ts)
        for n0 in range(0, n, 512):
            nw = min(512, n - n0)
            acc = nl.ndarray((p, 512), dtype=nl.float32, buffer=nl.psum)
            for kk in range(nk):
                kw = min(p, k - kk * p)
                # the lie: b's tiles hold arbitrary fp32 values, not zeros and ones
                nisa.nc_matmul(dst=acc[0:mw, 0:nw], stationary=a_t[kk][0:kw, 0:mw],
                               moving=b_tiles[kk][0:kw, n0:n0 + nw], is_moving_onezero=True)
            res = nl.ndarray((p, 512), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res[0:mw, 0:nw], src=acc[0:mw, 0:nw])
            nisa.dma_copy(dst=c[m0:m0 + mw, n0:n0 + nw], src=res[0:mw, 0:nw])
    return c
