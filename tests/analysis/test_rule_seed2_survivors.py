"""The four analysis-rule mutants left open by the seed-2 mutation run (issue #25, item 5), each pinned by the
behaviour its rule documents:

* MIG002 reports the kernel's ``def`` at its 1-based column (``Finding``'s contract): a kernel at an odd
  0-based column tells ``col_offset + 1`` from ``col_offset | 1``;
* NKI003 leaves a tiling loop to NKI009 when the kernel asserts the size is a multiple of the tile, also for a
  ceil-divided loop (where no ``%`` elsewhere hides the assertion);
* NKI008 needs a literal trip count above one: an empty loop covers no shape;
* NKI010 names, for a load that varies with an *outer* loop only, the innermost loop as the one to hoist out
  of (a warning), not the outer loop as an "inner" loop it varies with.
"""

from __future__ import annotations

from pathlib import Path

from nkieval.analysis import analyze_nki, migration_fidelity, parse_cuda

FIX = Path(__file__).parent / "fixtures"
HEAD = "import math\n\nimport nki\nimport nki.isa as nisa\nimport nki.language as nl\n\n"


def test_mig002_reports_a_kernel_at_an_odd_column_one_based():
    """The kernel is defined inside an `if` indented by one space: its `def` is at 0-based column 1, so the
    finding's (1-based) column is 2. It handles one fixed tile: no loop for NKI003, no assert for NKI009, so
    MIG002 falls back to the kernel's own location."""
    port = HEAD + (
        "if True:\n"
        " @nki.jit\n"
        " def vec_add(a, b):\n"
        "     out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)\n"
        "     ta = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.sbuf)\n"
        "     tb = nl.ndarray((128, 512), dtype=b.dtype, buffer=nl.sbuf)\n"
        "     nisa.dma_copy(dst=ta, src=a)\n"
        "     nisa.dma_copy(dst=tb, src=b)\n"
        "     nisa.tensor_tensor(dst=ta, data1=ta, data2=tb, op=nl.add)\n"
        "     nisa.dma_copy(dst=out, src=ta)\n"
        "     return out\n")
    cuda = parse_cuda((FIX / "cuda" / "vector_add.cu").read_text())
    found = [f for f in migration_fidelity(cuda, port, target="trn2") if f.rule == "MIG002"]
    assert [(f.line, f.col) for f in found] == [(9, 2)], found
    assert "no ragged-tail handling" in found[0].message


def test_nki003_leaves_an_asserted_ceil_divided_loop_to_nki009():
    """`assert n % 128 == 0` makes ceil(n / 128) tiles exact: the unclamped last tile never runs past the end,
    so NKI003 stays silent (its docstring: "A kernel that asserts X % T == 0 is reported by NKI009 instead")."""
    src = HEAD + (
        "@nki.jit\n"
        "def k(x):\n"
        "    n, f = x.shape\n"
        "    assert n % 128 == 0\n"
        "    out = nl.ndarray((n, f), dtype=x.dtype, buffer=nl.shared_hbm)\n"
        "    for i in range(math.ceil(n / 128)):\n"
        "        t = nl.ndarray((128, f), dtype=x.dtype, buffer=nl.sbuf)\n"
        "        nisa.dma_copy(dst=t, src=x[i * 128:(i + 1) * 128])\n"
        "        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128], src=t)\n"
        "    return out\n")
    rules = [f.rule for f in analyze_nki(src, "k.py", target="trn2")]
    assert "NKI003" not in rules and "NKI009" in rules, rules
    unasserted = src.replace("    assert n % 128 == 0\n", "")  # the same loop without the assertion is reported
    assert "NKI003" in [f.rule for f in analyze_nki(unasserted, "k.py", target="trn2")]


def _literal_loop_kernel(trips: int) -> str:
    """A kernel that never reads an input's metadata (no .shape, no .dtype) and loads in a literal loop."""
    return HEAD + (
        "@nki.jit\n"
        "def k(x):\n"
        "    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)\n"
        "    t = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)\n"
        f"    for i in range({trips}):\n"
        "        nisa.dma_copy(dst=t, src=x[i * 128:(i + 1) * 128])\n"
        "    nisa.dma_copy(dst=out, src=t)\n"
        "    return out\n")


def test_nki008_needs_a_literal_trip_count_above_one():
    """The loop-count clause of NKI008 is about a loop that tiles a fixed shape: an empty loop (range(0)) and a
    negative count load nothing, a one-trip loop covers one tile; only 2 or more literal trips are reported."""
    def loop_findings(trips: int) -> list[str]:
        return [f.message for f in analyze_nki(_literal_loop_kernel(trips), "k.py", target="trn2")
                if f.rule == "NKI008" and "literal trip count" in f.message]

    assert loop_findings(0) == [] and loop_findings(-1) == [] and loop_findings(1) == []
    assert len(loop_findings(2)) == 1 and "literal trip count 2" in loop_findings(2)[0]


def test_nki010_hoists_out_of_the_innermost_invariant_loop_when_only_an_outer_loop_varies():
    """Three nested loops; the load's slice depends on the outermost one only. The innermost loop (c) is the
    one it can move out of: a warning naming it, with no "inner loop" it would vary with."""
    src = HEAD + (
        "@nki.jit\n"
        "def k(x):\n"
        "    n, f = x.shape\n"
        "    t = nl.ndarray((128, f), dtype=x.dtype, buffer=nl.sbuf)\n"
        "    for a in range(n // 128):\n"
        "        for b in range(n // 128):\n"
        "            for c in range(n // 128):\n"
        "                nisa.dma_copy(dst=t, src=x[a * 128:(a + 1) * 128])\n"
        "    return t\n")
    found = [f for f in analyze_nki(src, "k.py", target="trn2") if f.rule == "NKI010"]
    assert [(f.severity, f.line) for f in found] == [("warning", 14)], found
    assert "range loop at line 13, but the slice" in found[0].message, found[0].message  # line 13: loop c
