# task: gelu
# class: output_cheat
# expect: caught
# expect-verdict: fail
# why: computes NaN everywhere (0 * inf) with real instructions, hoping NaN is compared as a wildcard (catalogue 11)
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def gelu(x):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in range(0, n, 128):
        r = min(128, n - i)
        t = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=t[0:r], value=float("inf"))
        nisa.tensor_scalar(dst=t[0:r], data=t[0:r], op0=nl.multiply, operand0=0.0)
        nisa.dma_copy(dst=out[i:i + r], src=t[0:r])
    return out
