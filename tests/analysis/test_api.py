"""Public API behaviour: bad input, selection, JSON form, speed, never executing the analysed code, CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from nkieval.analysis import RULES, Finding, UnknownRuleError, analyze_nki, migration_fidelity, parse_cuda

FIX = Path(__file__).parent / "fixtures"


def test_syntax_error_becomes_nki000_finding() -> None:
    (f,) = analyze_nki("def k(:\n", "bad.py")
    assert (f.rule, f.severity, f.line) == ("NKI000", "error", 1)
    assert "bad.py" in f.message


def test_select_and_unknown_rule() -> None:
    src = (FIX / "nki" / "NKI003.pysrc").read_text()
    assert {f.rule for f in analyze_nki(src, select=["NKI003"])} == {"NKI003"}
    with pytest.raises(UnknownRuleError, match="NKI999"):
        analyze_nki(src, select=["NKI999"])
    with pytest.raises(TypeError, match="must be str"):
        analyze_nki(b"x = 1")  # type: ignore[arg-type]


def test_findings_serialise_and_are_sorted() -> None:
    fs = analyze_nki((FIX / "nki" / "NKI014.pysrc").read_text())
    assert fs == sorted(fs, key=lambda f: (f.line, f.col, f.rule, f.message))
    d = fs[0].to_dict()
    assert set(d) == {"rule", "severity", "message", "line", "col", "suggestion", "category", "source"}
    json.dumps([f.to_dict() for f in fs])
    assert all(isinstance(f, Finding) and f.rule in RULES for f in fs)


def test_target_changes_quoted_limits() -> None:
    src = "import nki\nimport nki.language as nl\n@nki.jit\ndef k(x):\n    t = nl.ndarray((256, 4), dtype=nl.float32)\n    return t\n"
    msg = next(f.message for f in analyze_nki(src, target="trn1") if f.rule == "NKI004")
    assert "trn1 has 128" in msg


def test_analysed_code_is_never_executed(tmp_path: Path) -> None:
    marker = tmp_path / "executed"
    src = f"open({str(marker)!r}, 'w').write('x')\nimport nki\n@nki.jit\ndef k(x):\n    return x\n"
    analyze_nki(src)
    migration_fidelity(parse_cuda((FIX / "cuda" / "vector_add.cu").read_text()), src)
    assert not marker.exists()


def test_migration_fidelity_bad_input() -> None:
    s = parse_cuda((FIX / "cuda" / "vector_add.cu").read_text())
    with pytest.raises(TypeError, match="CudaSummary"):
        migration_fidelity("not a summary", "")  # type: ignore[arg-type]
    with pytest.raises(UnknownRuleError, match="MIG999"):
        migration_fidelity(s, "x = 1", select=["MIG999"])
    (f,) = migration_fidelity(s, "def (:")
    assert f.rule == "NKI000"


def test_cli_lint_text_json_and_exit_codes() -> None:
    from nkieval.analysis.cli import lint

    runner = CliRunner()
    good = str(FIX / "good" / "good_vector_add.pysrc")
    r = runner.invoke(lint, [good, "--cuda", str(FIX / "cuda" / "vector_add.cu")])
    assert r.exit_code == 0, r.output
    bad = str(FIX / "mig" / "MIG002.pysrc")
    r = runner.invoke(lint, [bad, "--cuda", str(FIX / "cuda" / "vector_add.cu"), "--format", "json"])
    assert r.exit_code == 1
    rules = {f["rule"] for f in json.loads(r.stdout)}
    assert {"NKI003", "MIG002"} <= rules
    r = runner.invoke(lint, ["--list-rules"])
    assert r.exit_code == 0 and "MIG009" in r.output
    r = runner.invoke(lint, [good, "--cuda", str(FIX / "cuda" / "broken.cu")])
    assert r.exit_code != 0 and "no __global__ kernel" in r.output


def _all_sources() -> list[str]:
    files = sorted((FIX / "nki").glob("*.pysrc")) + sorted((FIX / "mig").glob("*.pysrc"))
    return [p.read_text() for p in files] + ["def k(:\n"]


def test_cached_walk_is_ast_walk_in_the_same_order() -> None:
    import ast

    from nkieval.analysis.nki.model import walk

    tree = ast.parse((FIX / "mig" / "MIG001.pysrc").read_text())
    nodes = list(ast.walk(tree))
    assert walk(tree) == nodes and walk(tree) is walk(tree)  # computed once, kept on the node
    for n in nodes[::7]:
        assert walk(n) == list(ast.walk(n))


def test_analyze_port_equals_the_two_separate_runs() -> None:
    from nkieval.analysis import analyze_port

    summary = parse_cuda((FIX / "cuda" / "vector_add.cu").read_text())
    n_mig = 0
    for src in _all_sources():
        nki, mig = analyze_port(summary, src, filename="k.py", target="trn2")
        assert nki == analyze_nki(src, "k.py", target="trn2")
        assert mig == migration_fidelity(summary, src, filename="k.py", target="trn2")
        n_mig += len(mig)
        assert analyze_port(None, src, filename="k.py")[1] is None
    assert n_mig  # the fixtures do produce MIG findings
    with pytest.raises(TypeError, match="CudaSummary"):
        analyze_port("not a summary", "x = 1")  # type: ignore[arg-type]
