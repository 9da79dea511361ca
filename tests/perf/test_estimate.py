"""The public API: estimate(), PerfEstimate, latency percentiles, timeline export, CLI."""

from __future__ import annotations

import dataclasses
import itertools
import json

import nki
import numpy as np
import pytest
from click.testing import CliRunner
from perf_helpers import TraceBuilder

from nkieval.cli import main
from nkieval.examples import kernels as ex
from nkieval.hardware import get_target
from nkieval.perf import (
    MODEL_VERSION,
    LatencyEstimate,
    estimate,
    latency_percentiles,
    text_summary,
    to_perfetto,
    write_perfetto,
)
from nkieval.perf.cli import InputSpecError, parse_input_spec
from nkieval.perf.dma import effective_bw
from nkieval.perf.latency import LatencyPercentileError
from nkieval.perf.params import load_params


@pytest.fixture(scope="module")
def add_trace():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((512, 1024), dtype=np.float32)
    nki.simulate(ex.tiled_add, target="trn1")(a, a)
    return nki.last_result().trace


def test_estimate_is_typed_frozen_and_serialisable(add_trace) -> None:
    est = estimate(add_trace)
    assert est.target == "trn1" and est.model_version == MODEL_VERSION
    with pytest.raises(dataclasses.FrozenInstanceError):
        est.total_time_ns = 0.0  # type: ignore[misc]
    d = json.loads(json.dumps(est.to_dict()))
    assert d["estimate"] is True and d["total_time_ns"] == pytest.approx(est.total_time_ns)
    s = est.summary
    for name in ("total_time", "mfu_estimated_percent", "hfu_estimated_percent", "mbu_estimated_percent",
                 "mm_arithmetic_intensity", "tensor_active_time_percent", "vector_instruction_count",
                 "dma_active_time_percent", "hbm_read_bytes", "hbm_write_bytes", "spill_save_bytes",
                 "sbuf_peak_bytes_per_partition", "roofline_lower_bound_ns"):
        assert name in s
    assert s["hbm_read_bytes"] == 2 * 512 * 1024 * 4 and s["hbm_write_bytes"] == 512 * 1024 * 4
    assert s["vector_instruction_count"] == 4 and s["dma_transfer_count"] == 12
    assert s["roofline_lower_bound_ns"] <= est.total_time_ns
    lo, hi = est.interval_ns
    assert lo < est.total_time_ns < hi


def test_uncertainty_names_parameters_by_status(add_trace) -> None:
    u = estimate(add_trace).uncertainty
    assert {"documented", "fitted", "assumed"} <= set(u.by_status)
    assert "dma_fixed_ns" in u.by_status["fitted"]
    assert u.parameters["pe_clock_ghz"]["status"] == "documented"
    assert u.parameters["pe_clock_ghz"]["source"].startswith("A2")


def test_target_changes_the_estimate(add_trace) -> None:
    t1 = estimate(add_trace, "trn1").total_time_ns
    t2 = estimate(add_trace, "trn2").total_time_ns
    assert t2 < t1  # faster DMA engines on trn2 for a DMA-bound kernel


def test_estimate_rejects_non_traces() -> None:
    with pytest.raises(TypeError, match=r"needs an nkieval\.sim\.trace\.Trace"):
        estimate({"records": []})  # type: ignore[arg-type]


def test_latency_percentiles_are_marked_estimates(add_trace) -> None:
    lat = latency_percentiles(add_trace)
    assert isinstance(lat, LatencyEstimate) and lat.is_estimate
    assert lat.get_latency_percentile(50) == lat.get_latency_percentile(99) == pytest.approx(
        estimate(add_trace).total_time_ns / 1e3)
    assert lat.low_us < lat.latency_us < lat.high_us
    with pytest.raises(LatencyPercentileError, match="percentile 42"):
        lat.get_latency_percentile(42)


def test_text_summary_mentions_bottleneck_and_estimate(add_trace) -> None:
    txt = text_summary(estimate(add_trace))
    assert "ESTIMATE" in txt and "bottleneck" in txt and "dma" in txt


