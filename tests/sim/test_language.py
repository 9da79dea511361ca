"""The value-returning nl.* API: results against NumPy, lowering onto nisa instructions, rules."""

import math
import re
import warnings

import ml_dtypes
import nki
import nki.language as nl
import numpy as np
import pytest

from nkieval.sim.errors import NkiSimulatorWarning, NkiValidationError
from nkieval.sim.isa import INSTRUCTIONS
from nkieval.sim.ops import BINARY, UNARY

RNG = np.random.default_rng(7)


def run_nl(fn, *arrays, target=None):
    """Load each array into SBUF, apply ``fn`` to the tiles, store the result; returns (out, trace)."""

    def kernel(*args):
        tiles = [nl.load(a) for a in args]
        r = fn(*tiles)
        out = nl.ndarray(r.shape, dtype=r.dtype, buffer=nl.shared_hbm)
        nl.store(out, r)
        return out

    out = nki.simulate(kernel, target=target)(*arrays)
    return out, nki.last_result().trace


def opcodes(trace):
    return [r.opcode for r in trace.records]


def compute_opcodes(trace):
    return [r.opcode for r in trace.records if r.engine != "dma"]


# -- creation ---------------------------------------------------------------------------------------------
def test_zeros_ones_full_like_and_ndarray_sentinels():
    def kernel():
        z = nl.zeros((4, 8), dtype=nl.float32)
        o = nl.ones((4, 8), dtype=nl.int32)
        f = nl.full((4, 8), 2.5, dtype=nl.bfloat16)
        zl = nl.zeros_like(f)
        e = nl.ndarray((4, 8), dtype=nl.float32)
        ei = nl.empty_like(o)
        outs = []
        for t in (z, o, f, zl, e, ei):
            h = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm)
            nl.store(h, t)
            outs.append(h)
        return tuple(outs)

    with pytest.warns(NkiSimulatorWarning, match="before anything wrote it"):
        z, o, f, zl, e, ei = nki.simulate(kernel)()
    assert (z == 0).all() and z.dtype == np.float32
    assert (o == 1).all() and o.dtype == np.int32
    assert (f.astype(np.float32) == 2.5).all() and f.dtype == ml_dtypes.bfloat16
    assert (zl.astype(np.float32) == 0).all() and zl.dtype == ml_dtypes.bfloat16
    assert np.isnan(e).all(), "fresh float allocations hold NaN"
    assert (ei == 4).all(), "fresh integer allocations hold 4"
    assert opcodes(nki.last_result().trace).count("memset") == 4


def test_hbm_full_is_initialised_without_instructions():
    def kernel():
        h = nl.full((3, 5), 7, dtype=nl.int16, buffer=nl.shared_hbm)
        return h

    assert (nki.simulate(kernel)() == 7).all()


# -- elementwise ---------------------------------------------------------------------------------------------
_BIN_SIM = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "maximum": np.maximum,
    "minimum": np.minimum, "equal": np.equal, "not_equal": np.not_equal, "greater": np.greater,
    "greater_equal": np.greater_equal, "less": np.less, "less_equal": np.less_equal,
    "logical_and": np.logical_and, "logical_or": np.logical_or, "logical_xor": np.logical_xor,
}


@pytest.mark.parametrize("name", sorted(_BIN_SIM))
def test_binary_tile_tile(name):
    a = RNG.integers(-3, 4, (16, 24)).astype(np.float32)
    b = RNG.integers(-3, 4, (16, 24)).astype(np.float32)
    out, tr = run_nl(lambda x, y: getattr(nl, name)(x, y), a, b)
    np.testing.assert_array_equal(out, _BIN_SIM[name](a, b).astype(np.float32))
    assert compute_opcodes(tr) == ["tensor_tensor"]
    assert tr.records[-2].attrs["op"] == name


@pytest.mark.parametrize("name", ["bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift"])
def test_binary_bitwise_int32(name):
    a = RNG.integers(0, 1 << 20, (8, 16)).astype(np.int32)
    b = RNG.integers(0, 8, (8, 16)).astype(np.int32)
    out, _ = run_nl(lambda x, y: getattr(nl, name)(x, y), a, b)
    np.testing.assert_array_equal(out, getattr(np, name)(a, b))


