"""The scheduler's and the metrics' shortcuts give exactly what the straightforward computation gives.

* byte-range tables: the exact-box index, the cached lookups and the in-place rewrite of a replaced
  entry, each switched off, leave every schedule bit for bit the same;
* the cost memo (keyed by a record's signature, tried against the latest records of the same source
  line first) returns what the cost rules return for each record;
* the per-signature, vectorised metrics equal the per-record reference (metrics_reference.py);
* the rotation planner's live-instance count equals the event sweep it replaces, and the buffer the
  scheduler gives an instance (j mod depth) is the one its reuse chain leads to;
* the per-signature operand information (modes, partitions, HBM row geometry) gives each record's own
  values and the reference box (``reference_box``); a read of an ``exact`` entry's box, taken on its fast path, gives
  what the general hit handling gives (``_EXACT_READS`` off).
"""

from __future__ import annotations

import random
from array import array
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from metrics_reference import compute_metrics as ref_compute_metrics
from metrics_reference import critical_path as ref_critical_path
from metrics_reference import merged_length
from metrics_reference import stall_breakdown as ref_stall_breakdown
from perf_helpers import TraceBuilder, over_capacity
from sched_regression import digest, matmul, overlaps, pipeline, reference_box, same_record_overlaps

from nkieval.hardware import get_target
from nkieval.perf import metrics
from nkieval.perf import schedule as sched_mod
from nkieval.perf.costs import cost_of
from nkieval.perf.dma import plan_dma
from nkieval.perf.params import load_params
from nkieval.perf.rotation import _max_live, plan_rotation
from nkieval.perf.schedule import SchedulePolicy, schedule
from nkieval.sim.trace import AllocationRecord, OperandAccess, Trace, TraceRecord

SHORTCUTS = ("_EXACT_INDEX", "_CACHE_LOOKUPS", "_REWRITE_IN_PLACE", "_EXACT_READS")



def _digest_with(trace: Trace, target: str, policy: SchedulePolicy, **switches: object) -> str:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sched_mod, "_NATIVE", False)  # the shortcuts are the Python loop's (test_native_schedule.py)
        for name, value in switches.items():
            mp.setattr(sched_mod, name, value)
        return digest(schedule(trace, load_params(get_target(target)), policy))


def _variants() -> list[dict[str, object]]:
    off = {name: False for name in SHORTCUTS}
    return [*({name: False} for name in SHORTCUTS), off,
            {**off, "_INDEX_MIN": 4, "_MISSES_BEFORE_INDEX": 1}, {"_INDEX_MIN": 10**9}]


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 10**6), mode=st.sampled_from(["compiler", "physical"]),
       target=st.sampled_from(["trn1", "trn2"]), two_cores=st.booleans())
def test_table_shortcuts_do_not_change_the_schedule(seed: int, mode: str, target: str, two_cores: bool) -> None:
    trace = overlaps(target, seed, n=150, two_cores=two_cores)
    pol = SchedulePolicy(mode=mode)
    base = _digest_with(trace, target, pol)
    for v in _variants():
        assert _digest_with(trace, target, pol, **v) == base, v


@pytest.mark.parametrize("make,target,policy", [
    (lambda: same_record_overlaps("trn2"), "trn2", SchedulePolicy()),
    (lambda: same_record_overlaps("trn1"), "trn1", SchedulePolicy(mode="physical")),
    (lambda: pipeline("trn2", 30), "trn2", SchedulePolicy()),
    (lambda: pipeline("trn2", 30, slots=2), "trn2", SchedulePolicy(mode="physical")),
    (lambda: pipeline("trn1", 30, slots=3), "trn1", SchedulePolicy(rotation_depth=1)),
    (lambda: matmul("trn1"), "trn1", SchedulePolicy()),
    (lambda: matmul("trn2"), "trn2", SchedulePolicy(mode="physical")),
])
def test_table_shortcuts_do_not_change_pipelines(make, target: str, policy: SchedulePolicy) -> None:
    trace = make()
    base = _digest_with(trace, target, policy)
    for v in _variants():
        assert _digest_with(trace, target, policy, **v) == base, v