def _big_trace(n_iters: int) -> TraceBuilder:
    b = TraceBuilder("trn2")
    src = b.alloc("hbm", (128, 512 * 64))
    out = b.alloc("hbm", (128, 512 * 64))
    for i in range(n_iters):
        t = b.alloc("sbuf", (128, 512), site="big.py:3")
        u = b.alloc("sbuf", (128, 512), site="big.py:4")
        c = (i % 64) * 512
        b.rec("dma_copy", "dma", [b.op(t, "dst", "w"), b.op(src, "src", "r", cols=(c, c + 512))], line=3)
        b.rec("activation", "scalar", [b.op(u, "dst", "w"), b.op(t, "data", "r")], line=4, op="exp")
        b.rec("tensor_scalar", "vector", [b.op(u, "dst", "w"), b.op(u, "data", "r")], line=5, op0="multiply")
        b.rec("dma_copy", "dma", [b.op(out, "dst", "w", cols=(c, c + 512)), b.op(u, "src", "r")], line=6)
        t.free_seq = u.free_seq = len(b.trace.records)
    return b


def test_perfetto_export_of_100k_instructions_has_valid_structure(tmp_path) -> None:
    b = _big_trace(25_000)
    assert len(b.trace) == 100_000
    est = estimate(b.trace)
    path = write_perfetto(est, str(tmp_path / "t.json"))
    with open(path) as fh:
        doc = json.load(fh)
    ev = doc["traceEvents"]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    slices = [e for e in ev if e["ph"] == "X"]
    assert len([e for e in slices if e["cat"] != "dma_engines"]) == 100_000
    assert {"scalar", "vector"} <= set(names.values())
    # the DMA queue tracks carry their source lines' names
    assert {n for n in names.values() if n.startswith("dma:")} == {"dma:q0 (k.py:3)", "dma:q1 (k.py:6)"}
    per_track: dict = {}
    for e in slices:
        assert {"name", "ts", "dur", "pid", "tid"} <= e.keys() and e["dur"] >= 0 and e["ts"] >= 0
        assert (e["pid"], e["tid"]) in names
        per_track.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["dur"]))
        if e["cat"] != "dma_engines":
            assert e["args"]["nki_source_location"].startswith("k.py:")
    for key, iv in per_track.items():
        if names[key] in ("scalar", "vector"):  # in-order engines: slices never overlap
            iv.sort()
            assert all(a + d <= b2 + 1e-6 for (a, d), (b2, _) in itertools.pairwise(iv))
    assert doc["otherData"]["estimate"] is True


def test_perfetto_dict_without_file(add_trace) -> None:
    doc = to_perfetto(estimate(add_trace), dma_engines=True)
    assert any(e["ph"] == "X" and e["args"].get("wait_reason") for e in doc["traceEvents"])
    assert any(e["ph"] == "X" and e["cat"] == "dma_engines" for e in doc["traceEvents"])


def test_parse_input_spec() -> None:
    assert parse_input_spec("a=128x512:bfloat16") == ("a", (128, 512), "bfloat16")
    assert parse_input_spec("64x3") == (None, (64, 3), "float32")
    with pytest.raises(InputSpecError, match="expected"):
        parse_input_spec("a=12,4")


def test_cli_profile_writes_timeline_and_json(tmp_path) -> None:
    tl, js = tmp_path / "tl.json", tmp_path / "e.json"
    kfile = ex.__file__
    res = CliRunner().invoke(main, ["profile", f"{kfile}::tiled_add", "--target", "trn2", "--input", "256x256",
                                    "--input", "256x256", "--trace", str(tl), "--json", str(js)])
    assert res.exit_code == 0, res.output
    assert "tiled_add on trn2" in res.output and "ESTIMATE" in res.output
    assert json.loads(js.read_text())["target"] == "trn2"
    assert json.loads(tl.read_text())["traceEvents"]


_BETA1_OVER_PSUM = """
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


@nki.jit
def blocks(a):
    # 16 PSUM tiles of [128, 512] fp32 allocated as one tensor (32 KiB per partition): over PSUM, which the Beta-1
    # front end reports as a warning by default (its compiler freed tiles after their last use)
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)
    acc = nl.ndarray((16, nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.psum)
    for i in nl.affine_range(16):
        acc[i, :, :] = nisa.nc_matmul(t[:, 0:128], t[:, i * 512:(i + 1) * 512])
    for i in nl.affine_range(16):
        nl.store(out[:, i * 512:(i + 1) * 512], value=nl.copy(acc[i, :, :]))
    return out
"""


