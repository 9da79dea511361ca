"""Regressions found by running public current-API (`nki`) kernels through `nkieval compat`.

Each test is our own minimal reproduction of an API use that nkieval rejected or got wrong
(no public code is copied here).
"""

import dataclasses
from dataclasses import dataclass, field

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

from nkieval.sim.errors import NkiValidationError


def test_isa_constants_submodule():
    from nki.isa import constants
    from nki.isa.constants import dge_mode, oob_mode

    assert oob_mode is nisa.oob_mode and dge_mode is nisa.dge_mode
    assert constants.reduce_cmd is nisa.reduce_cmd and constants.matmul_perf_mode is nisa.matmul_perf_mode


def test_nki_dtype_is_the_dtype_type():
    def f(x, dt: nki.dtype = nl.bfloat16):  # used as an annotation in kernel signatures
        return dt

    assert isinstance(f(None), nki.dtype)


@dataclass(frozen=True)
class _Cfg(nl.NKIObject):
    scale: float
    rows: int


@nki.jit(mode="trace")
def _scaled_copy(dst, src, cfg: _Cfg):
    t = nl.ndarray((cfg.rows, src.shape[1]), dtype=src.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=src[0:cfg.rows, :])
    nisa.activation(dst=t, op=nl.copy, data=t, scale=cfg.scale)
    nisa.dma_copy(dst=dst[0:cfg.rows, :], src=t)


@nki.jit(mode="auto", debug_kernel=True)
def _kernel_with_config(x, cfg: _Cfg):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    _scaled_copy(out, x, cfg)
    return out


class _Dims(nl.NKIObject):
    rows: int
    cols: int
    tiles: int

    def derive(self):
        self.tiles = self.rows // 2


def test_nkiobject_plain_subclass_takes_keywords_and_partial_fields():
    d = _Dims(rows=4, cols=3)
    assert (d.rows, d.cols, d.tiles) == (4, 3, None)  # a field not given is None (the NKI default initializer)
    d.derive()
    assert d.tiles == 2
    assert _Dims(1, 2, 3).tiles == 3
    with pytest.raises(TypeError, match="unexpected keyword argument 'depth'"):
        _Dims(depth=1)
    with pytest.raises(TypeError, match="positional"):
        _Dims(1, 2, 3, 4)


@dataclass
class _Tiling(nl.NKIObject):
    rows: int
    cols: int
    spare: int  # never read by the kernel below, and never passed
    scale: float = 2.0


@dataclass
class _Section(nl.NKIObject):  # no annotations: class attributes only, built with keywords
    index = None
    offset = None


@dataclass(frozen=True)
class _Frozen(nl.NKIObject):
    rows: int
    seen: list = field(default_factory=list)

    def __post_init__(self):
        self.seen.append(self.rows)


class _OwnInit(nl.NKIObject):
    rows: int

    def __init__(self, n):
        self.rows = 2 * n


