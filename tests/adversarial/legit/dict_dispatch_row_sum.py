# task: row_sum
# expect: pass
# why: a dict of strategy functions chosen by shape (not by values), enumerate/zip over spans, a lambda
import nki
import nki.isa as nisa
import nki.language as nl

CH = 4096


def _narrow(x, out, lo, rows, d):
    t = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t[0:rows], src=x[lo:lo + rows])
    s = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=s[0:rows], op=nl.add, data=t[0:rows], axis=1)
    nisa.dma_copy(dst=out[lo:lo + rows].reshape((rows, 1)), src=s[0:rows])


def _wide(x, out, lo, rows, d):
    spans = [(c, min(d, c + CH)) for c in range(0, d, CH)]
    part = nl.ndarray((128, len(spans)), dtype=nl.float32, buffer=nl.sbuf)
    for j, (c0, c1) in enumerate(spans):
        t = nl.ndarray((128, CH), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t[0:rows, 0:c1 - c0], src=x[lo:lo + rows, c0:c1])
        nisa.tensor_reduce(dst=part[0:rows, j:j + 1], op=nl.add, data=t[0:rows, 0:c1 - c0], axis=1)
    s = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=s[0:rows], op=nl.add, data=part[0:rows], axis=1)
    nisa.dma_copy(dst=out[lo:lo + rows].reshape((rows, 1)), src=s[0:rows])


STRATEGY = {True: _narrow, False: _wide}
pick = lambda d: STRATEGY[d <= CH]  # noqa: E731


@nki.jit
def row_sum(x):
    n, d = x.shape
    out = nl.ndarray((n,), dtype=nl.float32, buffer=nl.shared_hbm)
    for lo in range(0, n, 128):
        pick(d)(x, out, lo, min(128, n - lo), d)
    return out