def test_the_shortcuts_are_taken() -> None:
    """The exact index answers most lookups of the pipeline and writes rewrite entries in place."""
    calls = Counter()
    real_lookup = sched_mod._RangeTable.lookup
    real_clear = sched_mod._RangeTable.clear

    def lookup(self, *a):
        calls["lookup"] += 1
        return real_lookup(self, *a)

    def clear(self):
        calls["clear"] += 1
        return real_clear(self)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sched_mod, "_NATIVE", False)
        mp.setattr(sched_mod._RangeTable, "lookup", lookup)
        mp.setattr(sched_mod._RangeTable, "clear", clear)
        schedule(pipeline("trn2", 40), load_params(get_target("trn2")))
        fast = dict(calls)
        calls.clear()
        mp.setattr(sched_mod, "_REWRITE_IN_PLACE", False)
        schedule(pipeline("trn2", 40), load_params(get_target("trn2")))
    assert fast.get("lookup", 0) < 10  # 160 records, ~280 table lookups: the exact index answers them
    assert fast.get("clear", 0) < calls["clear"]  # in place instead of kill (and clear) + append


# ---- cost memo ---------------------------------------------------------------------------------------
def _signature(rec) -> tuple:
    attrs = tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in rec.attrs.items())
    return (rec.opcode, rec.engine, attrs, *((o.role, o.mode, o.buffer, o.dtype, o.shape, o.pattern, o.nbytes,
                                            o.contiguous_bytes, o.partitions) for o in rec.operands))


def _varied(target: str, seed: int) -> Trace:
    """One source line issuing records whose signatures alternate, repeat, or carry list attributes."""
    rng = random.Random(seed)
    b = TraceBuilder(target)
    src = b.alloc("hbm", (128, 2048), "bfloat16")
    tiles = [b.alloc("sbuf", (128, 512), "bfloat16"), b.alloc("sbuf", (128, 512), "float32")]
    ps = b.alloc("psum", (128, 512), "float32")
    for _ in range(120):
        t = rng.choice(tiles)
        w = rng.choice((128, 256, 512))
        kind = rng.random()
        if kind < 0.3:
            b.rec("dma_copy", "dma", [b.op(t, "dst", "w", cols=(0, w)), b.op(src, "src", "r", cols=(0, w))], line=7,
                  dge_mode=rng.choice((0, 2)))
        elif kind < 0.6:
            b.rec("nc_matmul", "tensor", [b.op(ps, "dst", "rw", cols=(0, w)), b.op(t, "stationary", "r", cols=(0, 128)),
                                          b.op(t, "moving", "r", cols=(0, w))], line=7, M=128, N=w,
                  accumulated=rng.random() < 0.8, tile_size=[] if rng.random() < 0.7 else [64, 64])
        else:
            b.rec(rng.choice(("tensor_scalar", "activation", "mystery_op")), rng.choice(("vector", "scalar")),
                  [b.op(t, "dst", "w", cols=(0, w)), b.op(t, "data", "r", cols=(0, w))], line=rng.choice((7, 8)),
                  op="add")
    return b.trace


