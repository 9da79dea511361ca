"""The suite runner: planning, judging, resumable JSON-lines results, the CLI, one real review."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from nkieval.review import suite
from nkieval.tasks import load_task


def _rec(key: str, role: str, **kw: object) -> dict:
    task, rest = key.split("/", 1)
    cand, target = rest.split("@")
    base = {"v": suite.RECORD_VERSION, "key": key, "fingerprint": "x", "task": task, "level": 1, "role": role,
            "candidate": cand, "target": target, "verdict": "pass", "score": 90.0,
            "levels": {"correctness": 4, "numerics": 4, "hardware": 4, "performance": 4}, "summaries": {},
            "elapsed_s": 1.0}
    base.update(kw)
    return base


def test_plan_covers_every_candidate_and_target() -> None:
    t = load_task("relu")
    entries = suite.plan(tasks="relu")
    roles = [e.role for e in entries]
    assert roles.count("expert") == len(t.targets) == roles.count("baseline")
    assert roles.count("flawed") == len(t.flawed)
    assert {e.target for e in entries if e.role == "flawed"} == {t.default_target}
    assert all(Path(e.path).is_file() for e in entries)
    assert len({e.key for e in entries}) == len(entries)
    only_default = suite.plan(tasks="relu", all_targets=False, roles=("expert",))
    assert [e.target for e in only_default] == [t.default_target]


def test_plan_filters_by_pattern_and_level() -> None:
    ids = {e.task for e in suite.plan(tasks="gelu*,relu", roles=("expert",), all_targets=False)}
    assert ids == {"gelu", "gelu_tanh", "relu"}
    assert all(load_task(e.task).level == 1 for e in suite.plan(level=1, tasks="r*", roles=("expert",)))
    assert suite.plan(level=3, tasks="relu") == []


def test_judge_applies_the_three_expectations() -> None:
    recs = [
        _rec("t/solution@trn2", "expert", time_s=1e-5),
        _rec("t/solution@trn1", "expert", verdict="fail", levels={"correctness": 2, "numerics": 4}),
        _rec("t/baseline@trn2", "baseline", time_s=2e-5, solution_time_s=1e-5),
        _rec("t/baseline@trn1", "baseline", time_s=1e-5, solution_time_s=1e-5),
        _rec("t/flawed:a@trn2", "flawed", criterion="hardware", levels={"hardware": 2},
             evidence=["Partitions"], feedback={"hardware": ["drive 1.0 of 128 partitions"]}),
        _rec("t/flawed:b@trn2", "flawed", criterion="numerics", levels={"numerics": 4},
             evidence=["bf16"], feedback={"numerics": ["rounded to bf16"]}),
        _rec("t/flawed:c@trn2", "flawed", criterion="correctness", levels={"correctness": 1},
             evidence=["unwritten"], feedback={"correctness": ["3 of 9 elements unwritten (NaN)"]}),
        _rec("t/flawed:d@trn2", "flawed", criterion="correctness", levels={"correctness": 1},
             evidence=["hard-coded"], feedback={"correctness": ["values differ"]}),
        # marked down, but the words are only in an `also` criterion: not caught for its reason
        _rec("t/flawed:e@trn2", "flawed", criterion="hardware", levels={"hardware": 1}, also=["migration"],
             evidence=["partitions"], feedback={"hardware": ["HBM reads 2x"], "migration": ["1/128 partitions"]}),
        # marked down, but the task declares no evidence words
        _rec("t/flawed:f@trn2", "flawed", criterion="hardware", levels={"hardware": 1},
             feedback={"hardware": ["drive 1.0 of 128 partitions"]}),
        # evidence declared, but no feedback recorded (an old or cut record)
        _rec("t/flawed:g@trn2", "flawed", criterion="hardware", levels={"hardware": 1}, evidence=["partitions"]),
    ]
    m = suite.judge(recs)
    ok = {o.key: o.ok for o in m.outcomes}
    assert ok == {"t/solution@trn2": True, "t/solution@trn1": False, "t/baseline@trn2": True,
                  "t/baseline@trn1": False, "t/flawed:a@trn2": True, "t/flawed:b@trn2": False,
                  "t/flawed:c@trn2": True, "t/flawed:d@trn2": False, "t/flawed:e@trn2": False,
                  "t/flawed:f@trn2": False, "t/flawed:g@trn2": False}
    detail = {o.key: o.detail for o in m.outcomes}
    assert "names the flaw" in detail["t/flawed:e@trn2"] and "no evidence words" in detail["t/flawed:f@trn2"]
    s = m.summary()
    assert s["expert_pass"] == [1, 2] and s["baseline_ok"] == [1, 2] and s["flawed_caught"] == [2, 7]
    assert len(s["misses"]) == 7 and not m.ok
    text = suite.format_matrix(m)
    assert "misses:" in text and "t/flawed:b@trn2" in text


def test_judge_checks_the_stated_roofline_fraction() -> None:
    """An expert below its task's expert_roofline_fraction on a target is a miss, named as such."""
    recs = [
        _rec("t/solution@trn2", "expert", expert_roofline_fraction=0.3, percent_of_roofline=35.0),
        _rec("t/solution@trn1", "expert", expert_roofline_fraction=0.3, percent_of_roofline=29.9),
        _rec("t/solution@trn3", "expert", expert_roofline_fraction=0.3),  # no estimate: cannot be shown
        _rec("u/solution@trn2", "expert", percent_of_roofline=5.0),  # states none: not judged on it
        _rec("v/solution@trn2", "expert", expert_roofline_fraction=0.5, percent_of_roofline=10.0,
             verdict="fail", levels={"correctness": 2, "numerics": 4}),
    ]
    m = suite.judge(recs)
    by = {o.key: o for o in m.outcomes}
    assert {k: o.ok for k, o in by.items()} == {"t/solution@trn2": True, "t/solution@trn1": False,
                                                 "t/solution@trn3": False, "u/solution@trn2": True,
                                                 "v/solution@trn2": False}
    assert {k: o.roofline_ok for k, o in by.items()} == {"t/solution@trn2": True, "t/solution@trn1": False,
                                                          "t/solution@trn3": False, "u/solution@trn2": None,
                                                          "v/solution@trn2": False}
    assert "29.9% of roofline is below the stated expert_roofline_fraction 0.3" in by["t/solution@trn1"].detail
    assert "no roofline estimate" in by["t/solution@trn3"].detail
    assert "correctness=2" in by["v/solution@trn2"].detail and "below the stated" in by["v/solution@trn2"].detail
    s = m.summary()
    assert s["expert_pass"] == [4, 5] and s["expert_roofline_met"] == [1, 4]
    assert len(s["misses"]) == 3
    text = suite.format_matrix(m)
    assert "trn1:ROOF" in text and "trn3:ROOF" in text and "expert at stated roofline fraction 1/4" in text
    assert "t/solution@trn1: " in text and "30% (stated 30%)" in text
    # exactly at the stated fraction is enough
    (o,) = suite.judge([_rec("t/solution@trn2", "expert", expert_roofline_fraction=0.25,
                             percent_of_roofline=25.0)]).outcomes
    assert o.ok and o.roofline_ok


