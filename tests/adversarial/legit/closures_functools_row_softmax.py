# task: row_softmax
# expect: pass
# why: closures built with functools.partial, math.ceil, itertools over row blocks, and a list comprehension of tiles
import functools
import itertools
import math

import nki
import nki.isa as nisa
import nki.language as nl


def _softmax_rows(x, out, d, r0, rows):
    t = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t[0:rows], src=x[r0:r0 + rows])
    stats = [nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf) for _ in range(2)]
    neg_max, total = stats
    nisa.tensor_reduce(dst=neg_max[0:rows], op=nl.maximum, data=t[0:rows], axis=1, negate=True)
    nisa.activation_reduce(dst=t[0:rows], op=nl.exp, data=t[0:rows], bias=neg_max[0:rows], reduce_op=nl.add,
                           reduce_res=total[0:rows])
    nisa.reciprocal(dst=total[0:rows], data=total[0:rows])
    nisa.tensor_scalar(dst=t[0:rows], data=t[0:rows], op0=nl.multiply, operand0=total[0:rows])
    nisa.dma_copy(dst=out[r0:r0 + rows], src=t[0:rows])


@nki.jit
def row_softmax(x):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    block = functools.partial(_softmax_rows, x, out, d)
    for i in itertools.islice(itertools.count(), math.ceil(n / 128)):
        block(i * 128, min(128, n - i * 128))
    return out