@pytest.mark.parametrize("make,target", [
    (lambda: _varied("trn2", 1), "trn2"), (lambda: _varied("trn1", 2), "trn1"),
    (lambda: overlaps("trn2", 5, n=200), "trn2"), (lambda: matmul("trn1"), "trn1"), (lambda: pipeline("trn2", 20), "trn2"),
])
@pytest.mark.parametrize("native", [False, True])
def test_cost_memo_returns_each_records_own_cost(make, target: str, native: bool,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Both the Python signature loop and the compiled one (``_schedule_c.classify``)."""
    monkeypatch.setattr(sched_mod, "_NATIVE", native)
    trace = make()
    p = load_params(get_target(target))
    static, first, unmodelled, written = sched_mod._static_costs(trace.records, p)
    first_of_sig: dict[tuple, int] = {}
    want_unmodelled: Counter = Counter()
    for i, rec in enumerate(trace.records):
        cost, opinfo, psum = static[i]
        if rec.engine == "dma":
            assert cost == plan_dma(rec, p)
        else:
            c, ok = cost_of(rec, p)
            assert cost == (c.occ, c.lat, c.mode, ok)
            if not ok:
                want_unmodelled[rec.opcode] += 1
        # what the class says of each operand holds for this record's operands
        assert psum == any(o.buffer == "psum" for o in rec.operands)
        assert [x[:5] for x in opinfo] == [(j, "r" in o.mode, "w" in o.mode, o.buffer,
                                            0 if o.buffer == "hbm" else o.partitions or 1)
                                           for j, o in enumerate(rec.operands)]
        for j, *_, nparts, hrows in opinfo:
            o = rec.operands[j]
            if not nparts:
                assert _hbm_box(o, hrows) == reference_box(o)
        # signature classes: the first record with each signature
        assert first[i] == first_of_sig.setdefault(_signature(rec), i)
    assert unmodelled == want_unmodelled
    assert written == {o.alloc for r in trace.records for o in r.operands if "w" in o.mode}


_SIG_FIELDS = {"role": "data", "mode": "rw", "buffer": "psum", "dtype": "bfloat16", "shape": (128, 32),
               "pattern": ((2, 32),), "nbytes": 8192, "contiguous_bytes": 128, "partitions": 64}


@pytest.mark.parametrize("native", [False, True])
@pytest.mark.parametrize("n_ops", [0, 1, 2, 3, 4])
def test_each_signature_field_of_each_operand_tells_records_of_a_line_apart(n_ops: int, native: bool,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Records of one source line that differ in one field a cost rule reads (of any operand, whatever the
    operand count), or in opcode, engine or attributes, get their own signature class; positions (alloc,
    partition start, addresses, name) and the source file do not count."""
    def op(k: int, **kw) -> OperandAccess:
        base = dict(role="dst" if k == 0 else "src", mode="w" if k == 0 else "r", buffer="sbuf", alloc=k,
                    shape=(128, 64), dtype="float32", partition_start=0, partitions=128, addr_lo=0, addr_hi=256,
                    nbytes=32768, contiguous_bytes=256, pattern=((1, 64),), name=f"t{k}")
        base.update(kw)
        return OperandAccess(**base)

    def rec(ops: list, **kw) -> TraceRecord:
        base = dict(seq=0, opcode="tensor_copy", engine="vector", operands=ops, attrs={"op": "add"}, program=0,
                    loops=(), file="k.py", line=7)
        base.update(kw)
        return TraceRecord(**base)

    plain = rec([op(k) for k in range(n_ops)])
    variants = [rec([op(k, **({f: v} if k == j else {})) for k in range(n_ops)])
                for j in range(n_ops) for f, v in _SIG_FIELDS.items()]
    variants += [rec([op(k) for k in range(n_ops)], **kw)
                 for kw in ({"opcode": "tensor_tensor"}, {"engine": "gpsimd"}, {"attrs": {"op": "multiply"}})]
    moved = rec([op(k, alloc=9 + k, partition_start=32, addr_lo=512, addr_hi=768, name="u") for k in range(n_ops)],
                file="other.py")
    monkeypatch.setattr(sched_mod, "_NATIVE", native)
    p = load_params(get_target("trn2"))
    for v in variants:
        _, first, _, _ = sched_mod._static_costs([plain, v, plain, moved, v], p)
        assert list(first) == [0, 1, 0, 0, 1], v


def _hbm_box(o, hrows) -> tuple[int, int, int, int, int]:
    """The scheduler loop's HBM box: from the class's row geometry (pitch, rows, (rows - 1) * pitch) and the
    operand's byte range."""
    lo, hi = o.addr_lo, o.addr_hi
    if hrows is not None:
        pitch, rows, skip = hrows
        width = hi - lo - skip
        r0, c0 = lo // pitch, lo % pitch
        if 0 < width and c0 + width <= pitch:
            return pitch, r0, r0 + rows, c0, c0 + width
    return 0, 0, 1, lo, hi


@settings(max_examples=60, deadline=None)
@given(shape=st.tuples(st.integers(1, 64), st.integers(1, 300)), dtype=st.sampled_from(["float32", "bfloat16"]),
       data=st.data())
def test_hbm_row_geometry_gives_the_reference_box(shape: tuple[int, int], dtype: str, data) -> None:
    """Per-class row geometry plus the record's byte range give ``reference_box`` for any rows × columns × stride
    access of an HBM tensor (single rows, full rows, strided columns)."""
    b = TraceBuilder("trn2")
    h = b.alloc("hbm", shape, dtype)
    r0 = data.draw(st.integers(0, shape[0] - 1))
    r1 = data.draw(st.integers(r0 + 1, shape[0]))
    stride = data.draw(st.sampled_from([1, 1, 2, 3]))
    c0 = data.draw(st.integers(0, shape[1] - 1))
    c1 = data.draw(st.integers(c0 + 1, shape[1]))
    c1 = c0 + max(1, (c1 - c0) // stride) * stride
    if c1 > shape[1]:
        return
    o = b.op(h, "src", "r", rows=(r0, r1), cols=(c0, c1), stride=stride)
    sig = (o.role, o.mode, o.buffer, o.dtype, o.shape, o.pattern, o.nbytes, o.contiguous_bytes, o.partitions)
    *_, nparts, hrows = sched_mod._operand_info(sig)
    assert nparts == 0
    assert _hbm_box(o, hrows) == reference_box(o)


# ---- metrics -----------------------------------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 12), st.sampled_from([0.0, 0.1, 1 / 3, 0.5])),
                max_size=60))
