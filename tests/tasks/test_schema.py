"""Task format: the built-in tasks load and check; malformed tasks fail with specific errors."""

import shutil
from pathlib import Path

import pytest

from nkieval.tasks import BUILTIN_ROOT, TaskError, builtin_ids, check_task, load_task
from nkieval.tasks.inputs import FAMILIES, generate

VECTOR_ADD = BUILTIN_ROOT / "vector_add"


@pytest.mark.parametrize("tid", builtin_ids())
def test_builtin_task_checks_clean(tid):
    rep = check_task(tid)
    assert rep.ok, rep.errors
    t = rep.task
    assert t.hidden_shapes and t.public_shapes
    assert any(any(v % 128 for v in s.dims.values()) for s in t.hidden_shapes), "needs a ragged hidden shape"
    assert len(t.flawed) >= 2  # the suite's floor (issue 7); the first six tasks ship >= 3


def test_first_tasks_ship_three_flawed_candidates():
    assert len(load_task("vector_add").flawed) >= 3


def _copy(tmp_path: Path) -> Path:
    d = tmp_path / "t"
    shutil.copytree(VECTOR_ADD, d)
    return d


def _edit(d: Path, old: str, new: str) -> None:
    p = d / "task.toml"
    text = p.read_text()
    assert old in text
    p.write_text(text.replace(old, new, 1))


@pytest.mark.parametrize("old,new,rule,where", [
    ('dtype = "float32" },\n  { name = "b"', 'dtype = "float64" },\n  { name = "b"', "dtype", "signature.inputs[0].dtype"),
    ("public = [{ N = 65536 }]", "public = [{ M = 65536 }]", "shape-binding", "shapes.public[0]"),
    ('level = 1', 'level = 7', "value", "level"),
    ('kernel = "vector_add"', 'kernal = "vector_add"', "unknown-key", "task.toml"),
    ('op = "add"', 'op = "add"\nrecipe2 = 1', "unknown-key", "numerics"),
    ('criterion = "correctness"', 'criterion = "speed"', "value", "flawed[0]"),
    ('accumulate = "fp32"', 'acumulate = "fp32"', "recipe", "numerics.recipe"),
])
def test_malformed_task_names_rule_and_place(tmp_path, old, new, rule, where):
    d = _copy(tmp_path)
    _edit(d, old, new)
    with pytest.raises(TaskError) as ei:
        load_task(d)
    assert ei.value.rule == rule
    assert where in ei.value.where


def test_missing_reference_file(tmp_path):
    d = _copy(tmp_path)
    (d / "reference.py").unlink()
    with pytest.raises(TaskError, match=r"reference\.py") as ei:
        load_task(d)
    assert ei.value.rule == "missing-file"


def test_reference_signature_must_match_inputs(tmp_path):
    d = _copy(tmp_path)
    (d / "reference.py").write_text("def reference(x, y):\n    return x + y\n")
    with pytest.raises(TaskError, match=r"declared inputs \['a', 'b'\]") as ei:
        load_task(d)
    assert ei.value.rule == "reference-signature"


def test_flawed_candidate_must_define_entry_point(tmp_path):
    d = _copy(tmp_path)
    (d / "flawed" / "skips_tail.py").write_text("def other(a, b):\n    pass\n")
    with pytest.raises(TaskError, match="entry point `vector_add`"):
        load_task(d)


def test_check_reports_wrong_reference_output_shape(tmp_path):
    d = _copy(tmp_path)
    (d / "reference.py").write_text("import numpy as np\n\ndef reference(a, b):\n    return (a + b)[:-1]\n")
    rep = check_task(d)
    assert not rep.ok
    assert any("has shape" in e for e in rep.errors)


def test_unknown_task_id():
    with pytest.raises(TaskError, match="built-in"):
        load_task("no_such_task")