@nki.jit(mode="auto", debug_kernel=True)
def _kernel_with_partial_dataclass(x):
    t = _Tiling(rows=x.shape[0], cols=x.shape[1])  # built inside the kernel without `spare`
    sec = _Section(index=1, offset=x.shape[0] // 2)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    buf = nl.ndarray((t.rows, t.cols), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=buf, src=x)
    nisa.activation(dst=buf, op=nl.copy, data=buf, scale=t.scale * sec.index)
    nisa.dma_copy(dst=out[0:sec.offset, :], src=buf[0:sec.offset, :])
    nisa.dma_copy(dst=out[sec.offset:t.rows, :], src=buf[sec.offset:t.rows, :])
    return out


def test_nkiobject_dataclass_fields_not_given_are_none_as_the_nki_compiler_builds_them():
    t = _Tiling(4, cols=3)
    assert (t.rows, t.cols, t.spare, t.scale) == (4, 3, None, 2.0)
    s = _Section(index=1, offset=8)
    assert (s.index, s.offset) == (1, 8) and _Section().index is None
    with pytest.raises(TypeError, match="unexpected keyword argument 'depth'"):
        _Tiling(rows=1, depth=2)
    with pytest.raises(TypeError, match="multiple values for argument 'rows'"):
        _Tiling(1, rows=2)
    with pytest.raises(TypeError, match="positional"):
        _Tiling(1, 2, 3, 4.0, 5)


def test_nkiobject_frozen_dataclass_builds_and_runs_post_init():
    f = _Frozen(rows=3)
    assert f.rows == 3 and f.seen == [3] and _Frozen(rows=1).seen == [1]  # a fresh list per instance
    with pytest.raises(dataclasses.FrozenInstanceError):
        f.rows = 4


def test_nkiobject_init_written_in_the_class_is_kept():
    assert _OwnInit(3).rows == 6
    with pytest.raises(TypeError):
        _OwnInit(rows=3)


def test_nkiobject_partial_dataclass_inside_a_kernel():
    x = np.arange(32, dtype=np.float32).reshape(8, 4)
    out = nki.simulate(_kernel_with_partial_dataclass)(x)
    np.testing.assert_array_equal(out, 2 * x)


def test_nkiobject_config_and_kept_jit_modes():
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    out = nki.simulate(_kernel_with_config)(x, _Cfg(scale=2.0, rows=4))
    np.testing.assert_allclose(out, 2 * x)


@pytest.mark.parametrize("mode", ["torchxla", "jax", "simulation", "baremetal"])
def test_jit_mode_is_ignored_as_since_nki_0_3(mode):
    # NKI's migration guide (0.2 to 0.3): "The mode parameter is deprecated and ignored"; kernels written for
    # NKI 0.2 still say @nki.jit(mode="torchxla"), as a decorator and called on a function
    @nki.jit(mode=mode)
    def twice(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        nisa.tensor_tensor(dst=t, data1=t, data2=t, op=nl.add)
        nisa.dma_copy(dst=out, src=t)
        return out

    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(twice(x), 2 * x)
    np.testing.assert_array_equal(nki.simulate(nki.jit(twice.fn, mode=mode, platform_target="trn2"))(x), 2 * x)


@nki.jit(platform_target="trn1")
def _who_runs(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=x)
    return out


def test_jit_platform_target_selects_the_target(monkeypatch):
    monkeypatch.delenv("NEURON_PLATFORM_TARGET_OVERRIDE", raising=False)
    nki.simulate(_who_runs)(np.zeros((2, 2), np.float32))
    assert nki.last_result().target.name == "trn1"
    nki.simulate(_who_runs, target="trn2")(np.zeros((2, 2), np.float32))
    assert nki.last_result().target.name == "trn2"


def test_collectives_module_loads_and_ops_say_unsupported():
    import nki.collectives as ncc
    from nki.collectives import ReplicaGroup

    assert ReplicaGroup([[0, 1], [2, 3]]).replica_groups == [[0, 1], [2, 3]]
    with pytest.raises(NotImplementedError, match="not simulated by nkieval"):
        ncc.all_gather()


def test_dtypes_survive_dataclasses_asdict_and_work_as_numpy_dtypes():
    import copy
    import dataclasses
    import pickle

    @dataclasses.dataclass
    class Params:
        dtype: object = nl.bfloat16

    dt = dataclasses.asdict(Params())["dtype"]
    assert dt is nl.bfloat16 and not dataclasses.is_dataclass(nl.bfloat16)
    assert not np.issubdtype(dt, np.integer) and np.zeros(2, np.float32).astype(dt).dtype == dt
    assert copy.deepcopy(nl.float8_e4m3) is nl.float8_e4m3 and pickle.loads(pickle.dumps(nl.int32)) is nl.int32
    with pytest.raises(AttributeError):
        nl.float32.name = "x"


@nki.jit
def _optional_bias(x, bias=None):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    if bias:  # "was an optional tensor given?", as library kernels write it
        b = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=b, src=bias)
        nisa.tensor_tensor(dst=t, data1=t, data2=b, op=nl.add)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_tensor_truthiness_means_given():
    x = np.ones((4, 8), np.float32)
    np.testing.assert_array_equal(nki.simulate(_optional_bias)(x), x)
    np.testing.assert_array_equal(nki.simulate(_optional_bias)(x, 2 * x), 3 * x)


@nki.jit
def _replaced_banks(x):
    """Each round re-creates 8 PSUM tiles at the same explicit bank addresses while the previous round's list
    is still referenced: explicitly placed tiles occupy their banks once, so this fits in PSUM."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    banks = []
    for _ in range(3):
        new = []
        for bank in range(8):
            new.append(nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum, address=(0, bank * 2048)))
        banks = new
        nisa.tensor_copy(dst=banks[0][:, 0:x.shape[1]], src=t)
        nisa.tensor_copy(dst=t, src=banks[0][:, 0:x.shape[1]])
    nisa.dma_copy(dst=out, src=t)
    return out


@nki.jit
def _nine_auto_banks(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    tiles = [nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum) for _ in range(9)]
    for t in tiles:  # all nine written before any can be read (the reads also need acc, loaded after them)
        nisa.memset(dst=t, value=0.0)
    acc = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=acc, src=x)
    for t in tiles:
        nisa.tensor_tensor(dst=acc, data1=acc, data2=t[:, 0:x.shape[1]], op=nl.add)
    nisa.dma_copy(dst=out, src=acc)
    return out


@nki.jit
def _nine_declared_banks_used_in_turn(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    tiles = [nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum) for _ in range(9)]
    acc = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    for t in tiles:  # declared up front, but each live only while used: fits, as the compiler allocates
        nisa.memset(dst=t, value=1.0)
        nisa.tensor_copy(dst=acc, src=t[:, 0:x.shape[1]])
    nisa.dma_copy(dst=out, src=acc)
    return out


def test_explicitly_placed_tiles_count_once_per_address():
    x = np.arange(128 * 4, dtype=np.float32).reshape(128, 4)
    np.testing.assert_array_equal(nki.simulate(_replaced_banks)(x), x)
    with pytest.raises(NkiValidationError, match=r"tiles live at once need 18432 bytes per partition of PSUM"):
        nki.simulate(_nine_auto_banks)(x)
    np.testing.assert_array_equal(nki.simulate(_nine_declared_banks_used_in_turn)(x), np.ones_like(x))


@nki.jit
def _transpose_int32(x, hwdge):
    out = nl.ndarray((x.shape[1], x.shape[0]), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((x.shape[1], x.shape[0]), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_transpose(dst=t, src=x, dge_mode=nisa.dge_mode.hwdge if hwdge else nisa.dge_mode.unknown)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_dma_transpose_4_byte_dtypes_only_refused_with_hwdge():
    x = np.arange(16 * 32, dtype=np.int32).reshape(16, 32)
    np.testing.assert_array_equal(nki.simulate(_transpose_int32)(x, False), x.T)
    with pytest.raises(NkiValidationError, match="dge_mode=hwdge supports 2-byte dtypes"):
        nki.simulate(_transpose_int32)(x, True)


@nki.jit
def _barrier_after_slow_core(x, slow_s):
    import time

    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    pid = nl.program_id(0)
    if pid == 1:
        time.sleep(slow_s)  # a core that takes long to simulate before the barrier
    t = nl.ndarray((1, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x[pid:pid + 1, :])
    nisa.dma_copy(dst=out[pid:pid + 1, :], src=t)
    nisa.core_barrier(out, (0, 1))
    return out


@nki.jit
def _barrier_on_one_core(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    if nl.program_id(0) == 0:
        nisa.core_barrier(out, (0, 1))
    return out


@nki.jit
def _barrier_vs_sendrecv(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((1, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x[0:1, :])
    if nl.program_id(0) == 0:
        nisa.core_barrier(out, (0, 1))
    else:
        r = nl.ndarray((1, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
        nisa.sendrecv(src=t, dst=r, send_to_rank=0, recv_from_rank=0, pipe_id=0)
    return out


def test_core_barrier_waits_for_a_slow_peer_and_detects_missing_or_blocked_ones():
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    np.testing.assert_array_equal(nki.simulate(_barrier_after_slow_core[2], target="trn2")(x, 1.0), x)
    with pytest.raises(NkiValidationError, match="core 1 finished the kernel without arriving"):
        nki.simulate(_barrier_on_one_core[2], target="trn2")(x)
    with pytest.raises(NkiValidationError, match="deadlock"):
        nki.simulate(_barrier_vs_sendrecv[2], target="trn2")(x)


@nki.jit
def _sharded_rows(x):
    """Rows split over the LNC programs; with fewer rows than programs a shard is empty (nl.ds(off, 0))."""
    n_prog = nl.num_programs(0)
    me = nl.program_id(0)
    rows = x.shape[0]
    per = rows // n_prog
    mine = rows - me * per if me == n_prog - 1 else per
    shard_in = x[nl.ds(me * per, mine)]
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    shard_out = out[nl.ds(me * per, mine)]
    for r in range(mine):  # zero iterations on an empty shard
        t = nl.ndarray((1, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=shard_in[r:r + 1])
        nisa.dma_copy(dst=shard_out[r:r + 1], src=t)
    return out


def test_empty_hbm_shard_is_a_view_but_not_an_operand():
    x = np.arange(12, dtype=np.float32).reshape(1, 12)
    out = nki.simulate(_sharded_rows[2])(x)  # program 0 gets 0 rows, program 1 gets the row
    np.testing.assert_array_equal(out, x)

    @nki.jit
    def empty_operand(x):
        t = nl.ndarray((1, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[0:0])

    with pytest.raises(NkiValidationError, match="no elements") as e:
        nki.simulate(empty_operand)(x)
    assert e.value.rule == "indexing"

    @nki.jit
    def empty_on_chip(x):
        t = nl.ndarray((1, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
        t[:, 3:3]

    with pytest.raises(NkiValidationError, match="empty slice"):
        nki.simulate(empty_on_chip)(x)


def test_lnc_namespace_has_the_lnc_instructions():
    import nki.lnc

    assert nki.lnc.core_barrier is nisa.core_barrier and nki.lnc.sendrecv is nisa.sendrecv

    @nki.jit
    def barrier_bad_cores(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nki.lnc.core_barrier(data=out, cores=(1, 2))

    with pytest.raises(NkiValidationError, match="cores must be") as e:
        nki.simulate(barrier_bad_cores[2])(np.ones((2, 2), np.float32))
    assert e.value.rule == "argument"


@nki.jit
def _scatter_rows_into_reshaped_cache(cache, new, idx, pos):
    """Write new rows into a [B, S, D] cache through a reshaped [B*S, D] (vector_offset) and a flat [B*S*D]
    (scalar_offset) view: the index scales by the stride of indirect_dim of the reshaped view."""
    b, s, d = cache.shape
    out = nl.ndarray(cache.shape, dtype=cache.dtype, buffer=nl.shared_hbm)
    whole = nl.ndarray((b, s * d), dtype=cache.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=whole, src=cache.reshape((b, s * d)))
    nisa.dma_copy(dst=out.reshape((b, s * d)), src=whole)
    rows = nl.ndarray((b, d), dtype=cache.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=rows, src=new)
    ix = nl.ndarray((b, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=ix, src=idx)
    nisa.dma_copy(dst=out.reshape((b * s, d)).ap(pattern=[[1, b], [1, d]], offset=0, vector_offset=ix,
                                                 indirect_dim=0), src=rows)
    p = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=p, src=pos)
    one = nl.ndarray((1, 2), dtype=cache.dtype, buffer=nl.sbuf)
    nisa.memset(dst=one, value=-1.0)
    nisa.dma_copy(dst=out.reshape((b * s * d,)).ap(pattern=[[2, 1], [1, 2]], offset=0, scalar_offset=p,
                                                   indirect_dim=0), src=one)
    return out


def test_ap_offsets_scale_by_the_reshaped_views_stride():
    cache = np.zeros((3, 5, 4), np.float32)
    new = np.arange(12, dtype=np.float32).reshape(3, 4) + 1
    idx = np.array([[2], [7], [14]], np.int32)  # global rows of the [15, 4] view
    out = nki.simulate(_scatter_rows_into_reshaped_cache)(cache, new, idx, np.array([[1]], np.int32))
    want = cache.reshape(15, 4).copy()
    want[idx[:, 0]] = new
    want = want.reshape(-1)
    want[1:3] = -1.0  # scalar_offset 1 on a 1-D view moves one element, not one [5, 4] slab
    np.testing.assert_array_equal(out.reshape(-1), want)


@nki.jit
def _write_row_at_runtime_offset(x, pos, skip):
    """Write a row of -1 at row `pos` of a copy of x; an invalid (negative) pos is meant to be dropped by the
    DMA's oob_mode.skip, so the view made from it must not fail when it is made."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.dma_copy(dst=out, src=t)
    p = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=p, src=pos)
    row = nl.ndarray((1, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
    nisa.memset(dst=row, value=-1.0)
    view = out.ap(pattern=[[x.shape[1], 1], [1, x.shape[1]]], offset=0, scalar_offset=p, indirect_dim=0)
    nisa.dma_copy(dst=view, src=row, oob_mode=nisa.oob_mode.skip if skip else nisa.oob_mode.error)
    return out


def test_runtime_scalar_offset_out_of_bounds_follows_oob_mode():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    ok = nki.simulate(_write_row_at_runtime_offset)(x, np.array([[1]], np.int32), True)
    want = x.copy()
    want[1] = -1.0
    np.testing.assert_array_equal(ok, want)
    skipped = nki.simulate(_write_row_at_runtime_offset)(x, np.array([[-1000]], np.int32), True)
    np.testing.assert_array_equal(skipped, x)
    with pytest.raises(NkiValidationError, match="outside storage") as e:
        nki.simulate(_write_row_at_runtime_offset)(x, np.array([[-1000]], np.int32), False)
    assert e.value.rule == "out-of-bounds"


@nki.jit
def _peer_fails_before_sendrecv(x):
    me = nl.program_id(0)
    a = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=a, value=1.0)
    if me == 1:
        x[x.shape[0]]  # core 1 stops here with its own error
    b = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf)
    nisa.sendrecv(src=a, dst=b, send_to_rank=1 - me, recv_from_rank=1 - me, pipe_id=0)


