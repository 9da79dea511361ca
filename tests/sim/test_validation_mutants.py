"""The simulator's validation where mutation testing found it unchecked (issue #25, item 5): PE tiling of
``nc_matmul`` (nki.isa docs: tile rows/cols 128 or 64 on NeuronCore-v2, also 32 on v3+; a position is a multiple
of the tile inside the 128x128 array; the stationary must fit the tile) and the partition-mismatch message."""

from __future__ import annotations

import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from isa_testlib import last_trace, psum, rand, sbuf, simulate

from nkieval.sim.errors import NkiValidationError


def _tiled(k: int, m: int, position, size, target: str = "trn2"):
    a, b = rand((k, m), 1), rand((k, 32), 2)

    def body(x, y):
        acc = psum((m, 32))
        nisa.nc_matmul(dst=acc, stationary=x, moving=y, tile_position=position, tile_size=size)
        return acc
    return simulate(body, a, b, target=target), a.T @ b


@pytest.mark.parametrize("position,size", [((0,), (64, 64)), ((0, 0), (64,)), ((0, 0, 0), (64, 64)),
                                           ((0, 0), (64, 64, 64))])
def test_tile_position_and_size_must_both_be_pairs(position, size):
    with pytest.raises(NkiValidationError, match=r"must both be \(row, col\) pairs") as e:
        _tiled(64, 64, position, size)
    assert e.value.rule == "argument"


@pytest.mark.parametrize("position,size,target", [
    ((64, 64), (64, 64), "trn2"), ((0, 64), (64, 64), "trn1"), ((96, 32), (32, 32), "trn2"),
    ((0, 0), (128, 128), "trn2"), ((64, 0), (64, 128), "trn2"),
])
def test_legal_tilings_compute_the_product(position, size, target):
    k = min(size[0], 32)
    out, want = _tiled(k, min(size[1], 32), position, size, target)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("position,size,rule", [
    ((32, 0), (64, 64), "argument"),  # not a multiple of the tile rows
    ((0, 32), (64, 64), "argument"),  # not a multiple of the tile cols
    ((128, 0), (64, 64), "argument"),  # past the array's 128 rows
    ((0, 128), (64, 64), "argument"),  # past its 128 columns
    ((64, 0), (128, 64), "argument"),  # 64 + 128 rows > 128
    ((0, 0), (48, 64), "argument"),  # 48 is no tile size
    ((0, 0), (64, 256), "argument"),
])
def test_illegal_tilings_are_rejected(position, size, rule):
    with pytest.raises(NkiValidationError) as e:
        _tiled(32, 32, position, size)
    assert e.value.rule == rule, e.value


def test_32x32_tiles_are_v3_and_later():
    with pytest.raises(NkiValidationError) as e:
        _tiled(32, 32, (0, 0), (32, 32), "trn1")
    assert e.value.rule == "generation"
    out, want = _tiled(32, 32, (0, 0), (32, 32), "trn2")
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("k,m", [(65, 32), (32, 65)])
def test_the_stationary_must_fit_the_tile(k, m):
    with pytest.raises(NkiValidationError, match=rf"stationary \[{k}, {m}\] does not fit the 64x64 tile") as e:
        _tiled(k, m, (0, 0), (64, 64))
    assert e.value.rule == "matmul-limit"


def test_the_partition_mismatch_names_both_partition_counts():
    def body(x):
        d = sbuf((128, 8))
        nisa.tensor_tensor(dst=d, data1=x, data2=x[0:64, 0:8], op=nl.add)
        return d

    with pytest.raises(NkiValidationError) as e:
        simulate(body, rand((128, 8), 3))
    assert e.value.rule == "partition-mismatch"
    assert "has 128" in str(e.value) and "[64, 8] has 64" in str(e.value), str(e.value)


def test_the_trace_records_the_sbuf_and_psum_peaks_separately():
    """One live SBUF tile of [128, 64] fp32 (64 x 4 = 256 B per partition) and one PSUM tile of [128, 512] fp32
    (one 2 KiB bank per partition): each buffer's peak is its own tile."""
    def body(x):
        p = psum((128, 512))
        nisa.memset(dst=p, value=0.0)
        nisa.tensor_copy(dst=x, src=p[:, 0:64])
        return x

    simulate(body, rand((128, 64), 4))
    tr = last_trace()
    assert (tr.peak_sbuf_bytes, tr.peak_psum_bytes) == (256, 2048)


@pytest.mark.parametrize("free_dims,ok", [(3, True), (4, True), (5, False)])
def test_max8_takes_at_most_four_free_dimensions(free_dims, ok):
    """nki.isa.max8: src up to 4 free dimensions (16 elements per partition here in every case)."""
    shape = (128, *([2] * (free_dims - 1)), 16 // 2 ** (free_dims - 1))
    a = rand(shape, 5)

    def body(x):
        d = sbuf((128, 8))
        nisa.max8(dst=d, src=x)
        return d

    if ok:
        out = simulate(body, a)
        np.testing.assert_array_equal(out, -np.sort(-a.reshape(128, -1), axis=1)[:, :8])
    else:
        with pytest.raises(NkiValidationError, match=r"has 5 free dimensions; at most 4") as e:
            simulate(body, a)
        assert e.value.rule == "instruction-limit"


def test_the_capacity_error_lists_the_largest_live_tiles_first():
    """Three SBUF tiles of 96, 64 and 80 KiB per partition live at once (240 KiB) exceed trn2's SBUF partition
    (224 KiB); the message lists them by size, largest first."""
    from nkieval.sim.options import SimOptions

    sizes = {"a": 96 * 256, "b": 64 * 256, "c": 80 * 256}  # fp32 elements per partition (1 KiB = 256)

    def body(x):
        tiles = [nl.ndarray((128, n), dtype=nl.float32, buffer=nl.sbuf, name=k) for k, n in sizes.items()]
        for t in tiles:
            nisa.memset(dst=t, value=0.0)
        for t in tiles:
            nisa.tensor_copy(dst=x, src=t[:, 0:8])
        return x

    with pytest.raises(NkiValidationError) as e:
        simulate(body, rand((128, 8), 6), options=SimOptions.from_env(capacity_check="error"))
    msg = str(e.value)
    assert e.value.rule == "sbuf-capacity", msg
    assert msg.index("a[128, 24576]") < msg.index("c[128, 20480]") < msg.index("b[128, 16384]"), msg
