"""The judge's side of streamed tracing (``nkieval.review.tracing.ProgramStream``): what it takes from the tracer's
parts and answer, with the tracer replaced by a scripted one (the real one is exercised by every review)."""

from __future__ import annotations

import numpy as np
import pytest

from nkieval.review import tracing
from nkieval.review.cache import TRACES, TraceCache
from nkieval.review.sandbox import CaseJob, SandboxLimits


def _cases(*ns: int) -> list[CaseJob]:
    return [CaseJob(f"c{i}", {"a": np.zeros((n, 4), np.float32)}, {}, 1) for i, n in enumerate(ns)]


def _stream(monkeypatch, cases, script, memo=None) -> tracing.ProgramStream:
    calls: list[list[str]] = []

    def fake(request, limits, n_shapes, hide=(), on_part=None):
        keys = [s["key"] for s in request["shapes"]]
        calls.append(keys)
        return script(keys, on_part)

    monkeypatch.setattr(tracing, "run_tracer", fake)
    s = tracing.ProgramStream("src", "k", cases, "trn2", SandboxLimits(), memo=memo)
    s.join()
    s.calls = calls  # type: ignore[attr-defined]
    return s


def test_parts_are_taken_only_for_asked_shapes_but_the_last_first_answer_wins(monkeypatch):
    cases = _cases(8, 8, 16, 32)  # three distinct shapes, the first twice

    def script(keys, on_part):
        k0, k1, k2 = keys
        on_part(tracing.pack_message({"key": k2, "status": "ok", "program": 0}, [b"forged last"]))  # the last: ignored
        on_part(tracing.pack_message({"key": "not asked", "status": "ok", "program": 0}, [b"x"]))
        on_part(b"\xff not json")
        on_part(tracing.pack_message({"key": k0, "status": "ok", "program": 0}, [b"P0"]))
        on_part(tracing.pack_message({"key": k0, "status": "ok", "program": 0}, [b"second"]))  # the first one wins
        return {k0: {"status": "sent"}, k1: {"status": "sent"}, k2: {"status": "ok", "program": b"P2"}}, None

    s = _stream(monkeypatch, cases, script)
    k0, k1, k2 = s.order
    assert s.keys == [k0, k0, k1, k2]
    assert s.get(k0) == {"status": "ok", "program": b"P0"}
    assert s.get(k1)["status"] == "bad-program"  # the answer says it was sent; it never was
    assert s.get(k2) == {"status": "ok", "program": b"P2"}
    assert s.calls == [[k0, k1, k2]]  # one tracer run, each distinct shape once


def test_a_violation_in_the_answer_reaches_the_shapes_not_streamed(monkeypatch):
    cases = _cases(8, 16)
    violation = {"status": "sandbox-violation", "rule": "tampering", "message": "reached for the harness"}

    def script(keys, on_part):
        on_part(tracing.pack_message({"key": keys[0], "status": "ok", "program": 0}, [b"P0"]))
        return {k: violation for k in keys}, None

    s = _stream(monkeypatch, cases, script)
    assert s.get(s.order[0])["status"] == "ok"
    assert s.get(s.order[1]) == violation


def test_a_dead_tracer_run_blames_the_shape_it_was_tracing_and_retraces_the_rest(monkeypatch):
    cases = _cases(8, 16, 32, 64)
    order = [tracing.shape_key(c) for c in cases]

    def script(keys, on_part):
        if keys == order:  # dies while tracing the second shape, after streaming the first
            on_part(tracing.pack_message({"key": keys[0], "status": "ok", "program": 0}, [b"P0"]))
            return {}, {"status": "crash", "message": "died"}
        if keys == order[2:]:  # the fresh run hangs on its first shape
            on_part(tracing.pack_message({"key": keys[0], "status": "exception", "message": "raised"}))
            return {}, {"status": "timeout", "message": "hung"}
        raise AssertionError(keys)

    s = _stream(monkeypatch, cases, script)
    assert [s.get(k)["status"] for k in s.order] == ["ok", "crash", "exception", "timeout"]
    assert s.calls == [order, order[2:]]

    def hangs_first(keys, on_part):
        return {}, {"status": "timeout", "message": "hung"}

    s = _stream(monkeypatch, cases, hangs_first)
    assert [s.get(k)["status"] for k in s.order] == ["timeout", "not-run", "not-run", "not-run"]
    assert len(s.calls) == 1


def test_a_harness_fault_of_a_tracer_run_ends_every_open_shape_without_a_fresh_run(monkeypatch):
    """The sandbox's supervisor reports a harness fault (a failed set-up, a starved worker): every shape not yet
    answered gets it, and none is traced again (the review is a harness error whatever they would give)."""
    cases = _cases(8, 16, 32)

    def script(keys, on_part):
        on_part(tracing.pack_message({"key": keys[0], "status": "ok", "program": 0}, [b"P0"]))
        return {}, {"status": "infra-error", "message": "the machine kept the worker waiting for a core"}

    s = _stream(monkeypatch, cases, script)
    assert [s.get(k)["status"] for k in s.order] == ["ok", "infra-error", "infra-error"]
    assert len(s.calls) == 1


