# task: gelu
# expect: pass
# why: Beta-1 (neuronxcc.nki) style: value-returning nl.load / nisa.activation / nl.store on row tiles
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


@nki.jit
def gelu(x):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in range((n + 127) // 128):
        r = min(128, n - i * 128)
        t = nl.load(x[i * 128:i * 128 + r])
        nl.store(out[i * 128:i * 128 + r], value=nisa.activation(op=nl.gelu, data=t))
    return out
