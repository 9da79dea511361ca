"""Beta-1 index expressions that keep their affine form and make their values only when read give the values, the
comparisons and the ``affine_select`` patterns that NumPy's arithmetic on the grids gives (issue 31, speed)."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nkieval.frontends.beta1.index import IndexExpr, Predicate, affine_form, arange, fitted_form, mgrid

_OPS = ["add", "radd", "sub", "rsub", "mul", "rmul", "neg", "add_expr", "sub_expr"]


@st.composite
def _expr(draw):
    """An expression over grids with the NumPy array it must equal: grids of nl.arange placed on an axis or of
    nl.mgrid, combined with integers (some large enough to leave the kept range) and each other."""
    p, f = draw(st.integers(1, 9)), draw(st.integers(1, 9))
    start = draw(st.integers(-5, 5))

    def grid():
        kind = draw(st.sampled_from(["mgrid_p", "mgrid_f", "col", "row", "flat", "step"]))
        if kind in ("mgrid_p", "mgrid_f"):
            g = mgrid[start:start + p, 0:f]
            return g[0 if kind == "mgrid_p" else 1], np.mgrid[start:start + p, 0:f][0 if kind == "mgrid_p" else 1]
        if kind == "step":
            g = mgrid[0:2 * p:2, 1:f + 1]
            return g[1], np.mgrid[0:2 * p:2, 1:f + 1][1]
        a = arange(start, start + (p if kind == "col" else f))
        ref = np.arange(start, start + (p if kind == "col" else f), dtype=np.int64)
        if kind == "col":
            return a[:, None], ref[:, None]
        if kind == "row":
            return a[None, :], ref[None, :]
        return a, ref

    e, ref = grid()
    for _ in range(draw(st.integers(0, 5))):
        op = draw(st.sampled_from(_OPS))
        k = draw(st.one_of(st.integers(-300, 300), st.sampled_from([2**40, -(2**45), 2**61, 2**62 - 1]),
                           st.integers(-300, 300).map(np.int32)))
        kk = np.int64(int(k))
        with np.errstate(over="ignore"):
            if op == "add":
                e, ref = e + k, ref + kk
            elif op == "radd":
                e, ref = k + e, kk + ref
            elif op == "sub":
                e, ref = e - k, ref - kk
            elif op == "rsub":
                e, ref = k - e, kk - ref
            elif op == "mul":
                e, ref = e * k, ref * kk
            elif op == "rmul":
                e, ref = k * e, kk * ref
            elif op == "neg":
                e, ref = -e, -ref
            else:
                g, gref = grid()  # (shapes [p, f], [p, 1], [1, f] and [f]: they broadcast together)
                e, ref = (e + g, ref + gref) if op == "add_expr" else (e - g, ref - gref)
    return e, ref


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)


@settings(max_examples=400, deadline=None)
@given(_expr())
def test_values_are_numpys(case):
    e, ref = case
    assert isinstance(e, IndexExpr)
    assert e.shape == ref.shape and e.ndim == ref.ndim
    assert _same(e.values, ref)


@settings(max_examples=400, deadline=None)
@given(_expr(), _expr(), st.sampled_from(["<", "<=", ">", ">=", "==", "!="]), st.integers(-3, 3))
def test_comparisons_and_differences_are_numpys(left, right, cmp, k):
    (a, aref), (b, bref) = left, right
    try:
        np.broadcast_shapes(aref.shape, bref.shape)
    except ValueError:
        return
    fns = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal, "==": np.equal,
           "!=": np.not_equal}
    ops = {"<": lambda x, y: x < y, "<=": lambda x, y: x <= y, ">": lambda x, y: x > y, ">=": lambda x, y: x >= y,
           "==": lambda x, y: x == y, "!=": lambda x, y: x != y}
    for other, oref in ((b, bref), (k, np.int64(k))):
        p = ops[cmp](a, other)
        assert isinstance(p, Predicate)
        with np.errstate(over="ignore"):
            diff = aref - oref
        assert p.shape == np.broadcast_shapes(aref.shape, np.shape(oref))
        assert _same(p.values, fns[cmp](aref, oref))
        assert _same(p.diff, diff)


@settings(max_examples=300, deadline=None)
@given(_expr(), _expr(), st.sampled_from([(1,), (3,), (1, 1), (4, 1), (1, 5), (4, 5), (2, 4, 5), (1, 4, 5)]))
def test_tile_form_is_affine_forms(left, right, tile):
    """What affine_select reads of a predicate's form is what affine_form reads of its fitted difference (None
    where the fitting fails: the values path raises there, as before)."""
    (a, aref), (b, bref) = left, right
    try:
        np.broadcast_shapes(aref.shape, bref.shape)
    except ValueError:
        return
    p = a >= b
    if p.aff is None:
        return
    form = fitted_form(p.aff, tile)
    d = p.diff
    try:
        fitted = np.broadcast_to(d.reshape(d.shape[-len(tile):]) if d.ndim > len(tile) else d, tile)
    except ValueError:
        assert form is None
        return
    assert form == affine_form(fitted, tile)


def test_out_of_range_forms_are_not_kept():
    """A form that could leave int64 is made at once, and wraps as NumPy wraps."""
    e = arange(0, 4)[:, None] * 2**61
    assert e.aff is None
    with np.errstate(over="ignore"):
        assert _same((e * 8).values, np.arange(4, dtype=np.int64)[:, None] * np.int64(2**61) * np.int64(8))
    with pytest.raises(OverflowError):
        arange(0, 4) + 2**64  # NumPy's own error, as before


def test_float_mgrid_keeps_no_form():
    g = mgrid[0:3.0, 0:2]
    assert g[0].aff is None and _same(g[0].values, np.mgrid[0:3.0, 0:2][0].astype(np.int64))


def _band(x, out, q0: int, k0: int):
    iq, ik = nl.mgrid[0:128, 0:64]
    t = nl.load(x)
    res = nisa.affine_select(pred=(q0 * 128 + iq >= k0 * 64 + ik - 3), on_true_tile=t, on_false_value=-7.0)
    res2 = nisa.affine_select(pred=(2 * ik - iq < 5 + q0), on_true_tile=res, on_false_value=-9.0)
    nl.store(out, res2)


@pytest.mark.parametrize("q0, k0", [(0, 0), (0, 1), (1, 3), (2, 1)])
def test_affine_select_on_lazy_predicates(q0, k0):
    x = np.random.default_rng(3).standard_normal((128, 64)).astype(np.float32)
    out = np.zeros_like(x)
    nki.jit(_band, mode="simulation")(x, out, q0, k0)
    iq, ik = np.mgrid[0:128, 0:64]
    expected = np.where(q0 * 128 + iq >= k0 * 64 + ik - 3, x, np.float32(-7.0))
    expected = np.where(2 * ik - iq < 5 + q0, expected, np.float32(-9.0))
    assert np.array_equal(out, expected)


def test_affine_select_reads_only_the_form():
    """The speed path: a predicate of affine expressions reaches affine_select without its values or its difference
    ever being made."""
    seen = []

    def kernel(x, out):
        iq, ik = nl.mgrid[0:128, 0:64]
        pred = 3 * 128 + iq >= 64 + ik
        seen.append(pred)
        nl.store(out, nisa.affine_select(pred=pred, on_true_tile=nl.load(x), on_false_value=0.0))

    x = np.ones((128, 64), np.float32)
    out = np.zeros_like(x)
    nki.jit(kernel, mode="simulation")(x, out)
    (pred,) = seen
    assert pred._values is None and pred._diff is None and pred.aff is not None
    assert np.array_equal(out, np.where(pred.values, x, np.float32(0)))


@st.composite
def _placed_access(draw):
    """An affine grid of up to 3 axes (some of size one), the access shape it broadcasts to (right-aligned, with
    leading axes added), and a box of slices of that shape (or none)."""
    nd = draw(st.integers(1, 3))
    gshape = tuple(draw(st.sampled_from([1, 2, 3, 5])) for _ in range(nd))
    lead = tuple(draw(st.sampled_from([1, 2, 4])) for _ in range(draw(st.integers(0, 2))))
    shape = lead + tuple(n if n > 1 else draw(st.sampled_from([1, 3])) for n in gshape)
    base = draw(st.integers(-50, 50))
    coefs = tuple(0 if n == 1 else draw(st.integers(-40, 40)) for n in gshape)
    box = None
    if draw(st.booleans()):
        box = []
        for n in shape:
            a = draw(st.integers(0, n - 1))
            b = draw(st.integers(a + 1, n))
            box.append(slice(a, b, draw(st.sampled_from([1, 1, 2]))))
        box = tuple(box)
    return (gshape, base, coefs), shape, box


@settings(max_examples=300, deadline=None)
@given(_placed_access())
def test_an_accessed_grids_form_from_its_form_equals_the_form_read_from_its_values(case):
    """Access.view reads an affine grid's form, its range and its box without making values: the same form and
    range as reading them from the values broadcast to the access and cut to the box."""
    from nkieval.frontends.beta1.index import _affine_values
    from nkieval.frontends.beta1.tensor import _form_range, _placed_form

    aff, shape, box = case
    values = np.broadcast_to(_affine_values(aff), shape)
    cut = values[box] if box is not None else values
    sub = cut.shape
    got = _placed_form(aff, shape, box, sub)
    assert got is not None
    base, coefs = affine_form(cut, sub)
    assert got == (base, coefs)
    assert _form_range(got, sub) == (int(cut.min()), int(cut.max()))