@pytest.mark.parametrize("kernel", ["tiled_add", "beta1"])
def test_cli_profile_without_values_gives_the_same_estimate(tmp_path, kernel) -> None:
    """--no-values runs record-only: the same estimate, and the front end's own defaults are kept (a Beta-1
    kernel's PSUM over-subscription stays a warning, as with values)."""
    if kernel == "beta1":
        kfile = tmp_path / "b1.py"
        kfile.write_text(_BETA1_OVER_PSUM)
        argv = [f"{kfile}::blocks", "--input", "128x8192"]
    else:
        argv = [f"{ex.__file__}::tiled_add", "--input", "256x256", "--input", "256x256"]
    est = {}
    for flag in ("--values", "--no-values"):
        js = tmp_path / f"e{flag}.json"
        res = CliRunner().invoke(main, ["profile", *argv, "--target", "trn2", flag, "--json", str(js)])
        assert res.exit_code == 0, res.output
        est[flag] = json.loads(js.read_text())
    assert est["--values"]["total_time_ns"] == est["--no-values"]["total_time_ns"] > 0


def test_cli_profile_bad_kernel_name(tmp_path) -> None:
    res = CliRunner().invoke(main, ["profile", f"{ex.__file__}::nope", "--input", "4x4"])
    assert res.exit_code != 0 and "no kernel 'nope'" in res.output


_PROFILE_KERNELS = """
import nki
import nki.language as nl
import nki.isa as nisa


@nki.jit
def copy(a):
    t = nl.ndarray((a.shape[0], 512), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


@nki.jit
def needs_64_rows(a):
    assert a.shape[0] == 64, "needs 64 rows"
    return a
"""


@pytest.mark.parametrize("argv, code, message", [
    # a hardware rule, reported at the kernel line that broke it
    (["K::copy", "--input", "256x512"], 1, "kernel.py:9: ndarray: partition dimension 256 exceeds maximum 128"),
    # the kernel's own exception, at its line
    (["K::needs_64_rows", "--input", "128x4"], 1, "kernel.py:18: the kernel raised AssertionError: needs 64 rows"),
    # inputs that do not fit the kernel's parameters
    (["K::copy", "--input", "b=128x512"], 2, "has no parameter 'b'; name an --input after one of: a"),
    (["K::copy"], 2, "missing a required argument: 'a'"),
    (["K::copy", "--input", "128x512", "--input", "4x4"], 2, "too many positional arguments"),
    (["K::copy", "--input", "128x512", "--target", "trn9"], 2, "unknown target 'trn9'; known:"),
    (["K::copy", "--inputs", "NPZ"], 2, "arrays x name no parameter of copy (a)"),
    (["S::copy", "--input", "128x512"], 1, "broken.py:2: cannot import the kernel file: SyntaxError"),
])
def test_cli_profile_reports_bad_input_without_a_traceback(tmp_path, argv, code, message) -> None:
    kfile, sfile, npz = tmp_path / "kernel.py", tmp_path / "broken.py", tmp_path / "named.npz"
    kfile.write_text(_PROFILE_KERNELS)
    sfile.write_text("import nki\ndef copy(:\n")
    np.savez(npz, x=np.zeros((128, 512), np.float32))
    subst = {"NPZ": str(npz)}
    argv = [subst.get(a, a.replace("K::", f"{kfile}::").replace("S::", f"{sfile}::")) for a in argv]
    res = CliRunner().invoke(main, ["profile", *argv])
    assert res.exit_code == code, res.output
    assert message in res.output.replace(str(tmp_path) + "/", "")
    assert res.exception is None or isinstance(res.exception, SystemExit)
    assert "Traceback" not in res.output


def test_cli_profile_takes_unnamed_and_named_npz_inputs(tmp_path) -> None:
    kfile = ex.__file__
    for name, arrays in (("pos.npz", {}), ("named.npz", {"a": None, "b": None})):
        npz = tmp_path / name
        x = np.ones((256, 256), np.float32)
        if arrays:
            np.savez(npz, b=x, a=x)
        else:
            np.savez(npz, x, x)
        res = CliRunner().invoke(main, ["profile", f"{kfile}::tiled_add", "--target", "trn2", "--inputs", str(npz)])
        assert res.exit_code == 0, res.output
        assert "tiled_add on trn2" in res.output


