# task: log_softmax
# expect: pass
# why: two passes per row block with explicit intermediate tiles: x - max, then subtract log(sum exp)
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def log_softmax(x):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range((n + 127) // 128):
        r = min(128, n - i * 128)
        t = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t[0:r], src=x[i * 128:i * 128 + r])
        m = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=m[0:r], op=nl.maximum, data=t[0:r], axis=1)
        nisa.tensor_scalar(dst=t[0:r], data=t[0:r], op0=nl.subtract, operand0=m[0:r])
        e = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        s = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation_reduce(dst=e[0:r], op=nl.exp, data=t[0:r], reduce_op=nl.add, reduce_res=s[0:r])
        nisa.activation(dst=s[0:r], op=nl.log, data=s[0:r])
        nisa.tensor_scalar(dst=t[0:r], data=t[0:r], op0=nl.subtract, operand0=s[0:r])
        nisa.dma_copy(dst=out[i * 128:i * 128 + r], src=t[0:r])
    return out
