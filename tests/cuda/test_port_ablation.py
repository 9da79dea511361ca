"""The port's side of a GPU-vs-port difference (review/stages/port_ablate.py; differential.py's
``_explain_differences``): the port's recorded program replayed with one of the simulator's rounding sources
removed at a time (``SimOptions.exact``, on-chip low-precision tiles widened).

The ports are NKI kernels of our own, each with one known source of difference from its "GPU" result (computed
here with NumPy as a GPU kernel would): an intermediate rounded to bf16, an fp32 exp that is not correctly
rounded, an fp32 matmul against a contraction rounded once, an fp32 row sum against one rounded once, a
multiply-add rounded after each operation against an FMA."""

from __future__ import annotations

import numpy as np
import pytest

import nkieval.frontends

nkieval.frontends.install(force=True)

import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402

from nkieval.cuda.ablate import named, shares  # noqa: E402
from nkieval.review.runs import SandboxLimits  # noqa: E402
from nkieval.review.stages.differential import _cause_sentence  # noqa: E402
from nkieval.review.stages.port_ablate import PORT_WHAT, port_ablations, port_runs, widened_program  # noqa: E402
from nkieval.sim.options import SimOptions  # noqa: E402
from nkieval.sim.program import ArgSpec, record_program  # noqa: E402

P, F = 128, 64


def k_bf16_intermediate(x):
    """``(x * 1.7) * 1.3`` with the product kept in a bf16 tile."""
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    mid = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.activation(dst=mid, op=nl.copy, data=t, scale=1.7)
    nisa.activation(dst=t, op=nl.copy, data=mid, scale=1.3)
    nisa.dma_copy(dst=out, src=t)
    return out


def k_exp(x):
    """``exp(x)`` on the Scalar engine."""
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.activation(dst=t, op=nl.exp, data=t)
    nisa.dma_copy(dst=out, src=t)
    return out


