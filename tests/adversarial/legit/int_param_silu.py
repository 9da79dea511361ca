# task: silu
# expect: pass
# why: the kernel takes an extra keyword with an int default (tile width) and a float constant, and uses nl.tile_size.pmax
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def silu(x, width=777, one=1.0):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    fw = min(int(width), d)
    for i in range(0, n, p):
        r = min(p, n - i)
        for lo in range(0, d, fw):
            w = min(fw, d - lo)
            t = nl.ndarray((p, fw), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=t[0:r, 0:w], src=x[i:i + r, lo:lo + w])
            s = nl.ndarray((p, fw), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=s[0:r, 0:w], op=nl.sigmoid, data=t[0:r, 0:w], scale=one)
            nisa.tensor_tensor(dst=t[0:r, 0:w], data1=t[0:r, 0:w], data2=s[0:r, 0:w], op=nl.multiply)
            nisa.dma_copy(dst=out[i:i + r, lo:lo + w], src=t[0:r, 0:w])
    return out
