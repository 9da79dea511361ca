"""The Beta-1 front end's memoised and shortened paths give what the full paths give (issue 31, speed)."""

import gc
import weakref

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nkieval.frontends.beta1 import state
from nkieval.frontends.beta1.index import affine_form
from nkieval.frontends.beta1.tensor import _expand
from nkieval.sim.context import set_current
from nkieval.sim.errors import NkiValidationError

RNG = np.random.default_rng(31)


def run(fn, *args):
    return nki.jit(fn, mode="simulation")(*args)


# -- block tensors: t[i, :, :] ------------------------------------------------------------------
def _key(draw, shape: tuple[int, ...]) -> tuple:
    """A key of ints (some negative), slices and nl.ds, in bounds for ``shape``."""
    out = []
    for n in shape:
        kind = draw(st.sampled_from(["int", "neg", "slice", "full", "ds"]))
        if kind == "int":
            out.append(draw(st.integers(0, n - 1)))
        elif kind == "neg":
            out.append(-draw(st.integers(1, n)))
        elif kind == "full":
            out.append(slice(None))
        else:
            lo = draw(st.integers(0, n - 1))
            hi = draw(st.integers(lo + 1, n))
            out.append(slice(lo, hi) if kind == "slice" else nl.ds(lo, hi - lo))
    return tuple(out)


@st.composite
def _block_cases(draw):
    pdim = draw(st.integers(1, 2))
    blocks = [draw(st.integers(1, 3)) for _ in range(pdim)]
    shape = (*blocks, draw(st.sampled_from([1, 8, 128])), draw(st.integers(1, 6)))
    keys = [_key(draw, shape) for _ in range(4)]
    return pdim, shape, keys


@settings(max_examples=40, deadline=None)
@given(_block_cases())
def test_a_block_tensor_index_is_the_full_path_s_view_on_first_and_repeated_use(case):
    pdim, shape, keys = case
    seen = []

    def kern(x):
        par = [nl.par_dim(n) if d == pdim else n for d, n in enumerate(shape)]
        t = nl.ndarray(tuple(par), dtype=nl.float32)
        u = nl.ndarray((shape[pdim], *shape[:pdim], *shape[pdim + 1:]), dtype=nl.float32)  # same storage shape, pdim 0
        for key in keys + keys:  # the second round takes the memo
            fast = t[key]
            full = t._basic(_expand(key, t.ndim))
            seen.append((fast.data.shape, fast.data.strides, fast._byte_offset(), fast.pdim,
                         full.data.shape, full.data.strides, full._byte_offset(), full.pdim))
            # the byte offset the fast path carries is where NumPy's view starts in the storage
            assert fast._byte_offset() == fast.data.__array_interface__["data"][0] - t.alloc.base_ptr
            assert fast.alloc is t.alloc and u[0, 0].alloc is u.alloc
        out = nl.ndarray((1, 1), dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load(x))
        return out

    run(kern, np.zeros((1, 1), np.float32))
    assert len(seen) == 2 * len(keys)
    for s in seen:
        assert s[:4] == s[4:]


def test_a_bad_block_index_raises_every_time_and_a_good_one_after_it_still_works():
    def kern(x):
        t = nl.ndarray((2, nl.par_dim(128), 4), dtype=nl.float32)
        for _ in range(2):
            with pytest.raises(NkiValidationError, match="Out-of-bound access"):
                t[2, :, :]
        t[1, :, :] = nl.load(x)
        t[-1, :, :] = nl.add(t[1, :, :], 1.0)
        out = nl.ndarray((128, 4), dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, t[1])
        return out

    x = RNG.standard_normal((128, 4), dtype=np.float32)
    np.testing.assert_array_equal(run(kern, x), x + 1)


def test_block_tensors_of_one_logical_shape_and_different_partition_dims_index_apart():
    # (4, par_dim 8, 16) and (4, 8, par_dim 16) are both [4, 8, 16]: one key must give each its own view
    views = []

    def kern(x):
        a = nl.ndarray((4, nl.par_dim(8), 16), dtype=nl.float32)
        b = nl.ndarray((4, 8, nl.par_dim(16)), dtype=nl.float32)
        for t in (a, b, a, b):
            v = t[1, 2, :]
            views.append((v.data.shape, v.pdim))
        out = nl.ndarray((1, 1), dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load(x))
        return out

    run(kern, np.zeros((1, 1), np.float32))
    assert views == [((1, 16), 0), ((16,), 0)] * 2


