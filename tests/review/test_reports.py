"""Reports an expert would sign (issue 30): one finding per cause with its confidence, advice chosen by the
evidence, per-output verdicts, honest summaries, the HTML page and the suite dashboard, lean JSON and a
schema check without jsonschema, redaction of hidden shapes and seeds."""

from __future__ import annotations

import copy
import json
import re
from html.parser import HTMLParser

import pytest

from nkieval.review import wording as W
from nkieval.review.minischema import validate as mini_validate
from nkieval.review.model import CaseResult
from nkieval.review.redact import redact_hidden
from nkieval.review.report import report_schema, to_html, to_markdown, validate_report


def _findings_md(md: str) -> str:
    m = re.search(r"^## Findings\n(.*?)(?=^## |\Z)", md, flags=re.S | re.M)
    return m.group(1) if m else ""


# ------------------------------------------------------------------------------ wording
@pytest.mark.parametrize(("v", "want"), [(47959.463936255066, "4.8e+04"), (0.000123456, "0.000123"), (3, "3"),
                                         (262144, "262,144"), (float("inf"), "inf"), (float("nan"), "NaN"),
                                         (2.0, "2"), ("inf", "inf")])
def test_numbers_are_worded_to_three_significant_digits(v, want):
    assert W.num(v) == want


def test_share_states_count_and_percent():
    assert W.share(5, 262144) == "5 of 262,144 elements (0.00191%)"
    assert W.share(262144, 262144).endswith("(100%)")


def test_suspected_causes_are_worded_as_suspected():
    assert "suspected" in W.stated("bf16 rounding", "suspected")
    assert "reproduced" in W.stated("omits the bias", "reproduced")
    assert W.finding_confidence({"id": "tile_edge", "cause": "x", "evidence": "rows 128..130"}) == "matched-pattern"
    assert W.finding_confidence({"id": "v", "cause": "x", "evidence": "re-running the op that way reproduces the "
                                                                     "kernel's output"}) == "reproduced"
    assert W.finding_confidence({"id": "tf32_inputs", "cause": "x", "evidence": "0.9σ under tf32"}) == "suspected"
    assert W.finding_confidence({"id": "x", "cause": "", "evidence": ""}) is None


# ------------------------------------------------------------------------------ findings
def test_one_finding_per_cause_across_cases_and_criteria(reviewed):
    r = reviewed("adamw_step", "flawed/no_bias_correction.py")
    cause = "omits Adam's bias correction"
    sec = _findings_md(to_markdown(r))
    assert sec.count(cause) == 1, sec  # 4 failing cases, 2 criteria: stated once
    f = next(f for f in r.findings if f.cause and cause in f.cause)
    assert f.confidence == "reproduced"
    assert set(f.criteria) >= {"Correctness", "Numerical standard"}
    assert len(f.cases) == len(r.cases) == 4
    assert any(a.startswith("Numerical standard") for a in f.also)
    # the criteria keep their own lines (the reward and the suite read them), keyed to the same cause
    keys = {fb.key for c in r.criteria for fb in c.feedback if fb.cause and cause in fb.cause}
    assert len(keys) == 1


def test_every_stated_cause_carries_its_confidence(reviewed):
    for task, cand in [("adamw_step", "flawed/no_bias_correction.py"), ("vector_add", "flawed/skips_tail.py"),
                       ("row_softmax", "flawed/thread_port.py"), ("row_softmax", "flawed/bf16_exp.py")]:
        r = reviewed(task, cand)
        for f in r.findings:
            if f.cause:
                assert f.confidence in ("reproduced", "matched-pattern", "suspected", "measured"), (cand, f)
            if f.confidence == "suspected" and f.cause:
                assert "suspected" in " ".join([f.observed, *f.also]), (cand, f.observed, f.also)
        observed = [f.observed for f in r.findings]
        assert len(observed) == len(set(observed)), cand


