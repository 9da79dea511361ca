# task: cumsum
# expect: pass
# why: narrower 1000-column scan chunks carried across with the previous chunk's last column, rows in 64-row blocks
import nki
import nki.isa as nisa
import nki.language as nl

R, C = 64, 1000


@nki.jit
def cumsum(x):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=nl.float32, buffer=nl.shared_hbm)
    fw = min(C, d)
    ones = nl.ndarray((R, fw), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=ones, value=1.0)
    for i in range(0, n, R):
        rows = min(R, n - i)
        prev = None
        for lo in range(0, d, C):
            w = min(C, d - lo)
            t = nl.ndarray((R, fw), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=t[0:rows, 0:w], src=x[i:i + rows, lo:lo + w])
            y = nl.ndarray((R, fw), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_tensor_scan(dst=y[0:rows, 0:w], data0=ones[0:rows, 0:w], data1=t[0:rows, 0:w],
                                    initial=0.0 if prev is None else prev, op0=nl.multiply, op1=nl.add)
            nisa.dma_copy(dst=out[i:i + rows, lo:lo + w], src=y[0:rows, 0:w])
            prev = y[0:rows, w - 1:w]
    return out
