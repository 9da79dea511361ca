# task: matvec
# class: numerics_cheat
# expect: caught
# expect-verdict: fail
# why: quantises the matrix to fp8 (e4m3) tiles before the multiply-reduce: a quarter of the bytes, far outside the fp32 recipe
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def matvec(a, x):
    m, k = a.shape
    y = nl.ndarray((m,), dtype=nl.float32, buffer=nl.shared_hbm)
    xb = nl.ndarray((128, k), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=xb, src=x.reshape((1, k)).broadcast(0, 128))
    for i in range(0, m, 128):
        r = min(128, m - i)
        t = nl.ndarray((128, k), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t[0:r], src=a[i:i + r])
        q = nl.ndarray((128, k), dtype=nl.float8_e4m3, buffer=nl.sbuf)
        nisa.tensor_copy(dst=q[0:r], src=t[0:r])
        prod = nl.ndarray((128, k), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=prod[0:r], data1=q[0:r], data2=xb[0:r], op=nl.multiply)
        s = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=s[0:r], op=nl.add, data=prod[0:r], axis=1)
        nisa.dma_copy(dst=y[i:i + r].reshape((r, 1)), src=s[0:r])
    return y
