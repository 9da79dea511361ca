"""Expert port: 128 rows per tile; one affine_select masks the invisible keys (j > i + S - N) with a huge
negative score, so the row max, the exp with its row sum and the normalisation run over whole rows
(the masked exponentials are exactly 0, as the CUDA kernel writes them).
"""

import nki
import nki.isa as nisa
import nki.language as nl

MASKED = -1.0e30


@nki.jit
def causal_softmax(x):
    n, s = x.shape
    y = nl.ndarray((n, s), dtype=nl.float32, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    for i in range((n + p - 1) // p):
        rows = min(p, n - i * p)
        t = nl.ndarray((p, s), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t[0:rows], src=x[i * p:i * p + rows])
        # keep key j for query row r = i*p + q when (i*p + s - n) + q - j >= 0
        nisa.affine_select(dst=t[0:rows], pattern=[[-1, s]], channel_multiplier=1, on_true_tile=t[0:rows],
                           on_false_value=MASKED, cmp_op=nl.greater_equal, offset=i * p + s - n)
        nb = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=nb[0:rows], op=nl.maximum, data=t[0:rows], axis=1, negate=True)
        nisa.tensor_scalar(dst=nb[0:rows], data=nb[0:rows], op0=nl.multiply, operand0=0.0625)
        total = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation_reduce(dst=t[0:rows], op=nl.exp, data=t[0:rows], scale=0.0625, bias=nb[0:rows],
                               reduce_op=nl.add, reduce_res=total[0:rows])
        inv = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv[0:rows], data=total[0:rows])
        nisa.tensor_scalar(dst=t[0:rows], data=t[0:rows], op0=nl.multiply, operand0=inv[0:rows])
        nisa.dma_copy(dst=y[i * p:i * p + rows], src=t[0:rows])
    return y