# -- assignment into the same region is no copy ---------------------------------------------------
def test_psum_accumulation_assigned_back_issues_no_copy_and_another_region_does():
    def kern(a, b):
        acc = nl.zeros((2, nl.par_dim(128), 128), dtype=nl.float32, buffer=nl.psum)
        sa, sb = nl.load(a), nl.load(b)
        for _ in nl.affine_range(2):
            acc[0, :, :] += nisa.nc_matmul(sa, sb)  # (Python: getitem, iadd, then setitem of the same view)
        acc[1, :, :] = acc[0, :, :]  # a different region: a copy
        out = nl.ndarray((128, 128), dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, acc[1])
        return out

    a = RNG.standard_normal((128, 128), dtype=np.float32)
    b = RNG.standard_normal((128, 128), dtype=np.float32)
    got = run(kern, a, b)
    np.testing.assert_allclose(got, 2 * (a.T @ b), rtol=1e-5, atol=1e-3)
    ops = [r.opcode for r in nki.last_result().trace.records]
    # two copies: acc[1] = acc[0], and PSUM to SBUF before the store; none for the two `+=` (4 if they copied)
    assert ops.count("nc_matmul") == 2 and ops.count("tensor_copy") == 2


# -- the program state is per context ------------------------------------------------------------
class _Ctx:
    """A stand-in for a running program's context (state() needs only its identity)."""


def test_program_state_follows_the_running_context_and_does_not_keep_a_finished_one():
    a, b = _Ctx(), _Ctx()
    prev = set_current(a)
    try:
        sa = state.state()
        set_current(b)
        sb = state.state()
        set_current(a)
        assert state.state() is sa and sa is not sb
        set_current(b)
        assert state.state() is sb
        gone = weakref.ref(sb)
        set_current(None)
        del b, sb
        gc.collect()
        assert gone() is None  # the per-thread cache holds neither the context nor its state
        assert state.state() is None
    finally:
        set_current(prev)


# -- affine_form --------------------------------------------------------------------------------
def _reference_affine(v: np.ndarray, shape: tuple[int, ...]):
    """Least-effort reference: read base and coefficients off the grid, rebuild it with np.indices."""
    v = np.broadcast_to(v, shape).astype(np.int64)
    base = int(v[(0,) * len(shape)])
    coefs = [int(v[tuple(1 if j == k else 0 for j in range(len(shape)))]) - base if n > 1 else 0
             for k, n in enumerate(shape)]
    rebuilt = base + sum(c * g for c, g in zip(coefs, np.indices(shape, dtype=np.int64)))
    return (base, coefs) if np.array_equal(rebuilt, v) else None


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 5), min_size=1, max_size=3), st.integers(-50, 50),
       st.lists(st.integers(-4, 4), min_size=3, max_size=3), st.booleans(), st.data())
def test_affine_form_matches_a_reference_on_affine_and_perturbed_grids(shape, base, coefs, perturb, data):
    shape = tuple(shape)
    grid = base + sum(c * g for c, g in zip(coefs, np.indices(shape, dtype=np.int64)))
    grid = np.asarray(grid, dtype=np.int64).copy()
    if perturb:
        at = tuple(data.draw(st.integers(0, n - 1)) for n in shape)
        grid[at] += data.draw(st.sampled_from([-1, 1, 7]))
    assert affine_form(grid, shape) == _reference_affine(grid, shape)


