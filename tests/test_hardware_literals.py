"""Hardware facts once (issue #25, item 6): the numbers that are hardware facts live in
``hardware/data/*.toml`` and code reads them from the target (``get_target(t).partitions``,
``target.has("feature")``), not as literals or generation comparisons.

The test reads every module of ``src/nkieval`` outside ``hardware/`` (and the NKI kernels that are data:
built-in tasks, examples, calibration kernels), finds integer constants equal to a known fact in code
(strings, comments and docstrings do not count) and compares them with the list below, each with the
reason it stays. The list is exact: a new literal fails, and so does a listed one that is gone (remove
it from the list). The same for ``generation`` compared with a number.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import nkieval

SRC = Path(nkieval.__file__).resolve().parent
SKIP = ("hardware/", "tasks/builtin/", "examples/", "perf/calibration/kernels.py")

#: value -> the fact it is (hardware/data/*.toml)
FACTS = {128: "partitions / PE array rows", 2048: "PSUM bank bytes", 16384: "PSUM bytes per partition",
         229376: "trn2 SBUF bytes per partition", 196608: "trn1 SBUF bytes per partition",
         200_000: "the default instruction budget"}

#: (module, value) -> (count, why the literal stays)
ALLOWED: dict[tuple[str, int], tuple[int, str]] = {
    ("numerics/locate.py", 128): (7, "numerics stands alone (no hardware import): the 128-row tile edge a "
                                    "diagnosis looks for in error patterns"),
    ("numerics/platforms.py", 128): (3, "numerics stands alone: default K chunk of the platform models"),
    ("numerics/recipe.py", 128): (2, "numerics stands alone: the recipe's default tile_k and FP8 promotion"),
    ("numerics/inputs.py", 128): (2, "test sizes that straddle the tile edge (127, 128, 129)"),
    ("numerics/inputs.py", 16384): (1, "a test K size, not the PSUM size"),
    ("perf/calibration/validate.py", 128): (6, "shapes of the calibration micro-benchmarks' inputs"),
    ("perf/calibration/validate.py", 16384): (1, "a calibration input size"),
    ("review/isolation/_linux.py", 16384): (1, "a pipe read size, not a hardware fact"),
    ("review/isolation/pool.py", 2048): (1, "a buffer size, not a hardware fact"),
    ("review/stages/differential.py", 2048): (1, "the ablation case's least element count, not the PSUM bank"),
    ("sim/program/codec.py", 200_000): (1, "the definition of DEFAULT_MAX_INSTRUCTIONS, with the program's "
                                          "other bounds"),
    ("sim/isa/gather.py", 128): (1, "a table keyed by active partition counts (128, 96, 64, 32)"),
    ("sim/isa/random.py", 128): (1, "to do: the PRNG state's lane count"),
    ("sim/isa/tensor_engine.py", 128): (1, "the tile sizes the ISA names (32, 64, 128) in a message's rule choice"),
    ("reward/workers.py", 128): (1, "the shell's exit status of a process ended by a signal (128 + signal)"),
}


def _modules() -> list[tuple[str, ast.AST]]:
    out = []
    for p in sorted(SRC.rglob("*.py")):
        rel = p.relative_to(SRC).as_posix()
        if not rel.startswith(SKIP) and rel not in SKIP:
            out.append((rel, ast.parse(p.read_text(), filename=rel)))
    return out


def test_hardware_facts_are_not_literals_outside_hardware():
    seen: Counter[tuple[str, int]] = Counter()
    for rel, tree in _modules():
        for n in ast.walk(tree):
            if isinstance(n, ast.Constant) and type(n.value) is int and n.value in FACTS:
                seen[(rel, n.value)] += 1
    want = {k: n for k, (n, _) in ALLOWED.items()}
    assert dict(seen) == want, {"new": {k: v for k, v in seen.items() if want.get(k) != v},
                                "gone": {k: v for k, v in want.items() if seen.get(k) != v}}


def test_no_generation_number_comparisons_in_checks():
    """Features are named capabilities of a target (``target.has("indirect")``), not ``generation >= 4``
    (the instruction decorator's ``min_generation`` is each instruction's documented minimum, compared with a
    parameter, not a number written in a check)."""
    found = []
    for rel, tree in _modules():
        for n in ast.walk(tree):
            if isinstance(n, ast.Compare) and any(isinstance(c, ast.Constant) and type(c.value) is int
                                                  for c in n.comparators):
                left = n.left
                if isinstance(left, ast.Attribute) and left.attr in ("generation", "nc_version"):
                    found.append(f"{rel}:{n.lineno}")
    assert found == [], found


def test_the_facts_named_here_are_the_data():
    from nkieval.hardware import get_target

    t2, t1 = get_target("trn2"), get_target("trn1")
    assert t2.partitions == 128 and t2.pe_array_rows == 128 and t2.psum_bank_bytes == 2048
    assert t2.psum_bytes_per_partition == 16384 and t2.sbuf_bytes_per_partition == 229376
    assert t1.sbuf_bytes_per_partition == 196608
    from nkieval.sim.program.codec import DEFAULT_MAX_INSTRUCTIONS

    assert DEFAULT_MAX_INSTRUCTIONS == 200_000


def test_the_task_schema_and_the_sandbox_read_the_one_instruction_budget():
    """A task without [limits] max_instructions and a sandbox built without limits get the budget defined with
    the program format's bounds (the literal appears nowhere else: the test above)."""
    from nkieval.review.sandbox import SandboxLimits
    from nkieval.sim.program import codec
    from nkieval.tasks.schema import Limits

    assert SandboxLimits().max_instructions == Limits().max_instructions == codec.DEFAULT_MAX_INSTRUCTIONS
