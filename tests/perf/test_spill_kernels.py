"""Spill priced by what moves, on kernels of our own that over-subscribe SBUF (trn2: 212,984 usable B/partition).

A zero-initialised buffer overwritten tile by tile before it is read moves nothing; data computed on chip and read
later is saved and reloaded; zeros read before they are written are refilled by a memset, not read from HBM; and a
kernel whose DMAs are mostly spill traffic is labelled spill-bound.
"""

from __future__ import annotations

import ml_dtypes
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

from nkieval.perf import estimate
from nkieval.perf import spill as spill_mod
from nkieval.perf.metrics import WAIT_BOUND_SHARE, classify
from nkieval.perf.spill import estimate_spill
from nkieval.sim.options import SimOptions

pytestmark = pytest.mark.filterwarnings("ignore:kernel. tiles live at once need")

F, T = 65536, 2048  # a [128, 65536] fp32 buffer: 256 KiB per partition, more than the SBUF holds
USABLE = 212984  # trn2 compiler-usable SBUF per partition (nkipy HardwareConstants.h)


@nki.jit
def zero_then_overwrite(x):
    out = nl.ndarray((128, F), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((128, F), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=0.0)
    for i in nl.affine_range(F // T):
        t = nl.ndarray((128, T), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[:, i * T:(i + 1) * T])
        nisa.tensor_scalar(dst=acc[:, i * T:(i + 1) * T], data=t, op0=nl.multiply, operand0=2.0)
        nisa.dma_copy(dst=out[:, i * T:(i + 1) * T], src=acc[:, i * T:(i + 1) * T])
    return out


@nki.jit
def zero_then_accumulate(x):
    out = nl.ndarray((128, F), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((128, F), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=0.0)
    for i in nl.affine_range(F // T):
        t = nl.ndarray((128, T), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[:, i * T:(i + 1) * T])
        nisa.tensor_tensor(dst=acc[:, i * T:(i + 1) * T], data1=acc[:, i * T:(i + 1) * T], data2=t, op=nl.add)
        nisa.dma_copy(dst=out[:, i * T:(i + 1) * T], src=acc[:, i * T:(i + 1) * T])
    return out


@nki.jit
def compute_then_read(x):
    out = nl.ndarray((128, F), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((128, F), dtype=nl.float32, buffer=nl.sbuf)
    for i in nl.affine_range(F // T):
        t = nl.ndarray((128, T), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[:, i * T:(i + 1) * T])
        nisa.tensor_scalar(dst=acc[:, i * T:(i + 1) * T], data=t, op0=nl.multiply, operand0=2.0)
    for i in nl.affine_range(F // T):
        y = nl.ndarray((128, T), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=y, data1=acc[:, i * T:(i + 1) * T], data2=acc[:, i * T:(i + 1) * T], op=nl.multiply)
        nisa.dma_copy(dst=out[:, i * T:(i + 1) * T], src=y)
    return out


FB, TB = 131072, 4096  # bf16: 256 KiB per partition


@nki.jit
def cyclic_passes(x):
    """Three in-place passes over a buffer larger than SBUF: each pass needs tiles the previous one evicted."""
    out = nl.ndarray((128, FB), dtype=nl.bfloat16, buffer=nl.shared_hbm)
    acc = nl.ndarray((128, FB), dtype=nl.bfloat16, buffer=nl.sbuf)
    for i in nl.affine_range(FB // TB):
        nisa.dma_copy(dst=acc[:, i * TB:(i + 1) * TB], src=x[:, i * TB:(i + 1) * TB])
    for _ in range(3):
        for i in nl.affine_range(FB // TB):
            nisa.tensor_scalar(dst=acc[:, i * TB:(i + 1) * TB], data=acc[:, i * TB:(i + 1) * TB], op0=nl.add,
                               operand0=1.0)
    for i in nl.affine_range(FB // TB):
        nisa.dma_copy(dst=out[:, i * TB:(i + 1) * TB], src=acc[:, i * TB:(i + 1) * TB])
    return out


def _trace(kernel, x):
    nki.simulate(kernel, target="trn2", options=SimOptions.from_env(capacity_check="warn"))(x)
    return nki.last_result().trace


@pytest.fixture(scope="module")
def x32():
    return np.ones((128, F), np.float32)


def _both_walks_agree(trace) -> None:
    native = estimate_spill(trace, USABLE)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(spill_mod, "_NATIVE", False)
        assert estimate_spill(trace, USABLE) == native


def test_a_zero_initialised_buffer_overwritten_before_it_is_read_moves_nothing(x32) -> None:
    tr = _trace(zero_then_overwrite, x32)
    assert tr.peak_sbuf_bytes > USABLE
    s = estimate(tr, "trn2").summary
    assert s["spill_evictions"] > 0  # the buffer does not fit: tiles are dropped ...
    # ... but the zeros are dead before anything reads them: no save, no reload, no refill
    assert (s["spill_save_bytes"], s["spill_reload_bytes"], s["spill_refill_bytes"]) == (0, 0, 0)
    _both_walks_agree(tr)


def test_zeros_read_before_they_are_written_are_refilled_not_reloaded(x32) -> None:
    tr = _trace(zero_then_accumulate, x32)
    s = estimate(tr, "trn2").summary
    assert s["spill_save_bytes"] == 0 and s["spill_reload_bytes"] == 0
    # at least the overflow of the buffer must be made again before it is read
    assert s["spill_refill_bytes"] >= (tr.peak_sbuf_bytes - USABLE) * 128
    _both_walks_agree(tr)


def test_data_computed_on_chip_and_read_later_is_saved_and_reloaded(x32) -> None:
    tr = _trace(compute_then_read, x32)
    s = estimate(tr, "trn2").summary
    assert s["spill_reload_bytes"] == s["spill_save_bytes"]  # every evicted tile is read again
    assert s["spill_reload_bytes"] >= (tr.peak_sbuf_bytes - USABLE) * 128
    assert s["spill_refill_bytes"] == 0
    _both_walks_agree(tr)


def test_a_kernel_whose_dmas_are_mostly_spill_is_labelled_spill_bound() -> None:
    tr = _trace(cyclic_passes, np.ones((128, FB), ml_dtypes.bfloat16))
    est = estimate(tr, "trn2")
    assert est.bottleneck.resource == "spill" and est.bottleneck.bound == "memory"
    assert "spill" in est.bottleneck.reason
    assert est.summary["spill_dma_active_time_percent"] >= 0.5 * est.summary["dma_active_time_percent"]
    assert est.stalls["vector"]["waiting_on_spill"] > 0


@pytest.mark.parametrize("spill_share,expect", [(WAIT_BOUND_SHARE, "spill"), (WAIT_BOUND_SHARE / 2, "vector")])
def test_the_busiest_engine_waiting_on_spill_names_spill(spill_share: float, expect: str) -> None:
    total = 1000.0
    util = {"tensor": 0.0, "vector": 0.8, "scalar": 0.0, "gpsimd": 0.0, "sync": 0.0, "dma": 0.3}
    stalls = {"vector": {"busy": 800.0, "waiting_on_spill": spill_share * total}}
    b = classify(util, stalls, total)
    assert b.resource == expect
    assert b.bound == ("memory" if expect == "spill" else "compute")


# -- where spill traffic lands: a spilled buffer of one size among buffers of other sizes ----------------------
FM, TW, TR = 131072, 4096, 1024  # a bf16 buffer of 256 KiB per partition, written 8 KiB and read 2 KiB at a time


@nki.jit
def mixed_sizes(x):
    """bf16 ``acc`` written from fp32 [128, 4096] tiles (16 KiB), read back in [128, 1024] slices (2 KiB) into
    fp32 tiles of 4 KiB: only ``acc`` is live long enough to be spilled."""
    out = nl.ndarray((128, FM), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((128, FM), dtype=nl.bfloat16, buffer=nl.sbuf)
    for i in nl.affine_range(FM // TW):
        t = nl.ndarray((128, TW), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[:, i * TW:(i + 1) * TW])
        nisa.tensor_scalar(dst=acc[:, i * TW:(i + 1) * TW], data=t, op0=nl.multiply, operand0=2.0)
    for i in nl.affine_range(FM // TR):
        y = nl.ndarray((128, TR), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=y, data=acc[:, i * TR:(i + 1) * TR], op0=nl.add, operand0=1.0)
        nisa.dma_copy(dst=out[:, i * TR:(i + 1) * TR], src=y)
    return out


@pytest.fixture(scope="module")
def mixed_trace():
    return _trace(mixed_sizes, np.ones((128, FM), np.float32))


def _acc_id(trace) -> int:
    return next(a for a, al in trace.allocations.items() if al.buffer == "sbuf" and al.shape == (128, FM))


def test_spill_moves_the_spilled_buffer_at_its_own_access_sizes(mixed_trace) -> None:
    s = estimate_spill(mixed_trace, USABLE)
    acc = _acc_id(mixed_trace)
    moved = [t for t in s.transfers if t.kind in ("save", "reload")]
    assert moved and {t.alloc for t in moved} == {acc}  # never the 16 KiB or 4 KiB tiles
    for t in moved:
        size = t.addr_hi - t.addr_lo
        assert t.partitions == 128
        if t.kind == "reload":
            assert size == TR * 2  # read back one 2 KiB slice before the instruction that reads it
        else:
            assert size % (TR * 2) == 0 and size <= TW * 2  # saved within the 8 KiB range its writer wrote
    assert s.reload_bytes == s.save_bytes == sum((t.addr_hi - t.addr_lo) * t.partitions for t in moved) // 2
    assert s.save_bytes >= (mixed_trace.peak_sbuf_bytes - USABLE) * 128


def _ranges(r, alloc, mode):
    return [(o.addr_lo, o.addr_hi) for o in r.operands if o.alloc == alloc and mode in o.mode and o.buffer == "sbuf"]


def test_spill_traffic_lands_between_the_segment_s_writer_and_its_reader(mixed_trace) -> None:
    est = estimate(mixed_trace, "trn2")
    sch, tr = est.schedule, est.schedule.trace
    acc = _acc_id(mixed_trace)
    saves: dict[tuple[int, int], float] = {}
    for i, r in enumerate(tr.records):
        if r.opcode == "spill_save":
            (lo, hi), = _ranges(r, acc, "r")
            writers = [j for j in range(i) if any(a < hi and lo < b for a, b in _ranges(tr.records[j], acc, "w"))
                       and tr.records[j].opcode != "spill_reload"]
            assert writers and sch.start[i] >= sch.end[writers[-1]]  # saved after its last write is done
            saves[(lo, hi)] = sch.end[i]
        elif r.opcode == "spill_reload":
            (lo, hi), = _ranges(r, acc, "w")
            done = [end for (a, b), end in saves.items() if a <= lo and hi <= b]
            assert done and sch.start[i] >= max(done)  # reloaded after its save reached HBM
            reader = next(j for j in range(i + 1, len(tr.records)) if _ranges(tr.records[j], acc, "r"))
            assert (lo, hi) in _ranges(tr.records[reader], acc, "r")  # ... for the instruction that reads it
            assert sch.end[i] <= sch.start[reader]
    assert saves


def test_spill_time_lands_where_the_reloads_are(mixed_trace) -> None:
    """With spill traffic scheduled the kernel is slower than with it off, and the time it adds is in the read
    phase (the reloads; the saves overlap the write phase's loads)."""
    from nkieval.perf.schedule import SchedulePolicy

    on = estimate(mixed_trace, "trn2")
    off = estimate(mixed_trace, "trn2", policy=SchedulePolicy(spill_traffic="off"))

    def phase_ends(est):
        recs = est.schedule.trace.records
        last_write = max(i for i, r in enumerate(recs) if r.opcode == "tensor_scalar" and r.operands[0].dtype == "bfloat16")
        return est.schedule.end[last_write], est.total_time_ns

    (w_on, t_on), (w_off, t_off) = phase_ends(on), phase_ends(off)
    assert t_on > t_off
    assert (t_on - w_on) - (t_off - w_off) > 0.5 * (t_on - t_off)


# -- where spill time lands on a size ladder: the rotation plan may take a long-lived buffer's room --------------
TL = 2048


def _two_phase(f: int):
    """``acc`` [128, f] fp32 filled from streamed [128, 2048] tiles, then read back slice by slice."""
    @nki.jit
    def two_phase(x):
        out = nl.ndarray((128, f), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.ndarray((128, f), dtype=nl.float32, buffer=nl.sbuf)
        for i in nl.affine_range(f // TL):
            t = nl.ndarray((128, TL), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x[:, i * TL:(i + 1) * TL])
            nisa.tensor_scalar(dst=acc[:, i * TL:(i + 1) * TL], data=t, op0=nl.multiply, operand0=2.0)
        for i in nl.affine_range(f // TL):
            y = nl.ndarray((128, TL), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_scalar(dst=y, data=acc[:, i * TL:(i + 1) * TL], op0=nl.add, operand0=1.0)
            nisa.dma_copy(dst=out[:, i * TL:(i + 1) * TL], src=y)
        return out
    return two_phase


@pytest.fixture(scope="module")
def ladder():
    """(columns, trace) at 160 KiB (fits with double buffers), 192 KiB (fits, but not with two sets of both streamed
    tiles beside it) and 232 KiB (spills) of ``acc`` per partition."""
    return [(f, _trace(_two_phase(f), np.ones((128, f), np.float32))) for f in (40960, 49152, 59392)]


def test_by_default_the_pipelining_is_lost_before_anything_spills(ladder) -> None:
    (f0, t0), (f1, t1), _ = ladder
    e0, e1 = estimate(t0, "trn2"), estimate(t1, "trn2")
    assert e1.summary["spill_save_bytes"] + e1.summary["spill_reload_bytes"] == 0
    assert min(r["depth"] for r in e1.rotation) == 1  # no room for a second set beside acc
    assert e1.total_time_ns / f1 > 1.3 * e0.total_time_ns / f0


def test_rotation_room_spill_puts_the_time_where_the_spill_is(ladder) -> None:
    from nkieval.perf.schedule import SchedulePolicy

    pol = SchedulePolicy(rotation_room="spill")
    per_col, moved = [], []
    for f, tr in ladder:
        e = estimate(tr, "trn2", policy=pol)
        assert all(r["depth"] == 2 for r in e.rotation)  # double-buffered at every size
        per_col.append(e.total_time_ns / f)
        moved.append(e.summary["spill_save_bytes"] + e.summary["spill_reload_bytes"])
    # the 192 KiB step gives up its acc room for the second sets: exactly that room is spilled, and costs little
    assert moved[0] == 0 and moved[1] > 0 and moved[2] > moved[1]
    assert per_col[1] < 1.05 * per_col[0]
    # the spilling size pays for its traffic: slower per column than the size that fits
    assert per_col[2] > per_col[1]
    # the room taken is the spill estimate's capacity cut: the rotation sets the plan gives beyond acc
    e = estimate(ladder[1][1], "trn2", policy=pol)
    assert e.schedule.spill is not None and e.schedule.spill.capacity_bytes < USABLE


def test_rotation_room_is_checked() -> None:
    from nkieval.perf.schedule import ScheduleError, SchedulePolicy

    with pytest.raises(ScheduleError, match="rotation_room"):
        SchedulePolicy(rotation_room="steal")  # type: ignore[arg-type]


def test_cli_profile_takes_the_rotation_room_policy(tmp_path) -> None:
    from click.testing import CliRunner

    from nkieval.perf.cli import profile

    src = tmp_path / "k.py"
    src.write_text(
        "import nki, nki.isa as nisa, nki.language as nl\n"
        "@nki.jit\n"
        "def k(x):\n"
        "    out = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.shared_hbm)\n"
        "    t = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.sbuf)\n"
        "    nisa.dma_copy(dst=t, src=x)\n"
        "    nisa.dma_copy(dst=out, src=t)\n"
        "    return out\n")
    args = [f"{src}::k", "--target", "trn2", "--input", "128x512"]
    assert CliRunner().invoke(profile, [*args, "--rotation-room", "spill"]).exit_code == 0
    bad = CliRunner().invoke(profile, [*args, "--rotation-room", "steal"])
    assert bad.exit_code == 2 and "rotation-room" in bad.output


# -- rotation_room="spill" reserves every extra set it gives, not only the overflow ----------------------------------
PW = 8192  # a [128, 8192] fp32 tile: 32 KiB per partition


@nki.jit
def resident_params(x):
    """Three [128, PW] fp32 parameters loaded once and read by every iteration (96 KiB), beside a streamed input and
    output tile (32 KiB each): 160 KiB of its own at peak, 224 KiB with a second set of both streamed tiles."""
    n = x.shape[1] // PW
    out = nl.ndarray((128, (n - 3) * PW), dtype=nl.float32, buffer=nl.shared_hbm)
    # one allocation site each: tiles allocated once (a site allocated in a loop would be a rotation site)
    p0 = nl.ndarray((128, PW), dtype=nl.float32, buffer=nl.sbuf)
    p1 = nl.ndarray((128, PW), dtype=nl.float32, buffer=nl.sbuf)
    p2 = nl.ndarray((128, PW), dtype=nl.float32, buffer=nl.sbuf)
    params = (p0, p1, p2)
    for j, p in enumerate(params):
        nisa.dma_copy(dst=p, src=x[:, j * PW:(j + 1) * PW])
    for i in nl.affine_range(n - 3):
        t = nl.ndarray((128, PW), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[:, (i + 3) * PW:(i + 4) * PW])
        o = nl.ndarray((128, PW), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=o, data1=t, data2=params[0], op=nl.multiply)
        nisa.tensor_tensor(dst=o, data1=o, data2=params[1], op=nl.add)
        nisa.tensor_tensor(dst=o, data1=o, data2=params[2], op=nl.multiply)
        nisa.dma_copy(dst=out[:, i * PW:(i + 1) * PW], src=o)
    return out


def test_rotation_room_spill_evicts_what_the_extra_sets_overflow() -> None:
    """The kernel's own peak (160 KiB) is far below the usable SBUF, but with the second sets the spill policy gives
    both streamed tiles (+64 KiB) it overflows by about 11 KiB: that much of the parameters is evicted and reloaded.
    Reserving only the overflow left the spill estimate's capacity above the kernel's own peak, so the extra sets
    came for free."""
    from nkieval.perf.schedule import SchedulePolicy

    tr = _trace(resident_params, np.ones((128, 11 * PW), np.float32))
    assert tr.peak_sbuf_bytes < USABLE - 32768  # fits with one extra set, not two
    fit = estimate(tr, "trn2")
    e = estimate(tr, "trn2", policy=SchedulePolicy(rotation_room="spill"))
    streamed = [r for r in e.rotation if r["instances"] > 1 and r["bytes_per_partition"] == 4 * PW]
    assert len(streamed) == 2 and all(r["depth"] == 2 for r in streamed)
    assert min(r["depth"] for r in fit.rotation if r["bytes_per_partition"] == 4 * PW) == 1
    assert e.schedule.spill is not None and e.schedule.spill.capacity_bytes == USABLE - 2 * 4 * PW
    assert e.summary["spill_reload_bytes"] > 0
    assert fit.summary["spill_reload_bytes"] == 0
