"""Regressions found by running public current-API (`nki`) kernels through `nkieval compat`.

Each test is our own minimal reproduction of an API use that nkieval rejected or got wrong
(no public code is copied here).
"""

from dataclasses import dataclass

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

from nkieval.sim.errors import NkiValidationError


def test_isa_constants_submodule():
    from nki.isa import constants
    from nki.isa.constants import dge_mode, oob_mode

    assert oob_mode is nisa.oob_mode and dge_mode is nisa.dge_mode
    assert constants.reduce_cmd is nisa.reduce_cmd and constants.matmul_perf_mode is nisa.matmul_perf_mode


def test_nki_dtype_is_the_dtype_type():
    def f(x, dt: nki.dtype = nl.bfloat16):  # used as an annotation in kernel signatures
        return dt

    assert isinstance(f(None), nki.dtype)


@dataclass(frozen=True)
class _Cfg(nl.NKIObject):
    scale: float
    rows: int


@nki.jit(mode="trace")
def _scaled_copy(dst, src, cfg: _Cfg):
    t = nl.ndarray((cfg.rows, src.shape[1]), dtype=src.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=src[0:cfg.rows, :])
    nisa.activation(dst=t, op=nl.copy, data=t, scale=cfg.scale)
    nisa.dma_copy(dst=dst[0:cfg.rows, :], src=t)


@nki.jit(mode="auto", debug_kernel=True)
def _kernel_with_config(x, cfg: _Cfg):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    _scaled_copy(out, x, cfg)
    return out


def test_nkiobject_config_and_kept_jit_modes():
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    out = nki.simulate(_kernel_with_config)(x, _Cfg(scale=2.0, rows=4))
    np.testing.assert_allclose(out, 2 * x)


@pytest.mark.parametrize("mode", ["simulation", "baremetal", "jax"])
def test_beta1_jit_modes_still_errors(mode):
    with pytest.raises(NkiValidationError, match=r"mode='\w+': removed in NKI 0\.3"):
        nki.jit(mode=mode)


@nki.jit(platform_target="trn1")
def _who_runs(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=x)
    return out


def test_jit_platform_target_selects_the_target(monkeypatch):
    monkeypatch.delenv("NEURON_PLATFORM_TARGET_OVERRIDE", raising=False)
    nki.simulate(_who_runs)(np.zeros((2, 2), np.float32))
    assert nki.last_result().target.name == "trn1"
    nki.simulate(_who_runs, target="trn2")(np.zeros((2, 2), np.float32))
    assert nki.last_result().target.name == "trn2"


def test_collectives_module_loads_and_ops_say_unsupported():
    import nki.collectives as ncc
    from nki.collectives import ReplicaGroup

    assert ReplicaGroup([[0, 1], [2, 3]]).replica_groups == [[0, 1], [2, 3]]
    with pytest.raises(NotImplementedError, match="not simulated by nkieval"):
        ncc.all_gather()
