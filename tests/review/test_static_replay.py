"""A static program's later cases replay without a trace (``nkieval.review.executor``).

A program with no device-side decision (no register, device scalar, runtime-indexed view or device loop) issues
the same instructions on the same memory whatever its inputs, so the judge traces the replay of one case per
shape and takes from it what only the trace gives (instruction count, unwritten elements, capacity verdict)
for the others. What must hold: the later cases' outputs and masks are exactly those of a traced replay, a
program with a device-side decision is never treated so, and the evidence case always keeps its trace.
"""

from __future__ import annotations

import numpy as np
import pytest

import nkieval.frontends

nkieval.frontends.install(force=True)

import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402

from nkieval.review import executor  # noqa: E402
from nkieval.review.runs import CaseJob, SandboxLimits  # noqa: E402
from nkieval.sim.program import ArgSpec, Program, is_static, record_program  # noqa: E402
from nkieval.sim.program import replay as replay_module  # noqa: E402


@pytest.fixture(autouse=True)
def _judge_replays_every_case(monkeypatch):
    """These tests count the judge's own replays: no replay worker takes any (tests/review/test_replay_worker.py)."""
    monkeypatch.setenv("NKIEVAL_REPLAY_WORKER", "0")


def k_half(a):
    """Writes only the first half of the rows of its output: the rest stays unwritten."""
    n, d = a.shape
    out = nl.ndarray((n, d), dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((n // 2, d), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a[0:n // 2, :])
    nisa.activation(dst=t, op=nl.exp, data=t)
    nisa.dma_copy(dst=out[0:n // 2, :], src=t)
    return out


def k_first_rows(x, n):
    """A device loop copies the first ``n`` rows: which rows are written depends on the data."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    cnt = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=cnt, src=n)
    reg = nisa.register_alloc(cnt)
    row = nl.ndarray((1, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
    for i in nl.dynamic_range(reg):
        nisa.dma_copy(dst=row, src=x[nl.ds(i, 1), :])
        nisa.dma_copy(dst=out[nl.ds(i, 1), :], src=row)
    return out


def k_gather(table, ids):
    """An indirect DMA: the rows read come from an index tensor at run time."""
    n, d = ids.shape[0], table.shape[1]
    out = nl.ndarray((n, d), dtype=table.dtype, buffer=nl.shared_hbm)
    idx = nl.ndarray((n, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=idx, src=ids.reshape((n, 1)))
    nisa.dma_copy(dst=out, src=table.ap(pattern=[[d, n], [1, d]], offset=0, vector_offset=idx, indirect_dim=0))
    return out


def _program(fn, *inputs):
    rec = record_program(fn, [ArgSpec(a.shape, a.dtype.name) for a in inputs], {}, target="trn2")
    return rec.program.to_json()


class _Stream:
    """The tracer's side, already done: one program for every case (all of one shape)."""

    def __init__(self, text: str, cases: list[CaseJob]) -> None:
        self.keys = ["k"] * len(cases)
        self.order = ["k"]
        self._text = text

    def get(self, key: str) -> dict:
        return {"status": "ok", "program": self._text.encode()}

    def all_traced(self) -> bool:
        return True


def _replay_all(text: str, cases: list[CaseJob], monkeypatch) -> tuple[list, list[bool]]:
    """Every case's run through the executor, and for each replay (in the order run) whether it kept a trace."""
    traced: list[bool] = []
    real = replay_module.replay_program

    def spy(prog, args, kwargs=None, *, target=None, options=None):
        traced.append(options.record_trace)
        return real(prog, args, kwargs, target=target, options=options)

    monkeypatch.setattr(replay_module, "replay_program", spy)
    monkeypatch.setattr("nkieval.sim.program.replay_program", spy)
    runs: dict[int, object] = {}
    executor.replay_as_traced(_Stream(text, cases), cases, "trn2", SandboxLimits(), runs.__setitem__,
                              {"trace_s": 0.0})
    return [runs[k] for k in range(len(cases))], traced


def _fresh(text: str, case: CaseJob):
    """The same case replayed on its own, with its trace (what the executor did for every case before)."""
    return executor.replay_case(Program.from_json(text), case, "trn2", SandboxLimits())


def test_programs_with_device_decisions_are_not_static():
    a = np.zeros((128, 16), np.float32)
    assert is_static(Program.from_json(_program(k_half, a)))
    assert not is_static(Program.from_json(_program(k_gather, np.zeros((64, 16), np.float32),
                                                    np.zeros(128, np.int32))))
    assert not is_static(Program.from_json(_program(k_first_rows, np.zeros((10, 8), np.float32),
                                                    np.zeros((1, 1), np.int32))))


def test_a_static_programs_later_cases_replay_without_a_trace_and_match_a_traced_replay(monkeypatch):
    rng = np.random.default_rng(3)
    cases = [CaseJob(f"c{i}", {"a": rng.standard_normal((128, 16)).astype(np.float32)}, {}, 1, want_trace=False) for i in range(3)]
    text = _program(k_half, cases[0].inputs["a"])
    runs, traced = _replay_all(text, cases, monkeypatch)
    assert traced == [True, False, False]
    for case, run in zip(cases, runs):
        fresh = _fresh(text, case)
        assert run.status == fresh.status == "ok"
        np.testing.assert_array_equal(run.outputs[0][:64], np.exp(case.inputs["a"][:64]))
        assert run.n_instructions == fresh.n_instructions == 3
        assert run.unwritten is not None and run.unwritten[0].sum() == 64 * 16
        np.testing.assert_array_equal(run.unwritten[0], fresh.unwritten[0])
        assert run.trace is None and fresh.trace is None  # (no case here is the evidence case)


def test_the_evidence_case_is_replayed_first_and_keeps_its_trace(monkeypatch):
    a = np.ones((128, 16), np.float32)
    cases = [CaseJob("c0", {"a": a}, {}, 1, want_trace=False), CaseJob("c1", {"a": a * 2}, {}, 1, want_trace=True)]
    runs, traced = _replay_all(_program(k_half, a), cases, monkeypatch)
    assert traced == [True, False]  # c1 first, with its trace; then c0 without
    assert runs[1].trace is not None and len(runs[1].trace.records) == 3
    assert runs[0].trace is None and runs[0].n_instructions == 3


def test_a_data_dependent_program_traces_every_case(monkeypatch):
    """How many rows a device loop writes depends on a register: each case's own trace decides its unwritten
    rows (the first case's would say every row is written)."""
    x = np.arange(10 * 8, dtype=np.float32).reshape(10, 8)
    every_row = CaseJob("all", {"x": x, "n": np.array([[10]], np.int32)}, {}, 1, want_trace=False)
    three_rows = CaseJob("three", {"x": x, "n": np.array([[3]], np.int32)}, {}, 1, want_trace=False)
    text = _program(k_first_rows, x, np.zeros((1, 1), np.int32))
    runs, traced = _replay_all(text, [every_row, three_rows], monkeypatch)
    assert traced == [True, True]
    assert runs[0].unwritten is not None and runs[0].unwritten[0] is None  # every row written
    assert runs[1].unwritten[0] is not None and runs[1].unwritten[0][3:].all() and not runs[1].unwritten[0][:3].any()
    assert runs[1].n_instructions == 2 + 3 * 2  # (the count load, register_alloc, two DMAs per row)


@pytest.mark.parametrize("bad", ["timeout", "exception"])
def test_a_first_case_that_fails_leaves_the_next_traced(monkeypatch, bad):
    a = np.ones((128, 16), np.float32)
    cases = [CaseJob("c0", {"a": a}, {}, 1, want_trace=False), CaseJob("c1", {"a": a}, {}, 1, want_trace=False)]
    real = executor.replay_case
    calls: list[object] = []

    def first_fails(prog, case, target, limits, like=None):
        calls.append(like)
        run = real(prog, case, target, limits, like=like)
        if case.label == "c0":
            run.status = bad
        return run

    monkeypatch.setattr(executor, "replay_case", first_fails)
    runs: dict[int, object] = {}
    executor.replay_as_traced(_Stream(_program(k_half, a), cases), cases, "trn2", SandboxLimits(), runs.__setitem__,
                              {"trace_s": 0.0})
    assert calls[0] is None
    if bad == "timeout":  # the shape's other cases are skipped, as before
        assert runs[1].status == "not-run" and len(calls) == 1
    else:
        assert calls[1] is None and runs[1].status == "ok"
