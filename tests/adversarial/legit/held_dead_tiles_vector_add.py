# task: vector_add
# expect: pass
# why: staging tiles kept in a list after their last use exceed SBUF while the live ones fit (capacity is by live range)
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def vector_add(a, b):
    n = a.shape[0]
    out = nl.ndarray((n,), dtype=a.dtype, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    m = n // p
    scratch = []
    if m > 0:
        a2 = a[0:m * p].reshape((p, m))
        b2 = b[0:m * p].reshape((p, m))
        o2 = out[0:m * p].reshape((p, m))
        for lo in range(0, m, 512):
            w = min(512, m - lo)
            ta = nl.ndarray((p, 16384), dtype=a.dtype, buffer=nl.sbuf)  # (64 KiB per partition, a slice used)
            tb = nl.ndarray((p, 512), dtype=b.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=ta[:, 0:w], src=a2[:, lo:lo + w])
            nisa.dma_copy(dst=tb[:, 0:w], src=b2[:, lo:lo + w])
            nisa.tensor_tensor(dst=ta[:, 0:w], data1=ta[:, 0:w], data2=tb[:, 0:w], op=nl.add)
            nisa.dma_copy(dst=o2[:, lo:lo + w], src=ta[:, 0:w])
            scratch.append((ta, tb))  # (held, never used again: dead as far as the compiler sees)
    r = n - m * p
    if r > 0:
        ta = nl.ndarray((1, r), dtype=a.dtype, buffer=nl.sbuf)
        tb = nl.ndarray((1, r), dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=ta, src=a[m * p:n].reshape((1, r)))
        nisa.dma_copy(dst=tb, src=b[m * p:n].reshape((1, r)))
        nisa.tensor_tensor(dst=ta, data1=ta, data2=tb, op=nl.add)
        nisa.dma_copy(dst=out[m * p:n].reshape((1, r)), src=ta)
    return out
