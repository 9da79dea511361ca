# task: scale_bias_broadcast
# expect: pass
# why: replicates the column bias to 128 partitions with a ones matmul flagged is_stationary_onezero (the documented broadcast), which the hint check must accept: the flagged operand holds only ones
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def scale_bias_broadcast(x, row_scale, col_bias):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=nl.float32, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    ones = nl.ndarray((1, p), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=ones, value=1.0)
    bias_row = nl.ndarray((1, d), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=bias_row, src=col_bias.reshape((1, d)))
    bias = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
    for c0 in range(0, d, 512):
        w = min(512, d - c0)
        acc = nl.ndarray((p, 512), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=acc[:, 0:w], stationary=ones, moving=bias_row[:, c0:c0 + w], is_stationary_onezero=True)
        nisa.tensor_copy(dst=bias[:, c0:c0 + w], src=acc[:, 0:w])
    for i in range((n + p - 1) // p):
        rows = min(p, n - i * p)
        t = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t[0:rows], src=x[i * p:i * p + rows])
        s = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=s[0:rows], src=row_scale[i * p:i * p + rows].reshape((rows, 1)))
        nisa.scalar_tensor_tensor(dst=t[0:rows], data=t[0:rows], op0=nl.multiply, operand0=s[0:rows],
                                  op1=nl.add, operand1=bias[0:rows])
        nisa.dma_copy(dst=out[i * p:i * p + rows], src=t[0:rows])
    return out
