# task: log_softmax
# class: output_cheat
# expect: caught
# expect-verdict: fail
# why: memsets the output to a constant (catalogue 1-2: zero/constant output under a loose tolerance)
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def log_softmax(x):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in range(0, n, 128):
        r = min(128, n - i)
        t = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=t[0:r], value=-6.9)
        nisa.dma_copy(dst=out[i:i + r], src=t[0:r])
    return out
