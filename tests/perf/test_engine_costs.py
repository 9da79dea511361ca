"""Vector/Scalar engine costs per dtype and operand count against the documented engine figures.

Each expectation is computed here from the published numbers (written out below, with where they come from),
not from the model's parameters: the tests fail if a data file or a cost rule drifts from the documentation.
"""

from __future__ import annotations

import ml_dtypes
import nki
import numpy as np
import pytest
from perf_helpers import TraceBuilder

from nkieval.examples import kernels as ex
from nkieval.hardware import get_target
from nkieval.perf import estimate
from nkieval.perf.costs import cost_of
from nkieval.perf.params import load_params

LANES = 128  # A2/A3: 128 partitions, one Vector/Scalar lane each
MIN_II = 64  # B1I: Vector/Scalar instructions cost max(MIN_II, N)
# Vector engine clock (GHz) and data-path width in elements per cycle: (other dtypes, BF16/FP16)
VECTOR = {"trn1": (1.12, 128, 128),  # A2: 1.12 GHz, 128 elements/cycle in and out
          "trn2": (0.96, 256, 512),  # A3 compute-engine table: 0.96 GHz, 256 (512 BF16/FP16)
          "trn3": (1.2, 256, 512)}  # A4: 1.2 GHz, 256 (512 BF16/FP16/FP8)
SCALAR_GHZ = {"trn1": 1.4, "trn2": 1.2, "trn3": 1.2}  # A2/A3/A4: 128 elements/cycle on v2/v3


def _ns(rec, target: str) -> float:
    cost, ok = cost_of(rec, load_params(get_target(target)))
    assert ok
    return cost.occ


def _two_input(opcode: str, target: str, dtype: str, n: int, **attrs):
    b = TraceBuilder(target)
    x, y, z = (b.alloc("sbuf", (128, n), dtype) for _ in range(3))
    roles = {"tensor_tensor": ("data1", "data2"), "scalar_tensor_tensor": ("data", "operand1"),
             "tensor_tensor_scan": ("data0", "data1")}[opcode]
    return b.rec(opcode, "vector", [b.op(z, "dst", "w"), b.op(x, roles[0], "r"), b.op(y, roles[1], "r")], **attrs)


def _documented_two_stream_cycles(target: str, dtype: str, n: int) -> float:
    """Two N-element streams through the documented read width, at one element per lane per cycle at best."""
    _, width_other, width_16 = VECTOR[target]
    width = width_16 if dtype in ("bfloat16", "float16") else width_other
    return max(MIN_II, n, 2 * n * LANES / width)


@pytest.mark.parametrize("target", ["trn1", "trn2", "trn3"])
@pytest.mark.parametrize("opcode,attrs", [("tensor_tensor", {"op": "maximum"}),
                                          ("scalar_tensor_tensor", {"op0": "add", "op1": "maximum"}),
                                          ("tensor_tensor_scan", {"op0": "multiply", "op1": "add"})])
@pytest.mark.parametrize("n", [32, 512, 4096])
def test_two_input_fp32_vector_cost_follows_the_documented_read_width(target: str, opcode: str, attrs: dict,
                                                                      n: int) -> None:
    ghz = VECTOR[target][0]
    expect = _documented_two_stream_cycles(target, "float32", n) / ghz
    assert _ns(_two_input(opcode, target, "float32", n, **attrs), target) == pytest.approx(expect)


def test_two_input_fp32_is_2n_on_trn1_and_n_on_trn2() -> None:
    """The figures the issue names: NeuronCore-v2 charges 2N (B1I); the 256-wide NeuronCore-v3 data path, N."""
    n = 2048
    t1 = _ns(_two_input("tensor_tensor", "trn1", "float32", n, op="add"), "trn1")
    t2 = _ns(_two_input("tensor_tensor", "trn2", "float32", n, op="add"), "trn2")
    assert t1 == pytest.approx(2 * n / 1.12)
    assert t2 == pytest.approx(n / 0.96)


