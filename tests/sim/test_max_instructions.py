"""SimOptions.max_instructions: a runaway kernel stops at the limit with rule instruction-budget."""

import time

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

from nkieval.review.sandbox import CaseJob, SandboxLimits, run_candidate
from nkieval.sim.errors import RULES, NkiValidationError
from nkieval.sim.options import SimOptions

X = np.ones((128, 8), np.float32)


def k_copies(a, n):
    """1 load, ``n`` copies, 1 store: n + 2 instructions."""
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    for _ in range(n):
        nisa.tensor_copy(dst=t, src=t)
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_rule_is_catalogued():
    assert "instruction-budget" in RULES


def test_at_the_limit_runs_one_more_fails_with_the_rule():
    out = nki.simulate(k_copies, options=SimOptions(max_instructions=12))(X, 10)  # exactly 12 instructions
    assert np.array_equal(out, X)
    with pytest.raises(NkiValidationError) as info:
        nki.simulate(k_copies, options=SimOptions(max_instructions=12))(X, 11)
    e = info.value
    assert e.rule == "instruction-budget"
    assert "more than 12 instructions" in str(e)
    assert e.instruction == "dma_copy"  # the 13th instruction is the store


def test_counted_without_a_trace_too():
    with pytest.raises(NkiValidationError, match=r"\[rule instruction-budget\]"):
        nki.simulate(k_copies, options=SimOptions(max_instructions=5, record_trace=False))(X, 10)


def test_default_is_unlimited_and_bad_values_are_refused():
    assert SimOptions().max_instructions is None
    nki.simulate(k_copies)(X, 50)
    for bad in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match="max_instructions"):
            SimOptions(max_instructions=bad)


def test_review_sandbox_reports_instruction_limit_without_waiting_for_the_timeout():
    src = ("import nki\nimport nki.isa as nisa\nimport nki.language as nl\n\n@nki.jit\ndef vector_add(a, b):\n"
           "    t = nl.ndarray((1, a.shape[0]), dtype=a.dtype, buffer=nl.sbuf)\n"
           "    nisa.dma_copy(dst=t, src=a.reshape((1, a.shape[0])))\n"
           "    while True:\n        nisa.tensor_copy(dst=t, src=t)\n")
    case = CaseJob("c", {"a": np.ones(16, np.float32), "b": np.ones(16, np.float32)}, {}, 1)
    t = time.monotonic()
    runs = run_candidate(src, "vector_add", [case], target="trn2",
                         limits=SandboxLimits(timeout_s=60, max_instructions=2000, startup_s=10))
    assert runs[0].status == "instruction-limit", runs[0].error
    assert runs[0].error.get("rule") == "instruction-budget"
    assert time.monotonic() - t < 30  # stopped by the budget, far before the 60 s timeout