def test_unwritten_output_gets_coverage_advice_not_overflow(reviewed):
    r = reviewed("vector_add", "flawed/skips_tail.py")
    lines = [fb for c in r.criteria if c.id in ("correctness", "numerics") for fb in c.feedback]
    assert lines
    for fb in lines:
        assert "overflow" not in fb.suggestion and "inf" not in fb.suggestion, fb.suggestion
    f = r.findings[0]
    assert "never written" in f.observed and f.confidence == "matched-pattern"
    assert "tile" in f.suggestion
    # Correctness and Numerical standard say the same thing once
    assert sum("never written" in x.observed for x in r.findings) == 1


def test_numbers_in_findings_are_rounded(reviewed):
    r = reviewed("adamw_step", "flawed/no_bias_correction.py")
    sec = _findings_md(to_markdown(r))
    decimals = re.findall(r"(?<![\d.])\d+\.\d+(?![\d.])", sec)
    assert decimals
    long_floats = [x for x in decimals if len(x.replace(".", "").lstrip("0")) > 3]
    assert not long_floats, long_floats


# ------------------------------------------------------------------------------ per-output verdicts
def test_each_output_of_a_multi_output_task_has_its_verdict(reviewed):
    r = reviewed("adamw_step", "flawed/no_bias_correction.py")
    for c in r.cases:
        by = {o["name"]: o for o in c.outputs}
        assert list(by) == ["param_new", "m_new", "v_new"]
        assert by["param_new"]["correct"] is False and by["param_new"]["numerics"]["status"] == "fail"
        for name in ("m_new", "v_new"):  # the flaw is in the update only: the moments are right
            assert by[name]["correct"] is True and by[name]["numerics"]["status"] == "pass", (c.case, by[name])
    assert "param_new" in r.criterion("numerics").summary
    assert r.criterion("numerics").evidence["failing_outputs"] == ["param_new"]
    assert r.summary["outputs"]["m_new"]["numerics_pass"] == len(r.cases)
    d = r.to_dict()
    assert d["cases"][0]["outputs"][1]["name"] == "m_new"


def test_an_output_without_its_own_oracle_says_so(reviewed):
    r = reviewed("row_argmax", "solution_nki.py")
    notes = [o.get("numerics_note", "") for c in r.cases for o in c.outputs[1:]]
    assert notes and all("integer output" in n for n in notes)


def test_expert_of_a_multi_output_task_passes_every_output(reviewed):
    r = reviewed("adamw_step", "solution_nki.py")
    assert r.verdict == "pass"
    assert all(o["numerics"]["status"] == "pass" for c in r.cases for o in c.outputs)


# ------------------------------------------------------------------------------ honest summaries
def test_capped_levels_say_what_they_would_have_been(reviewed):
    r = reviewed("adamw_step", "flawed/no_bias_correction.py")
    hw = r.criterion("hardware")
    assert hw.capped_by and hw.uncapped_level is not None and hw.uncapped_level > hw.level
    md = to_markdown(r)
    assert f"{hw.level}/4 (capped; {hw.uncapped_level}/4 uncapped)" in md
    assert any(x["criterion"] == "Hardware appropriateness" and x["would_be"] == hw.uncapped_level
               for x in r.summary["capped"])


def test_the_verdict_line_says_what_pass_covers(reviewed):
    r = reviewed("vector_add", "flawed/thread_port.py")  # a hardware flaw: correct, so the verdict is pass
    assert r.verdict == "pass"
    md = to_markdown(r)
    assert "does not cover speed, hardware use" in md
    assert r.summary["verdict_line"].startswith("PASS")


def test_worst_margin_counts_failing_cases():
    from nkieval.review.scoring import _num_margin, _num_status

    c = CaseResult("public-0/normal", {"n": 4}, False, "normal", 1, "ok")
    c.numerics = {"status": "pass", "margin": 0.5}
    c.outputs = [{"name": "a", "correct": True, "numerics": {"status": "pass", "margin": 0.5}},
                 {"name": "b", "correct": False, "numerics": {"status": "fail", "margin": 40.0}}]
    assert _num_status(c) == "fail" and _num_status(c, first=True) == "pass"
    assert _num_margin(c) == 40.0


def test_numerics_summary_names_cases_without_a_finite_margin(reviewed):
    r = reviewed("row_softmax", "flawed/no_max_subtraction.py")
    s = r.criterion("numerics").summary
    assert "no finite margin" in s or "worst margin" in s
    if "no finite margin" in s:
        assert r.criterion("numerics").evidence["worst_margin"] == float("inf")