def test_binary_every_op_has_a_wrapper():
    for name in BINARY:
        assert callable(getattr(nl, name)), name


def test_binary_scalar_and_column_use_tensor_scalar():
    a = RNG.standard_normal((32, 40), dtype=np.float32)
    c = RNG.standard_normal((32, 1), dtype=np.float32)
    out, tr = run_nl(lambda x: nl.subtract(3.0, x), a)
    np.testing.assert_allclose(out, 3.0 - a, rtol=1e-6)
    assert compute_opcodes(tr) == ["tensor_scalar"]
    out, tr = run_nl(lambda x, y: nl.multiply(x, y), a, c)
    np.testing.assert_allclose(out, a * c, rtol=1e-6)
    out, tr = run_nl(lambda x, y: nl.subtract(y, x), a, c)
    np.testing.assert_allclose(out, c - a, rtol=1e-6)
    assert compute_opcodes(tr) == ["tensor_scalar"]


def test_binary_does_not_broadcast_between_tiles():
    a = np.ones((8, 16), np.float32)
    b = np.ones((1, 16), np.float32)
    with pytest.raises(NkiValidationError, match=r"add: operands x\[8, 16\] and y\[1, 16\] have different shapes.*"
                                                 r"do not broadcast") as ei:
        run_nl(lambda x, y: nl.add(x, y), a, b)
    assert ei.value.rule == "shape-mismatch"


def test_binary_dtype_promotion_and_override():
    a = RNG.standard_normal((4, 8)).astype(ml_dtypes.bfloat16)
    b = RNG.standard_normal((4, 8)).astype(np.float16)
    out, _ = run_nl(lambda x, y: nl.add(x, y), a, b)
    assert out.dtype == np.float32  # bf16 + fp16 widen to fp32
    out, _ = run_nl(lambda x: nl.add(x, 1.5), a)
    assert out.dtype == ml_dtypes.bfloat16  # a Python float does not widen a float tile
    i8 = np.arange(32, dtype=np.int8).reshape(4, 8)
    out, _ = run_nl(lambda x: nl.add(x, 2), i8)
    assert out.dtype == np.int32  # documented: int8 tile + 2 -> int32
    out, _ = run_nl(lambda x: nl.add(x, 2, dtype=nl.int8), i8)
    assert out.dtype == np.int8


def test_divide_is_flagged_simulator_only():
    a = np.full((4, 4), 6.0, np.float32)
    with pytest.warns(NkiSimulatorWarning, match="simulator-only"):
        out, tr = run_nl(lambda x: nl.divide(x, 3.0), a)
    np.testing.assert_allclose(out, 2.0)
    assert tr.warnings and tr.warnings[0]["rule"] == "simulator-only"


def test_elementwise_rejects_hbm_operand():
    def kernel(a):
        return nl.exp(a)

    with pytest.raises(NkiValidationError, match=re.escape("Expected operand 'x' of 'exp' to be in address space 'psum|sbuf'")):
        nki.simulate(kernel)(np.ones((2, 2), np.float32))


_UNARY_REF = {
    "abs": np.abs, "negative": np.negative, "sign": np.sign, "square": np.square, "exp": np.exp,
    "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x), "reciprocal": lambda x: 1 / x,
    "sin": np.sin, "cos": np.cos, "tan": np.tan, "arctan": np.arctan, "tanh": np.tanh, "ceil": np.ceil,
    "floor": np.floor, "trunc": np.trunc, "relu": lambda x: np.maximum(x, 0),
    "logical_not": lambda x: (x == 0).astype(np.float32),
}