def k_matmul(a, b):
    """``a.T @ b`` (K = 128) in one fp32 matmul."""
    out = nl.ndarray((a.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    ta = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
    tb = nl.ndarray(b.shape, dtype=nl.float32, buffer=nl.sbuf)
    acc = nl.ndarray((a.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.psum)
    res = nl.ndarray((a.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=ta, src=a)
    nisa.dma_copy(dst=tb, src=b)
    nisa.nc_matmul(dst=acc, stationary=ta, moving=tb)
    nisa.tensor_copy(dst=res, src=acc)
    nisa.dma_copy(dst=out, src=res)
    return out


def k_row_sum(x):
    """Each row's sum on the Vector engine."""
    out = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    s = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.tensor_reduce(dst=s, op=nl.add, data=t, axis=1)
    nisa.dma_copy(dst=out, src=s)
    return out


def k_scale_bias(x, b):
    """``x * 1.3 + b`` in one scalar_tensor_tensor (the product rounded to fp32 before the sum)."""
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    tb = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.dma_copy(dst=tb, src=b)
    nisa.scalar_tensor_tensor(dst=t, data=t, op0=nl.multiply, operand0=1.3, op1=nl.add, operand1=tb)
    nisa.dma_copy(dst=out, src=t)
    return out


def _program(fn, *inputs: np.ndarray) -> str:
    rec = record_program(fn, [ArgSpec(a.shape, a.dtype.name) for a in inputs], {}, target="trn2")
    return rec.program.to_json()


def _cases() -> dict[str, tuple[object, list[np.ndarray], np.ndarray]]:
    """Per kernel: the kernel, its inputs and the "GPU" result (what the port would give without its cause)."""
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((P, F)) * 3).astype(np.float32)
    a = rng.standard_normal((P, F)).astype(np.float32)
    b = rng.standard_normal((P, F)).astype(np.float32)
    w = (rng.standard_normal((P, 2048)) + 1).astype(np.float32)  # (a long row: its fp32 sum rounds many times)
    return {
        "bf16": (k_bf16_intermediate, [x], (x * np.float32(1.7)) * np.float32(1.3)),
        "exp": (k_exp, [x], np.exp(x.astype(np.float64)).astype(np.float32)),  # (correctly rounded)
        "matmul": (k_matmul, [a, b], (a.astype(np.float64).T @ b.astype(np.float64)).astype(np.float32)),
        "sum": (k_row_sum, [w], w.astype(np.float64).sum(axis=1, keepdims=True).astype(np.float32)),
        # (a GPU's fmaf(x, 1.3f, b): one rounding)
        "fma": (k_scale_bias, [x, a], (x.astype(np.float64) * np.float32(1.3) + a).astype(np.float32)),
    }


def _port_shares(kernel: object, inputs: list[np.ndarray], gpu: np.ndarray) -> dict[str, float]:
    text = _program(kernel, *inputs)
    args = {f"a{k}": v for k, v in enumerate(inputs)}
    port = port_runs(text, args, {}, "trn2", [np.zeros(1, np.float32)], [], SandboxLimits())
    assert port == {}  # (no ablation asked: nothing replayed)
    variants = port_ablations(text)
    from nkieval.sim.program import Program, replay_program

    own = np.asarray(replay_program(Program.from_json(text), inputs, {}, target="trn2").outputs)
    runs = port_runs(text, args, {}, "trn2", [own], variants, SandboxLimits(), budget_s=30.0)
    assert set(runs) == {a.name for a in variants}
    got = shares(own, gpu, {n: o[0] for n, o in runs.items()})
    assert got is not None
    return got


@pytest.fixture(scope="module")
def attributions() -> dict[str, dict[str, float]]:
    return {name: _port_shares(*case) for name, case in _cases().items()}


@pytest.mark.parametrize(("kernel", "cause"), [("bf16", "port_precision"), ("exp", "port_functions"),
                                               ("matmul", "port_matmul"), ("sum", "port_reduce"),
                                               ("fma", "port_alu")])
def test_the_port_s_known_source_of_difference_is_named(attributions: dict[str, dict[str, float]], kernel: str,
                                                        cause: str) -> None:
    got = attributions[kernel]
    causes = named(got)
    assert causes and causes[0][0] == cause and causes[0][1] > 0.99, got
    assert all(abs(v) < 0.05 for k, v in got.items() if k != cause), got


def test_the_port_attribution_does_not_always_name_the_same_cause(attributions: dict[str, dict[str, float]]) -> None:
    tops = {kernel: named(got)[0][0] for kernel, got in attributions.items()}
    assert len(set(tops.values())) == 5, tops


def test_the_port_ablations_offered_follow_the_program() -> None:
    cases = _cases()
    offered = {name: [a.name for a in port_ablations(_program(k, *inp))] for name, (k, inp, _g) in cases.items()}
    assert offered == {"bf16": ["port_precision"], "exp": ["port_functions"], "matmul": ["port_matmul"],
                       "sum": ["port_reduce"], "fma": ["port_alu"]}


def test_the_widened_program_keeps_the_hbm_tensors_and_rescales_the_tiles() -> None:
    x = np.zeros((P, F), np.float32)
    text = _program(k_bf16_intermediate, x)
    wide = widened_program(text)
    assert wide is not None and "bfloat16" in text and "bfloat16" not in wide
    assert widened_program(_program(k_exp, x)) is None  # (no low-precision tile: nothing to widen)
    # (the bf16 tile's views: 2-byte strides become 4-byte ones)
    assert f"[{P},{F}],[{2 * F},2]]" in text.replace(" ", "") and f"[{P},{F}],[{4 * F},4]]" in wide


def test_exact_names_only_known_sources() -> None:
    assert SimOptions(exact=frozenset({"functions", "alu", "matmul"})).exact == {"functions", "alu", "matmul"}
    with pytest.raises(ValueError):
        SimOptions(exact=frozenset({"everything"}))


def test_the_sentence_names_each_cause_with_its_side() -> None:
    what = {"accumulation": "fp32 accumulation (order and rounding)", **PORT_WHAT}
    line = _cause_sentence([("port_matmul", 0.6), ("accumulation", 0.3), ("port_functions", 0.01)], what, "c",
                           set(PORT_WHAT))
    assert line.startswith("the difference comes from the port's fp32 matmul contraction (60%) and the GPU's fp32 "
                           "accumulation (order and rounding) (30%)")
    assert "the port's fp32 activation functions (exp, rsqrt, ...) 1%" in line
    none = _cause_sentence([("accumulation", 0.1), ("port_matmul", 0.05)], what, "c", set(PORT_WHAT))
    assert "neither side's ablated roundings alone" in none and "from the port's run each of fp32 matmul" in none
    gpu_only = _cause_sentence([("accumulation", 0.1)], what, "c")
    assert "comes from the port's side: removing from the GPU run each of" in gpu_only


@pytest.mark.slow
def test_the_review_s_envelope_line_names_a_port_side_cause_and_a_gpu_side_one() -> None:
    """rmsnorm_gemm's expert port keeps its normalised rows in bf16 tiles for the matmul where the CUDA kernel
    keeps them in fp32 registers: widening the port's tiles removes the difference. gelu's port evaluates gelu in
    one rounding where the CUDA kernel rounds erff, a sum and two products in fp32: the GPU's fp32 arithmetic."""
    from nkieval.review.pipeline import review
    from nkieval.tasks.loader import load_task

    tops = {}
    for task_id, cause, phrase in (("rmsnorm_gemm", "port_precision", "the port's bf16/fp8 intermediates"),
                                   ("gelu", "fp32_arithmetic", "the GPU's fp32 arithmetic")):
        task = load_task(task_id)
        r = review(task_id, str(task.solution_file), seed=5, compare_references=False)
        mig = next(c for c in r.criteria if c.id == "migration")
        line = next(f for f in mig.feedback if "expected envelope" in f.observed)
        top = line.evidence["envelope_causes"][0]
        assert top["ablation"] == cause and top["share"] > 0.5, line.evidence["envelope_causes"]
        assert f"the difference comes from {phrase}" in line.observed
        tops[task_id] = (top["ablation"], top["side"])
    assert tops["rmsnorm_gemm"][1] == "port" and tops["gelu"][1] == "gpu"
