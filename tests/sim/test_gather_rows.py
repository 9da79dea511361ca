"""The row-by-row indirect gather (``isa.dma._gathered_rows``) against the element-offset path it stands in for.

``dma_copy`` from an indirect view (``.ap(vector_offset=)``, ``vector_select``) stores what
``flat[element_offsets(idx)]`` holds when every row is in bounds; the fast path reads the same elements from one
strided view of the storage. It must give the same bits and shape whenever it answers, answer whenever the layout
is the plain one and every row is in bounds, and step aside (None) for any row out of bounds, where the
element-offset path raises or skips rows.
"""

import ml_dtypes
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from nkieval.sim.indirect_views import IndirectAccess
from nkieval.sim.isa.dma import _gathered_rows


@st.composite
def _views(draw):
    """An indirect view over a small storage (offset, row step, free pattern, row bound) and row indices, some of
    them out of bounds on purpose."""
    n = draw(st.integers(1, 300))
    flat = np.arange(n, dtype=np.int32) * 7 + 3
    step = draw(st.integers(-3, 40))
    free = tuple(draw(st.lists(st.tuples(st.integers(-4, 9), st.integers(1, 6)), min_size=1, max_size=2)))
    rows_bound = draw(st.one_of(st.none(), st.integers(0, 12)))
    idx = np.array(draw(st.lists(st.integers(-3, 14), min_size=1, max_size=8)), dtype=np.int32)
    offset = draw(st.integers(-5, n))
    ind = IndirectAccess(flat, (n,), ((step, len(idx)), *free), offset, None, 0, row_stride=step, rows=rows_bound)
    return ind, idx


@settings(max_examples=400, deadline=None)
@given(_views())
def test_gathered_rows_equal_the_element_offsets(view):
    ind, idx = view
    fast = _gathered_rows(ind, idx)
    offs = ind.element_offsets(idx)
    in_bounds = bool(((offs >= 0) & (offs < ind.flat.size)).all() and ind.rows_ok(idx).all())
    plain = ind.row_elems > 0 and all(s >= 0 for s, _ in ind.pattern[1:])
    if fast is not None:
        assert in_bounds
        assert fast.shape == offs.shape
        np.testing.assert_array_equal(fast, ind.flat[offs])
    else:
        assert not (in_bounds and plain), "an in-bounds gather of the plain layout left to the slow path"


def test_rows_one_element_outside_are_left_to_the_slow_path():
    """The bounds are exact: a first row starting one element before the storage, or a last row ending one past
    it, is not gathered here; one ending at the storage's last element is."""
    flat = np.arange(42, dtype=np.int32)
    before = IndirectAccess(flat, (42,), ((4, 2), (1, 4)), -1, None, 0, row_stride=4)
    assert _gathered_rows(before, np.array([0, 1], dtype=np.int32)) is None  # a row at -1..2
    np.testing.assert_array_equal(_gathered_rows(before, np.array([9, 1], dtype=np.int32)),
                                  [[35, 36, 37, 38], [3, 4, 5, 6]])
    assert _gathered_rows(before, np.array([1, 10], dtype=np.int32)) is None  # a row at 39..42
    last = IndirectAccess(flat, (42,), ((4, 2), (1, 4)), -2, None, 0, row_stride=4)
    np.testing.assert_array_equal(_gathered_rows(last, np.array([10, 1], dtype=np.int32)),
                                  [[38, 39, 40, 41], [2, 3, 4, 5]])


def test_gathered_rows_bf16_storage_bits():
    """A narrow float storage (bf16 NaN payloads, negative zero) comes back bit for bit."""
    bits = np.arange(64 * 16, dtype=np.uint16)
    bits[5] = 0x7FC1  # a NaN with a payload
    bits[6] = 0x8000  # -0.0
    flat = bits.view(ml_dtypes.bfloat16)
    ind = IndirectAccess(flat, (64, 16), ((16, 4), (1, 16)), 0, None, 0, row_stride=16)
    idx = np.array([0, 63, 0, 7], dtype=np.int32)
    fast = _gathered_rows(ind, idx)
    assert fast is not None
    np.testing.assert_array_equal(fast.view(np.uint16), bits.reshape(64, 16)[idx])
