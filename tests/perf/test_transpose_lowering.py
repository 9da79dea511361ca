"""Why there is no transpose-lowering pass: the simulator's lowering is already the model's cheapest documented one.

``nki.isa.nc_transpose`` without ``engine=``: "the best engine will be selected for the given input tile shape"
(Tensor engine up to [128, 128], SBUF to PSUM; Vector engine up to [32, 32], either memory). Where both fit, the
simulator picks the Tensor engine for SBUF -> PSUM and the Vector engine for SBUF -> SBUF. A pass that re-picked the
engine by the model's own costs would change nothing as long as these hold; if engine costs change so that they
fail, the default lowering (``sim/isa/tensor_engine.py``) and docs/perf.md's transpose paragraph must be revisited.
Kernels of our own: the same [P, F] tile transposed ``N`` times into ``N`` slices of one SBUF tile (distinct
slices, so that no copy is a dead store).
"""

from __future__ import annotations

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

from nkieval.perf import estimate

N = 16


def _to_psum(engine, p: int, f: int):
    @nki.jit
    def k(x):
        out = nl.ndarray((f, N * p), dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((p, f), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        r = nl.ndarray((f, N * p), dtype=x.dtype, buffer=nl.sbuf)
        for i in nl.affine_range(N):
            pt = nl.ndarray((f, p), dtype=x.dtype, buffer=nl.psum)
            if engine is None:
                nisa.nc_transpose(dst=pt, data=t)
            else:
                nisa.nc_transpose(dst=pt, data=t, engine=engine)
            nisa.tensor_copy(dst=r[:, i * p:(i + 1) * p], src=pt)
        nisa.dma_copy(dst=out, src=r)
        return out
    return k


def _to_sbuf(via_psum: bool, p: int, f: int):
    @nki.jit
    def k(x):
        out = nl.ndarray((f, N * p), dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((p, f), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        r = nl.ndarray((f, N * p), dtype=x.dtype, buffer=nl.sbuf)
        for i in nl.affine_range(N):
            if via_psum:  # the Tensor engine's route: transpose into PSUM, then copy out
                pt = nl.ndarray((f, p), dtype=x.dtype, buffer=nl.psum)
                nisa.nc_transpose(dst=pt, data=t, engine=nisa.tensor_engine)
                nisa.tensor_copy(dst=r[:, i * p:(i + 1) * p], src=pt)
            else:
                nisa.nc_transpose(dst=r[:, i * p:(i + 1) * p], data=t)
        nisa.dma_copy(dst=out, src=r)
        return out
    return k


def _run(kernel, target: str, p: int, f: int):
    nki.simulate(kernel, target=target)(np.ones((p, f), np.float32))
    tr = nki.last_result().trace
    engines = {r.engine for r in tr.records if r.opcode == "nc_transpose"}
    return estimate(tr, target).total_time_ns, engines


@pytest.mark.parametrize("target", ["trn1", "trn2", "trn3"])
def test_default_sbuf_to_psum_transpose_is_the_cheaper_engine(target) -> None:
    default, eng = _run(_to_psum(None, 32, 32), target, 32, 32)
    vector, _ = _run(_to_psum(nisa.vector_engine, 32, 32), target, 32, 32)
    tensor, _ = _run(_to_psum(nisa.tensor_engine, 32, 32), target, 32, 32)
    assert eng == {"tensor"} and default == tensor
    assert tensor < vector


@pytest.mark.parametrize("target", ["trn1", "trn2", "trn3"])
def test_default_sbuf_to_sbuf_transpose_is_the_cheaper_route(target) -> None:
    default, eng = _run(_to_sbuf(False, 32, 32), target, 32, 32)
    staged, _ = _run(_to_sbuf(True, 32, 32), target, 32, 32)
    assert eng == {"vector"}
    assert default < staged
