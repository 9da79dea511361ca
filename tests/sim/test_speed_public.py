"""Issue 31 item 3 (speed on the big public kernels): the caches added for speed change nothing recorded.

* ``NkiTensor._geometry`` shares its layout arithmetic between allocations with the same layout (a tile
  re-allocated on every loop iteration); each operand must still carry its own allocation's id, name and
  address, with the values worked out by hand here.
* ``OnChipAllocator`` keeps its live blocks sorted for first-fit; the addresses it hands out must be those
  of a plain first-fit over the live blocks (a model written here), for any allocate/free sequence.
"""

import gc

import nki.language as nl
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nkieval.sim.memory import Allocation, OnChipAllocator
from nkieval.sim.runner import run_kernel


def _accesses(make):
    """Run ``make()`` in a kernel; return the trace operands of the views it returns."""
    box = {}

    def kernel(a):
        box["acc"] = [(v.access("src", "r"), v.alloc.address) for v in make()]

    run_kernel(kernel, [np.zeros((2, 2), np.float32)])
    return box["acc"]


def test_an_operand_of_a_reallocated_tile_has_its_own_id_name_and_the_hand_computed_geometry():
    def make():
        out = []
        for i in range(3):  # the same tile allocated afresh each iteration: same address, same view
            t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf, name=f"tile{i}")
            out.append(t[0:64, 8:16])
            out.append(t)  # keep the allocation alive: the next one is placed after it
        return out

    acc = _accesses(make)
    views = [a for k, a in enumerate(acc) if k % 2 == 0]
    ids = {v.alloc for v, _ in views}
    assert len(ids) == 3
    for i, (v, address) in enumerate(views):
        assert v.name == f"tile{i}"
        assert v.buffer == "sbuf" and v.shape == (64, 8) and v.dtype == "float32"
        assert (v.partition_start, v.partitions) == (0, 64)
        assert v.addr_lo == address + 8 * 4  # column 8 of fp32
        assert v.addr_hi == address + 16 * 4
        assert v.nbytes == 64 * 8 * 4 and v.contiguous_bytes == 8 * 4 and v.pattern == ((1, 8),)
    assert len({address for _, address in views}) == 3  # three live tiles: three addresses


def test_a_tile_freed_and_reallocated_at_the_same_address_reports_the_new_allocation():
    def make():
        a = nl.ndarray((32, 16), dtype=nl.bfloat16, buffer=nl.sbuf, name="first")
        first = a[:, 4:12].access("src", "r")
        addr = a.alloc.address
        del a
        gc.collect()
        b = nl.ndarray((32, 16), dtype=nl.bfloat16, buffer=nl.sbuf, name="second")
        assert b.alloc.address == addr
        second = b[:, 4:12]
        return [first, second, b]

    box = {}

    def kernel(x):
        first, second, b = make()
        box["v"] = (first, second.access("src", "r"), b.alloc.id)

    run_kernel(kernel, [np.zeros((2, 2), np.float32)])
    first, second, b_id = box["v"]
    assert first.name == "first" and second.name == "second"
    assert second.alloc == b_id != first.alloc
    assert (second.addr_lo, second.addr_hi, second.pattern) == (first.addr_lo, first.addr_hi, ((1, 8),))
    assert second.dtype == "bfloat16" and second.nbytes == 32 * 8 * 2


class _Buf:
    kind = "sbuf"
    on_chip = True


class _D:
    name = "uint8"
    itemsize = 1


def _model_first_fit(live: dict[int, tuple[int, int]], size: int) -> int:
    pos = 0
    for start, end in sorted(live.values()):
        if start - pos >= size:
            return pos
        pos = max(pos, end)
    return pos


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(1, 40), st.integers(0, 30)), min_size=1, max_size=60))
def test_first_fit_addresses_equal_a_plain_first_fit_over_the_live_blocks(ops):
    alloc = OnChipAllocator("sbuf", 1 << 20, 4, "off", partitions=4, bank_bytes=2048)
    live: dict[int, tuple[int, int]] = {}
    next_id = 0
    for is_alloc, nbytes, pick in ops:
        if is_alloc or not live:
            size = max(4, (nbytes + 3) // 4 * 4)
            expected = _model_first_fit(live, size)
            a = Allocation(id=next_id, buffer=_Buf(), name="", dtype=_D(), shape=(4, nbytes),
                           storage=np.empty((4, nbytes), np.uint8), site=None, program=0)
            alloc.allocate(a, None, "test")
            assert a.address == expected
            live[next_id] = (a.address, a.address + size)
            next_id += 1
        else:
            victim = sorted(live)[pick % len(live)]
            alloc.release(victim)
            del live[victim]
        assert set(alloc.live) == set(live)


# -- third pass: per-tile numpy work replaced by plain arithmetic ------------------------------------------
def _model_live_bytes(blocks: dict[int, tuple[int, int, int, int, bool]], partitions: int) -> int:
    """Most live bytes in any partition, by brute force: first-fit blocks summed per partition, placed blocks
    (``fixed``) as the union of their byte ranges per partition."""
    best = 0
    for p in range(partitions):
        auto = sum(e - s for s, e, p0, p1, fixed in blocks.values() if not fixed and p0 <= p < p1)
        covered: set[int] = set()
        for s, e, p0, p1, fixed in blocks.values():
            if fixed and p0 <= p < p1:
                covered.update(range(s, e))
        best = max(best, auto + len(covered))
    return best


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(1, 4), st.integers(1, 40), st.integers(0, 3),
                          st.integers(0, 30)), min_size=1, max_size=40))
