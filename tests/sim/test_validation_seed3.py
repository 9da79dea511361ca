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