_BETA1_KERNEL = """
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


@nki.jit
def double(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(x.shape[1])[None, :]
    for i in nl.affine_range((x.shape[0] + 127) // 128):
        ok = i * 128 + i_p < x.shape[0]
        t = nl.load(x[i * 128 + i_p, i_f], mask=ok)
        nl.store(out[i * 128 + i_p, i_f], value=nl.multiply(t, 2.0, mask=ok), mask=ok)
    return out


@nki.jit
def too_wide(x):
    t = nl.load(x[nl.arange(256)[:, None], nl.arange(4)[None, :]])
    return t
"""


def test_cli_profile_runs_a_beta1_kernel_through_the_beta1_front_end(tmp_path) -> None:
    """Beta-1 kernels (masks, nl.load) only make sense under the Beta-1 front end; the target flag still applies."""
    kfile = tmp_path / "b1.py"
    kfile.write_text(_BETA1_KERNEL)
    res = CliRunner().invoke(main, ["profile", f"{kfile}::double", "--target", "trn1", "--input", "300x64"])
    assert res.exit_code == 0, res.output
    assert "double on trn1" in res.output and "ESTIMATE" in res.output
    res = CliRunner().invoke(main, ["profile", f"{kfile}::too_wide", "--input", "256x4"])
    assert res.exit_code == 1 and "b1.py:20:" in res.output and "256 exceed" in res.output and "partition-limit" in res.output, res.output
    assert "Traceback" not in res.output


_BETA1_GRID_KERNEL = """
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


@nki.jit
def rows(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    i = nl.program_id(0)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(x.shape[1])[None, :]
    nl.store(out[i * 128 + i_p, i_f], value=nl.exp(nl.load(x[i * 128 + i_p, i_f])))
    return out
"""


def test_cli_profile_launches_the_grid(tmp_path) -> None:
    """--grid 4 launches kernel[4]: four programs, four times the DMA bytes of one; an N-D grid on an nki
    kernel is the front end's own error, and a malformed grid a usage error."""
    kfile = tmp_path / "grid.py"
    kfile.write_text(_BETA1_GRID_KERNEL)
    moved = {}
    for grid in (None, "4"):
        js = tmp_path / f"e{grid}.json"
        extra = ["--grid", grid] if grid else []
        res = CliRunner().invoke(main, ["profile", f"{kfile}::rows", "--input", "512x256", "--json", str(js), *extra])
        assert res.exit_code == 0, res.output
        moved[grid] = json.loads(js.read_text())["summary"]["dma_transfer_total_bytes"]
    assert moved["4"] == 4 * moved[None] == 4 * 2 * 128 * 256 * 4
    res = CliRunner().invoke(main, ["profile", f"{ex.__file__}::tiled_add", "--grid", "2x2", "--input", "128x8",
                                    "--input", "128x8"])
    assert res.exit_code == 1 and "N-D SPMD grids are a Beta-1" in res.output, res.output
    res = CliRunner().invoke(main, ["profile", f"{ex.__file__}::tiled_add", "--grid", "two"])
    assert res.exit_code == 2 and "expected N or NxM" in res.output


def test_reloads_are_reported_as_hbm_reload_bytes() -> None:
    """A tensor loaded once per use (a reload flaw) shows up in hbm_reload_bytes / useful_read_percent."""

    def run(loads: int):
        b = TraceBuilder("trn2")
        src = b.alloc("hbm", (128, 512))
        out = b.alloc("hbm", (128, 512))
        for _ in range(loads):
            t = b.alloc("sbuf", (128, 512), site="k.py:1")
            b.rec("dma_copy", "dma", [b.op(t, "dst", "w"), b.op(src, "src", "r")], line=1)
        b.rec("dma_copy", "dma", [b.op(out, "dst", "w"), b.op(t, "src", "r")], line=2)
        return estimate(b.trace).summary

    once, thrice = run(1), run(3)
    size = 128 * 512 * 4
    assert once["hbm_reload_bytes"] == 0 and once["useful_read_percent"] == 100.0
    assert once["load_repeat_factor_max"] == 1.0
    assert thrice["hbm_reload_bytes"] == 2 * size
    assert thrice["useful_read_percent"] == pytest.approx(100.0 / 3)
    assert thrice["load_repeat_factor_max"] == pytest.approx(3.0)
    assert thrice["compulsory_hbm_bytes"] == once["compulsory_hbm_bytes"]