def test_wrong_element_share_is_stated(reviewed):
    r = reviewed("vector_add", "flawed/skips_tail.py")
    assert re.search(r"wrong elements: [\d,]+ of [\d,]+ elements \([\d.e+-]+%\)", r.criterion("correctness").summary)
    assert r.summary["wrong_elements"]["text"]


# ------------------------------------------------------------------------------ HTML
class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def _parse(html: str) -> _Page:
    p = _Page()
    p.feed(html)
    return p


@pytest.mark.parametrize(("task", "cand"), [("adamw_step", "flawed/no_bias_correction.py"),
                                            ("vector_add", "flawed/skips_tail.py"),
                                            ("row_softmax", "flawed/thread_port.py")])
def test_html_report_is_self_contained_and_complete(reviewed, task, cand):
    r = reviewed(task, cand)
    html = to_html(r)
    page = _parse(html)
    tags = [t for t, _ in page.tags]
    assert "script" not in tags and "link" not in tags and "img" not in tags and "iframe" not in tags
    urls = set(re.findall(r"https?://[^\s\"'<>]+", html))
    assert urls <= {"http://www.w3.org/2000/svg"}, urls  # the SVG namespace is a name, not a fetch
    verdict = [a for t, a in page.tags if a.get("id") == "verdict"]
    assert verdict and verdict[0]["data-verdict"] == r.verdict
    crit_rows = [a["data-criterion"] for t, a in page.tags if t == "tr" and "data-criterion" in a]
    assert crit_rows == [c.id for c in r.criteria]
    articles = [a for t, a in page.tags if t == "article"]
    assert len(articles) == sum(f.severity != "info" for f in r.findings)
    charts = {a.get("data-chart") for t, a in page.tags if t == "svg"}
    assert "roofline" in charts and "timeline" in charts
    if any(c.numerics for c in r.cases):
        assert "histogram" in charts


def test_html_escapes_candidate_text(reviewed):
    r = copy.deepcopy(reviewed("vector_add", "flawed/skips_tail.py"))
    r.findings[0].observed = "<script>alert(1)</script>"
    assert "<script>alert" not in to_html(r)


def test_html_shows_the_cited_code(reviewed):
    r = reviewed("adamw_step", "flawed/no_bias_correction.py")
    loc = next(f.location for f in r.findings if f.location)
    assert loc in r.excerpts
    html = to_html(r)
    from html import escape

    n = int(loc.rsplit(":", 1)[1])
    cited = next(t for k, t in r.excerpts[loc] if k == n)
    assert re.search(r'<span class="hl">\s*' + str(n) + "  " + re.escape(escape(cited)), html), cited


def test_suite_dashboard_renders_every_task():
    from nkieval.review.render import suite_html
    from nkieval.review.suite import judge

    recs = [{"key": "t/solution@trn2", "task": "t", "level": 1, "role": "expert", "candidate": "solution",
             "target": "trn2", "verdict": "pass", "score": 100.0, "levels": {"correctness": 4, "numerics": 4}},
            {"key": "t/flawed:x@trn2", "task": "t", "level": 1, "role": "flawed", "candidate": "flawed:x",
             "target": "trn2", "verdict": "fail", "criterion": "correctness", "levels": {"correctness": 1},
             "evidence": ["never written"], "feedback": {"correctness": ["3 elements were never written"]}}]
    html = suite_html(judge(recs))
    page = _parse(html)
    assert [a["data-task"] for t, a in page.tags if t == "tr" and "data-task" in a] == ["t"]
    assert "flawed caught <strong>1/1</strong>" in html
    assert "script" not in [t for t, _ in page.tags]


# ------------------------------------------------------------------------------ JSON
def test_lean_json_stores_reference_evidence_once(reviewed):
    r = reviewed("adamw_step", "flawed/no_bias_correction.py")
    d = r.to_dict()
    refs = d["references"]
    sol = d["performance"]["solution"]
    assert set(sol) == {"ref"} and refs[sol["ref"]]["of"] == "solution"
    assert refs[d["hardware"]["baseline"]["ref"]]["kind"] == "hardware"
    assert set(d["performance"]["candidate"]["uncertainty"]) == {"ref"}
    assert refs[sol["ref"]]["data"]["_total_time"] == r.performance["solution"]["_total_time"]
    full = r.to_dict(lean=False)
    assert len(json.dumps(d)) < len(json.dumps(full))
    assert d["version"].startswith("3.")
    validate_report(d)


