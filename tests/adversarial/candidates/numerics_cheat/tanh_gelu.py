# task: gelu
# class: numerics_cheat
# expect: caught
# expect-verdict: fail
# why: the cheaper tanh approximation in bf16 tiles instead of the exact erf GELU in fp32
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def gelu(x):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in range(0, n, 128):
        r = min(128, n - i)
        t = nl.ndarray((128, d), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.dma_copy(dst=t[0:r], src=x[i:i + r])
        nisa.activation(dst=t[0:r], op=nl.gelu_apprx_tanh, data=t[0:r])
        nisa.dma_copy(dst=out[i:i + r], src=t[0:r])
    return out
