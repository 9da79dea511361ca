"""What keeps one task's audit within its time (issue 28, item 1): flash_attention_fwd's float64 oracle computes
only the causal half and serves `out` and `lse` from one evaluation per input; the review prepares a case's
later outputs' checks right after the first's; the audit asks the baseline and the non-migration flawed
candidates only about the task's tests (no kernel.cu)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from nkieval.review.stages.judge import oracle_of, output_oracles_of, task_code
from nkieval.tasks import load_task
from nkieval.tasks.audit.context import AuditContext
from nkieval.tasks.audit.runner import RunOutcome


def _dense_causal_attention(q_t, k_t, v):
    """The textbook formula over the full score matrix (what the blocked oracle must equal)."""
    q, k, vv = (np.asarray(a, np.float64) for a in (q_t, k_t, v))
    d, s = q.shape
    sc = q.T @ k / math.sqrt(d)
    sc[np.triu(np.ones((s, s), bool), 1)] = -np.inf
    m = sc.max(axis=1, keepdims=True)
    e = np.exp(sc - m)
    return e / e.sum(axis=1, keepdims=True) @ vv, np.log(np.exp(sc - m).sum(axis=1)) + m[:, 0]


@pytest.mark.parametrize("d,s", [(8, 1), (8, 7), (16, 600), (4, 1030)])  # 600, 1030: two and three query blocks
def test_the_blocked_flash_oracle_is_the_dense_causal_attention(d, s) -> None:
    task = load_task("flash_attention_fwd")
    oracle = oracle_of(task)
    lse = output_oracles_of(task, oracle)["lse"]
    rng = np.random.default_rng(s)
    q, k, v = rng.standard_normal((d, s)) * 4, rng.standard_normal((d, s)) * 4, rng.standard_normal((s, d))
    want_out, want_lse = _dense_causal_attention(q, k, v)
    np.testing.assert_allclose(oracle(q, k, v), want_out, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(lse(q, k, v), want_lse, rtol=1e-13, atol=1e-13)


def test_the_out_and_lse_oracles_share_one_evaluation_per_input() -> None:
    task = load_task("flash_attention_fwd")
    oracle = oracle_of(task)
    others = output_oracles_of(task, oracle)
    assert others["lse"].__globals__ is oracle.__globals__  # one run of reference.py
    ns = oracle.__globals__
    calls = []
    real = ns["_causal_attention"]
    ns["_causal_attention"] = lambda *a: calls.append(1) or real(*a)
    rng = np.random.default_rng(3)
    q, k, v = rng.standard_normal((8, 40)), rng.standard_normal((8, 40)), rng.standard_normal((40, 8))
    o = oracle(q, k, v)
    o[:] = 0  # a caller's change never reaches the kept result
    assert len(calls) == 1 and others["lse"](q, k, v).shape == (40,) and len(calls) == 1
    assert np.any(oracle(q, k, v) != 0) and len(calls) == 1
    oracle(q, k, v * 2)
    assert len(calls) == 2


def test_the_audit_prepares_every_output_check_from_one_oracle_evaluation_per_draw() -> None:
    # the reference check prefetches each case; `lse`'s check then costs no oracle evaluation of its own
    from nkieval.numerics.oracle_generic import GENERIC_DRAWS
    from nkieval.review.cache import CASE_CACHE, task_fingerprint
    from nkieval.review.stages.load import plan_cases

    full = load_task("flash_attention_fwd")
    shape = dataclasses.replace(full.public_shapes[0], dims={"D": 16, "S": 520})
    task = dataclasses.replace(full, shapes=(shape,), families=("normal",))
    _, oracle, _ = task_code(task, task_fingerprint(task))
    ns = oracle.__globals__
    calls = []
    real = ns["_causal_attention"]
    ns["_causal_attention"] = lambda *a: calls.append(1) or real(*a)
    try:
        ctx = AuditContext(task, 4242, task.default_target)
        assert len(ctx.prepared_checks()) == 1
    finally:
        ns["_causal_attention"] = real
    (c,) = plan_cases(task, 4242, task.families, "all")
    hit = CASE_CACHE.get((task_fingerprint(task), c.label, tuple(sorted(c.dims.items())), c.family, c.seed))
    assert hit is not None and "lse" in hit.extra_prepared and hit.extra_prepared["lse"][0] is not None
    assert len(calls) == 1 + GENERIC_DRAWS  # out's evaluation and draws; lse's were all served by them


def test_the_baseline_and_non_migration_flawed_candidates_are_reviewed_without_kernel_cu(monkeypatch) -> None:
    from nkieval.tasks.audit import flawed, hardware

    task = load_task("gemm_bf16")
    assert task.cuda_file is not None and task.baseline_file is not None and task.flawed
    ctx = AuditContext(task, 0, task.default_target)
    seen: dict[str, object] = {}

    def fake_run(label, source, *, task=None, **kw):  # records what each review would be given
        seen.setdefault(label, task)
        return RunOutcome(label, "pass", True, True, levels={"correctness": 4, "numerics": 4})

    monkeypatch.setattr(ctx, "run", fake_run)
    hardware.audit(ctx, all_targets=False)
    assert seen["expert"] is None  # the expert's review keeps its differential check
    assert seen["baseline"].cuda_file is None  # type: ignore[attr-defined]
    flawed.audit(ctx)
    for fl in task.flawed:
        t = seen[f"flawed:{fl.file}"]
        assert (t is None) if fl.criterion == "migration" else (t.cuda_file is None)  # type: ignore[attr-defined]


def test_later_oracles_come_from_reference_py_even_when_the_first_is_defined_elsewhere() -> None:
    task = load_task("flash_attention_fwd")
    oracle = oracle_of(task)
    foreign = lambda *a: oracle(*a)  # noqa: E731  (a function whose globals are this test module's)
    others = output_oracles_of(task, foreign)
    assert set(others) == {"lse"} and others["lse"].__globals__ is not oracle.__globals__
    assert others["lse"].__globals__["__file__"] == str(task.reference_file)