@pytest.mark.parametrize("name", sorted(_UNARY_REF))
def test_unary_against_numpy(name):
    x = (RNG.standard_normal((16, 33)) * 3).astype(np.float32)
    if name in ("log", "sqrt", "rsqrt"):
        x = np.abs(x) + 0.1
    if name in ("arctan",):
        x = np.clip(x, -1.5, 1.5)
    if name == "logical_not":
        x[0, :5] = 0
    if name == "tan":
        x = np.clip(x, -1.2, 1.2)
    with warnings.catch_warnings():
        warnings.simplefilter("error", NkiSimulatorWarning)  # inputs are in range: no range warnings
        out, _ = run_nl(lambda t: getattr(nl, name)(t), x)
    np.testing.assert_allclose(out, _UNARY_REF[name](x.astype(np.float64)), rtol=2e-5, atol=2e-5)


def test_sin_range_reduction_beyond_pi():
    """nl.sin reduces its argument; the bare activation (no reduction) is only valid in [-pi, pi]."""
    x = np.array([[9.0, -20.0, 100.0, 3.0]], np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error", NkiSimulatorWarning)
        out, tr = run_nl(nl.sin, x)
    np.testing.assert_allclose(out, np.sin(x.astype(np.float64)), atol=1e-4)
    assert compute_opcodes(tr)[-1] == "activation"


def test_unary_every_op_has_a_wrapper_running():
    x = (np.abs(RNG.standard_normal((4, 8))) + 0.5).astype(np.float32)
    skip = {"copy", "bypass", "identity", "invert"}
    for name in sorted(set(UNARY) - skip):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NkiSimulatorWarning)
            out, _ = run_nl(getattr(nl, name), x)
        assert out.shape == x.shape and np.isfinite(out).all(), name


def test_invert_needs_ints_and_matches_numpy():
    x = np.arange(16, dtype=np.int32).reshape(2, 8)
    out, _ = run_nl(nl.invert, x)
    np.testing.assert_array_equal(out, np.invert(x))


def test_rsqrt_on_gpsimd_rejects_psum():
    def kernel(a):
        t = nl.load(a)
        p = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.psum)
        nki.isa.tensor_copy(p, t)
        return nl.rsqrt(p)

    with pytest.raises(NkiValidationError, match=r"PSUM|psum"):
        nki.simulate(kernel)(np.ones((4, 4), np.float32))


# -- reductions ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,ref", [("sum", np.sum), ("max", np.max), ("min", np.min), ("prod", np.prod),
                                      ("mean", np.mean)])
def test_reductions(name, ref):
    x = RNG.uniform(0.5, 1.5, (8, 6, 10)).astype(np.float32)
    out, _tr = run_nl(lambda t: getattr(nl, name)(t, axis=2), x)
    np.testing.assert_allclose(out, ref(x, axis=2), rtol=1e-5)
    assert out.shape == (8, 6)
    out, _ = run_nl(lambda t: getattr(nl, name)(t, axis=(1, 2), keepdims=True), x)
    np.testing.assert_allclose(out, ref(x, axis=(1, 2), keepdims=True), rtol=1e-5)
    out, _ = run_nl(lambda t: getattr(nl, name)(t, axis=(1, 2)), x)
    assert out.shape == (8, 1), "on-chip results stay 2-D"


def test_reduction_axis_rules():
    x = np.ones((8, 6, 10), np.float32)
    with pytest.raises(NkiValidationError, match=r"sum: axis \(1,\) must be trailing contiguous free axes"):
        run_nl(lambda t: nl.sum(t, axis=1), x)
    with pytest.raises(NkiValidationError, match="partition dimension"):
        run_nl(lambda t: nl.max(t, axis=0), x)


def test_var_and_all():
    x = RNG.standard_normal((16, 64)).astype(np.float32)
    out, _ = run_nl(lambda t: nl.var(t, axis=1), x)
    np.testing.assert_allclose(out, x.var(axis=1, keepdims=True), rtol=1e-5)
    x3 = RNG.standard_normal((4, 3, 8)).astype(np.float32)
    out, _ = run_nl(lambda t: nl.var(t, axis=2), x3)
    np.testing.assert_allclose(out, x3.var(axis=2, keepdims=True), rtol=1e-5)
    b = (RNG.uniform(size=(8, 5)) > 0.3).astype(np.float32)
    b[0] = 1
    out, _ = run_nl(lambda t: nl.all(t, axis=1), b)
    np.testing.assert_array_equal(out[:, 0], b.all(axis=1).astype(np.uint8))