def test_a_tracer_claiming_a_harness_fault_is_believed_only_if_a_known_good_kernel_fails_too(monkeypatch):
    fault = {"status": "infra-error", "message": "the tracer's own imports failed"}

    def script(healthy):
        def run(keys, on_part):
            if keys == ["k"]:  # the known-good kernel
                return ({"k": {"status": "ok", "program": b"p"}}, None) if healthy else ({}, {"status": "crash"})
            on_part(tracing.pack_message({"key": keys[0], **fault}))  # not a status a part may claim
            return {k: fault for k in keys}, None
        return run

    s = _stream(monkeypatch, _cases(8, 16), script(healthy=True))
    assert {s.get(k)["status"] for k in s.order} == {"crash"}
    s = _stream(monkeypatch, _cases(8, 16), script(healthy=False))
    assert {s.get(k)["status"] for k in s.order} == {"infra-error"}


def test_memoised_shapes_are_not_traced_again_and_new_programs_are_memoised(monkeypatch):
    cases = _cases(8, 16)
    first = tracing.shape_key(cases[0])
    memo = {first: b"cached"}

    def script(keys, on_part):
        return {k: {"status": "ok", "program": b"new"} for k in keys}, None

    s = _stream(monkeypatch, cases, script, memo)
    assert s.get(first) == {"status": "ok", "program": b"cached"}
    assert s.calls == [[tracing.shape_key(cases[1])]]
    assert memo[tracing.shape_key(cases[1])] == b"new"


def test_a_judge_fault_while_tracing_fails_every_open_shape_closed(monkeypatch):
    def script(keys, on_part):
        raise RuntimeError("judge bug")

    s = _stream(monkeypatch, _cases(8, 16), script)
    assert {s.get(k)["status"] for k in s.order} == {"infra-error"}


@pytest.mark.parametrize("status", ["sandbox-violation", "bad-program"])
def test_a_whole_run_failure_that_is_the_candidates_deed_decides_every_open_shape(monkeypatch, status):
    def script(keys, on_part):
        if len(keys) == 1:
            raise AssertionError("retraced shape by shape")
        return {}, {"status": status, "message": "m"}

    s = _stream(monkeypatch, _cases(8, 16, 32), script)
    assert {s.get(k)["status"] for k in s.order} == {status}


def test_shapes_are_traced_smallest_first_ties_in_case_order(monkeypatch):
    cases = [*_cases(64, 8, 64, 16), CaseJob("c4", {"a": np.zeros((4, 4), np.float32)}, {"p": 1}, 1),
             CaseJob("c5", {"a": np.zeros((2, 8), np.float32)}, {}, 1)]
    keys = [tracing.shape_key(c) for c in cases]

    def script(asked, on_part):
        return {k: {"status": "ok", "program": f"P{k}".encode()} for k in asked}, None

    s = _stream(monkeypatch, cases, script)
    # elements: c4 and c5 16 each (a tie, kept in case order), c1 32, c3 64, c0 and c2 256 (one shape)
    assert s.order == [keys[4], keys[5], keys[1], keys[3], keys[0]]
    assert s.calls == [s.order]  # the tracer is asked for them in that order
    assert all(s.get(k)["program"] == f"P{k}".encode() for k in keys)


def test_a_part_whose_program_is_not_a_blob_it_carries_is_ignored(monkeypatch):
    """A part names its program by the index of a blob after its header: an index out of range, or a program
    inside the JSON (the old form), is not a program; the shape then comes with the answer."""
    cases = _cases(8, 16, 32)

    def script(keys, on_part):
        on_part(tracing.pack_message({"key": keys[0], "status": "ok", "program": 1}, [b"P0"]))
        on_part(tracing.pack_message({"key": keys[0], "status": "ok", "program": "P0 as a string"}))
        on_part(tracing.pack_message({"key": keys[1], "status": "ok", "program": True}, [b"P1"]))
        on_part(tracing.pack_message({"key": keys[1], "status": "ok", "program": 0}, [b"P1"]))
        return {keys[0]: {"status": "ok", "program": b"A0"}, keys[1]: {"status": "sent"},
                keys[2]: {"status": "ok", "program": b"A2"}}, None

    s = _stream(monkeypatch, cases, script)
    assert [s.get(k)["program"] for k in s.order] == [b"A0", b"P1", b"A2"]


@pytest.mark.parametrize("data", [
    b'{"key": "k", "status": "ok", "program": 0, "blobs": [3]}',  # no header line
    b'{"key": "k", "status": "ok", "program": 0, "blobs": [3]}\nP0',  # one byte short
    b'{"key": "k", "status": "ok", "program": 0, "blobs": [1]}\nP0',  # one byte over
    b'{"key": "k", "status": "ok", "program": 0, "blobs": [-1, 3]}\nP0',
    b'{"key": "k", "status": "ok", "program": 0, "blobs": [2.0]}\nP0',
    b'{"key": "k", "status": "ok", "program": 0}\nP0',  # no sizes
    b'["blobs"]\n',
    b'\xff\n',
])
def test_a_malformed_message_is_refused(data):
    with pytest.raises(ValueError):
        tracing.unpack_message(data)