def test_live_bytes_peak_equals_a_per_partition_count_with_placed_and_first_fit_tiles(ops):
    parts = 4
    alloc = OnChipAllocator("sbuf", 1 << 20, 4, "off", partitions=parts, bank_bytes=2048)
    live: dict[int, tuple[int, int, int, int, bool]] = {}
    peak = 0
    for next_id, (action, nparts, nbytes, p0, pick) in enumerate(ops):
        if action == 2 and live:  # free one
            victim = sorted(live)[pick % len(live)]
            alloc.release(victim)
            del live[victim]
        else:  # 0: first-fit, 1: placed at an explicit (partition, byte) address
            placed = action == 1
            p0 = min(p0, parts - nparts) if placed else 0
            a = Allocation(id=next_id, buffer=_Buf(), name="", dtype=_D(), shape=(nparts, nbytes),
                           storage=np.empty((nparts, nbytes), np.uint8), site=None, program=0)
            alloc.allocate(a, (p0, 4 * pick) if placed else None, "test")
            end = a.address + max(4, (nbytes + 3) // 4 * 4)  # the allocator's 4-byte alignment
            live[next_id] = (a.address, end, p0, p0 + nparts, placed)
        expected = _model_live_bytes(live, parts)
        assert alloc._total() == expected
        peak = max(peak, expected)
    assert alloc.peak_bytes >= peak


def _record(i: int, p0: int, nparts: int, nbytes: int):
    from nkieval.sim.trace import AllocationRecord

    return AllocationRecord(id=i, buffer="sbuf", name=f"t{i}", shape=(nparts, 8), dtype="float32", address=0,
                            partition_offset=p0, bytes_per_partition=nbytes, site=None, program=0, alloc_seq=0)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 10), st.integers(1, 512), st.integers(1, 4),
                          st.integers(0, 3)), min_size=1, max_size=25), st.booleans())
def test_live_range_sweep_peak_equals_a_brute_force_over_every_start(blocks, all_at_partition_zero):
    from nkieval.sim.capacity import _sweep

    parts = 4
    items = []
    for i, (lo, length, nbytes, nparts, p0) in enumerate(blocks):
        p0 = 0 if all_at_partition_zero else min(p0, parts - nparts)
        items.append([float(lo), float(lo + length), _record(i, p0, nparts, nbytes)])
    best, at, live = _sweep(items, parts)

    def peak(on) -> int:  # most bytes in any partition among the tiles ``on``
        return max(sum(a.bytes_per_partition for a in on
                       if a.partition_offset <= p < a.partition_offset + a.shape[0]) for p in range(parts))

    def live_at(x: float) -> list:
        return [a for lo, hi, a in items if lo <= x < hi + 0.25]

    expected = max(peak(live_at(lo)) for lo, _, _ in items)
    assert best == expected
    assert peak(live_at(at)) == expected
    # the tiles reported live at the peak are live there and reach the peak by themselves
    assert {a.id for a in live} <= {a.id for a in live_at(at)}
    assert peak(live) == expected


def test_affine_selects_repeated_with_other_offsets_multipliers_and_operators_each_match_numpy():
    """The predicate is kept by its arguments: each repeat (a hit) and each variant (a miss) must be its own."""
    import nki.isa as nisa
    from isa_testlib import rand, sbuf, simulate

    combos = [(0, 1, nl.greater_equal), (4, 1, nl.greater_equal), (0, 2, nl.greater_equal), (0, 1, nl.less),
              (-3, 1, nl.equal)] * 2
    s = rand((32, 32), 5)

    def body(x):
        outs = []
        for off, cm, cmp in combos:
            d = sbuf(x.shape)
            nisa.affine_select(dst=d, pattern=[[-1, 32]], channel_multiplier=cm, on_true_tile=x,
                               on_false_value=-1.0, cmp_op=cmp, offset=off)
            outs.append(d)
        r = sbuf((32, 32 * len(combos)))
        for k, d in enumerate(outs):
            nisa.tensor_copy(dst=r[:, 32 * k:32 * (k + 1)], src=d)
        return r

    got = simulate(body, s)
    p, j = np.arange(32)[:, None], np.arange(32)[None, :]
    compare = {nl.greater_equal: np.greater_equal, nl.less: np.less, nl.equal: np.equal}
    for k, (off, cm, cmp) in enumerate(combos):
        keep = compare[cmp](off + cm * p - j, 0)
        np.testing.assert_array_equal(got[:, 32 * k:32 * (k + 1)], np.where(keep, s, np.float32(-1.0)))


