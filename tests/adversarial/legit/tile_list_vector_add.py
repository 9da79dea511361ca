# task: vector_add
# expect: pass
# why: a list comprehension of loaded tiles, zip over the two lists, then the adds and stores in a second loop
import nki
import nki.isa as nisa
import nki.language as nl

W = 2048


def _load(src, lo, hi, rows):
    t = nl.ndarray((rows, hi - lo), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=src[:, lo:hi])
    return t


@nki.jit
def vector_add(a, b):
    n = a.shape[0]
    out = nl.ndarray((n,), dtype=a.dtype, buffer=nl.shared_hbm)
    m = n // 128
    views = []
    if m:
        views.append((a[0:m * 128].reshape((128, m)), b[0:m * 128].reshape((128, m)),
                      out[0:m * 128].reshape((128, m)), 128, m))
    if n - m * 128:
        r = n - m * 128
        views.append((a[m * 128:n].reshape((1, r)), b[m * 128:n].reshape((1, r)), out[m * 128:n].reshape((1, r)), 1, r))
    for av, bv, ov, rows, width in views:
        spans = [(lo, min(width, lo + W)) for lo in range(0, width, W)]
        tas = [_load(av, lo, hi, rows) for lo, hi in spans]
        tbs = [_load(bv, lo, hi, rows) for lo, hi in spans]
        for (lo, hi), ta, tb in zip(spans, tas, tbs):
            nisa.tensor_tensor(dst=ta, data1=ta, data2=tb, op=nl.add)
            nisa.dma_copy(dst=ov[:, lo:hi], src=ta)
    return out
