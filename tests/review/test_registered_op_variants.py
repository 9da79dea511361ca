"""A task whose numerics op is a registered one (not ``reference``) gets its reference.py ``VARIANTS`` tried by
the diagnosis too, each called on the task's own inputs: a failing output that follows a declared wrong formula
is named by that formula's cause, not only by its symptom."""

from __future__ import annotations

import json

import numpy as np

from nkieval.review import adapters
from nkieval.tasks import load_reference_variants
from nkieval.tasks.loader import BUILTIN_ROOT, load_task


def _named(task_id: str, inputs: dict, dims: dict, got: np.ndarray, words: str, with_variants: bool) -> bool:
    task = load_task(BUILTIN_ROOT / task_id)
    assert task.numerics.op != "reference"
    variants = load_reference_variants(task) if with_variants else ()
    prepared, why = adapters.numerics_prepare(task, inputs, "normal", True, None, dims, variants=variants)
    assert prepared is not None, why
    verdict, why = adapters.numerics_judge(prepared, got)
    assert verdict is not None and verdict["status"] == "fail", why
    return words in json.dumps(verdict, default=str)


def test_a_scan_without_carry_is_named_by_its_cause():
    x = np.random.default_rng(0).standard_normal((4, 1100)).astype(np.float32)
    chunks = [np.cumsum(x[:, lo:lo + 512], axis=1) for lo in range(0, 1100, 512)]
    got = np.concatenate(chunks, axis=1).astype(np.float32)
    dims = {"N": 4, "D": 1100}
    assert _named("cumsum", {"x": x}, dims, got, "not carried", with_variants=True)
    assert not _named("cumsum", {"x": x}, dims, got, "not carried", with_variants=False)


def test_a_variant_gets_the_tasks_inputs_in_their_order():
    """Two inputs (fp8 values and a per-row scale): the formula is called with them as the task declares them."""
    import ml_dtypes

    rng = np.random.default_rng(1)
    q = rng.standard_normal((8, 64)).astype(ml_dtypes.float8_e4m3fn)
    scale = rng.uniform(0.5, 2.0, (8, 1)).astype(np.float32)
    got = (q.astype(np.float32) * scale[0, 0]).astype(np.float32)
    task = load_task(BUILTIN_ROOT / "fp8_dequantize")
    names = [t.name for t in task.inputs]
    inputs = dict(zip(names, (q, scale)))
    dims = {d: n for d, n in zip(("N", "D"), q.shape)}
    assert _named("fp8_dequantize", inputs, dims, got, "first row's scale", with_variants=True)