@pytest.mark.parametrize("family", list(FAMILIES))
def test_input_families_generate_storage_dtypes(family):
    x = generate("x", (4, 5), "bfloat16", family, 1)
    assert x.shape == (4, 5) and x.dtype.name == "bfloat16"
    y = generate("x", (4, 5), "bfloat16", family, 1)
    assert (x.astype("float32") == y.astype("float32")).all()


def test_reference_variants_are_loaded_and_checked(tmp_path):
    from nkieval.tasks import load_reference_variants

    d = _copy(tmp_path)
    ref = d / "reference.py"
    base = ref.read_text()
    ref.write_text(base + "\n\nVARIANTS = {'swapped': {'cause': 'computes a - b', 'action': 'add',\n"
                   "                         'fn': lambda a, b: a - b}}\n")
    t = load_task(d)
    (v,) = load_reference_variants(t)
    assert (v.id, v.cause, v.action) == ("swapped", "computes a - b", "add")
    assert check_task(d).ok

    ref.write_text(base + "\n\nVARIANTS = {'bad': {'cause': 'x', 'fn': lambda a, b: a}}\n")
    with pytest.raises(TaskError, match=r"VARIANTS\['bad'\] lacks \['action'\]") as ei:
        load_reference_variants(load_task(d))
    assert ei.value.rule == "reference-variants"
    assert any("VARIANTS['bad']" in e for e in check_task(d).errors)

    ref.write_text(base + "\n\nVARIANTS = {'short': {'cause': 'x', 'action': 'y', 'fn': lambda a, b: a[:1]}}\n")
    errs = check_task(d).errors
    assert any("VARIANTS['short'] returns shape" in e for e in errs), errs


def _set_perf(d: Path, fraction: str, note: str) -> None:
    """Replace the copied task's [perf] fraction and note lines."""
    p = d / "task.toml"
    lines = p.read_text().splitlines()
    for i, line in enumerate(lines):
        if line.startswith("expert_roofline_fraction ="):
            lines[i] = f"expert_roofline_fraction = {fraction}"
        elif line.startswith("note ="):
            lines[i] = f"note = {note}"
    p.write_text("\n".join(lines) + "\n")


def test_low_roofline_fraction_needs_a_perf_note(tmp_path):
    """A stated expert roofline fraction below 0.3 must say why in [perf] note (rule perf-note)."""
    from nkieval.tasks.schema import LOW_ROOFLINE_FRACTION

    d = _copy(tmp_path)
    _set_perf(d, "0.2", '"  "')
    with pytest.raises(TaskError) as ei:
        load_task(d)
    assert ei.value.rule == "perf-note" and ei.value.where == "task.toml:perf.note"
    assert "task.toml" in str(ei.value) and "perf-note" in str(ei.value) and "0.2" in str(ei.value)
    assert not check_task(d).ok
    _set_perf(d, "0.2", '"Vector-bound: four passes per element."')
    assert load_task(d).perf.expert_roofline_fraction == 0.2
    _set_perf(d, str(LOW_ROOFLINE_FRACTION), '""')  # at the threshold no reason is needed
    assert load_task(d).perf.note == ""


@pytest.mark.parametrize("fraction", ["0", "-0.1", "1.5"])
def test_roofline_fraction_must_be_a_fraction(tmp_path, fraction):
    d = _copy(tmp_path)
    _set_perf(d, fraction, '"why"')
    with pytest.raises(TaskError) as ei:
        load_task(d)
    assert ei.value.rule == "value" and ei.value.where == "task.toml:perf.expert_roofline_fraction"


@pytest.mark.parametrize("tid", builtin_ids())
def test_builtin_low_roofline_fractions_give_a_reason(tid):
    """Every built-in task states its expert's roofline fraction; below 0.3 the note names the bottleneck."""
    from nkieval.tasks.schema import LOW_ROOFLINE_FRACTION

    perf = load_task(tid).perf
    assert perf.expert_roofline_fraction is not None
    if perf.expert_roofline_fraction < LOW_ROOFLINE_FRACTION:
        assert len(perf.note) >= 80, perf.note
