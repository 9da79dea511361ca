"""Static rules at the points where mutation testing found them unchecked (issue #25, item 5). Each expectation is
the rule's documented behaviour (its module docstring), on kernels written for the case."""

from __future__ import annotations

from pathlib import Path

import pytest

from nkieval.analysis import analyze_nki, migration_fidelity, parse_cuda

HEAD = "import nki\nimport nki.isa as nisa\nimport nki.language as nl\nimport numpy as np\n\n\n@nki.jit\n"
FIX = Path(__file__).parent / "fixtures"


def _rules(src: str, rule: str) -> list:
    return [f for f in analyze_nki(src, "k.py", target="trn2") if f.rule == rule]


def _multiply_then_sum(call: str) -> str:
    return HEAD + ("def k(a, b):\n"
                   "    out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)\n"
                   "    x = nl.load(a)\n    y = nl.load(b)\n"
                   f"    p = {call}\n"
                   "    s = nl.sum(p, axis=1)\n"
                   "    nl.store(out, s)\n    return out\n")


@pytest.mark.parametrize("call,fires", [
    ("nl.multiply(x, y)", True),  # the product of two different tensors, then summed: a contraction on VectorE
    ("nl.multiply(x, y, nl.float32)", True),  # a third positional argument (dtype) does not change that
    ("nl.multiply(x, x)", False),  # a square (a norm) is not a contraction
])
def test_nki012_flags_an_nl_multiply_of_two_tensors_that_is_then_summed(call, fires):
    assert bool(_rules(_multiply_then_sum(call), "NKI012")) is fires


@pytest.mark.parametrize("kw,fires", [("op=np.add", True), ("op0=np.multiply", True), ("dtype=np.float32", False)])
def test_nki030_flags_a_numpy_ufunc_only_as_an_operator_argument(kw, fires):
    src = HEAD + ("def k(a):\n    out = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.shared_hbm)\n"
                  "    t = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.sbuf)\n"
                  f"    nisa.tensor_scalar(dst=t, data=t, operand0=1.0, {kw})\n    return out\n")
    found = [f for f in _rules(src, "NKI030") if "NumPy ufunc" in f.message]
    assert bool(found) is fires, found


def test_nki042_flags_numpy_on_a_tile_the_kernel_allocated():
    """NKI042: NumPy on any tensor or tile of the kernel is host-side work, the kernel's own tiles included."""
    src = HEAD + ("def k(a):\n    out = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.shared_hbm)\n"
                  "    t = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.sbuf)\n"
                  "    u = np.exp(t)\n    return out\n")
    assert [f.line for f in _rules(src, "NKI042")] == [11]


def test_mig008_points_at_the_first_vector_contraction():
    """The fixture's hand-written GEMV (NKI012 at line 24, column 13) with a second multiply-and-sum after it,
    nested deeper (column 17): the MIG008 finding stays on the first."""
    src = (FIX / "mig" / "MIG008.pysrc").read_text().replace("    return out\n", (
        "    if m > 0:\n"
        "        if n > 0:\n"
        "            if k > 0:\n"
        "                prod2 = nl.ndarray((128, k), dtype=nl.float32, buffer=nl.sbuf)\n"
        "                nisa.tensor_tensor(dst=prod2, data1=at, data2=bt, op=nl.multiply)\n"
        "                col2 = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)\n"
        "                nisa.tensor_reduce(dst=col2, op=nl.add, data=prod2, axis=1)\n"
        "    return out\n"))
    summary = parse_cuda((FIX / "cuda" / "gemm_wmma.cu").read_text())
    nki012 = _rules(src, "NKI012")
    assert len(nki012) == 2 and nki012[0].col != nki012[1].col, nki012
    found = [f for f in migration_fidelity(summary, src, filename="k.py", target="trn2") if f.rule == "MIG008"]
    assert [(f.line, f.col) for f in found] == [(24, 13)], found