def test_affine_select_still_refuses_a_bool_multiplier_after_the_equal_int_was_accepted():
    import nki.isa as nisa
    import pytest
    from isa_testlib import rand, sbuf, simulate

    from nkieval.sim.errors import NkiValidationError

    def body(x):
        for cm in (1, True):  # True == 1 and hashes alike, but a bool is not an integer argument
            d = sbuf(x.shape)
            nisa.affine_select(dst=d, pattern=[[-1, 16]], channel_multiplier=cm, on_true_tile=x,
                               on_false_value=0.0, cmp_op=nl.greater_equal)
        return d

    with pytest.raises(NkiValidationError) as e:
        simulate(body, rand((16, 16), 1))
    assert e.value.rule == "argument" and "channel_multiplier" in str(e.value)


def test_memset_stores_the_value_rounded_into_every_element_of_each_dtype():
    import ml_dtypes
    import nki.isa as nisa
    from isa_testlib import sbuf, simulate

    # float8_e4m3 saturates at its largest finite value, 240
    cases = [(nl.bfloat16, 1 / 3, np.float32(ml_dtypes.bfloat16(1 / 3))), (nl.int8, 300, 127),
             (nl.int32, -7, -7), (nl.float8_e4m3, 1000.0, 240.0), (nl.float32, 0.1, np.float32(0.1))]

    for dtype, value, expected in cases:
        def body(_x, dtype=dtype, value=value):
            d = sbuf((8, 4, 6), dtype)
            nisa.memset(dst=d[:, 1:3, :], value=value)  # a strided view of the tile
            nisa.memset(dst=d[:, 0, :], value=0)
            nisa.memset(dst=d[:, 3, :], value=0)
            return d

        out = simulate(body, np.zeros((1, 1), np.float32)).astype(np.float64)
        assert out.shape == (8, 4, 6)
        np.testing.assert_array_equal(out[:, 1:3, :], np.full((8, 2, 6), np.float64(expected)))
        np.testing.assert_array_equal(out[:, [0, 3], :], 0)


def _saturating_round_model(x: np.ndarray, d) -> np.ndarray:
    """NKI's saturating rounding to a narrow float, written out: finite values clipped to ±max, ±inf kept where
    the format has inf and saturated where it has none, NaN kept, then one round-to-nearest-even."""
    import ml_dtypes

    m = float(ml_dtypes.finfo(d.storage).max)
    f = x.astype(np.float32)
    with np.errstate(invalid="ignore"):
        f = np.where(np.isfinite(f), np.clip(f, -m, m), f)
    if d.name in ("float8_e4m3fn", "float8_e8m0fnu"):  # no inf in these formats
        f = np.where(np.isinf(f), np.sign(f) * m, f)
    with np.errstate(over="ignore", invalid="ignore"):
        return f.astype(d.storage)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(["bfloat16", "float16", "float8_e4m3", "float8_e5m2", "float8_e4m3fn"]),
       st.sampled_from(["in range", "overflow", "inf", "nan"]), st.integers(0, 2**31 - 1))
def test_rounding_to_a_narrow_float_is_bit_identical_to_the_saturating_model(name, extra, seed):
    from nkieval.sim import dtypes as dt

    d = dt.to_dtype(name)
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((16, 33)) * float(rng.choice([1e-3, 1.0, 100.0]))).astype(np.float32)
    special = {"in range": None, "overflow": 1e30, "inf": -np.inf, "nan": np.nan}[extra]
    if special is not None:
        x[rng.integers(16), rng.integers(33)] = special
    got = dt.cast(x, d)
    want = _saturating_round_model(x, d)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.view(np.uint8 if got.itemsize == 1 else np.uint16),
                                  want.view(np.uint8 if want.itemsize == 1 else np.uint16))