def test_a_message_round_trips_its_blobs_byte_for_byte():
    blobs = [b"", b'{"x": "\\n\n"}', bytes(range(256))]  # (a blob may hold anything, newlines included)
    header, got = tracing.unpack_message(tracing.pack_message({"shapes": {"a": {"program": 2}}}, blobs))
    assert got == blobs and header["shapes"] == {"a": {"program": 2}} and header["blobs"] == [0, 12, 256]
    assert tracing.with_program({"status": "ok", "program": 2}, got) == {"status": "ok", "program": blobs[2]}
    assert tracing.with_program({"status": "ok", "program": 3}, got)["status"] == "bad-program"
    assert tracing.with_program({"status": "exception", "message": "m"}, got) == {"status": "exception",
                                                                                   "message": "m"}


def _kept_script(calls: list[int], answer_status: str = "ok"):
    def script(keys, on_part):
        calls.append(len(keys))
        on_part(tracing.pack_message({"key": keys[0], "status": "ok", "program": 0}, [b"P" + keys[0].encode()]))
        last = {"status": "ok", "program": b"P" + keys[-1].encode()} if answer_status == "ok" \
            else {"status": answer_status, "message": "m"}
        return {**{k: {"status": "sent"} for k in keys[:-1]}, keys[-1]: last}, None
    return script


def test_a_clean_tracer_runs_programs_are_kept_for_a_later_review_of_the_same_source(monkeypatch):
    calls: list[int] = []
    first = _stream(monkeypatch, _cases(8, 16), _kept_script(calls))
    again = _stream(monkeypatch, _cases(8, 16, 16), _kept_script(calls))  # (the same shapes, more cases)
    assert calls == [2] and TRACES.stats()["hits"] == 2
    assert [again.get(k) for k in again.order] == [first.get(k) for k in first.order]
    _stream(monkeypatch, _cases(8, 32), _kept_script(calls))  # a new shape: only it is traced
    assert calls == [2, 1]


@pytest.mark.parametrize("change", ["source", "kernel", "target", "limits", "hide"])
def test_a_kept_program_serves_only_the_same_request_sandbox_and_shape(monkeypatch, change):
    calls: list[int] = []

    def stream(**over):
        monkeypatch.setattr(tracing, "run_tracer", lambda request, *a, **k: _kept_script(calls)(
            [s["key"] for s in request["shapes"]], k["on_part"]))
        args = {"source": "src", "kernel": "k", "target": "trn2", "limits": SandboxLimits(), "hide": (), **over}
        s = tracing.ProgramStream(args["source"], args["kernel"], _cases(8), args["target"], args["limits"],
                                  args["hide"])
        s.join()

    stream()
    stream(**{"source": {"source": "src2"}, "kernel": {"kernel": "k2"}, "target": {"target": "trn3"},
            "limits": {"limits": SandboxLimits(memory_mb=1024)}, "hide": {"hide": ("/task",)}}[change])
    assert calls == [1, 1]


@pytest.mark.parametrize("status", ["sandbox-violation", "bad-program", "sent"])
def test_a_run_whose_answer_decides_the_review_keeps_none_of_its_programs(monkeypatch, status):
    """A reach for the harness, a malformed part, or an answer naming a part never sent (``bad-program``)."""
    calls: list[int] = []
    _stream(monkeypatch, _cases(8, 16), _kept_script(calls, answer_status=status))
    _stream(monkeypatch, _cases(8, 16), _kept_script(calls))
    assert calls == [2, 2] and TRACES.stats()["programs"] == 2  # (only the clean second run's)


def test_programs_of_a_run_retraced_after_a_death_are_not_kept(monkeypatch):
    calls: list[int] = []

    def dies_once(keys, on_part):
        calls.append(len(keys))
        if len(calls) == 1:
            on_part(tracing.pack_message({"key": keys[0], "status": "ok", "program": 0}, [b"P0"]))
            return {}, {"status": "crash", "message": "died"}
        return {k: {"status": "ok", "program": b"P"} for k in keys}, None

    _stream(monkeypatch, _cases(8, 16, 32), dies_once)
    assert TRACES.stats()["programs"] == 0


def test_the_kept_programs_stay_within_their_bytes():
    cache = TraceCache(max_bytes=100)
    for i in range(10):
        cache.put(bytes([i]), bytes(20))
    assert cache.stats()["bytes"] <= 100 and cache.get(bytes([9])) is not None and cache.get(bytes([0])) is None
    cache.put(b"big", bytes(26))  # (over a quarter of the bound: never kept)
    assert cache.get(b"big") is None
