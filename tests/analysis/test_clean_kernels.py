"""Precision: expert-style kernels (written for these tests) give no errors or warnings, NKI or MIG."""

from __future__ import annotations

from pathlib import Path

import pytest

from nkieval.analysis import analyze_nki, migration_fidelity, parse_cuda

FIX = Path(__file__).parent / "fixtures"
GOOD = sorted((FIX / "good").glob("*.pysrc"))


@pytest.mark.parametrize("path", GOOD, ids=lambda p: p.stem)
def test_good_kernel_has_no_errors_or_warnings(path: Path) -> None:
    src = path.read_text()
    cuda = FIX / "cuda" / src.splitlines()[0].split(":", 1)[1].strip()
    findings = analyze_nki(src, path.name, target="trn2")
    findings += migration_fidelity(parse_cuda(cuda.read_text()), src, filename=path.name, target="trn2")
    bad = [f"{f.rule} {f.severity} line {f.line}: {f.message}" for f in findings if f.severity != "info"]
    assert not bad, "\n".join(bad)


def test_good_corpus_is_not_empty() -> None:
    assert len(GOOD) >= 5


def test_flawed_variant_of_a_good_kernel_is_caught() -> None:
    """Remove the min() clamp from the clean vector add: the tail rules must fire (tests can fail)."""
    src = (FIX / "good" / "good_vector_add.pysrc").read_text()
    flawed = src.replace("math.ceil(n / p)", "n // p").replace("rows = min(p, n - i * p)", "rows = p")
    assert flawed != src
    rules = {f.rule for f in analyze_nki(flawed, target="trn2")}
    assert "NKI003" in rules
    summary = parse_cuda((FIX / "cuda" / "vector_add.cu").read_text())
    assert any(f.rule == "MIG002" and f.severity == "error" for f in migration_fidelity(summary, flawed))


def test_flawed_softmax_in_bf16_and_without_max() -> None:
    src = (FIX / "good" / "good_row_softmax.pysrc").read_text()
    summary = parse_cuda((FIX / "cuda" / "row_softmax.cu").read_text())
    bf16 = src.replace("dtype=nl.float32", "dtype=nl.bfloat16")
    assert {"MIG003"} <= {f.rule for f in migration_fidelity(summary, bf16)}
    no_max = src.replace("nisa.tensor_reduce(dst=neg_max[0:rows], op=nl.maximum, data=t[0:rows], axis=1, negate=True)",
                         "nisa.memset(dst=neg_max[0:rows], value=0.0)")
    assert no_max != src
    assert "MIG004" in {f.rule for f in migration_fidelity(summary, no_max)}
