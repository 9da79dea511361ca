"""The Beta-1 front end's limits come from the target's hardware data (issue #25, item 6): the partition limit
of a tile and of a placed allocation, and the PSUM bank range of ``mod_alloc``. A target whose facts differ
(a stand-in holding the two facts) moves each limit; the real targets keep 128 partitions and 8 banks
(architecture guides A2/A3/A4, ``nl.tile_size``)."""

from __future__ import annotations

import types

import neuronxcc.nki as nki
import neuronxcc.nki.compiler as ncc
import neuronxcc.nki.language as nl
import pytest

from nkieval.frontends.beta1 import state
from nkieval.hardware import get_target
from nkieval.sim.errors import NkiValidationError


def _run(fn):
    return nki.jit(fn, mode="simulation")()


def _tile(parts: int):
    def kern():
        nl.ndarray((parts, 4), dtype=nl.float32, buffer=nl.sbuf)
    return kern


def _placed(base_partition: int, parts: int):
    def kern():
        nl.ndarray((1, nl.par_dim(parts), 16), dtype=nl.float32,
                   buffer=ncc.sbuf.mod_alloc(base_addr=0, base_partition=base_partition))
    return kern


def _psum_bank(bank: int):
    def kern():
        nl.ndarray((1, nl.par_dim(8), 16), dtype=nl.float32, buffer=ncc.psum.mod_alloc(base_bank=bank))
    return kern


@pytest.fixture
def small_target(monkeypatch):
    """A target with 64 partitions and 4 PSUM banks, seen by the Beta-1 front end as the running one."""
    hw = types.SimpleNamespace(partitions=64, psum_banks=4)
    monkeypatch.setattr(state, "target", lambda: hw)
    return hw


def test_the_real_limits_are_the_documented_ones():
    for t in ("trn1", "trn2", "trn3"):
        assert get_target(t).partitions == 128 and get_target(t).psum_banks == 8
    _run(_tile(128))
    with pytest.raises(NkiValidationError, match="number of partitions 129 exceed architecture limitation of 128"):
        _run(_tile(129))
    _run(_placed(64, 64))
    with pytest.raises(NkiValidationError, match=r"partitions \[64, 129\) exceed the 128 partitions"):
        _run(_placed(64, 65))
    _run(_psum_bank(7))
    with pytest.raises(NkiValidationError, match=r"base_bank must be in \[0, 8\)"):
        _run(_psum_bank(8))


def test_the_tile_partition_limit_is_the_targets(small_target):
    _run(_tile(64))
    with pytest.raises(NkiValidationError, match="number of partitions 65 exceed architecture limitation of 64"):
        _run(_tile(65))


def test_a_placed_allocation_is_bounded_by_the_targets_partitions(small_target):
    with pytest.raises(NkiValidationError, match=r"partitions \[32, 96\) exceed the 64 partitions"):
        _run(_placed(32, 64))


def test_the_psum_bank_range_is_the_targets(small_target):
    _run(_psum_bank(3))
    with pytest.raises(NkiValidationError, match=r"base_bank must be in \[0, 4\)"):
        _run(_psum_bank(4))
