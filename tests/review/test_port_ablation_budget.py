"""The port ablations' budget (review/stages/port_ablate.py): which of the port's replays a review runs is decided by
a model of their cost (the program's instruction count, its case's elements), never by a clock, so the same
candidate, task and seed get the same report on any machine and under any load."""

from __future__ import annotations

import time

import numpy as np
import pytest

import nkieval.frontends

nkieval.frontends.install(force=True)

import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402

from nkieval.review.runs import SandboxLimits  # noqa: E402
from nkieval.review.stages import port_ablate  # noqa: E402
from nkieval.review.stages.port_ablate import port_ablations, port_runs, replay_cost_s  # noqa: E402
from nkieval.sim.program import ArgSpec, record_program  # noqa: E402


def k_three_sources(x, b):
    """exp, then a bf16 intermediate, then ``x * 1.3 + b`` in one instruction: three port ablations to offer."""
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    tb = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    mid = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.dma_copy(dst=tb, src=b)
    nisa.activation(dst=mid, op=nl.exp, data=t)
    nisa.activation(dst=t, op=nl.copy, data=mid)
    nisa.scalar_tensor_tensor(dst=t, data=t, op0=nl.multiply, operand0=1.3, op1=nl.add, operand1=tb)
    nisa.dma_copy(dst=out, src=t)
    return out


@pytest.fixture(scope="module")
def program() -> tuple[str, dict[str, np.ndarray], list[np.ndarray]]:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((128, 64)).astype(np.float32)
    b = rng.standard_normal((128, 64)).astype(np.float32)
    text = record_program(k_three_sources, [ArgSpec(x.shape, "float32"), ArgSpec(b.shape, "float32")], {},
                          target="trn2").program.to_json()
    return text, {"x": x, "b": b}, [np.zeros((128, 64), np.float32)]


def test_the_program_offers_three_ablations(program: tuple) -> None:
    assert [a.name for a in port_ablations(program[0])] == ["port_precision", "port_functions", "port_alu"]


def test_a_slow_clock_changes_nothing(program: tuple, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the CPU clocks running 1,000 s per read (a machine under any load), the same ablations run. (The wall
    clocks are left alone: the replays' own time limit, a safety net, reads them.)"""
    text, inputs, like = program
    variants = port_ablations(text)
    normal = port_runs(text, inputs, {}, "trn2", like, variants, SandboxLimits())
    ticks = iter(range(0, 10**9, 1000))
    for clock in ("thread_time", "process_time"):
        monkeypatch.setattr(time, clock, lambda: float(next(ticks)))
    slow = port_runs(text, inputs, {}, "trn2", like, variants, SandboxLimits())
    assert sorted(normal) == sorted(slow) == sorted(a.name for a in variants)
    for name in normal:
        for a, b in zip(normal[name], slow[name]):
            np.testing.assert_array_equal(a, b)


def test_the_budget_counts_the_modelled_cost(program: tuple) -> None:
    """The first ablation always runs; the next ones while the modelled seconds spent are below the budget."""
    text, inputs, like = program
    variants = port_ablations(text)
    elements = sum(v.size for v in inputs.values()) + sum(v.size for v in like)
    one = replay_cost_s(text, 6, elements)
    assert one == pytest.approx(6 * port_ablate.REPLAY_S_PER_INSTRUCTION + elements * port_ablate.REPLAY_S_PER_ELEMENT)
    got = [sorted(port_runs(text, inputs, {}, "trn2", like, variants, SandboxLimits(), budget_s=k * one - one / 2,
                            n_instructions=6)) for k in (1, 2, 3)]
    names = [a.name for a in variants]
    assert got == [sorted(names[:1]), sorted(names[:2]), sorted(names[:3])]
    # a port run of many instructions on the case (a device loop's iterations), one replay over the budget: that
    # replay only
    many = int(1.5 * port_ablate.PORT_ABLATION_BUDGET_S / port_ablate.REPLAY_S_PER_INSTRUCTION)
    assert port_ablate.PORT_ABLATION_BUDGET_S < replay_cost_s(text, many, elements) < port_ablate.MAX_REPLAY_S
    assert len(port_runs(text, inputs, {}, "trn2", like, variants, SandboxLimits(), n_instructions=many)) == 1


def test_an_unknown_count_is_the_programs_instruction_events(program: tuple) -> None:
    text = program[0]
    assert replay_cost_s(text, None, 0) == pytest.approx(6 * port_ablate.REPLAY_S_PER_INSTRUCTION)
    assert replay_cost_s(text, 40, 1000) == pytest.approx(40 * port_ablate.REPLAY_S_PER_INSTRUCTION
                                                          + 1000 * port_ablate.REPLAY_S_PER_ELEMENT)


def test_a_replay_too_large_for_the_budget_runs_no_ablation(program: tuple) -> None:
    text, inputs, like = program
    assert port_runs(text, inputs, {}, "trn2", like, port_ablations(text), SandboxLimits(),
                     n_instructions=int(port_ablate.MAX_REPLAY_S / port_ablate.REPLAY_S_PER_INSTRUCTION) + 1) == {}


def test_a_replay_past_its_wall_clock_limit_fails_the_review(program: tuple) -> None:
    """The wall-clock limit is a safety net: past it, a harness fault (retry), never an ablation left out."""
    text, inputs, like = program
    with pytest.raises(port_ablate.PortReplaySafetyNet, match="time limit"):
        port_runs(text, inputs, {}, "trn2", like, port_ablations(text), SandboxLimits(timeout_s=1e-9))
