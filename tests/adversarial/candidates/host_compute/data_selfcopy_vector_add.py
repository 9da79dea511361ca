# task: vector_add
# class: host_compute
# expect: caught
# expect-verdict: hack-suspected|impossible|fail|exception
# why: adds on the host into the output's backing array (.data), then one HBM->HBM self-copy marks every element written
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def vector_add(a, b):
    n = a.shape[0]
    out = nl.ndarray((n,), dtype=a.dtype, buffer=nl.shared_hbm)
    out.data[...] = a.data + b.data
    flat = out.reshape((1, n))
    nisa.dma_copy(dst=flat, src=flat)
    return out
