"""The operand checks remembered by geometry (``isa.core.check_engine_operands`` / ``check_elementwise_operands``)
decide exactly as the checks run afresh, whatever geometries came before.

A key that missed a field the checks read (an operand's free size, its buffer, the operands' order, ``allow_psum``)
would let a geometry that fails pass because a geometry equal in the key's fields passed before: each case here runs
the same sequence of operand geometries through one program's remembered checks and through the checks with nothing
remembered (a fresh context per call), and compares the outcome (passed, or the error's rule, operand and message).

Also the PSUM write flags a whole-tile store sets without flag views (``isa.core.mark_written``): the same flags as
through the views, for whole and partial views.
"""

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nkieval.hardware.targets import get_target
from nkieval.sim import dtypes as dt
from nkieval.sim.errors import NkiValidationError
from nkieval.sim.isa import core
from nkieval.sim.memory import PSUM, SBUF, Allocation
from nkieval.sim.tensor import NkiTensor

_TARGET = get_target("trn2")
_P = _TARGET.partitions
# free sizes on both sides of the PSUM and SBUF limits, and small ones that repeat often
_FREE = st.sampled_from([1, 2, 64, _TARGET.vector_psum_free_max, _TARGET.vector_psum_free_max + 1,
                         _TARGET.vector_sbuf_free_max, _TARGET.vector_sbuf_free_max + 1])
_PARTS = st.sampled_from([1, 32, _P, _P + 1])


def _operand(parts: int, free: tuple[int, ...], buffer: str) -> NkiTensor:
    """A tensor of the geometry (its storage a broadcast of one byte: the checks read only its shape and
    buffer, so a [128, 65537] operand costs nothing)."""
    shape = (parts, *free)
    data = np.broadcast_to(np.zeros(1, np.uint8), shape)
    alloc = Allocation(id=1, buffer=SBUF if buffer == "sbuf" else PSUM, name="t", dtype=dt.uint8, shape=shape,
                       storage=data, site=None, program=0)
    return NkiTensor(data, alloc, dt.uint8)


_GEOMETRY = st.tuples(_PARTS, st.lists(_FREE, min_size=1, max_size=2).map(tuple), st.sampled_from(["sbuf", "psum"]))
_CALL = st.tuples(st.sampled_from(["engine", "elementwise"]), st.booleans(),
                  st.lists(_GEOMETRY, min_size=2, max_size=3))


def _outcome(ctx, kind: str, allow_psum: bool, geos) -> tuple:
    pairs = [(f"op{i}", _operand(*g)) for i, g in enumerate(geos)]
    check = core.check_engine_operands if kind == "engine" else core.check_elementwise_operands
    try:
        check(ctx, pairs, allow_psum=allow_psum, engine="vector")
    except NkiValidationError as e:
        return ("refused", e.rule, e.operand, str(e))
    return ("passed",)


def _ctx() -> SimpleNamespace:
    return SimpleNamespace(target=_TARGET)


@settings(max_examples=300, deadline=None)
@given(st.lists(_CALL, min_size=1, max_size=12))
def test_remembered_checks_decide_as_fresh_checks(calls):
    program = _ctx()  # one program: its checks remember what passed
    for kind, allow_psum, geos in calls:
        assert _outcome(program, kind, allow_psum, geos) == _outcome(_ctx(), kind, allow_psum, geos)


@pytest.mark.parametrize(("allow_psum", "first", "second", "rule"), [
    # same partitions and buffers, the second's free size past the PSUM limit
    (True, [(_P, (64,), "psum"), (_P, (64,), "psum")],
     [(_P, (_TARGET.vector_psum_free_max + 1,), "psum"), (_P, (_TARGET.vector_psum_free_max + 1,), "psum")],
     "instruction-limit"),
    # same shapes, the second's input in PSUM where PSUM is refused
    (False, [(_P, (64,), "sbuf"), (_P, (64,), "sbuf")], [(_P, (64,), "sbuf"), (_P, (64,), "psum")], "buffer"),
    # the same partitions, an input's elements per partition differ
    (False, [(_P, (64,), "sbuf"), (_P, (64,), "sbuf")], [(_P, (64,), "sbuf"), (_P, (64, 2), "sbuf")],
     "shape-mismatch"),
])
def test_a_geometry_that_passed_does_not_let_a_failing_one_through(allow_psum, first, second, rule):
    program = _ctx()
    assert _outcome(program, "elementwise", allow_psum, first) == ("passed",)
    assert _outcome(program, "elementwise", allow_psum, second)[:2] == ("refused", rule)


def test_engine_and_elementwise_checks_are_remembered_apart():
    """The engine checks passing does not stand for the element-wise ones (which also compare free sizes)."""
    program = _ctx()
    geos = [(_P, (64,), "sbuf"), (_P, (32,), "sbuf")]
    assert _outcome(program, "engine", True, geos) == ("passed",)
    assert _outcome(program, "elementwise", True, geos)[:2] == ("refused", "shape-mismatch")


def test_allow_psum_is_part_of_the_key():
    program = _ctx()
    geos = [(_P, (64,), "psum"), (_P, (64,), "sbuf")]
    assert _outcome(program, "engine", True, geos) == ("passed",)
    assert _outcome(program, "engine", False, geos)[:2] == ("refused", "buffer")


# -- the PSUM write flags of a whole-tile store (isa.core.mark_written's fast path) -------------------------------
@pytest.mark.parametrize("view", ["whole", "first partitions", "last partitions", "first columns", "last columns",
                                  "every other column", "transposed square", "one partition"])
@pytest.mark.parametrize("matmul", [True, False])
def test_psum_write_flags_match_the_flag_views(view, matmul):
    """The flags a store leaves are those set through ``flag_view`` of the stored view, whether or not the view is
    the whole tile (the whole tile sets its flag arrays without views)."""
    from nkieval.sim.storage import flag_view

    rng = np.random.default_rng(7)
    shape = (16, 16)
    storage = np.zeros(shape, np.float32)
    alloc = Allocation(id=3, buffer=PSUM, name="acc", dtype=dt.float32, shape=shape, storage=storage, site=None,
                       program=0)
    alloc.mm_written = rng.random(shape) < 0.5
    alloc.other_written = ~alloc.mm_written
    data = {"whole": storage, "first partitions": storage[0:8], "last partitions": storage[8:16],
            "first columns": storage[:, 0:8], "last columns": storage[:, 8:16], "every other column": storage[:, ::2],
            "transposed square": storage.T, "one partition": storage[5:6]}[view]
    expected_mm, expected_other = alloc.mm_written.copy(), alloc.other_written.copy()
    probe = NkiTensor(data, alloc, dt.float32)
    flag_view(probe, expected_mm)[...] = matmul
    flag_view(probe, expected_other)[...] = not matmul
    core.mark_written(NkiTensor(data, alloc, dt.float32), matmul=matmul)
    assert np.array_equal(alloc.mm_written, expected_mm)
    assert np.array_equal(alloc.other_written, expected_other)