def _mutations(d):
    a = copy.deepcopy(d)
    a["criteria"][0]["level"] = 7
    yield a
    b = copy.deepcopy(d)
    del b["findings"]
    yield b
    c = copy.deepcopy(d)
    c["findings"][0]["confidence"] = "certain"
    yield c
    e = copy.deepcopy(d)
    e["verdict"] = "maybe"
    yield e
    f = copy.deepcopy(d)
    f["criteria"][0]["feedback"][0]["extra"] = 1
    yield f
    g = copy.deepcopy(d)
    g["cases"][0]["seed"] = -1
    yield g


def test_minischema_agrees_with_jsonschema(reviewed):
    jsonschema = pytest.importorskip("jsonschema")
    d = json.loads(reviewed("adamw_step", "flawed/no_bias_correction.py").to_json())
    schema = report_schema()
    assert mini_validate(d, schema) is None
    jsonschema.validate(d, schema, cls=jsonschema.Draft202012Validator)
    for bad in _mutations(d):
        assert mini_validate(bad, schema) is not None
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema, cls=jsonschema.Draft202012Validator)


def test_validate_report_without_jsonschema(reviewed, monkeypatch):
    import builtins

    from nkieval.review.report import ReportValidationError

    real = builtins.__import__

    def no_jsonschema(name, *a, **k):
        if name == "jsonschema" or name.startswith("jsonschema."):
            raise ImportError("no jsonschema")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_jsonschema)
    d = json.loads(reviewed("vector_add", "flawed/skips_tail.py").to_json())
    validate_report(d)
    d["criteria"][0]["level"] = 7
    with pytest.raises(ReportValidationError):
        validate_report(d)


# ------------------------------------------------------------------------------ redaction
def test_redaction_hides_hidden_shapes_and_seeds(reviewed):
    r = reviewed("vector_add", "flawed/skips_tail.py")
    red = redact_hidden(r)
    md, js = to_markdown(red), red.to_json()
    for c in r.cases:
        assert str(c.seed) not in md and str(c.seed) not in js
        if c.hidden:
            shape = ", ".join(f"{k}={v}" for k, v in c.shape.items())
            assert shape not in md and shape not in js
    assert all(c.shape == {} for c in red.cases if c.hidden)
    assert all(c.shape for c in red.cases if not c.hidden)
    assert f"seed {r.seed}" not in md and red.seed == 0
    validate_report(red.to_dict())
    # the original is untouched and the flaw is still named
    assert r.cases[0].seed != 0
    assert "never written" in _findings_md(md)


def test_expand_references_restores_the_inline_layout(reviewed):
    from nkieval.review.report import expand_references

    r = reviewed("adamw_step", "flawed/no_bias_correction.py")
    lean, full = json.loads(r.to_json()), json.loads(json.dumps(r.to_dict(lean=False)))
    back = expand_references(lean)
    assert back["performance"]["solution"]["_total_time"] == full["performance"]["solution"]["_total_time"]
    assert back["hardware"]["baseline"] == full["hardware"]["baseline"]
    assert back["performance"]["candidate"]["uncertainty"] == full["performance"]["candidate"]["uncertainty"]


