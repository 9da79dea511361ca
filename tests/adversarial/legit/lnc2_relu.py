# task: relu
# expect: pass
# why: an LNC-2 kernel (Kernel[2]): each of the two programs takes every other 128-row block by nl.program_id
import nki
import nki.isa as nisa
import nki.language as nl


def _relu(x):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    pid = nl.program_id(0)
    nprog = nl.num_programs(0)
    for i in range(pid, (n + 127) // 128, nprog):
        r = min(128, n - i * 128)
        t = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t[0:r], src=x[i * 128:i * 128 + r])
        nisa.activation(dst=t[0:r], op=nl.relu, data=t[0:r])
        nisa.dma_copy(dst=out[i * 128:i * 128 + r], src=t[0:r])
    return out


relu = nki.jit(_relu)[2]
