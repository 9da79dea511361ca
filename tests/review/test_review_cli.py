"""``nkieval review``: formats, --out, exit codes."""

import json

from click.testing import CliRunner

from nkieval.cli import main
from nkieval.review import validate_report
from nkieval.tasks import BUILTIN_ROOT


def test_review_json_pass_exit_0(tmp_path):
    cand = BUILTIN_ROOT / "vector_add" / "solution_nki.py"
    r = CliRunner().invoke(main, ["review", "vector_add", str(cand), "--format", "json", "--seed", "1",
                                  "--out", str(tmp_path), "--no-progress"])
    assert r.exit_code == 0, r.output
    d = json.loads((tmp_path / "review.json").read_text())
    validate_report(d)
    assert (tmp_path / "review.md").read_text().startswith("# Review: vector_add")
    assert (tmp_path / "review.html").read_text().startswith("<!DOCTYPE html>")


def test_review_html_redacted(tmp_path):
    cand = BUILTIN_ROOT / "vector_add" / "flawed" / "skips_tail.py"
    r = CliRunner().invoke(main, ["review", "vector_add", str(cand), "--format", "html", "--seed", "12345",
                                  "--redact-hidden", "--out", str(tmp_path), "--no-progress"])
    assert r.exit_code == 1
    assert r.output.lstrip().startswith("<!DOCTYPE html>") and "never written" in r.output
    for ext in ("md", "html", "json"):
        text = (tmp_path / f"review.{ext}").read_text()
        assert "seed 12345" not in text and "N=300007" not in text, ext


def test_review_failing_candidate_exit_1():
    cand = BUILTIN_ROOT / "vector_add" / "flawed" / "skips_tail.py"
    r = CliRunner().invoke(main, ["review", str(BUILTIN_ROOT / "vector_add"), str(cand), "--seed", "1",
                                  "--no-progress"])
    assert r.exit_code == 1
    assert "never written" in r.output


def test_review_bad_task_exit_2(tmp_path):
    cand = BUILTIN_ROOT / "vector_add" / "solution_nki.py"
    r = CliRunner().invoke(main, ["review", str(tmp_path), str(cand), "--no-progress"])
    assert r.exit_code == 2
