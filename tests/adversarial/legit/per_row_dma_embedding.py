# task: embedding_gather
# expect: pass
# why: the indirect gather in 32-token groups through a helper, a generator expression over the groups
import nki
import nki.isa as nisa
import nki.language as nl

G = 32


def _groups(n):
    return ((lo, min(n, lo + G)) for lo in range(0, n, G))


@nki.jit
def embedding_gather(table, ids):
    _, d = table.shape
    n = ids.shape[0]
    out = nl.ndarray((n, d), dtype=table.dtype, buffer=nl.shared_hbm)
    for lo, hi in _groups(n):
        rows = hi - lo
        idx = nl.ndarray((G, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=idx[0:rows], src=ids[lo:hi].reshape((rows, 1)))
        nisa.dma_copy(dst=out[lo:hi],
                      src=table.ap(pattern=[[d, rows], [1, d]], offset=0, vector_offset=idx[0:rows], indirect_dim=0))
    return out