def test_expert_entries_and_records_carry_the_stated_fraction(monkeypatch: pytest.MonkeyPatch) -> None:
    from nkieval.review import pipeline

    t = load_task("relu")
    entries = suite.plan(tasks="relu")
    assert t.perf.expert_roofline_fraction is not None
    assert {e.expert_roofline_fraction for e in entries if e.role == "expert"} == {t.perf.expert_roofline_fraction}
    assert {e.expert_roofline_fraction for e in entries if e.role != "expert"} == {None}

    def boom(*a: object, **k: object) -> None:
        raise RuntimeError("no review here")

    monkeypatch.setattr(pipeline, "review", boom)
    rec = suite.run_entry(next(e for e in entries if e.role == "expert"))
    assert rec["v"] == suite.RECORD_VERSION >= 4 and rec["verdict"] == "harness-error"
    assert rec["expert_roofline_fraction"] == t.perf.expert_roofline_fraction


def test_records_of_an_older_format_are_run_again(tmp_path: Path) -> None:
    """Records without the stated fraction (version 2) are not reused: the judge could not check them."""
    out = tmp_path / "r.jsonl"
    old = _rec("t/solution@trn2", "expert", v=2, percent_of_roofline=50.0)
    out.write_text(json.dumps(old) + "\n" + json.dumps(_rec("t/solution@trn1", "expert")) + "\n")
    assert list(suite.load_records(out)) == ["t/solution@trn1"]


def test_flaw_is_judged_against_the_experts_level() -> None:
    """A flawed candidate scoring what the expert scores in its criterion is not caught, even below 4."""
    recs = [_rec("t/solution@trn2", "expert", levels={"correctness": 4, "numerics": 4, "migration": 3}),
            _rec("t/flawed:a@trn2", "flawed", criterion="migration", levels={"migration": 3},
                 evidence=["literal port"], feedback={"migration": ["literal port: 1/128 partitions"]}),
            _rec("t/flawed:b@trn2", "flawed", criterion="migration", levels={"migration": 2},
                 evidence=["literal port"], feedback={"migration": ["literal port: 1/128 partitions"]})]
    ok = {o.key: o.ok for o in suite.judge(recs).outcomes}
    assert ok["t/flawed:a@trn2"] is False and ok["t/flawed:b@trn2"] is True


