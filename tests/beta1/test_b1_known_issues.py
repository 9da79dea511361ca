"""Beta-1 code that NKI Beta 1 refused, refused here too, at the line that wrote it.

The rules come from Beta 1's own documentation, its "NKI Known Issues" page (aws-neuron-sdk, last Beta-1 docs tree
`cca3784`, ``general/nki/nki_known_issues.rst``), and from its simulator's messages on an LLM-written vector add
(``Insufficient rank!`` for ``nl.zeros((size,))``; ``Only support multi-dimensional subscript to arange!`` for
``for i in nl.arange(size)``):

* a tile on SBUF or PSUM has at least two dimensions (partition, then free): ``nl.zeros((n,))`` is refused, a
  1-D ``nl.ndarray`` only declared is an ``[n, 1]`` column;
* an ``[N, 1]`` or ``[1, M]`` buffer is indexed with both indices (``buf[0:N, 0]``, not ``buf[0:N]``);
* an ``nl.arange`` grid takes only a multi-dimensional subscript (``[:, None]``), so it is no loop range;
* Python operators (``+ - * / << >>`` ...) do not broadcast the partition dimension; ``nl.add`` etc. do;

and, from its error page (``nki.errors``): an output no instruction writes, item assignment to an index grid.

Each rule is checked on the smallest kernel that breaks it, next to the legal spelling of the same kernel.
"""

from __future__ import annotations

import inspect

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np
import pytest

from nkieval.sim.errors import NkiValidationError

RNG = np.random.default_rng(11)


def run(fn, *args):
    return nki.jit(fn, mode="simulation")(*args)


def refused(fn, *args, rule: str, line_text: str) -> NkiValidationError:
    """The error ``fn`` raises, checked to carry ``rule`` and to point at the kernel line holding ``line_text``."""
    with pytest.raises(NkiValidationError) as ei:
        run(fn, *args)
    err = ei.value
    assert err.rule == rule, str(err)
    lines, first = inspect.getsourcelines(fn)
    frames = [f for f in ei.traceback if str(f.path) == __file__]
    assert frames, str(err)
    at = frames[-1].lineno + 1  # (pytest numbers lines from 0)
    assert line_text in lines[at - first], (str(err), at, lines[at - first])
    return err


# -- at least two dimensions on chip ---------------------------------------------------------------
@pytest.mark.parametrize("buffer", ["sbuf", "psum"])
@pytest.mark.parametrize("make", ["zeros", "full", "zeros_like"])
def test_one_dimensional_on_chip_tile_written_is_refused_where_it_is_made(make, buffer):
    def kern(v):
        out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        where = getattr(nl, buffer)
        if make == "zeros":
            buf = nl.zeros((128,), dtype=nl.float32, buffer=where)  # <- the 1-D tile
        elif make == "full":
            buf = nl.full((128,), 2.0, dtype=nl.float32, buffer=where)  # <- the 1-D tile
        else:
            buf = nl.zeros_like(v, buffer=where)  # <- the 1-D tile
        nl.store(out, nl.load(v))
        return out, buf

    err = refused(kern, RNG.standard_normal(128, dtype=np.float32), rule="indexing", line_text="<- the 1-D tile")
    assert "at least 2 dimensions" in str(err) and "[128, 1]" in str(err)


def test_a_one_dimensional_tile_only_declared_is_a_column():
    """nl.ndarray((nl.par_dim(128),)) that the kernel rebinds at once (course kernels of 2024 that passed their
    tests): declared, never written as 1-D, so not refused; its one dimension is the partition dimension."""
    def kern(b):
        out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        col = nl.ndarray((nl.par_dim(128),), dtype=nl.float32, buffer=nl.sbuf)
        assert tuple(col.shape) == (128, 1)
        col = nl.load(b)
        nl.store(out, col)
        return out

    b = RNG.standard_normal(128, dtype=np.float32)
    np.testing.assert_array_equal(run(kern, b), b.reshape(128, 1))