def test_union_length_is_merged_length(ivs: list[tuple[int, int, float]]) -> None:
    intervals = [(float(s) + f, float(s) + f + d) for s, d, f in ivs]  # ties, touching, nested, repeated
    a = [s for s, _ in intervals]
    b = [e for _, e in intervals]
    assert metrics._union_length(np.array(a, dtype=np.float64), np.array(b, dtype=np.float64)) == \
        merged_length(intervals)


_METRIC_CASES = [
    (lambda: overlaps("trn2", 3, n=200, two_cores=True), "trn2", SchedulePolicy()),
    (lambda: overlaps("trn1", 4, n=200), "trn1", SchedulePolicy(mode="physical")),
    (lambda: matmul("trn1"), "trn1", SchedulePolicy()),
    (lambda: matmul("trn2"), "trn2", SchedulePolicy(mode="serial")),
    (lambda: pipeline("trn2", 25), "trn2", SchedulePolicy()),
    (lambda: _varied("trn2", 3), "trn2", SchedulePolicy()),
    (lambda: TraceBuilder("trn2").trace, "trn2", SchedulePolicy()),
    (lambda: over_capacity("trn1"), "trn1", SchedulePolicy()),  # spill traffic scheduled
    (lambda: over_capacity("trn1"), "trn1", SchedulePolicy(spill_traffic="off")),
    (lambda: over_capacity("trn2", width=28 * 1024), "trn2", SchedulePolicy(spill_traffic="on_demand")),
]


