"""The replay worker (``nkieval.review.replay_worker``): cases replayed in a second process of the judge's: shapes
without the evidence case whole, and a static program's later cases of the evidence shape.

What must hold: the worker's runs are exactly the judge's own in every mode (outputs bit for bit, statuses,
warnings, instruction counts and unwritten masks); the judge neither parses nor replays a shape the worker
replays; a job the worker has not started is taken back and never run there; a case that runs out of time stops
the review's jobs not yet sent; a worker that dies or answers something malformed fails its job, and the judge
replays that case itself with the same result; ``NKIEVAL_REPLAY_WORKER=0`` turns it off.
"""

from __future__ import annotations

import json
import threading
import time

import numpy as np
import pytest

import nkieval.frontends

nkieval.frontends.install(force=True)

import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402

from nkieval.review import executor, replay_worker  # noqa: E402
from nkieval.review.runs import CaseJob, SandboxLimits  # noqa: E402
from nkieval.sim.program import ArgSpec, Program, record_program  # noqa: E402


def k_half_difference(a, b):
    """a - b on the first half of the rows; the other half of the output is never written. Two inputs and an
    operation that is not symmetric: a worker that swapped its inputs would give -(a - b)."""
    n, d = a.shape
    out = nl.ndarray((n, d), dtype=a.dtype, buffer=nl.shared_hbm)
    ta = nl.ndarray((n // 2, d), dtype=a.dtype, buffer=nl.sbuf)
    tb = nl.ndarray((n // 2, d), dtype=b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=ta, src=a[0:n // 2, :])
    nisa.dma_copy(dst=tb, src=b[0:n // 2, :])
    nisa.tensor_tensor(dst=ta, data1=ta, data2=tb, op=nl.subtract)
    nisa.dma_copy(dst=out[0:n // 2, :], src=ta)
    return out


def _text(a: np.ndarray) -> str:
    specs = [ArgSpec(a.shape, a.dtype.name)] * 2
    return record_program(k_half_difference, specs, {}, target="trn2").program.to_json()


def _cases(n: int, dtype: str = "float32", evidence: bool = False) -> list[CaseJob]:
    """``n`` cases of one shape; with ``evidence``, the first one is the case whose trace the review keeps."""
    rng = np.random.default_rng(7)
    return [CaseJob(f"c{i}", {"a": (rng.standard_normal((128, 16)) * (i + 1)).astype(dtype),
                              "b": rng.standard_normal((128, 16)).astype(dtype)}, {}, 1,
                    want_trace=evidence and i == 0)
            for i in range(n)]


class _Stream:
    """The tracer's side, already done: one program for every case (all of one shape)."""

    def __init__(self, text: str, n: int) -> None:
        self.keys, self.order, self._text = ["k"] * n, ["k"], text

    def get(self, key: str) -> dict:
        return {"status": "ok", "program": self._text.encode()}

    def all_traced(self) -> bool:
        return True


def _replay_all(text: str, cases: list[CaseJob]) -> list:
    runs: dict[int, object] = {}
    executor.replay_as_traced(_Stream(text, len(cases)), cases, "trn2", SandboxLimits(), runs.__setitem__,
                              {"trace_s": 0.0})
    return [runs[k] for k in range(len(cases))]


def _same(run, fresh) -> None:
    assert run.status == fresh.status == "ok"
    assert len(run.outputs) == len(fresh.outputs) == 1
    assert run.outputs[0].dtype == fresh.outputs[0].dtype
    np.testing.assert_array_equal(run.outputs[0], fresh.outputs[0])
    assert run.n_instructions == fresh.n_instructions == 4
    np.testing.assert_array_equal(run.unwritten[0], fresh.unwritten[0])
    assert run.warnings == fresh.warnings


@pytest.fixture
def ready_worker(monkeypatch):
    """A fresh worker of this test's own, started and taking jobs."""
    monkeypatch.setenv("NKIEVAL_REPLAY_WORKER", "1")
    w = replay_worker.ReplayWorker()
    monkeypatch.setattr(replay_worker, "worker", lambda: w)
    w.start()
    assert w.ready.wait(120), "the replay worker did not start"
    yield w
    w._stop()


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_the_workers_runs_are_the_judges_own(ready_worker, monkeypatch, dtype):
    """The evidence shape: the judge's traced replay, the later cases the worker's, untraced."""
    import ml_dtypes  # noqa: F401  (bfloat16 by name)

    cases = _cases(3, dtype, evidence=True)
    text = _text(cases[0].inputs["a"])
    real_replay = executor.replay_case

    def traced_replay_after_the_workers(*args, **kwargs):
        deadline = time.monotonic() + 60  # (the judge's own replay ends only once the worker ran both others)
        while ready_worker.counts["answered"] < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        return real_replay(*args, **kwargs)

    monkeypatch.setattr(executor, "replay_case", traced_replay_after_the_workers)
    runs = _replay_all(text, cases)
    assert ready_worker.counts["answered"] == 2  # the two later cases
    assert runs[0].trace is not None and runs[1].trace is None and runs[2].trace is None
    for case, run in zip(cases, runs):
        _same(run, real_replay(Program.from_json(text), case, "trn2", SandboxLimits()))
        a, b = (case.inputs[n].astype(np.float32) for n in "ab")
        np.testing.assert_allclose(run.outputs[0][:64].astype(np.float32), a[:64] - b[:64], rtol=1e-2, atol=1e-2)


def test_a_busy_worker_is_not_sent_the_evidence_shapes_later_cases(ready_worker, monkeypatch):
    """It would parse the program again only to start them after its queue, where the judge, with the program
    parsed, replays them once its traced case is done."""
    cases = _cases(3, evidence=True)
    text = _text(cases[0].inputs["a"])
    assert ready_worker.idle()  # (started, nothing queued or running)
    monkeypatch.setattr(ready_worker, "idle", lambda: False)
    runs = _replay_all(text, cases)
    assert ready_worker.counts["answered"] == 0
    for case, run in zip(cases, runs):
        _same(run, executor.replay_case(Program.from_json(text), case, "trn2", SandboxLimits()))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_a_shape_without_the_evidence_case_is_replayed_whole_in_the_worker(ready_worker, monkeypatch, dtype):
    """Its first case traced there, the others taking that run's counts; the judge helps only with jobs not yet
    sent, from the last one, and every case is run once, with the judge's own results."""
    import ml_dtypes  # noqa: F401  (bfloat16 by name)

    cases = _cases(4, dtype)
    text = _text(cases[0].inputs["a"])
    here: list[str] = []
    real_here = executor._InWorker._here

    def judge_after_two_answers(self, k, job, shape):
        deadline = time.monotonic() + 60
        while ready_worker.counts["answered"] < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        here.append(self.cases[k].label)
        return real_here(self, k, job, shape)

    monkeypatch.setattr(executor._InWorker, "_here", judge_after_two_answers)
    runs = _replay_all(text, cases)
    assert ready_worker.counts["answered"] >= 2 and ready_worker.counts["answered"] + len(here) == 4
    assert here == [f"c{i}" for i in range(3, 4 - len(here) - 1, -1)]  # (taken back from the last)
    for case, run in zip(cases, runs):
        _same(run, executor.replay_case(Program.from_json(text), case, "trn2", SandboxLimits()))
        assert run.trace is None


class _TwoShapes:
    """The tracer's side, already done: a small shape (no evidence case) and the evidence shape, in that order."""

    def __init__(self, texts: dict[str, str]) -> None:
        self.keys, self.order, self._texts = ["small", "evidence"], ["small", "evidence"], texts

    def get(self, key: str) -> dict:
        return {"status": "ok", "program": self._texts[key].encode()}

    def all_traced(self) -> bool:
        return True


def _two_shapes() -> tuple[list[CaseJob], dict[str, str]]:
    rng = np.random.default_rng(11)
    small = CaseJob("small", {"a": rng.standard_normal((128, 16)).astype("float32"),
                              "b": rng.standard_normal((128, 16)).astype("float32")}, {}, 1, want_trace=False)
    big = CaseJob("evidence", {"a": rng.standard_normal((128, 48)).astype("float32"),
                               "b": rng.standard_normal((128, 48)).astype("float32")}, {}, 1, want_trace=True)
    return [small, big], {"small": _text(small.inputs["a"]), "evidence": _text(big.inputs["a"])}


def _answer_once_the_judge_replays(ready_worker, monkeypatch) -> threading.Event:
    """The worker answers its first job only once the judge has started its own replay (of the evidence shape);
    the event: that replay started."""
    judge_replaying = threading.Event()
    real_exchange = ready_worker._exchange

    def exchange(job):
        assert judge_replaying.wait(60), "the judge never replayed the evidence shape"
        return real_exchange(job)

    monkeypatch.setattr(ready_worker, "_exchange", exchange)
    return judge_replaying


def test_a_run_the_worker_answers_is_passed_on_while_the_judge_replays_the_evidence_shape(ready_worker,
                                                                                           monkeypatch):
    """The judge's judging starts on the worker's run as it comes in, not once the judge's own replay is done
    (the worker's thread passes it on)."""
    cases, texts = _two_shapes()
    judge_replaying = _answer_once_the_judge_replays(ready_worker, monkeypatch)
    passed_on = threading.Event()
    during: list[bool] = []
    real_replay = executor.replay_case

    def evidence_replay(*args, **kwargs):
        judge_replaying.set()
        during.append(passed_on.wait(20))  # (the small shape's run, passed on before this replay ends)
        return real_replay(*args, **kwargs)

    runs: dict[int, object] = {}

    def finish(k, run):
        runs[k] = run
        if k == 0:
            passed_on.set()

    monkeypatch.setattr(executor, "replay_case", evidence_replay)
    executor.replay_as_traced(_TwoShapes(texts), cases, "trn2", SandboxLimits(), finish, {"trace_s": 0.0})
    assert during == [True] and ready_worker.counts["answered"] == 1
    for k, case in enumerate(cases):
        _same(runs[k], real_replay(Program.from_json(texts[case.label]), case, "trn2", SandboxLimits()))
    assert runs[1].trace is not None and runs[0].trace is None


def test_a_fault_passing_a_workers_run_on_is_raised_in_the_judges_thread(ready_worker, monkeypatch):
    """What the judge's side raises while the worker's thread passes a run on is not lost there: the replay of
    the review's cases raises it (the review fails closed)."""
    cases, texts = _two_shapes()
    judge_replaying = _answer_once_the_judge_replays(ready_worker, monkeypatch)
    real_replay = executor.replay_case
    threads: list[str] = []

    def evidence_replay(*args, **kwargs):
        judge_replaying.set()
        deadline = time.monotonic() + 20  # (until the worker's run was passed on, in the worker's thread)
        while not threads and time.monotonic() < deadline:
            time.sleep(0.01)
        return real_replay(*args, **kwargs)

    def finish(k, run):
        if k == 0:
            threads.append(threading.current_thread().name)
            raise RuntimeError("the judge's own fault")

    monkeypatch.setattr(executor, "replay_case", evidence_replay)
    with pytest.raises(RuntimeError, match="the judge's own fault"):
        executor.replay_as_traced(_TwoShapes(texts), cases, "trn2", SandboxLimits(), finish, {"trace_s": 0.0})
    assert threads and threads[0] != threading.main_thread().name


def test_a_whole_shapes_program_that_does_not_parse_fails_each_case_as_bad_program(ready_worker):
    """The worker's parse failure is a worker fault; the judge parses the program itself and refuses it."""
    cases = _cases(2)
    runs = _replay_all("{not a program", cases)
    assert [r.status for r in runs] == ["bad-program", "bad-program"]


def test_a_worker_that_dies_during_a_whole_shape_leaves_its_cases_to_the_judge(ready_worker, monkeypatch):
    cases = _cases(3)
    text = _text(cases[0].inputs["a"])
    real_exchange = ready_worker._exchange

    def dying(job):
        ready_worker._proc.kill()
        return real_exchange(job)

    real_here = executor._InWorker._here

    def judge_after_a_loss(self, k, job, shape):
        deadline = time.monotonic() + 60  # (the judge's share waits until the worker has lost a job)
        while ready_worker.counts["failed"] < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        return real_here(self, k, job, shape)

    monkeypatch.setattr(ready_worker, "_exchange", dying)
    monkeypatch.setattr(executor._InWorker, "_here", judge_after_a_loss)
    runs = _replay_all(text, cases)
    assert ready_worker.counts["answered"] == 0 and ready_worker.counts["failed"] >= 1
    for case, run in zip(cases, runs):
        _same(run, executor.replay_case(Program.from_json(text), case, "trn2", SandboxLimits()))


def test_auto_cases_take_the_counts_of_the_workers_traced_run(monkeypatch):
    """In the worker's process: an ``auto`` case of a static program replays without a trace once a traced run of
    it passed there, and has that run's instruction count and unwritten masks."""
    from nkieval.review import replay_serve

    cases = _cases(2)
    text = _text(cases[0].inputs["a"])
    digest, untraced = b"d" * 16, []
    real_untraced = executor.replay_untraced
    monkeypatch.setattr(executor, "replay_untraced", lambda *a: untraced.append(1) or real_untraced(*a))
    monkeypatch.setattr(replay_serve, "_TRACED", type(replay_serve._TRACED)())
    prog = executor.PROGRAMS.get(text)
    first = replay_serve._run(prog, digest, cases[0], "trn2", SandboxLimits(), "auto")
    assert untraced == [] and list(replay_serve._TRACED) == [digest]
    later = replay_serve._run(prog, digest, cases[1], "trn2", SandboxLimits(), "auto")
    assert untraced == [1]
    fresh = executor.replay_case(Program.from_json(text), cases[1], "trn2", SandboxLimits())
    _same(later, fresh)
    _same(first, executor.replay_case(Program.from_json(text), cases[0], "trn2", SandboxLimits()))


def test_a_case_that_runs_out_of_time_stops_its_reviews_jobs_not_yet_sent(ready_worker):
    cases = _cases(3)
    text = _text(cases[0].inputs["a"])
    group = replay_worker.Group()
    stuck = SandboxLimits(timeout_s=1e-6)
    jobs = [ready_worker.submit(text, c, "trn2", stuck, mode="auto" if i else "traced", group=group)
            for i, c in enumerate(cases)]
    assert jobs[0].result().status == "timeout" and group.hung == "c0"
    assert jobs[1].take_back() and jobs[2].take_back()  # (never sent)
    assert ready_worker.counts["answered"] == 1


def test_the_judge_skips_every_case_after_a_hang_in_the_worker(ready_worker):
    """Two shapes without the evidence case: the first one's first case runs out of time in the worker, so its
    other case and the second shape's are skipped, not run."""
    small, large = _cases(2), [CaseJob(f"d{i}", {"a": np.ones((128, 32), np.float32),
                                                 "b": np.ones((128, 32), np.float32)}, {}, 1, want_trace=False)
                               for i in range(2)]
    texts = {"s": _text(small[0].inputs["a"]), "l": _text(large[0].inputs["a"])}

    class TwoShapes:
        keys, order = ["s", "s", "l", "l"], ["s", "l"]

        def get(self, key: str) -> dict:
            if key == "l":  # (the second program comes in once the first shape's hang is known)
                deadline = time.monotonic() + 60
                while ready_worker.counts["answered"] < 1 and time.monotonic() < deadline:
                    time.sleep(0.01)
            return {"status": "ok", "program": texts[key].encode()}

        def all_traced(self) -> bool:
            return True

    runs: dict[int, object] = {}
    executor.replay_as_traced(TwoShapes(), small + large, "trn2", SandboxLimits(timeout_s=1e-6),
                              runs.__setitem__, {"trace_s": 0.0})
    assert [runs[k].status for k in range(4)] == ["timeout", "not-run", "not-run", "not-run"]
    assert ready_worker.counts["answered"] == 1


def test_a_job_not_yet_sent_is_taken_back_and_never_run(monkeypatch):
    w = replay_worker.ReplayWorker()
    monkeypatch.setattr(w, "_spawn", lambda: threading.Event().wait())  # (a worker that never finishes starting)
    cases = _cases(1)
    job = w.submit(_text(cases[0].inputs["a"]), cases[0], "trn2", SandboxLimits())
    assert job is not None and job.take_back() and job.take_back()
    assert not job.future.done() and w.counts == {"answered": 0, "failed": 0, "started": 0}


def test_a_worker_that_dies_during_a_job_fails_it_and_the_judge_replays_the_case(ready_worker, monkeypatch):
    cases = _cases(3, evidence=True)
    text = _text(cases[0].inputs["a"])
    died = threading.Event()
    real_exchange, real_replay = ready_worker._exchange, executor.replay_case

    def dying(job):
        ready_worker._proc.kill()  # (the worker dies with the job in flight)
        try:
            return real_exchange(job)
        finally:
            died.set()

    def traced_replay_after_the_death(*args, **kwargs):
        died.wait(60)  # (the judge's own replay of the first case ends only after a job was lost)
        return real_replay(*args, **kwargs)

    monkeypatch.setattr(ready_worker, "_exchange", dying)
    monkeypatch.setattr(executor, "replay_case", traced_replay_after_the_death)
    runs = _replay_all(text, cases)
    assert died.is_set() and ready_worker.counts["failed"] >= 1 and ready_worker.counts["answered"] == 0
    for case, run in zip(cases, runs):
        _same(run, real_replay(Program.from_json(text), case, "trn2", SandboxLimits()))
    monkeypatch.setattr(ready_worker, "_exchange", real_exchange)
    assert ready_worker.ready.wait(120)  # a new worker takes the next jobs
    job = ready_worker.submit(text, cases[1], "trn2", SandboxLimits())
    np.testing.assert_array_equal(job.result().outputs[0], runs[1].outputs[0])
    assert ready_worker.counts["started"] >= 2


def test_a_worker_fault_is_never_the_cases(ready_worker):
    """A job whose run raises in the worker comes back as a worker fault, not as the case's exception."""
    cases = _cases(1)
    job = ready_worker.submit("{not a program", cases[0], "trn2", SandboxLimits())
    with pytest.raises(replay_worker.WorkerFailed, match="did not parse"):
        job.result()


@pytest.mark.parametrize("header, arrays, why", [
    ({"status": "passed"}, b"", "unknown status"),
    ({"status": "ok"}, b"", "without outputs"),
    ({"worker_error": "boom"}, b"", "boom"),
    ({"status": "ok"}, b"not an array file", "not a readable array file"),
])
def test_a_malformed_answer_is_refused(header, arrays, why):
    with pytest.raises((replay_worker.WorkerFailed, ValueError), match=why):
        replay_worker._case_run("c0", header, arrays)


def test_off_by_environment(monkeypatch):
    monkeypatch.setenv("NKIEVAL_REPLAY_WORKER", "0")
    assert replay_worker.worker() is None
    cases = _cases(2)
    text = _text(cases[0].inputs["a"])
    assert executor._offload(text, cases[1:], "trn2", SandboxLimits()) == {}
    runs: dict[int, object] = {}
    assert not executor._InWorker(cases, "trn2", SandboxLimits(), runs.__setitem__,
                                  replay_worker.Group()).send(text, [0, 1])


def test_the_evidence_shapes_cases_are_not_offloaded_while_the_tracer_still_records(monkeypatch):
    """Until the tracer is done, its core records the next shape (the one the judge waits for): the judge keeps
    the evidence shape's replays."""
    sent: list[str] = []
    w = replay_worker.ReplayWorker()
    monkeypatch.setattr(w, "submit", lambda text, case, *a, **kw: sent.append(case.label))
    monkeypatch.setattr(w, "idle", lambda: True)
    monkeypatch.setattr(replay_worker, "worker", lambda: w)

    class Recording(_Stream):
        def all_traced(self) -> bool:
            return False

    cases = _cases(3, evidence=True)
    runs: dict[int, object] = {}
    executor.replay_as_traced(Recording(_text(cases[0].inputs["a"]), 3), cases, "trn2", SandboxLimits(),
                              runs.__setitem__, {"trace_s": 0.0})
    assert sent == [] and [runs[k].status for k in range(3)] == ["ok"] * 3
    executor.replay_as_traced(_Stream(_text(cases[0].inputs["a"]), 3), cases, "trn2", SandboxLimits(),
                              runs.__setitem__, {"trace_s": 0.0})
    assert sent == ["c1", "c2"]


def k_rows_from_a_count(x, n):
    """HBM rows copied by a device loop whose trip count is read from ``n``: the rows written depend on the data."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    cnt = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=cnt, src=n)
    for i in nl.dynamic_range(nisa.register_alloc(cnt)):
        nisa.dma_copy(dst=out[nl.ds(i, 1), :], src=x[nl.ds(i, 1), :])
    return out


@pytest.mark.parametrize("evidence", [True, False])
def test_a_dynamic_programs_cases_are_each_traced(ready_worker, evidence):
    """A program with a device-side decision has every case traced, each with its own counts (here: its own
    unwritten rows): in the judge for the evidence shape, whatever the worker did with the jobs sent before the
    parse, and in the worker for another shape."""
    x = np.arange(10 * 8, dtype=np.float32).reshape(10, 8)
    cases = [CaseJob(f"c{n}", {"x": x, "n": np.array([[n]], np.int32)}, {}, 1, want_trace=evidence and n == 10)
             for n in (10, 3, 6)]
    specs = [ArgSpec(x.shape, "float32"), ArgSpec((1, 1), "int32")]
    text = record_program(k_rows_from_a_count, specs, {}, target="trn2").program.to_json()
    runs = _replay_all(text, cases)
    assert runs[0].unwritten[0] is None
    for run, n in zip(runs[1:], (3, 6)):
        assert run.status == "ok" and run.n_instructions == 2 + n
        assert run.unwritten[0][n:].all() and not run.unwritten[0][:n].any()


def test_the_worker_hashes_a_program_once_a_job_and_parses_it_once(monkeypatch):
    """A job's program (megabytes for a kernel of thousands of instructions) is hashed once in the worker, kept
    by that digest for its ``auto`` cases and its parse, and parsed only by the first job that brings it; the
    judge's text and the worker's bytes of one program are one kept program."""
    import nkieval.sim.program as program_module
    from nkieval.review import npzio, replay_serve

    cases = _cases(2)
    text = _text(cases[0].inputs["a"])
    monkeypatch.setattr(executor, "PROGRAMS", executor._Programs(4))
    hashes, parses = [], []
    digest, from_json = executor.program_digest, program_module.Program.from_json
    monkeypatch.setattr(executor, "program_digest", lambda data: (hashes.append(1), digest(data))[1])
    monkeypatch.setattr(program_module.Program, "from_json",
                        staticmethod(lambda data: (parses.append(1), from_json(data))[1]))
    for mode, c in zip(("traced", "auto"), cases):
        header = {"label": c.label, "names": list(c.inputs), "params": {}, "n_outputs": 1, "target": "trn2",
                  "mode": mode, "limits": [60.0, 4096, 100000]}
        answer = json.loads(replay_serve._replay(header, text.encode(), npzio.dumps(c.inputs))[0])
        assert answer["status"] == "ok" and answer["n_instructions"] == 4, answer
    assert len(hashes) == 2 and len(parses) == 1
    assert executor.PROGRAMS.get(text) is executor.PROGRAMS.get(text.encode()) and len(parses) == 1