def test_two_dimensional_column_tile_is_the_legal_spelling():
    def kern(v):
        out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        buf = nl.zeros((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nl.store(out, nl.add(buf, nl.load(v)))
        return out

    v = RNG.standard_normal(128, dtype=np.float32)
    np.testing.assert_array_equal(run(kern, v), v.reshape(128, 1))


# -- both indices on a 2-D buffer ------------------------------------------------------------------
@pytest.mark.parametrize("key", ["slice", "int", "ds"])
def test_two_dimensional_tile_indexed_with_one_index_is_refused(key):
    def kern(a):
        out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(a)
        k = slice(0, 128) if key == "slice" else 0 if key == "int" else nl.ds(0, 128)
        u = nl.add(t[k], 1.0)  # <- one index
        nl.store(out, u)
        return out

    err = refused(kern, RNG.standard_normal((128, 1), dtype=np.float32), rule="indexing", line_text="<- one index")
    assert "both" in str(err)


def test_two_dimensional_tile_indexed_with_both_indices_and_hbm_with_one():
    def kern(a):
        out = nl.ndarray((2, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(a[0:128, 0])  # HBM: one index per dimension still optional
        nl.store(out[0], nl.add(t[0:128, 0], 1.0))
        blocks = nl.ndarray((2, nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)
        blocks[1] = nl.multiply(t, 2.0)  # a block tensor's one index picks a block
        nl.store(out[1], blocks[1])
        return out

    a = RNG.standard_normal((128, 3), dtype=np.float32)
    got = run(kern, a)
    np.testing.assert_allclose(got, np.stack([a[:, 0] + 1, a[:, 0] * 2]), rtol=1e-6)


# -- an index grid is no loop range ----------------------------------------------------------------
def test_looping_over_an_arange_is_refused_at_the_loop():
    def kern(a):
        out = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        for i in nl.arange(4):  # <- the loop
            nl.store(out[0:128, i], nl.load(a[0:128, i]))
        return out

    err = refused(kern, RNG.standard_normal((128, 4), dtype=np.float32), rule="indexing", line_text="<- the loop")
    assert "nl.affine_range" in str(err)


def test_one_subscript_of_an_arange_is_refused():
    def kern(a):
        out = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        i_f = nl.arange(4)[2]  # <- one subscript
        nl.store(out, nl.load(a))
        return out, i_f

    err = refused(kern, RNG.standard_normal((128, 4), dtype=np.float32), rule="indexing",
                  line_text="<- one subscript")
    assert "multi-dimensional subscript" in str(err)


def test_multi_dimensional_subscripts_of_an_arange_still_place_the_grid():
    def kern(a):
        out = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        access = [None, None]
        access[1] = slice(None)
        i_p, i_f = nl.arange(128)[:, None], nl.arange(4)[tuple(access)]
        for j in nl.affine_range(4):
            nl.store(out[i_p, j], nl.load(a[i_p, j]))
        nl.store(out[i_p, i_f], nl.load(a[i_p, i_f]))
        return out

    a = RNG.standard_normal((128, 4), dtype=np.float32)
    np.testing.assert_array_equal(run(kern, a), a)


# -- operators do not broadcast partitions ---------------------------------------------------------
@pytest.mark.parametrize("form", ["operator", "reflected", "in-place", "numpy"])
def test_operator_broadcasting_the_partition_dimension_is_refused(form):
    def kern(a, row):
        out = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        t, r = nl.load(a), nl.load(row)
        if form == "operator":
            t = t * r  # <- partition broadcast
        elif form == "reflected":
            t = r - t  # <- partition broadcast
        elif form == "in-place":
            t += r  # <- partition broadcast
        else:
            t = np.add(t, r)  # <- partition broadcast
        nl.store(out, t)
        return out

    err = refused(kern, RNG.standard_normal((128, 4), dtype=np.float32), RNG.standard_normal((1, 4), dtype=np.float32),
                  rule="partition-mismatch", line_text="<- partition broadcast")
    assert "[128, 4]" in str(err) and "[1, 4]" in str(err) and "nl." in str(err)


def test_nl_calls_broadcast_partitions_and_operators_broadcast_free_elements():
    def kern(a, row, col):
        out = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(a)
        s = nl.multiply(t, nl.load(row))  # partitions broadcast by an nl call
        s = s + nl.load(col) * 2.0  # free elements broadcast by operators, and a scalar
        nl.store(out, s)
        return out

    a = RNG.standard_normal((128, 4), dtype=np.float32)
    row = RNG.standard_normal((1, 4), dtype=np.float32)
    col = RNG.standard_normal((128, 1), dtype=np.float32)
    np.testing.assert_allclose(run(kern, a, row, col), a * row + col * 2.0, rtol=1e-6, atol=1e-6)


# -- documented errors of Beta 1's error page (nki.errors) that nkieval did not raise before ---------------
def test_an_output_no_instruction_writes_is_refused():
    """tensor-output-not-written-to: the usual cause, a loop that never runs."""
    def kern(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        for _i in nl.affine_range(a.shape[0] // 129):
            nl.store(out, nl.load(a))
        return out

    with pytest.raises(NkiValidationError, match="no instruction wrote it") as ei:
        run(kern, RNG.standard_normal((128, 4), dtype=np.float32))
    assert ei.value.rule == "kernel"


def test_outputs_written_in_part_or_by_another_program_are_not_refused():
    def part(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out[0:64, 0:4], nl.load(a[0:64, 0:4]))
        return out

    a = RNG.standard_normal((128, 4), dtype=np.float32)
    np.testing.assert_array_equal(run(part, a)[:64], a[:64])

    def second_program_writes(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        if nl.program_id(0) == 1:
            nl.store(out, nl.load(a))
        return out

    np.testing.assert_array_equal(nki.jit(second_program_writes, mode="simulation")[2](a), a)


def test_item_assignment_to_an_index_grid_is_refused():
    """cannot-assign-to-index: an arange is an index, not a tile."""
    def kern(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        i_f = nl.arange(4)[None, :]
        i_f[0, 2] = 7  # <- assignment
        nl.store(out, nl.load(a))
        return out

    err = refused(kern, RNG.standard_normal((128, 4), dtype=np.float32), rule="indexing", line_text="<- assignment")
    assert "nisa.iota" in str(err)
