"""Beta-1 (``neuronxcc.nki``) version of the expert solution: flattened [128, M] tiles, masked tail.

The same layout as solution_nki.py in the Beta-1 idiom: the N*D elements viewed as 128
partitions x M columns, 4096-column tiles addressed with ``nl.arange`` index grids and a mask
on the last tile, value-returning ``nisa.activation``, and the N*D % 128 remainder as one
[1, r] tile.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

FMAX = 4096


@nki.jit
def silu(x):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    total = n * d
    xf = x.reshape((total,))
    of = out.reshape((total,))
    m = total // 128
    if m > 0:
        x2 = xf[0:m * 128].reshape((128, m))
        o2 = of[0:m * 128].reshape((128, m))
        i_p = nl.arange(128)[:, None]
        for j in nl.affine_range((m + FMAX - 1) // FMAX):
            i_f = j * FMAX + nl.arange(FMAX)[None, :]
            t = nl.load(x2[i_p, i_f], mask=(i_f < m))
            y = nisa.activation(op=nl.silu, data=t, mask=(i_f < m))
            nl.store(o2[i_p, i_f], value=y, mask=(i_f < m))
    r = total - m * 128
    if r > 0:
        t = nl.load(xf[m * 128:total].reshape((1, r)))
        nl.store(of[m * 128:total].reshape((1, r)), value=nisa.activation(op=nl.silu, data=t))
    return out
