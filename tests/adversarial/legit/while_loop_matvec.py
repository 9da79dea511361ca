# task: matvec
# expect: pass
# why: a while loop over 100-row blocks, x broadcast once, multiply then tensor_reduce, int arithmetic from a module constant
import nki
import nki.isa as nisa
import nki.language as nl

ROWS = 100


@nki.jit
def matvec(a, x):
    m, k = a.shape
    y = nl.ndarray((m,), dtype=nl.float32, buffer=nl.shared_hbm)
    xb = nl.ndarray((ROWS, k), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=xb, src=x.reshape((1, k)).broadcast(0, ROWS))
    i = 0
    while i < m:
        r = min(ROWS, m - i)
        t = nl.ndarray((ROWS, k), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t[0:r], src=a[i:i + r])
        nisa.tensor_tensor(dst=t[0:r], data1=t[0:r], data2=xb[0:r], op=nl.multiply)
        s = nl.ndarray((ROWS, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=s[0:r], op=nl.add, data=t[0:r], axis=1)
        nisa.dma_copy(dst=y[i:i + r].reshape((r, 1)), src=s[0:r])
        i += r
    return y