_WIDE_KERNEL = """
import nki
import nki.language as nl
import nki.isa as nisa


@nki.jit
def keep_three(a):
    out = nl.ndarray((3, *a.shape), dtype=a.dtype, buffer=nl.shared_hbm)
    tiles = [nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf) for _ in range(3)]
    for i, t in enumerate(tiles):
        nisa.dma_copy(dst=t, src=a)
        nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=float(i))
    for i, t in enumerate(tiles):
        nisa.dma_copy(dst=out[i], src=t)
    return out


@nki.jit
def add_two(a):
    x = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    y = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=a)
    nisa.dma_copy(dst=y, src=a)
    nisa.tensor_tensor(dst=x, data1=x, data2=y, op=nl.add)
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=x)
    return out
"""


@pytest.mark.filterwarnings("ignore:kernel. tiles live at once need")
def test_cli_profile_over_subscribed_sbuf_is_an_error_unless_it_may_spill(tmp_path) -> None:
    kfile = tmp_path / "wide.py"
    kfile.write_text(_WIDE_KERNEL)
    # three tiles computed on chip, 3 x 80 KiB per partition of trn1's usable 176 (physical 192)
    argv = ["profile", f"{kfile}::keep_three", "--target", "trn1", "--input", "128x20480"]
    res = CliRunner().invoke(main, argv)
    assert res.exit_code == 1 and "exceeding" in res.output and "sbuf-capacity" in res.output, res.output
    assert res.output.rstrip().endswith("--capacity-check warn estimates it with the spill traffic the compiler "
                                        "would add")
    res = CliRunner().invoke(main, [*argv, "--capacity-check", "warn"])
    assert res.exit_code == 0, res.output
    # the third tile evicts the one stored last (computed on chip: saved, then reloaded)
    assert "SBUF spill      10.49 MB saved, 10.49 MB reloaded, 1 evictions" in res.output
    assert "scheduled as DMAs" in res.output
    slow = float(res.output.split("total_time")[1].split()[0])
    res = CliRunner().invoke(main, [*argv, "--capacity-check", "warn", "--spill-traffic", "off"])
    assert res.exit_code == 0, res.output
    assert "not in the schedule" in res.output
    assert float(res.output.split("total_time")[1].split()[0]) < slow
    # one instruction reading two 128 KiB tiles: no eviction can make it fit, and the summary says so
    res = CliRunner().invoke(main, ["profile", f"{kfile}::add_two", "--target", "trn1", "--input", "128x32768",
                                    "--capacity-check", "warn"])
    assert res.exit_code == 0, res.output
    assert "SBUF overfull   1 instruction(s)" in res.output


_PSUM_KERNEL = """
import nki
import nki.language as nl
import nki.isa as nisa


@nki.jit
def nine_banks(a):
    return _banks(a, 9)


@nki.jit
def eight_banks(a):
    return _banks(a, 8)


def _banks(a, n):
    out = nl.ndarray((n, 128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    x = nl.ndarray((128, 128), dtype=a.dtype, buffer=nl.sbuf)
    y = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=a[:, 0:128])
    nisa.dma_copy(dst=y, src=a)
    accs = [nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum) for _ in range(n)]
    for _ in range(2):  # every accumulator takes a step in each round: all n are live at once
        for acc in accs:
            nisa.nc_matmul(dst=acc, stationary=x, moving=y)
    for i, acc in enumerate(accs):
        r = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=r, src=acc)
        nisa.dma_copy(dst=out[i], src=r)
    return out
"""


@pytest.mark.filterwarnings("ignore:kernel. tiles live at once need")
def test_cli_profile_says_a_psum_excess_is_not_modelled(tmp_path) -> None:
    kfile = tmp_path / "banks.py"
    kfile.write_text(_PSUM_KERNEL)
    # nine [128, 512] fp32 accumulators live at once: 9 x 2 KiB per partition of a 16 KiB PSUM
    argv = ["profile", f"{kfile}::nine_banks", "--target", "trn2", "--input", "128x512:bfloat16"]
    res = CliRunner().invoke(main, argv)
    assert res.exit_code == 1 and "psum-capacity" in res.output, res.output
    res = CliRunner().invoke(main, [*argv, "--capacity-check", "warn", "--json", str(tmp_path / "e.json")])
    assert res.exit_code == 0, res.output
    assert "PSUM over       peak 18432 B/partition is 112% of the PSUM: not modelled" in res.output
    assumptions = json.loads((tmp_path / "e.json").read_text())["uncertainty"]["assumptions"]
    assert any("PSUM spill is not modelled" in a for a in assumptions)
    # eight fill the PSUM exactly: neither
    res = CliRunner().invoke(main, ["profile", f"{kfile}::eight_banks", *argv[2:], "--json", str(tmp_path / "f.json")])
    assert res.exit_code == 0 and "PSUM peak 16384 B" in res.output and "PSUM over" not in res.output, res.output
    assumptions = json.loads((tmp_path / "f.json").read_text())["uncertainty"]["assumptions"]
    assert not any("PSUM" in a for a in assumptions)


