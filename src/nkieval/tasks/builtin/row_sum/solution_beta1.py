"""Beta-1 (``neuronxcc.nki``) version of the expert solution: rows on partitions, masked ragged tile.

128 rows per tile addressed with ``nl.arange`` grids and a row mask for the last tile; each row
is reduced by ``nl.sum`` over 8192-column chunks whose partial sums stay fp32 and are summed
once more. (The Beta-1 front end has no 3-D tile reduction over several rows per partition, so
narrow rows use one row per partition here.)
"""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

FMAX = 8192


@nki.jit
def row_sum(x):
    n, d = x.shape
    out = nl.ndarray((n,), dtype=nl.float32, buffer=nl.shared_hbm)
    o2 = out.reshape((n, 1))
    nch = (d + FMAX - 1) // FMAX
    fw = min(FMAX, d)
    i_p = nl.arange(128)[:, None]
    i_c = nl.arange(nch)[None, :]
    i_0 = nl.arange(1)[None, :]
    for i in nl.affine_range((n + 127) // 128):
        rows = i * 128 + i_p
        part = nl.ndarray((128, nch), dtype=nl.float32, buffer=nl.sbuf)
        for c in nl.affine_range(nch):
            cols = c * FMAX + nl.arange(fw)[None, :]
            t = nl.load(x[rows, cols], mask=(rows < n) & (cols < d))
            part[i_p, c + i_0] = nl.sum(t, axis=[1], keepdims=True, mask=(rows < n) & (cols < d))
        s = nl.sum(part[i_p, i_c], axis=[1], keepdims=True, mask=(rows < n))
        nl.store(o2[rows, i_0], value=s, mask=(rows < n))
    return out
