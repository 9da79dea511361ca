"""Analysis-rule behaviour where mutation testing (seed 3) found it unchecked (issue #25, item 5): NKI008 reports a
comparison that pins an input's shape to literal sizes, not one between two shapes."""

from __future__ import annotations

from nkieval.analysis import analyze_nki

HEAD = "import nki\nimport nki.isa as nisa\nimport nki.language as nl\n\n\n@nki.jit\ndef k(x, y):\n"
BODY = ("    n, f = x.shape\n"
        "    out = nl.ndarray((n, f), dtype=x.dtype, buffer=nl.shared_hbm)\n"
        "    t = nl.ndarray((128, f), dtype=x.dtype, buffer=nl.sbuf)\n"
        "    nisa.dma_copy(dst=t, src=x[0:128])\n"
        "    nisa.dma_copy(dst=out[0:128], src=t)\n"
        "    return out\n")


def _pins(condition: str) -> list[str]:
    src = HEAD + f"    assert {condition}\n" + BODY
    return [f.message for f in analyze_nki(src, "k.py", target="trn2") if f.rule == "NKI008" and "pins" in f.message]


def test_nki008_reports_a_dimension_pinned_to_a_literal_not_two_shapes_compared():
    assert _pins("x.shape[0] == y.shape[0]") == []  # the inputs agree with each other: every size still works
    assert _pins("x.shape[1] == 512") == ["`x.shape[1] == 512` pins the input to one literal shape"]