def test_affine_select_predicates_kept_stay_within_their_byte_bound(monkeypatch):
    import nki.isa as nisa
    from isa_testlib import rand, sbuf, simulate

    from nkieval.sim.isa import gpsimd

    monkeypatch.setattr(gpsimd, "_PREDICATES_MAX_BYTES", 3 * 16 * 16)  # room for three [16, 16] predicates
    monkeypatch.setattr(gpsimd, "_PREDICATES", {})
    monkeypatch.setattr(gpsimd, "_PREDICATE_BYTES", [0])
    s = rand((16, 16), 3)
    seen = []

    def body(x):
        for off in range(-4, 4):
            d = sbuf(x.shape)
            nisa.affine_select(dst=d, pattern=[[-1, 16]], channel_multiplier=1, on_true_tile=x,
                               on_false_value=0.0, cmp_op=nl.greater_equal, offset=off)
            seen.append(sum(p.nbytes for p in gpsimd._PREDICATES.values()))
        return d

    out = simulate(body, s)
    assert max(seen) <= 3 * 16 * 16 and len(seen) == 8
    p, j = np.arange(16)[:, None], np.arange(16)[None, :]
    np.testing.assert_array_equal(out, np.where(3 + p - j >= 0, s, np.float32(0)))


# -- Beta-1 affine_range write conflicts: extents first, a dense owner array only on overlap ---------------------
_column_writes = st.lists(st.tuples(st.integers(0, 40), st.integers(1, 24), st.integers(1, 3)), min_size=1,
                          max_size=70)


def _first_conflict(writes):
    """(earlier iteration, iteration) of the first element written by two iterations, by a dense model."""
    owners = np.full(64, -1)
    for it, (start, length, step) in enumerate(writes):
        cols = np.arange(start, start + length)[::step]
        clash = (owners[cols] >= 0) & (owners[cols] != it)
        if clash.any():
            return int(owners[cols][clash][0]), it
        owners[cols] = it
    return None


@settings(max_examples=12, deadline=None)
@given(_column_writes)
def test_affine_range_conflicts_equal_a_dense_model_with_disjoint_strided_and_many_writes(writes):
    import neuronxcc.nki as b1
    import neuronxcc.nki.language as b1l

    from nkieval.sim.errors import NkiValidationError

    def kern(x):
        out = b1l.ndarray([8, 64], dtype=x.dtype, buffer=b1l.shared_hbm)
        t = b1l.load(x)
        todo = iter(writes)
        for _ in b1l.affine_range(len(writes)):
            start, length, step = next(todo)
            b1l.store(out[0:8, start:start + length:step], value=t[0:8, start:start + length:step])
        return out

    x = np.arange(8 * 64, dtype=np.float32).reshape(8, 64)
    want = _first_conflict(writes)
    run = b1.jit(kern, mode="simulation")
    if want is None:
        run(x)
    else:
        with pytest.raises(NkiValidationError, match=f"iterations {want[0]} and {want[1]} of an nl.affine_range"):
            run(x)


def test_mgrid_grids_kept_by_their_bounds_equal_numpy_for_every_query():
    from nkieval.frontends.beta1.index import mgrid

    queries = [(slice(0, 4), slice(0, 3)), (slice(1, 5), slice(0, 3)), (slice(0, 4), slice(0, 6, 2)),
               (slice(0, 4),), (slice(0, 4.0),), (slice(0, 4), slice(0, 3))]
    for _ in range(2):
        for q in queries:
            got = [e.values for e in mgrid[q if len(q) > 1 else q[0]]]
            want = np.mgrid[q if len(q) > 1 else q[0]]
            want = [want] if len(q) == 1 else list(want)
            assert len(got) == len(want)
            for g, w in zip(got, want):
                np.testing.assert_array_equal(g, w)
                if g.flags.writeable:  # a copy (the float grid made int): scribbling on it must not reach the cache
                    g[...] = -7


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_storage_box_of_a_basic_slice_equals_the_brute_force_index_ranges(data):
    from nkieval.frontends.beta1.state import _storage_box

    shape = tuple(data.draw(st.lists(st.integers(1, 7), min_size=1, max_size=3)))
    base = np.arange(int(np.prod(shape))).reshape(shape)
    key = []
    for n in shape:
        a, b = sorted(data.draw(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1))))
        step = data.draw(st.sampled_from([1, 2, 3, -1]))
        key.append(slice(a, b + 1, step) if step > 0 else slice(b, a - 1 if a else None, -1))
    view = base[tuple(key)]
    if view.size == 0:
        return
    off = (view.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // base.itemsize
    box = _storage_box((off, view.shape, tuple(s // base.itemsize for s in view.strides)), shape)
    idx = np.unravel_index(view.reshape(-1), shape)  # arange: each value is its own flat offset
    assert box == tuple((int(i.min()), int(i.max())) for i in idx)
    flat = base.reshape(-1)[off:off + 2 * shape[-1]] if len(shape) > 1 and shape[-1] > 1 else None
    if flat is not None and flat.size == 2 * shape[-1]:  # a reshape spanning rows is no box of the array
        assert _storage_box((off, (flat.size,), (1,)), shape) is None
