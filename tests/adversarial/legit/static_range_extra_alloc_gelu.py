# task: gelu
# expect: pass
# why: nl.static_range over column chunks, tile sizes from nl.tile_size, and an extra allocation that is never used
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def gelu(x):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    fw = min(d, 1024)
    unused = nl.ndarray((p, 64), dtype=nl.float32, buffer=nl.sbuf)  # noqa: F841 - deliberately unused
    for i in nl.affine_range((n + p - 1) // p):
        r = min(p, n - i * p)
        for c in nl.static_range((d + fw - 1) // fw):
            lo = c * fw
            w = min(fw, d - lo)
            t = nl.ndarray((p, fw), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=t[0:r, 0:w], src=x[i * p:i * p + r, lo:lo + w])
            nisa.activation(dst=t[0:r, 0:w], op=nl.gelu, data=t[0:r, 0:w])
            nisa.dma_copy(dst=out[i * p:i * p + r, lo:lo + w], src=t[0:r, 0:w])
    return out
