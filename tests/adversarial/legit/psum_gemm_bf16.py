# task: gemm_bf16
# expect: pass
# why: a plain tiled bf16 GEMM with PSUM accumulation over K in 128-row chunks, 512-column N blocks, helper for the block
import nki
import nki.isa as nisa
import nki.language as nl

NB = 512


def _block(a_t, b, c, m0, mr, n0, nr, k):
    acc = nl.ndarray((128, NB), dtype=nl.float32, buffer=nl.psum)
    kt = (k + 127) // 128
    for j in range(kt):
        k0 = j * 128
        kr = min(128, k - k0)
        at = nl.ndarray((128, 128), dtype=nl.bfloat16, buffer=nl.sbuf)
        bt = nl.ndarray((128, NB), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.dma_copy(dst=at[0:kr, 0:mr], src=a_t[k0:k0 + kr, m0:m0 + mr])
        nisa.dma_copy(dst=bt[0:kr, 0:nr], src=b[k0:k0 + kr, n0:n0 + nr])
        nisa.nc_matmul(dst=acc[0:mr, 0:nr], stationary=at[0:kr, 0:mr], moving=bt[0:kr, 0:nr],
                       accumulate=j > 0)
    o = nl.ndarray((128, NB), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=o[0:mr, 0:nr], src=acc[0:mr, 0:nr])
    nisa.dma_copy(dst=c[m0:m0 + mr, n0:n0 + nr], src=o[0:mr, 0:nr])


@nki.jit
def gemm_bf16(a_t, b):
    k, m = a_t.shape
    _, n = b.shape
    c = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.shared_hbm)
    for m0 in range(0, m, 128):
        for n0 in range(0, n, NB):
            _block(a_t, b, c, m0, min(128, m - m0), n0, min(NB, n - n0), k)
    return c