@pytest.mark.parametrize("make,target,policy", _METRIC_CASES)
def test_metrics_equal_the_per_record_reference(make, target: str, policy: SchedulePolicy) -> None:
    s = schedule(make(), load_params(get_target(target)), policy)
    got, want = metrics.compute_metrics(s), ref_compute_metrics(s)
    assert list(got) == list(want)
    for k in want:
        assert got[k] == want[k] and type(got[k]) is type(want[k]), k
    assert [list(r.items()) for r in got["opcode_summary"]] == [list(r.items()) for r in want["opcode_summary"]]
    got_st, want_st = metrics.stall_breakdown(s), ref_stall_breakdown(s)
    assert [(k, list(v.items())) for k, v in got_st.items()] == [(k, list(v.items())) for k, v in want_st.items()]
    assert metrics.critical_path(s) == ref_critical_path(s)


def test_metrics_without_signatures_fall_back_to_one_class_per_record() -> None:
    s = schedule(matmul("trn1"), load_params(get_target("trn1")))
    want = ref_compute_metrics(s)
    s.signature = array("q")
    assert metrics.compute_metrics(s) == want


def test_groups_come_in_order_of_first_occurrence() -> None:
    got = metrics._groups(np.array([5, 2, 5, 0, 2, 9], dtype=np.int64))
    assert [(k, ix.tolist()) for k, ix in got] == [(5, [0, 2]), (2, [1, 4]), (0, [3]), (9, [5])]


# ---- rotation ----------------------------------------------------------------------------------------
def _max_live_sweep(allocs: list[AllocationRecord], end_seq: int) -> int:
    events = [(a.alloc_seq, 1) for a in allocs]
    events += [(a.free_seq if a.free_seq is not None else end_seq + 1, -1) for a in allocs]
    events.sort()
    live = best = 0
    for _, d in events:
        live += d
        best = max(best, live)
    return best


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 50), st.one_of(st.none(), st.integers(0, 30))), min_size=1, max_size=150))
def test_max_live_equals_the_event_sweep(spans: list[tuple[int, int | None]]) -> None:
    allocs = [AllocationRecord(k, "sbuf", "t", (1,), "float32", 0, 0, 4, "s", 0, s, None if d is None else s + d)
              for k, (s, d) in enumerate(spans)]
    assert _max_live([a.alloc_seq for a in allocs], [a.free_seq for a in allocs], 60) == _max_live_sweep(allocs, 60)


@settings(max_examples=30, deadline=None)
@given(sizes=st.lists(st.integers(1, 40), min_size=1, max_size=5), depth=st.integers(1, 3), seed=st.integers(0, 999))
def test_buffer_of_an_instance_is_its_reuse_chains_first(sizes: list[int], depth: int, seed: int) -> None:
    """The scheduler gives instance j of a site the buffer of instance j mod depth: the first instance of the
    chain that ``reuse_of`` (instance j reuses instance j - depth) leads back to."""
    rng = random.Random(seed)
    b = TraceBuilder("trn2")
    live: list = []
    for _ in range(max(sizes)):
        for s, n in enumerate(sizes):
            if n:
                t = b.alloc("sbuf", (128, 64 * (s + 1)), site=f"r.py:{s}")
                b.rec("memset", "gpsimd", [b.op(t, "dst", "w")], line=s)
                live.append(t)
        sizes = [max(0, n - 1) for n in sizes]
        while len(live) > rng.randint(0, 4):  # free some tiles: sites need 1.. buffers
            live.pop(rng.randrange(len(live))).free_seq = len(b.trace.records)
    plan = plan_rotation(b.trace, depth, {"sbuf": 10**9, "psum": 10**9})
    reuse = plan.reuse_of
    first: dict[int, int] = {}
    for a, prev in reuse.items():  # per site in allocation order: a reused instance comes first
        first[a] = first.get(prev, prev)
    for site, inst in zip(plan.sites, plan.instances):
        ids = [x[3] for x in inst]
        assert [x[0] for x in inst] == sorted(x[0] for x in inst)
        for j, a in enumerate(ids):
            assert first.get(a, a) == ids[j % site.depth]
            if j >= site.depth:
                assert reuse[a] == ids[j - site.depth]
