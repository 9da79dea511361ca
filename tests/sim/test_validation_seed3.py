"""Simulator checks where mutation testing (seed 3) found them unchecked (issue #25, item 5):

* a [P, 1] reduction output is accepted and holds the row reduction (nki.isa: "reduce_res ... of shape [P, 1]");
  one on other partitions than the data is refused;
* a fixed-address tile whose bytes lie inside another live fixed-address tile's bytes adds nothing to the peak
  (the NKI docs place an SBUF tensor at "a rectangle in the underlying memory": nested rectangles share bytes).
"""

from __future__ import annotations

import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from isa_testlib import last_trace, rand, sbuf, simulate

from nkieval.sim.errors import NkiValidationError


def test_a_one_column_reduction_output_holds_the_row_sums():
    x = rand((128, 64), 4)

    def body(t):
        d, r = sbuf(t.shape), sbuf((128, 1))
        nisa.activation(dst=d, op=nl.exp, data=t, reduce_cmd=nisa.reduce_cmd.reset_reduce, reduce_res=r)
        return r

    got = np.asarray(simulate(body, x))
    np.testing.assert_allclose(got, np.exp(x.astype(np.float64)).sum(axis=1, keepdims=True), rtol=1e-5)


def test_a_reduction_output_on_fewer_partitions_than_the_data_is_refused():
    def body(t):
        d, r = sbuf(t.shape), sbuf((64, 1))
        nisa.activation(dst=d, op=nl.exp, data=t, reduce_cmd=nisa.reduce_cmd.reset_reduce, reduce_res=r)
        return d

    with pytest.raises(NkiValidationError, match=r"reduce_res must be \[128, 1\], got \[64, 1\]") as e:
        simulate(body, rand((128, 64), 5))
    assert e.value.rule == "shape-mismatch"


BASE = 65536  # a free SBUF byte offset, past the input tile the test kernel's DMA places automatically


def test_a_fixed_tile_nested_inside_another_adds_nothing_to_the_peak():
    """Three fixed fp32 tiles live together: [128, 512] at SBUF bytes [B, B+2048), [128, 256] at [B+512, B+1536)
    (inside the first) and [128, 256] at [B+2048, B+3072) (just after it). Their union is [B, B+3072): 3072 bytes a
    partition; with the input tile's 1024 bytes the peak is 4096. (Letting the nested tile's earlier end pull the
    union's reach back would count 2560 for the three, a peak of 3584.)"""
    def body(x):
        outer = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf, address=(0, BASE))
        inner = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.sbuf, address=(0, BASE + 512))
        after = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.sbuf, address=(0, BASE + 2048))
        nisa.memset(dst=outer, value=1.0)
        nisa.memset(dst=inner, value=2.0)
        nisa.memset(dst=after, value=3.0)
        nisa.tensor_tensor(dst=x, data1=outer[:, 0:256], data2=inner, op=nl.add)
        nisa.tensor_tensor(dst=x, data1=x, data2=after, op=nl.add)
        return x

    simulate(body, rand((128, 256), 6))
    assert last_trace().peak_sbuf_bytes == 1024 + 3072


def test_a_tile_position_past_the_array_is_refused_whatever_its_bits():
    """(160, 0) with 32x32 tiles is a multiple of the tile but 160 + 32 > 128 rows (160 ^ 32 = 128 would fit)."""
    a, b = rand((32, 32), 7), rand((32, 32), 8)

    def body(x, y):
        acc = nl.ndarray((32, 32), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=acc, stationary=x, moving=y, tile_position=(160, 0), tile_size=(32, 32))
        return acc

    with pytest.raises(NkiValidationError, match=r"tile_position \(160, 0\) must be a multiple of tile_size") as e:
        simulate(body, a, b)
    assert e.value.rule == "argument"


def test_a_matmul_into_the_second_psum_bank_is_accepted():
    """A [128, 512] fp32 PSUM tile at byte 2048 fills bank 1 exactly (2 KiB banks): no bank boundary is crossed, and
    the product is computed."""
    a, b = rand((128, 128), 9), rand((128, 512), 10)

    def body(x, y):
        acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum, address=(0, 2048))
        nisa.nc_matmul(dst=acc, stationary=x, moving=y)
        return acc

    np.testing.assert_allclose(simulate(body, a, b), a.T @ b, rtol=1e-4, atol=1e-4)