def test_lean_case_numerics_keep_every_measured_value(reviewed):
    # schema 3.1: the recipe once by hash, uncomputed metrics left out, floats to 9 significant digits; 3.2: each
    # diagnosis once by hash, no prose explanation, no empty gate fields; expanded, every case's numerics equals
    # the inline record up to that rounding (exact for fp32 values)
    import math

    import numpy as np

    from nkieval.review.report import expand_references

    r = reviewed("adamw_step", "flawed/no_bias_correction.py")
    lean, full = json.loads(r.to_json()), json.loads(json.dumps(r.to_dict(lean=False)))
    assert lean["version"] == "3.2"
    hashes = {c["numerics"]["recipe"]["ref"] for c in lean["cases"] if c.get("numerics")}
    assert len(hashes) == 1 and lean["references"][hashes.pop()]["kind"] == "recipe"
    assert len(json.dumps(lean["cases"])) < 0.9 * len(json.dumps(full["cases"]))
    back = expand_references(lean)

    def same(a, b, where):
        if isinstance(b, dict):
            dropped = {k for k in b if k not in a}
            assert all(b[k] in (None, "nan", "") or k == "explanation" for k in dropped), (where, dropped)
            for k in a:
                same(a[k], b[k], f"{where}.{k}")
        elif isinstance(b, list):
            assert len(a) == len(b), where
            for i, (x, y) in enumerate(zip(a, b)):
                same(x, y, f"{where}[{i}]")
        elif isinstance(b, float) and not isinstance(a, str):
            assert math.isclose(a, b, rel_tol=1e-8), where
            if b == float(np.float32(b)):
                assert np.float32(a) == np.float32(b), where  # an fp32 value round-trips exactly
        else:
            assert a == b, where

    for c_lean, c_full in zip(back["cases"], full["cases"]):
        same(c_lean, c_full, c_full["case"])
    validate_report(lean)