@pytest.mark.parametrize("op,nc_v2_cycles", [("add", 1), ("maximum", 2)])
def test_trn2_bf16_tensor_tensor_is_half_the_neuroncore_v2_cost(op: str, nc_v2_cycles: int) -> None:
    """A3: the 2x mode of a BF16 SBUF tensor_tensor doubles NeuronCore-v2's throughput (B1I: N for bf16
    add/subtract/multiply, 2N otherwise)."""
    n = 4096
    rec = _two_input("tensor_tensor", "trn2", "bfloat16", n, op=op)
    cost, _ = cost_of(rec, load_params(get_target("trn2")))
    assert cost.mode == "2x"
    assert cost.occ == pytest.approx(nc_v2_cycles * n / 2 / 0.96)


def test_trn2_tensor_tensor_with_a_psum_input_gets_no_perf_mode() -> None:
    b = TraceBuilder("trn2")
    x = b.alloc("sbuf", (128, 1024))
    ps = b.alloc("psum", (128, 1024))
    z = b.alloc("sbuf", (128, 1024))
    rec = b.rec("tensor_tensor", "vector", [b.op(z, "dst", "w"), b.op(x, "data1", "r"), b.op(ps, "data2", "r")],
                op="multiply")
    assert _ns(rec, "trn2") == pytest.approx(1024 / 0.96)  # B1I: N with one input in PSUM


@pytest.mark.parametrize("target", ["trn1", "trn2"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_scalar_engine_one_input_is_one_element_per_lane_per_cycle(target: str, dtype: str) -> None:
    """A2/A3: ScalarE moves 128 elements per cycle for every dtype (no 2x mode before NeuronCore-v4)."""
    b = TraceBuilder(target)
    src = b.alloc("sbuf", (128, 2048), dtype)
    dst = b.alloc("sbuf", (128, 2048), dtype)
    rec = b.rec("activation", "scalar", [b.op(dst, "dst", "w"), b.op(src, "data", "r")], op="exp")
    assert _ns(rec, target) == pytest.approx(2048 / SCALAR_GHZ[target])


def test_two_stream_rule_leaves_gpsimd_at_2n() -> None:
    """No documented data-path width for GpSimd: its two-input ops keep the B1I 2N."""
    b = TraceBuilder("trn2")
    x, y, z = (b.alloc("sbuf", (128, 512), "int32") for _ in range(3))
    rec = b.rec("tensor_tensor", "gpsimd", [b.op(z, "dst", "w"), b.op(x, "data1", "r"), b.op(y, "data2", "r")],
                op="add")
    assert _ns(rec, "trn2") == pytest.approx(2 * 512 / 1.2)


# -- HFU / MFU against the peak of the dtype used ------------------------------------------------------------
PE_FLOPS_PER_NS_BF16_TRN2 = 2 * 128 * 128 * 2.4  # A3: 128x128 PE array at 2.4 GHz (79 TFLOPS BF16)
FP32_RATE = 1 / 4  # A3: 20 FP32 TFLOPS of the 79 BF16 (B1I: fp32 matmul costs x4)


@pytest.mark.parametrize("dtype,peak", [("float32", PE_FLOPS_PER_NS_BF16_TRN2 * FP32_RATE),
                                        ("bfloat16", PE_FLOPS_PER_NS_BF16_TRN2)])
def test_hfu_divides_by_the_peak_of_the_dtype_used(dtype: str, peak: float) -> None:
    np_dtype = np.float32 if dtype == "float32" else ml_dtypes.bfloat16
    a_t = np.ones((256, 128), dtype=np_dtype)
    b = np.ones((256, 512), dtype=np_dtype)
    nki.simulate(ex.matmul_bf16, target="trn2")(a_t, b)
    s = estimate(nki.last_result().trace, "trn2").summary
    flops = 2 * 256 * 128 * 512
    assert s["hardware_flops"] == flops
    assert s["hfu_estimated_percent"] == pytest.approx(100 * flops / (s["total_time_ns"] * peak))
    assert s["mfu_estimated_percent"] == pytest.approx(100 * flops / (s["total_time_ns"] * peak))
    assert s["hfu_bf16_peak_percent"] == pytest.approx(100 * flops / (s["total_time_ns"] * PE_FLOPS_PER_NS_BF16_TRN2))