# -- deferred sentinel fills (nkieval.sim.tensor.allocate(defer_fill=True)) ------------------------------------
def test_a_masked_matmul_result_keeps_its_sentinels_outside_the_mask():
    """A pending matmul's PSUM tile is filled only when flushed: a masked matmul writes part of it, and the rest
    reads the NaN sentinels an eager fill leaves."""

    def kern(a, b):
        out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        i_p = nl.arange(128)[:, None]
        i_f = nl.arange(128)[None, :]
        r = nisa.nc_matmul(nl.load(a), nl.load(b), mask=(i_p < 40) & (i_f < 72))
        nl.store(out, value=nl.copy(r))
        return out

    a = RNG.standard_normal((128, 128)).astype(np.float32)
    b = RNG.standard_normal((128, 128)).astype(np.float32)
    got = run(kern, a, b)
    np.testing.assert_allclose(got[:40, :72], (a.T @ b)[:40, :72], rtol=2e-2, atol=2e-2)
    assert np.isnan(got[40:]).all() and np.isnan(got[:, 72:]).all()


@pytest.mark.parametrize("pdim", [0, 1])
def test_zeros_and_full_write_every_element_without_the_fill(pdim):
    """``nl.zeros`` / ``nl.full`` memset the whole storage (block tensors: every block), so their deferred fill
    is dropped; every element holds the value."""

    def kern(x):
        out = nl.ndarray((2, 128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        shape = (2, nl.par_dim(128), 8) if pdim else (128, 8)
        z = nl.full(shape, 3.0, nl.float32)
        for i in nl.affine_range(2):
            nl.store(out[i], value=z[i] if pdim else z)
        return out

    got = run(kern, np.zeros((1, 1), np.float32))
    assert (got == 3.0).all()


# -- access views and index shapes -------------------------------------------------------------
class _Shaped:
    def __init__(self, shape):
        self.shape = shape


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.sampled_from([0, 1, 1, 2, 3]), max_size=3).map(tuple), min_size=1, max_size=3))
def test_index_shapes_broadcast_as_numpy_broadcasts_them(shapes):
    from nkieval.frontends.beta1.index import broadcast_shape

    try:
        want = tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        with pytest.raises(NkiValidationError, match="do not broadcast"):
            broadcast_shape([_Shaped(s) for s in shapes])
        return
    assert broadcast_shape([_Shaped(s) for s in shapes]) == want


def k_reversed_and_strided(x):
    """Loads through affine grids with negative and non-unit steps, into a block of an SBUF block tensor, and
    stores them back: out[b] = x[B-1-b] with its free axis reversed, half[b] = every other column of x[b] (stored
    from a view of a reversed view: reversed twice)."""
    B, P, F = x.shape
    out = nl.ndarray((B, P, F), dtype=x.dtype, buffer=nl.shared_hbm)
    half = nl.ndarray((B, P, F // 2), dtype=x.dtype, buffer=nl.shared_hbm)
    ip = nl.arange(P)[:, None]
    jf = nl.arange(F)[None, :]
    jh = nl.arange(F // 2)[None, :]
    for b in nl.affine_range(B):
        t = nl.ndarray((2, nl.par_dim(P), F), dtype=x.dtype, buffer=nl.sbuf)
        t[1, ip, jf] = nl.load(x[B - 1 - b, ip, F - 1 - jf])
        nl.store(out[b, ip, jf], value=t[1, ip, jf])
        t[0, ip, jh] = nl.load(x[b, ip, 2 * jh])
        nl.store(half[b, ip, jh], value=t[0, ip, F // 2 - 1 - jh][ip, F // 2 - 1 - jh])
    return out, half


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_affine_access_views_read_and_write_the_elements_numpy_indexing_names(dtype):
    """The strided views made over the storage (negative steps, steps of two, a block of a block tensor; a
    bf16 storage too) read and write the elements NumPy's indexing names."""
    import ml_dtypes

    np_dtype = np.float32 if dtype == "float32" else ml_dtypes.bfloat16
    x = RNG.standard_normal((3, 128, 8)).astype(np_dtype)
    out, half = run(k_reversed_and_strided, x)
    def raw(a):  # (bit for bit; a bf16 output comes back widened to fp32, exactly)
        return np.ascontiguousarray(np.asarray(a).astype(np.float32)).view(np.uint32)

    np.testing.assert_array_equal(raw(out), raw(x[::-1, :, ::-1]))
    np.testing.assert_array_equal(raw(half), raw(x[:, :, ::2]))