# ------------------------------------------------------------------------------ in a browser
def _chromium():
    import shutil

    return next((p for p in (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")) if p), None)


def _browser(args, timeout=120):
    import subprocess

    exe = _chromium()
    return subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           "--enable-logging=stderr", "--v=0", *args], capture_output=True, text=True,
                          timeout=timeout)


def _console_errors(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ":CONSOLE" in ln]


@pytest.mark.slow
@pytest.mark.skipif(_chromium() is None, reason="no headless Chromium (Debian's chromium package)")
@pytest.mark.parametrize(("task", "cand"), [("adamw_step", "flawed/no_bias_correction.py"),
                                            ("vector_add", "flawed/skips_tail.py"),
                                            ("row_softmax", "flawed/thread_port.py")])
def test_html_report_in_headless_chromium(reviewed, tmp_path, task, cand):
    r = reviewed(task, cand)
    page = tmp_path / "review.html"
    page.write_text(to_html(r))
    dom = _browser(["--dump-dom", page.as_uri()])
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert not _console_errors(dom.stderr), _console_errors(dom.stderr)
    p = _parse(dom.stdout)  # the DOM the browser built, not our text
    assert [a["data-verdict"] for t, a in p.tags if a.get("id") == "verdict"] == [r.verdict]
    assert [a["data-criterion"] for t, a in p.tags if t == "tr" and "data-criterion" in a] == \
        [c.id for c in r.criteria]
    assert sum(t == "article" for t, _ in p.tags) == sum(f.severity != "info" for f in r.findings)
    shot = tmp_path / "review.png"
    res = _browser([f"--screenshot={shot}", "--window-size=1200,2400", page.as_uri()])
    assert res.returncode == 0 and shot.stat().st_size > 10_000, res.stderr[-2000:]


@pytest.mark.slow
@pytest.mark.skipif(_chromium() is None, reason="no headless Chromium (Debian's chromium package)")
def test_suite_dashboard_in_headless_chromium(tmp_path):
    # the records of a real suite run (`nkieval suite run --tasks vector_add,adamw_step --default-target-only`,
    # kept under tests/review/data; regenerate it if the suite's record version changes)
    from pathlib import Path

    from nkieval.review.render import suite_html
    from nkieval.review.suite import judge, load_records

    recs = load_records(Path(__file__).parent / "data" / "suite-run-vector_add-adamw_step.jsonl")
    assert len(recs) == 10, "the recorded suite run no longer loads (record version changed?)"
    page = tmp_path / "suite.html"
    page.write_text(suite_html(judge(recs.values())))
    dom = _browser(["--dump-dom", page.as_uri()])
    assert dom.returncode == 0 and not _console_errors(dom.stderr)
    tree = _parse(dom.stdout)
    assert sorted(a["data-task"] for t, a in tree.tags if "data-task" in a) == ["adamw_step", "vector_add"]
    assert "flawed caught <strong>6/6</strong>" in dom.stdout
    shot = tmp_path / "suite.png"
    assert _browser([f"--screenshot={shot}", page.as_uri()]).returncode == 0 and shot.stat().st_size > 5_000


def _numerics_of(cases, task_id="adamw_step"):
    from nkieval.review.rubric import load_rubric
    from nkieval.review.scoring import Evidence, score_numerics
    from nkieval.tasks import load_task

    rubric = load_rubric()
    crit = next(c for c in rubric.criteria if c.id == "numerics")
    return score_numerics(Evidence(task=load_task(task_id), rubric=rubric, target="trn2", cases=cases), crit)


def _case(label, first, later=None, hidden=False):
    c = CaseResult(label, {"N": 4}, hidden, "normal", 1, "ok", correct=first.get("status") == "pass")
    c.numerics = dict(first)
    c.outputs = [{"name": "param_new", "correct": c.correct, "numerics": dict(first)}]
    c.outputs += [{"name": n, "correct": True, "numerics": v} for n, v in (later or {}).items()]
    return c


def test_a_failing_later_output_fails_the_case_and_is_named():
    ok = {"status": "pass", "margin": 0.3, "deciding_gate": "G2"}
    c = _case("public-0/normal", ok, {"m_new": {"status": "fail", "margin": 12.5, "deciding_gate": "G2"},
                                      "v_new": ok})
    res = _numerics_of([c, _case("hidden-0/normal", ok, {"m_new": ok, "v_new": ok}, hidden=True)])
    assert res.level == 2 and res.evidence["failing_outputs"] == ["m_new"]
    (fb,) = res.feedback
    assert "m_new (margin 12.5)" in fb.observed and "first output passes" in fb.observed
    assert "worst margin 12.5" in res.summary


def test_a_failing_case_without_a_finite_margin_is_counted():
    bad = {"status": "fail", "margin": float("inf"), "deciding_gate": "G0"}
    ok = {"status": "pass", "margin": 0.3, "deciding_gate": "G2"}
    res = _numerics_of([_case("public-0/normal", ok), _case("hidden-0/normal", bad, hidden=True)])
    assert "1 failing case(s) have no finite margin" in res.summary and "hidden-0/normal" in res.summary
    assert res.evidence["worst_margin"] == float("inf") and res.evidence["worst_finite_margin"] == 0.3


def test_a_later_output_that_fails_gets_its_own_cause(tmp_path):
    # residual_layernorm's y is right, its second output h = x + residual is written 1% too large: the review
    # names h's own cause (a constant factor), with its confidence, not only "h fails"
    from nkieval.review.pipeline import review
    from nkieval.tasks.loader import BUILTIN_ROOT

    src = (BUILTIN_ROOT / "residual_layernorm" / "solution_nki.py").read_text()
    store = "        nisa.dma_copy(dst=h[i * p:i * p + rows], src=ht[0:rows])\n"
    assert store in src
    bad = src.replace(store, "        hs = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)\n"
                             "        nisa.tensor_scalar(dst=hs[0:rows], data=ht[0:rows], op0=nl.multiply, operand0=1.01)\n"
                             "        nisa.dma_copy(dst=h[i * p:i * p + rows], src=hs[0:rows])\n")
    p = tmp_path / "h_scaled.py"
    p.write_text(bad)
    r = review("residual_layernorm", str(p), seed=7, compare_references=False)
    h = [next(o for o in c.outputs if o["name"] == "h") for c in r.cases]
    assert all(o["numerics"]["status"] == "fail" for o in h)
    y = [next(o for o in c.outputs if o["name"] == "y") for c in r.cases]
    assert all(o["numerics"]["status"] == "pass" for o in y)
    causes = [o["numerics"].get("findings") for o in h]
    assert causes[0] and causes[0][0]["id"] == "constant_factor", causes[0]
    assert sum(1 for c in causes if c) == 3  # the first three failing cases are diagnosed
    sec = _findings_md(to_markdown(r))
    assert "h: " in sec and "constant factor 1.01" in sec, sec
    f = next(f for f in r.findings if f.cause and "constant factor" in f.cause)
    assert f.confidence == "matched-pattern"