# -- composites ----------------------------------------------------------------------------------------------
def _softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def test_softmax_full_row_and_partial_axes():
    x = (RNG.standard_normal((64, 200)) * 5).astype(np.float32)
    out, tr = run_nl(nl.softmax, x)
    np.testing.assert_allclose(out, _softmax(x.astype(np.float64), -1), rtol=1e-5, atol=1e-8)
    assert compute_opcodes(tr) == ["tensor_reduce", "activation_reduce", "reciprocal", "tensor_scalar"]
    x3 = (RNG.standard_normal((8, 4, 16)) * 3).astype(np.float32)
    out, _ = run_nl(lambda t: nl.softmax(t, axis=2), x3)
    np.testing.assert_allclose(out, _softmax(x3.astype(np.float64), 2), rtol=1e-5, atol=1e-8)


def test_rms_norm_with_full_and_row_weight():
    x = RNG.standard_normal((32, 96)).astype(np.float32)
    w = RNG.standard_normal((32, 96)).astype(np.float32)
    ref = x / np.sqrt((x.astype(np.float64) ** 2).mean(axis=1, keepdims=True) + 1e-6) * w
    out, _ = run_nl(lambda t, u: nl.rms_norm(t, u, axis=1), x, w)
    np.testing.assert_allclose(out, ref, rtol=2e-5, atol=1e-6)
    w1 = w[:1]
    ref1 = x / np.sqrt((x.astype(np.float64) ** 2).mean(axis=1, keepdims=True) + 1e-6) * w1
    out, tr = run_nl(lambda t, u: nl.rms_norm(t, u, axis=1), x, w1)
    np.testing.assert_allclose(out, ref1, rtol=2e-5, atol=1e-6)
    assert "nc_matmul" in opcodes(tr), "a [1, F] weight is broadcast across partitions on the Tensor engine"


@pytest.mark.parametrize("transpose_x", [True, False])
def test_matmul(transpose_x):
    x = RNG.standard_normal((64, 96)).astype(ml_dtypes.bfloat16)
    y = RNG.standard_normal((96 if not transpose_x else 64, 300)).astype(ml_dtypes.bfloat16)
    out, tr = run_nl(lambda a, b: nl.matmul(a, b, transpose_x=transpose_x), x, y)
    xf, yf = x.astype(np.float32), y.astype(np.float32)
    ref = (xf.T @ yf) if transpose_x else (xf @ yf)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-4)
    assert out.dtype == np.float32
    ops = compute_opcodes(tr)
    assert ops.count("nc_matmul") == 1
    assert ("nc_transpose" in ops) == (not transpose_x)


def test_matmul_result_is_psum():
    def kernel(a, b):
        r = nl.matmul(nl.load(a), nl.load(b), transpose_x=True)
        assert nl.is_psum(r.buffer)
        return None

    nki.simulate(kernel)(np.ones((8, 8), np.float32), np.ones((8, 8), np.float32))


def test_transpose_and_limits():
    x = RNG.standard_normal((100, 40)).astype(np.float32)
    out, tr = run_nl(nl.transpose, x)
    np.testing.assert_array_equal(out, x.T)
    assert [r.engine for r in tr.records if r.opcode == "nc_transpose"] == ["tensor"]
    with pytest.raises(NkiValidationError, match=r"size of dimension 1 in 'x\[4, 200\]' of 'transpose' exceed"):
        run_nl(nl.transpose, np.ones((4, 200), np.float32))