def test_lnc2_reports_the_failing_cores_error_not_its_peers_wait():
    with pytest.raises(NkiValidationError) as e:
        nki.simulate(_peer_fails_before_sendrecv[2])(np.zeros((2, 2), np.float32))
    assert e.value.rule == "out-of-bounds", str(e.value)


@nki.jit
def _last_tile_view_made_but_unused(x, n_used):
    # the pattern of a kernel whose last loop step builds its operand's view before a condition skips the step
    out = nl.ndarray((4, 8), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((4, 8), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    acc = nl.ndarray((4, 2), dtype=x.dtype, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=0.0)
    for i in range(3):
        view = t.ap([[8, 4], [4, 2]], offset=3 * i)  # (i == 2 reaches column 10 of 8: outside the tile)
        if i < n_used:
            nisa.tensor_tensor(dst=acc, data1=acc, data2=view, op=nl.add)
    res = nl.ndarray((4, 8), dtype=x.dtype, buffer=nl.sbuf)
    nisa.memset(dst=res, value=0.0)
    nisa.tensor_copy(dst=res[:, 0:2], src=acc)
    nisa.dma_copy(dst=out, src=res)
    return out


def test_a_view_past_its_tensor_is_an_error_where_used_not_where_made():
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    got = nki.simulate(_last_tile_view_made_but_unused)(x, 2)
    np.testing.assert_array_equal(got[:, 0:2], x[:, [0, 4]] + x[:, [3, 7]])
    with pytest.raises(NkiValidationError, match=r"outside storage of 32 elements \(the \.ap\(\) view made at") as e:
        nki.simulate(_last_tile_view_made_but_unused)(x, 3)
    assert e.value.rule == "out-of-bounds"
