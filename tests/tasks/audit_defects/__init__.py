"""Seeded defective tasks for the task audit (issue 28): one defect each, made from a good built-in task.

Each :class:`Defect` copies a small built-in task (``relu``, or ``silu`` where the op must round) into
a temporary directory and applies one documented transformation; the audit must name it with
``rule`` in ``criterion``. Generating them keeps the repository small and makes each defect's
one-line change readable here.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from nkieval.tasks.loader import BUILTIN_ROOT


@dataclass(frozen=True)
class Defect:
    id: str
    base: str
    criterion: str  # the audit criterion that must name it
    rule: str  # the finding's rule id
    what: str
    apply: Callable[[Path], None]
    bad_task: bool = False  # the task does not load (audit verdict bad-task, exit 2)


def _sub(path: Path, pattern: str, repl: str, count: int = 1) -> None:
    text = path.read_text()
    new, n = re.subn(pattern, repl, text, count=count, flags=re.S)
    assert n, f"{path.name}: {pattern!r} not found"
    path.write_text(new)


def _toml(d: Path, pattern: str, repl: str) -> None:
    _sub(d / "task.toml", pattern, repl)


def _append_ref(d: Path, text: str) -> None:
    p = d / "reference.py"
    p.write_text(p.read_text() + "\n" + text)


_RELU_SHAPES = "[shapes]\n{shapes}\n\n[perf]"


def _shapes(d: Path, public: str, hidden: str) -> None:
    _toml(d, r"\[shapes\].*?\n\[perf\]", _RELU_SHAPES.format(shapes=f"public = {public}\nhidden = {hidden}"))


DEFECTS: list[Defect] = [
    # --- Well-formed
    Defect("unknown_numerics_op", "relu", "well_formed", "op", "numerics.op names no registered op",
           lambda d: _toml(d, r'op = "relu"', 'op = "l2normalise"'), bad_task=True),
    Defect("reference_op_without_k", "relu", "well_formed", "numerics-op",
           "numerics.op = 'reference' with an oracle but no contraction length k",
           lambda d: (_toml(d, r'op = "relu"', 'op = "reference"'),
                      _append_ref(d, "def oracle(x):\n    return np.maximum(x.astype(np.float64), 0.0)\n"))),
    Defect("reference_syntax_error", "relu", "well_formed", "reference", "reference.py does not parse",
           lambda d: _append_ref(d, "def broken(:\n    pass\n"), bad_task=True),
    Defect("todo_statement", "relu", "well_formed", "placeholder", "the statement still holds a TODO",
           lambda d: _toml(d, r"Every element must be written\.", "Every element must be written. TODO: layouts.")),
    Defect("variant_is_reference", "relu", "well_formed", "variant-is-reference",
           "a known wrong formula identical to the reference",
           lambda d: _append_ref(d, 'VARIANTS = {"same": {"cause": "no flaw", "action": "none", '
                                    '"fn": lambda x: np.maximum(x.astype(np.float64), 0.0)}}\n')),
    # --- Reference is right
    Defect("reference_off_by_scale", "relu", "reference", "reference-vs-oracle",
           "the reference computes 1.01 * relu(x)",
           lambda d: _sub(d / "reference.py", r"return np\.maximum\(x, np\.float32\(0\)\)",
                          "return np.float32(1.01) * np.maximum(x, np.float32(0))")),
    Defect("reference_nondeterministic", "relu", "reference", "reference-nondeterministic",
           "the reference adds fresh noise on every call",
           lambda d: _sub(d / "reference.py", r"return np\.maximum\(x, np\.float32\(0\)\)\.astype\(np\.float32\)",
                          "return (np.maximum(x, np.float32(0)) + np.random.default_rng().random(x.shape) * 1e-3)"
                          ".astype(np.float32)")),
    Defect("reference_raises_on_integers", "relu", "reference", "reference-raises",
           "the reference raises on the integers family",
           lambda d: _sub(d / "reference.py", r"def reference\(x\):\n",
                          "def reference(x):\n    if np.all(x == np.round(x)):\n"
                          "        raise ValueError('integer inputs are not supported')\n")),
    Defect("statement_dtype_mismatch", "relu", "reference", "statement-dtype",
           "the statement says bf16 where the signature is fp32",
           lambda d: _toml(d, r"for an fp32 activation tensor", "for a bf16 activation tensor")),
    Defect("statement_wrong_dims", "relu", "reference", "statement-shape",
           "the statement's shape uses a dimension the signature does not have",
           lambda d: _toml(d, r"shape \[N, D\]", "shape [N, C]")),
    Defect("cuda_disagrees_with_reference", "relu", "reference", "reference-vs-cuda",
           "kernel.cu computes a leaky ReLU (0.01 x below zero) where the reference clamps to 0",
           lambda d: _sub(d / "kernel.cu", r"v > 0\.0f \? v : 0\.0f", "v > 0.0f ? v : 0.01f * v")),
    # --- Tests discriminate
    Defect("broken_expert", "relu", "discriminates", "expert-fails", "the expert skips the ragged tail",
           lambda d: shutil.copy(d / "flawed" / "skips_tail.py", d / "solution_nki.py")),
    Defect("positive_inputs_only", "relu", "discriminates", "trivial-passes",
           "only positive inputs: relu is the identity, a copy of the input passes",
           lambda d: _toml(d, r'families = \["normal", "integers"\]', 'families = ["positive"]')),
    Defect("tail_never_exercised", "relu", "discriminates", "mutation-kill-rate",
           "every shape is whole 128-row tiles: the expert's tail branch is never tested",
           lambda d: _shapes(d, "[{ N = 128, D = 256 }]", "[{ N = 256, D = 128 }, { N = 128, D = 384 }]")),
    # --- Tolerances fit the op
    Defect("rtol_100", "relu", "tolerance", "tolerance-absurd", "rtol = 100",
           lambda d: _toml(d, r"rtol = 0\.0", "rtol = 100.0")),
    Defect("atol_admits_leaky_relu", "relu", "tolerance", "tolerance-admits-variant",
           "atol = 0.05 admits leaky ReLU (slope 0.001), a declared wrong formula",
           lambda d: (_toml(d, r"atol = 0\.0", "atol = 0.05"),
                      _append_ref(d, 'VARIANTS = {"leaky": {"cause": "leaky ReLU (slope 0.001)", "action": "use '
                                     'max(x, 0)", "fn": lambda x: np.maximum(x.astype(np.float64), '
                                     '0.001 * x.astype(np.float64))}}\n'))),
    Defect("silu_exact_tolerance", "silu", "tolerance", "tolerance-too-tight",
           "rtol = atol = 0 for silu, which the standard lets round by several ulps",
           lambda d: (_toml(d, r"rtol = 1e-2", "rtol = 0.0"), _toml(d, r"atol = 1e-3", "atol = 0.0"))),
    # --- Coverage
    Defect("no_ragged_shape", "relu", "coverage", "no-ragged-shape", "every hidden size a multiple of 128",
           lambda d: _shapes(d, "[{ N = 256, D = 512 }]", "[{ N = 384, D = 1024 }, { N = 128, D = 128 }]")),
    Defect("single_tile_only", "relu", "coverage", "no-multi-tile-shape", "every hidden shape fits one tile",
           lambda d: _shapes(d, "[{ N = 64, D = 100 }]", "[{ N = 100, D = 7 }, { N = 1, D = 3 }]")),
    Defect("hidden_copies_public", "relu", "coverage", "hidden-equals-public", "the hidden shape is the public one",
           lambda d: _shapes(d, "[{ N = 256, D = 512 }]", "[{ N = 256, D = 512 }]")),
    Defect("softmax_without_large_logits", "relu", "coverage", "hazard-family-missing",
           "tagged softmax, but no family with large logits",
           lambda d: _toml(d, r'tags = \["elementwise"', 'tags = ["softmax"')),
    # --- Hardware-appropriate
    Defect("stale_roofline_fraction", "relu", "hardware", "stale-roofline-fraction",
           "states 0.95 of roofline, which the expert does not reach",
           lambda d: _toml(d, r"expert_roofline_fraction = 0\.6\b", "expert_roofline_fraction = 0.95")),
    Defect("baseline_is_expert", "relu", "hardware", "baseline-not-slower", "the baseline is the expert",
           lambda d: shutil.copy(d / "solution_nki.py", d / "baseline_nki.py")),
    Defect("broken_baseline", "relu", "hardware", "baseline-fails", "the baseline skips the ragged tail",
           lambda d: shutil.copy(d / "flawed" / "skips_tail.py", d / "baseline_nki.py")),
    # --- Hard to game
    Defect("public_shape_is_only_shape", "relu", "gaming", "hostile-passes",
           "hidden shapes repeat the public one: a kernel hard-coded to it passes",
           lambda d: _shapes(d, "[{ N = 300, D = 1000 }]", "[{ N = 300, D = 1000 }]")),
    # --- Flawed candidates prove something
    Defect("flawed_is_correct", "relu", "flawed", "flawed-not-caught", "a 'flawed' candidate that is the expert",
           lambda d: shutil.copy(d / "solution_nki.py", d / "flawed" / "skips_tail.py")),
    Defect("evidence_in_every_review", "relu", "flawed", "evidence-in-expert-review",
           "evidence word 'fp32' is the recipe's format, printed by every numerics finding",
           lambda d: _toml(d, r'evidence = \["never written"\]', 'evidence = ["never written", "fp32"]')),
    Defect("evidence_not_named", "relu", "flawed", "evidence-not-found", "evidence the review never writes",
           lambda d: _toml(d, r'evidence = \["never written"\]', 'evidence = ["bananas"]')),
]


def make_base(base: str, root: Path, name: str) -> Path:
    """A copy of built-in task ``base`` named ``name``. For relu the thread-port flawed candidate is
    dropped (its review is the slowest part of a relu audit and no defect is about it), and so is any
    Beta-1 twin of the expert; the control test audits this same prepared copy."""
    d = root / name
    shutil.copytree(BUILTIN_ROOT / base, d)
    _sub(d / "task.toml", r'id = "[a-z_0-9]+"', f'id = "{name}"')
    if base == "relu":
        _sub(d / "task.toml", r'\[\[flawed\]\]\nfile = "flawed/thread_port\.py".*?\n\n', "")
    (d / "solution_beta1.py").unlink(missing_ok=True)  # the Beta-1 twin is audited on the built-in task
    return d


def make(defect: Defect, root: Path) -> Path:
    """The defective task directory under ``root`` (a prepared copy of its base with the defect applied)."""
    d = make_base(defect.base, root, defect.id)
    defect.apply(d)
    return d