def test_broadcast_to_partition_and_free():
    row = RNG.standard_normal((1, 700)).astype(np.float32)
    out, tr = run_nl(lambda t: nl.broadcast_to(t, (128, 700)), row)
    np.testing.assert_array_equal(out, np.broadcast_to(row, (128, 700)))
    assert opcodes(tr).count("nc_matmul") == 2  # 700 columns > one 512-column PSUM bank
    col = RNG.standard_normal((16, 1)).astype(np.float32)
    out, tr = run_nl(lambda t: nl.broadcast_to(t, (16, 9)), col)
    np.testing.assert_array_equal(out, np.broadcast_to(col, (16, 9)))
    assert compute_opcodes(tr) == ["tensor_copy"]
    ints = np.arange(5, dtype=np.int32).reshape(1, 5)
    out, _ = run_nl(lambda t: nl.broadcast_to(t, (3, 5)), ints)
    np.testing.assert_array_equal(out, np.broadcast_to(ints, (3, 5)))
    with pytest.raises(NkiValidationError, match="cannot broadcast dimension 1 of size 3 to 5"):
        run_nl(lambda t: nl.broadcast_to(t, (2, 5)), np.ones((2, 3), np.float32))


def test_expand_dims_is_a_view():
    def kernel(a):
        t = nl.load(a)
        v = nl.expand_dims(t, 1)
        assert v.shape == (4, 1, 6)
        with pytest.raises(NkiValidationError, match="partition"):
            nl.expand_dims(t, 0)
        return None

    nki.simulate(kernel)(np.ones((4, 6), np.float32))


needs_predicated = pytest.mark.skipif("tensor_copy_predicated" not in INSTRUCTIONS,
                                      reason="nisa.tensor_copy_predicated not implemented yet")


@needs_predicated
def test_where():
    c = (RNG.uniform(size=(8, 12)) > 0.5).astype(np.float32)
    a = RNG.standard_normal((8, 12)).astype(np.float32)
    b = RNG.standard_normal((8, 12)).astype(np.float32)
    out, tr = run_nl(nl.where, c, a, b)
    np.testing.assert_array_equal(out, np.where(c != 0, a, b))
    assert "tensor_copy_predicated" in opcodes(tr)
    out, _ = run_nl(lambda cc, aa: nl.where(cc, aa, 0.0), c, a)
    np.testing.assert_array_equal(out, np.where(c != 0, a, 0.0))


@needs_predicated
@pytest.mark.parametrize("cond", [np.array([-1, 0, 1, 2, -128, 0, 5, 0], np.int8),
                                  np.array([-1, 0, 1, 2, -70000, 0, 5, 0], np.int32),
                                  np.array([-0.5, 0.0, 0.5, 2.0, -0.0, 1e-30, 5.0, 0.0], np.float32)])
def test_where_holds_where_the_condition_is_nonzero(cond):
    # (a converting copy to uint8 saturated -1 to 0 and truncated 0.5 to 0: both read as false)
    c = np.tile(cond, (4, 1))
    a = RNG.standard_normal((4, 8)).astype(np.float32)
    out, tr = run_nl(lambda cc, aa: nl.where(cc, aa, 9.0), c, a)
    np.testing.assert_array_equal(out, np.where(c, a, np.float32(9.0)))
    # an integer condition is read as unsigned bits in place; a float one is compared with 0
    want = ["memset", "tensor_copy_predicated"] if cond.dtype.kind == "i" else \
        ["memset", "tensor_scalar", "tensor_copy_predicated"]
    assert compute_opcodes(tr) == want


def test_dropout_zeroes_about_rate_and_keeps_the_rest():
    x = np.ones((128, 256), np.float32)
    out, tr = run_nl(lambda t: nl.dropout(t, 0.25), x)
    frac = float((out == 0).mean())
    assert 0.2 < frac < 0.3
    assert set(np.unique(out)) <= {0.0, 1.0}
    assert "dropout" in opcodes(tr)


def test_shared_identity_matrix():
    out, tr = run_nl(lambda t: nl.shared_identity_matrix(16, dtype=nl.float32), np.zeros((1, 1), np.float32))
    np.testing.assert_array_equal(out, np.eye(16, dtype=np.float32))
    assert "iota" in opcodes(tr)