def test_run_suite_is_resumable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def fake(entry: suite.SuiteEntry, seed: int = 0) -> dict:
        calls.append(entry.key)
        return _rec(entry.key, entry.role, fingerprint=entry.fingerprint(), criterion=entry.criterion,
                    levels={"correctness": 4, "numerics": 4, "hardware": 1, "performance": 4})

    monkeypatch.setattr(suite, "run_entry", fake)
    entries = suite.plan(tasks="relu")
    out = tmp_path / "r.jsonl"
    recs = suite.run_suite(entries, out, progress=False)
    assert len(recs) == len(entries) == len(calls)
    with open(out, "a") as fh:
        fh.write('{"v": 1, "key": "cut off')  # an interrupted run leaves a partial line
    calls.clear()
    again = suite.run_suite(entries, out, progress=False)
    assert calls == [] and [r["key"] for r in again] == [e.key for e in entries]
    # a changed fingerprint (edited task or candidate) is reviewed again
    lines = [json.loads(x) for x in out.read_text().splitlines()[:-1]]
    lines[0]["fingerprint"] = "stale"
    out.write_text("".join(json.dumps(x) + "\n" for x in lines))
    suite.run_suite(entries, out, progress=False)
    assert calls == [lines[0]["key"]]
    suite.run_suite(entries, out, progress=False, rerun=True)
    assert len(calls) == 1 + len(entries)


def test_cli_run_and_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from nkieval.cli import main

    def fake(entry: suite.SuiteEntry, seed: int = 0) -> dict:
        lv = {"correctness": 4, "numerics": 4, "hardware": 4 if entry.role != "flawed" else 1, "performance": 4}
        fb = {entry.criterion: [f"names {entry.evidence[0]}"]} if entry.criterion else {}
        return _rec(entry.key, entry.role, fingerprint=entry.fingerprint(), criterion=entry.criterion, levels=lv,
                    time_s=2e-5 if entry.role == "baseline" else 1e-5, solution_time_s=1e-5,
                    evidence=list(entry.evidence), feedback=fb)

    monkeypatch.setattr(suite, "run_entry", fake)
    out = tmp_path / "r.jsonl"
    r = CliRunner().invoke(main, ["suite", "run", "--tasks", "relu", "--results", str(out), "--no-progress"])
    # relu's flawed candidates name hardware and correctness; the fake lowers hardware only
    assert r.exit_code == 1, r.output
    assert "relu" in r.output and "flawed caught 1/2" in r.output
    r = CliRunner().invoke(main, ["suite", "report", "--results", str(out), "--json"])
    assert r.exit_code == 0 and json.loads(r.output)["flawed_caught"] == [1, 2]


def test_a_real_review_entry(tmp_path: Path) -> None:
    """One real sandboxed review through the runner: relu's tail-skipping candidate is caught."""
    e = next(x for x in suite.plan(tasks="relu", roles=("flawed",)) if x.candidate == "flawed:skips_tail")
    recs = suite.run_suite([e], tmp_path / "r.jsonl", progress=False)
    (rec,) = recs
    assert rec["levels"]["correctness"] < 4 and rec["failing_cases"], rec
    (o,) = suite.judge(recs).outcomes
    assert o.ok, o.detail


def test_names_flaw_matches_any_word_case_insensitively() -> None:
    lines = ["hidden-0/normal: 44000 of 300000 elements of y were never written (NaN) | every output element written"]
    assert suite.names_flaw(["Never Written"], lines)
    assert suite.names_flaw(["bf16", "never written"], lines)
    assert not suite.names_flaw(["bf16"], lines)
    assert not suite.names_flaw([], lines) and not suite.names_flaw(["", " "], lines)
    assert not suite.names_flaw(["never written"], [])


def test_every_flawed_candidate_declares_evidence_words() -> None:
    """Every built-in flaw names the words its criterion's feedback must contain (how the suite knows
    the review caught it for its reason, not just lowered a level); the words are specific."""
    from nkieval.tasks.loader import builtin_ids

    generic = {"differ", "wrong", "error", "incorrect", "expected", "fail", "slow"}
    missing, vague = [], []
    for tid in builtin_ids():
        for fl in load_task(tid).flawed:
            words = [w.strip().lower() for w in fl.evidence if w.strip()]
            if not words:
                missing.append(f"{tid}/{fl.file}")
            vague += [f"{tid}/{fl.file}: {w!r}" for w in words if w in generic or len(w) < 3]
    assert not missing, missing
    assert not vague, vague
