"""The SBUF spill estimate: Belady eviction over segments, saves only for dirty data, wired into the metrics."""

from __future__ import annotations

from perf_helpers import TraceBuilder

from nkieval.perf import estimate, text_summary
from nkieval.perf.spill import estimate_spill

KIB = 1024


def _load(b: TraceBuilder, t, src, cols=None) -> int:
    return b.rec("dma_copy", "dma", [b.op(t, "dst", "w", cols=cols), b.op(src, "src", "r")]).seq


def _store(b: TraceBuilder, t, dst, cols=None) -> int:
    return b.rec("dma_copy", "dma", [b.op(dst, "dst", "w"), b.op(t, "src", "r", cols=cols)]).seq


def _tiles(b: TraceBuilder, *widths: int):
    """SBUF fp32 tiles of 128 partitions and ``w`` elements each, and an HBM source/sink big enough for any."""
    hbm = b.alloc("hbm", (128, max(widths)))
    return hbm, [b.alloc("sbuf", (128, w)) for w in widths]


def test_no_eviction_when_the_live_tiles_fit() -> None:
    b = TraceBuilder()
    hbm, (x, y) = _tiles(b, 256, 256)
    _load(b, x, hbm)
    _load(b, y, hbm)
    _store(b, x, hbm)
    _store(b, y, hbm)
    e = estimate_spill(b.trace, 2 * KIB)
    assert (e.save_bytes, e.reload_bytes, e.evictions) == (0, 0, 0)
    assert e.peak_live_bytes == 2 * KIB


def test_a_clean_tile_is_reread_from_its_source_never_saved() -> None:
    b = TraceBuilder()
    hbm, (x, y) = _tiles(b, 256, 256)  # 1 KiB per partition each; room for one
    _load(b, x, hbm)
    _load(b, y, hbm)  # evicts x
    _store(b, x, hbm)  # x back, evicts y
    _store(b, y, hbm)  # y back
    e = estimate_spill(b.trace, KIB)
    assert e.evictions == 2
    assert e.save_bytes == 0
    assert e.reload_bytes == 2 * KIB * 128


def test_a_tile_computed_on_chip_is_saved_before_it_is_dropped() -> None:
    b = TraceBuilder()
    hbm, (x, y) = _tiles(b, 256, 256)
    b.rec("memset", "vector", [b.op(x, "dst", "w")], value=1.0)  # x's data exists nowhere else
    _load(b, y, hbm)  # evicts x: saved
    _store(b, x, hbm)  # x reloaded, evicts y (clean)
    _store(b, y, hbm)
    e = estimate_spill(b.trace, KIB)
    assert e.evictions == 2
    assert e.save_bytes == KIB * 128
    assert e.reload_bytes == 2 * KIB * 128


def test_the_tile_used_furthest_ahead_goes_first() -> None:
    b = TraceBuilder()
    hbm, (x, y, z) = _tiles(b, 256, 512, 256)  # 1, 2 and 1 KiB per partition; room for 3 KiB
    _load(b, x, hbm)
    _load(b, y, hbm)
    _load(b, z, hbm)  # x is used next, y last: y goes (oldest-first or smallest-first would drop x)
    _store(b, x, hbm)
    _store(b, z, hbm)
    _store(b, y, hbm)
    e = estimate_spill(b.trace, 3 * KIB)
    assert e.evictions == 1
    assert e.reload_bytes == 2 * KIB * 128


def test_only_the_segment_a_kernel_is_not_using_is_evicted() -> None:
    b = TraceBuilder()
    hbm, (big, t) = _tiles(b, 1024, 256)  # a 4 KiB accumulator worked on a quarter at a time, and a 1 KiB tile
    for q in range(4):
        _load(b, big, hbm, cols=(256 * q, 256 * (q + 1)))
    _load(b, t, hbm)  # 5 KiB live, room for 4.5: one quarter must go, not the whole accumulator
    _store(b, t, hbm)
    for q in range(4):
        _store(b, big, hbm, cols=(256 * q, 256 * (q + 1)))
    e = estimate_spill(b.trace, 4 * KIB + 512)
    assert e.evictions == 1
    assert e.reload_bytes == KIB * 128
    assert e.peak_live_bytes == 5 * KIB


def test_estimate_reports_spill_only_beyond_usable_sbuf() -> None:
    def trace(width: int):
        b = TraceBuilder("trn1")
        hbm, (x, y) = _tiles(b, width, width)
        _load(b, x, hbm)
        _load(b, y, hbm)
        _store(b, x, hbm)
        _store(b, y, hbm)
        b.trace.peak_sbuf_bytes = 2 * width * 4
        return b.trace

    fits = estimate(trace(16 * KIB), "trn1")  # 2 x 64 KiB of 176 KiB
    assert (fits.summary["spill_evictions"], fits.summary["spill_reload_bytes"]) == (0, 0)
    assert "SBUF spill" not in text_summary(fits)
    over = estimate(trace(32 * KIB), "trn1")  # 2 x 128 KiB: each tile goes out once and comes back
    m = over.summary
    assert m["spill_evictions"] == 2
    assert m["spill_save_bytes"] == 0
    assert m["spill_reload_bytes"] == 2 * 128 * KIB * 128
    assert m["sbuf_usable_bytes_per_partition"] == 180224
    assert "SBUF spill" in text_summary(over)