# -- data movement -------------------------------------------------------------------------------------------
def test_load_store_copy_and_buffer_errors():
    x = RNG.standard_normal((8, 16)).astype(np.float32)
    out, tr = run_nl(lambda t: nl.copy(t, dtype=nl.bfloat16), x)
    np.testing.assert_array_equal(out, x.astype(ml_dtypes.bfloat16))
    assert compute_opcodes(tr) == ["tensor_copy"]

    def bad_load(a):
        t = nl.load(a)
        nl.load(t)

    with pytest.raises(NkiValidationError, match="Expected operand 'src' of 'load' to be in address space 'hbm'"):
        nki.simulate(bad_load)(x)

    def bad_store(a):
        t = nl.load(a)
        nl.store(t, t)

    with pytest.raises(NkiValidationError, match="Expected operand 'dst' of 'store'"):
        nki.simulate(bad_store)(x)


def test_load_1d_becomes_one_partition():
    v = np.arange(10, dtype=np.float32)

    def kernel(a):
        t = nl.load(a)
        assert t.shape == (1, 10)
        out = nl.ndarray((10,), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, t)
        return out

    np.testing.assert_array_equal(nki.simulate(kernel)(v), v)


# -- loops, programs, tile sizes ------------------------------------------------------------------------------
@pytest.mark.parametrize("it", ["range", "affine_range", "sequential_range", "static_range"])
def test_loop_iterators_record_loop_context(it):
    def kernel(a):
        t = nl.load(a)
        for i in getattr(nl, it)(1, 7, 2):
            nl.add(t, float(i))
        return None

    nki.simulate(kernel)(np.ones((2, 2), np.float32))
    tr = nki.last_result().trace
    ctx = [r.loops for r in tr.records if r.opcode == "tensor_scalar"]
    kind = {"affine_range": "affine", "sequential_range": "sequential", "static_range": "static"}.get(it, "range")
    assert ctx == [((kind, i, 3),) for i in (1, 3, 5)]
    assert all(r.loops == () for r in tr.records if r.opcode == "dma_copy")


@pytest.mark.parametrize("target,gen", [("trn1", 2), ("trn2", 3), ("trn3", 4)])
def test_tile_size_per_generation(target, gen):
    seen = {}

    def kernel():
        ts = nl.tile_size
        seen.update(pmax=ts.pmax, psum_fmax=ts.psum_fmax, moving=ts.gemm_moving_fmax,
                    stat=ts.gemm_stationary_fmax, bn=ts.bn_stats_fmax, sbuf=ts.sbuf_size_bytes,
                    banks=ts.psum_num_banks, ver=int(nki.isa.get_nc_version()))

    nki.simulate(kernel, target=target)()
    assert seen["pmax"] == 128 and seen["stat"] == 128 and seen["bn"] == 512 and seen["banks"] == 8
    assert seen["psum_fmax"] == 512
    assert seen["ver"] == gen
    assert seen["sbuf"] == {2: 192, 3: 224, 4: 256}[gen] * 1024
    # the tiling constant is one PSUM bank of fp32 on every generation (v4's nc_matmul takes up to 4096, a
    # separate limit); AWS's trn3 tutorials tile by it
    assert seen["moving"] == 512


def test_program_queries_plain_launch():
    seen = {}

    def kernel():
        seen.update(pid=nl.program_id(0), n=nl.num_programs(), nd=nl.program_ndim())

    nki.simulate(kernel)()
    assert seen == {"pid": 0, "n": 1, "nd": 0}


def test_ds_slices():
    x = np.arange(40, dtype=np.float32).reshape(4, 10)

    def kernel(a):
        t = nl.load(a[:, nl.ds(3, 4)])
        out = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, t)
        return out

    np.testing.assert_array_equal(nki.simulate(kernel)(x), x[:, 3:7])


def test_instruction_location_points_at_the_kernel_line():
    x = np.ones((2, 2), np.float32)
    _out, tr = run_nl(lambda t: nl.exp(t), x)
    act = next(r for r in tr.records if r.opcode == "activation")
    assert act.file.endswith("test_language.py")
    assert math.isfinite(act.line)