@pytest.mark.parametrize("target", ["trn1", "trn2", "trn3"])
def test_an_hbm_to_hbm_copy_is_bound_by_hbm_reading_and_writing_each_byte(target: str) -> None:
    """An HBM->HBM DMA reads and writes every byte in HBM: it takes at least 2 x bytes / the core's HBM bandwidth,
    never beats its roofline, and its MBU stays within 100 %."""
    b = TraceBuilder(target)
    src = b.alloc("hbm", (4096, 4096), dtype="float32")
    dst = b.alloc("hbm", (4096, 4096), dtype="float32")
    b.rec("dma_copy", "dma", [b.op(dst, "dst", "w"), b.op(src, "src", "r")])
    est = estimate(b.trace, target)
    m = est.summary
    p = load_params(get_target(target))
    nbytes = 4096 * 4096 * 4
    assert m["hbm_read_bytes"] == m["hbm_write_bytes"] == nbytes
    assert est.total_time_ns >= 2 * nbytes / p.hbm_core_bw_bytes_per_ns
    assert m["roofline_lower_bound_ns"] == pytest.approx(2 * nbytes / p.hbm_core_bw_bytes_per_ns)
    assert m["percent_of_roofline"] <= 100.0 and m["mbu_estimated_percent"] <= 100.0
    # a load of the same bytes has one side in HBM: the DMA engines' rate, not twice the HBM traffic, bounds it
    b2 = TraceBuilder(target)
    src2 = b2.alloc("hbm", (128, 8192), dtype="float32")
    t = b2.alloc("sbuf", (128, 8192), dtype="float32")
    b2.rec("dma_copy", "dma", [b2.op(t, "dst", "w"), b2.op(src2, "src", "r")])
    load = estimate(b2.trace, target)
    assert load.summary["roofline_lower_bound_ns"] == pytest.approx(
        128 * 8192 * 4 / min(effective_bw(p) * int(p.dma_engines), p.hbm_core_bw_bytes_per_ns))


def test_the_summary_says_how_two_cores_are_counted() -> None:
    from sched_regression import overlaps

    from nkieval.perf import text_summary

    two = text_summary(estimate(overlaps("trn2", 3, n=60, two_cores=True), "trn2"))
    assert "(2 cores: instr summed over the cores; active% and busy per core, their mean)" in two
    assert "cores:" not in text_summary(estimate(overlaps("trn2", 3, n=60), "trn2"))


def test_an_empty_trace_says_it_ran_nothing() -> None:
    from nkieval.perf import text_summary

    est = estimate(TraceBuilder("trn2").trace, "trn2")
    assert est.total_time_ns == 0.0
    assert "critical path   (none: the kernel ran no instructions)" in text_summary(est)


_SCALE_KERNEL = """
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def scale(a, eps):
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=eps)
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out
"""


def test_cli_profile_npz_scalars_are_python_scalars(tmp_path) -> None:
    """``np.savez(f, a=x, eps=1e-5)`` stores eps as a 0-d float64 array; the kernel gets the float, as a Python
    caller would pass it (a 0-d float64 array is no NKI input)."""
    kfile = tmp_path / "kernel.py"
    kfile.write_text(_SCALE_KERNEL)
    for name, save in (("named.npz", lambda f, x: np.savez(f, a=x, eps=1e-5)),
                       ("pos.npz", lambda f, x: np.savez(f, x, 1e-5))):
        npz = tmp_path / name
        save(npz, np.ones((128, 64), np.float32))
        res = CliRunner().invoke(main, ["profile", f"{kfile}::scale", "--target", "trn2", "--inputs", str(npz)])
        assert res.exit_code == 0, res.output
        assert "scale on trn2" in res.output
