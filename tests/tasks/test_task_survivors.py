"""Surviving mutants and hazard families of built-in tasks (issue 28): each test computes a mutated formula with
NumPy, in the precision a kernel would use, and holds it against the task's own reference and tolerance on the
task's own cases. A fix is shown to be what kills the mutant: the mutant fails the new family (or the new
tolerance) and passes every old family (or the old tolerance); a correct computation passes everywhere."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator

import ml_dtypes
import numpy as np
import pytest

from nkieval.review.stages.load import case_inputs, plan_cases
from nkieval.tasks import load_task
from nkieval.tasks.audit import coverage
from nkieval.tasks.audit.context import AuditContext
from nkieval.tasks.loader import load_reference
from nkieval.tasks.schema import Task


def _cases(task: Task) -> Iterator[tuple[str, dict[str, np.ndarray], np.ndarray]]:
    """(family, inputs, reference's first output) for every shape and family of the task, seed 0."""
    ref_fn = load_reference(task)
    for fam in task.families:
        for c in plan_cases(task, 0, (fam,), "all"):
            ins = case_inputs(task, c)
            ref = ref_fn(**ins, **task.params)
            yield fam, ins, np.asarray(ref[0] if isinstance(ref, tuple) else ref, np.float64)


def _ratio(got: np.ndarray, ref: np.ndarray, rtol: float, atol: float) -> float:
    """The largest error as a fraction of the tolerance (above 1 fails); inf for a non-finite result."""
    got = np.asarray(got, np.float64)
    if not np.isfinite(got).all():
        return float("inf")
    return float(np.max(np.abs(got - ref) / (atol + rtol * np.abs(ref))))


def _worst_by_family(task: Task, fn, rtol: float | None = None, atol: float | None = None) -> dict[str, float]:
    rtol = task.rtol if rtol is None else rtol
    atol = task.atol if atol is None else atol
    worst: dict[str, float] = {}
    for fam, ins, ref in _cases(task):
        with np.errstate(all="ignore"):
            worst[fam] = max(worst.get(fam, 0.0), _ratio(fn(ins, task.params), ref, rtol, atol))
    return worst


# --- router_topk: `offset` logits (100 + N(0, 1)) --------------------------------------------------------------

def _router_weights(ins, params, shift: str) -> np.ndarray:
    """Top-8 renormalised weights in fp32, the exponent's argument shifted as a kernel might get it wrong."""
    x = np.asarray(ins["logits"], np.float32)
    idx = np.argsort(-x, axis=1, kind="stable")[:, :8]
    top = np.take_along_axis(x, idx, axis=1)
    arg = {"minus_max": top - top[:, :1], "plus_max": top + top[:, :1], "none": top}[shift]
    e = np.exp(arg)
    return e / e.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("shift", ["plus_max", "none"])
def test_router_topk_offset_logits_reject_a_softmax_shift_that_overflows(shift: str) -> None:
    task = load_task("router_topk")
    assert "offset" in task.families
    worst = _worst_by_family(task, lambda i, p: _router_weights(i, p, shift))
    assert worst["offset"] > 1.0, worst  # exp(top + top[0]) (or exp(top)) overflows fp32 at logits ~100
    assert all(v <= 1.0 for f, v in worst.items() if f != "offset"), worst  # and passes every other family
    correct = _worst_by_family(task, lambda i, p: _router_weights(i, p, "minus_max"))
    assert all(v <= 0.1 for v in correct.values()), correct  # the max-subtracted fp32 softmax passes everywhere


# --- moe_expert_block: `offset` activations and router (100 + N(0, 1)) ------------------------------------------

def _moe_fp32(ins, params, subtract_max: bool = True) -> np.ndarray:
    """The block computed in fp32 (bf16 inputs are exact there); the top-2 gates exp(l - max) / sum, or without
    the maximum."""
    f = lambda a: np.asarray(a, np.float32)  # noqa: E731
    x = f(ins["x_t"]).T
    logits = x @ f(ins["router_w"])
    order = np.argsort(-logits, axis=1, kind="stable")[:, :2]
    top = np.take_along_axis(logits, order, axis=1)
    e = np.exp(top - top[:, :1] if subtract_max else top)
    g = e / e.sum(axis=1, keepdims=True)
    out = np.zeros((x.shape[0], x.shape[1]), np.float32)
    for k in range(f(ins["w1"]).shape[0]):
        weight = (g * (order == k)).sum(axis=1)
        h = x @ f(ins["w1"])[k]
        out += weight[:, None] * ((h / (1 + np.exp(-h))) @ f(ins["w2"])[k])
    return out


def test_moe_offset_inputs_reject_gates_without_max_subtraction() -> None:
    task = load_task("moe_expert_block")
    assert "offset" in task.families
    worst = _worst_by_family(task, lambda i, p: _moe_fp32(i, p, subtract_max=False))
    assert worst["offset"] > 1.0 and worst["normal"] <= 1.0, worst  # logits of ~2.5e6 overflow exp; ~20 do not
    correct = _worst_by_family(task, _moe_fp32)
    assert max(correct.values()) <= 0.1, correct  # the max-subtracted fp32 block passes on both


# --- decoder_decode_step: the tolerance, not a family, let the softmax scale x 1.01 through -------------------

def _decode(ins, params, dtype=np.float32, scale_mul: float = 1.0) -> np.ndarray:
    """The decode step computed in ``dtype`` throughout (the task's fp32 intermediates), the score scale times
    ``scale_mul``."""
    f = lambda a: np.asarray(a, dtype)  # noqa: E731
    x = f(ins["x"])
    b = x.shape[0]
    h, dh = ins["k_cache"].shape[2], ins["k_cache"].shape[3]
    hn = x / np.sqrt((x * x).mean(axis=1, keepdims=True) + dtype(params["eps"])) * f(ins["gamma"])
    q, k, v = ((hn @ f(ins[w])).reshape(b, h, dh) for w in ("wq", "wk", "wv"))

    def rope(z):
        return z * f(ins["cos"])[:, None, :] + np.concatenate([z[..., dh // 2:], z[..., :dh // 2]], -1) * \
            f(ins["sin"])[:, None, :]

    q, k = rope(q), rope(k)
    kk = np.concatenate([f(ins["k_cache"]), k[:, None]], axis=1)
    vv = np.concatenate([f(ins["v_cache"]), v[:, None]], axis=1)
    sc = np.einsum("bhd,bshd->bhs", q, kk) * dtype(scale_mul / math.sqrt(dh))
    p = np.exp(sc - sc.max(axis=2, keepdims=True))
    p /= p.sum(axis=2, keepdims=True)
    return x + np.einsum("bhs,bshd->bhd", p, vv).reshape(b, h * dh) @ f(ins["wo"])


def test_decoder_tolerance_rejects_the_softmax_scale_off_by_one_percent() -> None:
    task = load_task("decoder_decode_step")
    mutant = lambda i, p: _decode(i, p, np.float64, scale_mul=1.01)  # noqa: E731
    assert max(_worst_by_family(task, mutant).values()) > 1.0  # rejected by the task's tolerance
    assert max(_worst_by_family(task, mutant, rtol=1e-2, atol=1.0).values()) <= 1.0  # the old one admitted it
    fp32 = _worst_by_family(task, _decode)  # a correct kernel with fp32 intermediates passes with room to spare
    assert max(fp32.values()) <= 0.25, fp32


# --- rmsnorm_gemm: rtol 5e-2 admitted a mean of squares off by 1% -----------------------------------------------

def _rmsnorm_gemm(ins, params, ms_mul: float = 1.0, gamma_bf16: bool = False) -> np.ndarray:
    """The kernel the statement allows: normalised activations rounded to bf16, accumulated exactly."""
    bf = lambda a: np.asarray(a, np.float32).astype(ml_dtypes.bfloat16).astype(np.float64)  # noqa: E731
    x = np.asarray(ins["x"], np.float64)
    gamma = bf(ins["gamma"]) if gamma_bf16 else np.asarray(ins["gamma"], np.float64)
    r = 1.0 / np.sqrt((x * x).mean(axis=1, keepdims=True) * ms_mul + params["eps"])
    return bf(x * r * gamma) @ np.asarray(ins["w"], np.float64)


def test_rmsnorm_gemm_tolerance_rejects_a_mean_of_squares_off_by_one_percent() -> None:
    task = load_task("rmsnorm_gemm")
    mutant = lambda i, p: _rmsnorm_gemm(i, p, ms_mul=1.01)  # noqa: E731
    worst = _worst_by_family(task, mutant)
    assert worst["offset"] > 1.0, worst  # a 0.5% scale error on one-signed outputs of ~1e7
    assert max(_worst_by_family(task, mutant, rtol=5e-2, atol=1.0).values()) <= 1.0  # the old tolerance
    correct = _worst_by_family(task, _rmsnorm_gemm)
    assert max(correct.values()) <= 0.5, correct  # bf16 activations, which the statement allows, pass


def test_rmsnorm_gemm_gamma_in_bf16_is_within_the_allowed_precision() -> None:
    """The documented equivalence: gamma rounded to bf16 adds one more rounding of the size the statement allows
    (bf16 activations), so no tolerance that passes every correct bf16 kernel can reject it."""
    task = load_task("rmsnorm_gemm")
    assert max(_worst_by_family(task, lambda i, p: _rmsnorm_gemm(i, p, gamma_bf16=True)).values()) <= 1.0


# --- Coverage: the five tasks the criterion flagged ------------------------------------------------------------

@pytest.mark.parametrize("tid", ["moe_expert_block", "llama_mlp_fp8", "chunked_linear_attention", "router_topk"])
def test_flagged_tasks_now_reach_their_hazard(tid: str) -> None:
    task = load_task(tid)
    rules = {f.rule for f in coverage.audit(task).findings}
    assert "hazard-family-missing" not in rules
    bare = dataclasses.replace(task, families=("normal",))
    assert "hazard-family-missing" in {f.rule for f in coverage.audit(bare).findings}


def test_offset_logits_reach_the_softmax_hazard_but_uniform_ones_do_not() -> None:
    task = load_task("router_topk")
    for fams, flagged in [(("normal", "offset"), False), (("normal", "large"), False), (("normal", "uniform"), True)]:
        rules = {f.rule for f in coverage.audit(dataclasses.replace(task, families=fams)).findings}
        assert ("hazard-family-missing" in rules) is flagged, fams


def test_decoder_normal_family_reaches_the_overflow_its_no_max_variant_names() -> None:
    """The decoder's scores q . k / sqrt(Dh) of projected N(0, 1) activations run to hundreds, so its declared
    no-max-subtraction formula overflows on the normal family: the criterion records the hazard as reached (a
    `large` family would scale the scores by 40^4 and leave even an fp32-exact kernel outside any useful
    tolerance). On the one-token shape alone (scores near 0) the variant stays finite and the warning stands."""
    task = load_task("decoder_decode_step")
    assert "large" not in task.families and "offset" not in task.families
    res = coverage.audit(task, AuditContext(task, 0, task.default_target))
    assert {f.rule for f in res.findings} & {"hazard-family-missing", "hazard-reached-by-variant"} == \
        {"hazard-reached-by-variant"}
    assert "hazard-family-missing" in {f.rule for f in coverage.audit(task).findings}  # no cases: not shown
    one = dataclasses.replace(task, shapes=tuple(s for s in task.shapes if s.dims["S"] == 1))
    assert "hazard-family-missing" in {f.rule for f in coverage.audit(one, AuditContext(one, 0, one.default_target)).findings}


# --- softmax tasks: a row maximum kept in bf16 survived every family (`far_offset`, 1e5 + N(0, 1)) --------------

def _bf16(a: np.ndarray) -> np.ndarray:
    return np.asarray(a, np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)


def _softmax_rows(ins, params, task_id: str, bf16_max: bool) -> np.ndarray:
    """The task's softmax in fp32, with the negated row maximum stored in bf16 (as the surviving mutants do) or in
    fp32 (as the experts do)."""
    keep_max = _bf16 if bf16_max else (lambda a: np.asarray(a, np.float32))
    x = np.asarray(ins["x"], np.float32)
    if task_id == "scaled_masked_softmax":
        n, s = x.shape
        keep = np.arange(s)[None, :] <= np.arange(n)[:, None] + (s - n)
        x = np.where(keep, x, np.float32(-3e38))
        scale = np.float32(params["scale"])
        nb = keep_max(keep_max(-x.max(axis=1, keepdims=True)) * scale)
        e = np.where(keep, np.exp(x * scale + nb), np.float32(0))
        return e / e.sum(axis=1, keepdims=True)
    nb = keep_max(-x.max(axis=1, keepdims=True))
    e = np.exp(x + nb)
    if task_id == "log_softmax":
        return x + nb - np.log(e.sum(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("tid", ["log_softmax", "row_softmax", "scaled_masked_softmax"])
def test_far_offset_logits_reject_a_row_maximum_kept_in_bf16(tid: str) -> None:
    """bf16(max) is off by up to 2^-9 x 1e5 ~ 200 on far_offset logits, so exp(x - max) overflows (or every term
    underflows); on every other family the error is a shift the softmax cancels. The fp32 maximum is exact
    there (a difference of nearby fp32 values), so a correct kernel passes."""
    task = load_task(tid)
    assert "far_offset" in task.families
    worst = _worst_by_family(task, lambda i, p: _softmax_rows(i, p, tid, bf16_max=True))
    assert worst["far_offset"] > 1.0, worst
    assert all(v <= 1.0 for f, v in worst.items() if f != "far_offset"), worst
    correct = _worst_by_family(task, lambda i, p: _softmax_rows(i, p, tid, bf16_max=False))
    assert all(v <= 0.5 for v in correct.values()), correct
