"""Issue 30, closing: later outputs of multi-output tasks are diagnosed with the task's own known wrong formulas
(``VARIANTS[id]["outputs"]``) and judged in their own dtype; the lean JSON 3.2 leaves out the per-case prose
and the uncertainty statement's sources (the hardware data holds them)."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from nkieval.review.lean import SOURCES_OMITTED, restore_uncertainty
from nkieval.review.report import expand_references, to_markdown, validate_report
from nkieval.tasks import TaskError, builtin_tasks, load_reference_variants, load_task
from nkieval.tasks.loader import BUILTIN_ROOT


def _findings_md(md: str) -> str:
    m = re.search(r"^## Findings\n(.*?)(?=^## |\Z)", md, flags=re.S | re.M)
    return m.group(1) if m else ""


def _output(c, name):
    return next(o for o in c.outputs if o["name"] == name)


# ------------------------------------------------------------------------------ every later output is judged
def test_every_later_float_output_of_a_builtin_task_has_an_oracle():
    from nkieval.review.stages.judge import output_oracles_of

    multi = [t for t in builtin_tasks() if len(t.outputs) > 1]
    assert len(multi) >= 8
    for t in multi:
        oracles = output_oracles_of(t)
        for o in t.outputs[1:]:
            # an integer output is exact: Correctness judges it; every float output has its float64 oracle
            assert o.name in oracles or "int" in o.dtype, (t.id, o.name)


# ------------------------------------------------------------------------------ task-specific causes
@pytest.mark.slow
def test_a_later_output_gets_the_tasks_own_cause():
    # flash_attention_bwd's no_delta_term also changes dk (dS feeds dk = dS^T Q) and leaves dv (P^T dO) right:
    # dk is diagnosed with the task's formula, not a generic "constant factor", and the finding says the
    # cause is the same instead of stating it twice
    from nkieval.review.pipeline import review

    r = review("flash_attention_bwd", str(BUILTIN_ROOT / "flash_attention_bwd" / "flawed" / "no_delta_term.py"),
               seed=7, compare_references=False)
    dk = [_output(c, "dk") for c in r.cases]
    dv = [_output(c, "dv") for c in r.cases]
    assert all(o["numerics"]["status"] == "fail" for o in dk)
    assert all(o["numerics"]["status"] == "pass" and not o["numerics"].get("findings") for o in dv)
    causes = [o["numerics"]["findings"][0]["id"] for o in dk if o["numerics"].get("findings")]
    assert causes == ["no_delta_term"] * 3, causes
    sec = _findings_md(to_markdown(r))
    assert "dk (the same cause, reproduced)" in sec, sec
    assert sec.count("drops the Di = rowsum(dO * O) term") == 1, sec


@pytest.mark.slow
def test_a_later_output_is_judged_in_its_own_dtype():
    # fp8_quantize's scale is fp32: bounded by fp32 rounding, not by q's fp8 rounding, so a scale 240/448 of
    # the right one fails the numerical standard wherever Correctness finds it wrong, with the task's cause
    from nkieval.review.pipeline import review

    r = review("fp8_quantize", str(BUILTIN_ROOT / "fp8_quantize" / "flawed" / "e4m3fn_range.py"), seed=7,
               compare_references=False)
    scale = [_output(c, "scale") for c in r.cases]
    assert scale and all(o["correct"] is False for o in scale)
    assert all(o["numerics"]["status"] == "fail" for o in scale), [o["numerics"] for o in scale]
    causes = [o["numerics"]["findings"][0]["id"] for o in scale if o["numerics"].get("findings")]
    assert causes and set(causes) == {"e4m3fn_range"}, causes


def _task_copy(tmp_path, task_id):
    dst = tmp_path / task_id
    shutil.copytree(BUILTIN_ROOT / task_id, dst)
    return dst


def test_variant_outputs_must_name_later_outputs(tmp_path):
    d = _task_copy(tmp_path, "fp8_quantize")
    ref = d / "reference.py"
    src = ref.read_text()
    assert '"outputs": {"scale": e4m3fn_range_oracle_scale}' in src
    ref.write_text(src.replace('"outputs": {"scale": e4m3fn_range_oracle_scale}',
                               '"outputs": {"q": e4m3fn_range_oracle_scale}'))
    with pytest.raises(TaskError) as e:
        load_reference_variants(load_task(d))
    assert e.value.rule == "reference-variants" and "'q'" in str(e.value)
    ref.write_text(src.replace('"outputs": {"scale": e4m3fn_range_oracle_scale}', '"outputs": {"scale": 1.0}'))
    with pytest.raises(TaskError):
        load_reference_variants(load_task(d))


def test_variant_outputs_reach_the_later_output_only():
    from nkieval.review.stages.judge import output_recipe, output_variants

    task = load_task("flash_attention_bwd")
    vs = {v.id: v for v in load_reference_variants(task)}
    # no_delta_term has a formula for dk only; bf16_operands for dk and dv
    assert [v.id for v in output_variants(list(vs.values()), "dk")] == ["no_delta_term", "bf16_operands"]
    assert [v.id for v in output_variants(list(vs.values()), "dv")] == ["bf16_operands"]
    for name, v in (("dk", "no_delta_term"), ("dk", "bf16_operands"), ("dv", "bf16_operands")):
        (later,) = [x for x in output_variants(list(vs.values()), name) if x.id == v]
        assert later.fn is vs[v].outputs[name] and later.fn is not vs[v].fn and later.outputs == {}
    fp8 = load_task("fp8_quantize")
    assert output_recipe(fp8, 1)["output"] == "float32" and fp8.numerics.recipe["output"] == "fp8_e4m3"


# ------------------------------------------------------------------------------ lean JSON 3.2
def test_lean_cases_leave_out_the_prose_and_the_empty_fields(reviewed):
    r = reviewed("adamw_step", "flawed/no_bias_correction.py")
    d = json.loads(r.to_json())
    full = json.loads(json.dumps(r.to_dict(lean=False)))
    assert d["version"] == "3.2"
    nums = [c["numerics"] for c in d["cases"] if c.get("numerics")]
    assert nums and not any("explanation" in n for n in nums)
    assert any(n.get("explanation") for n in (c.get("numerics") or {} for c in full["cases"]))
    gates = [g for n in nums for g in n["gates"]]
    assert gates and all(v not in (None, "") for g in gates for v in g.values())
    # the diagnosis the explanation restated is still there, as data
    held = [n["findings"] for n in nums if n.get("findings")]
    assert held and held[0][0]["id"] == "no_bias_correction"
    assert len(json.dumps(d["cases"])) < 0.8 * len(json.dumps(full["cases"]))
    validate_report(d)


def test_the_uncertainty_statement_leaves_its_sources_to_the_hardware_data(reviewed):
    r = reviewed("adamw_step", "flawed/no_bias_correction.py")
    d = json.loads(r.to_json())
    (unc,) = [v["data"] for v in d["references"].values() if v["kind"] == "uncertainty"]
    assert unc["parameter_sources"] == SOURCES_OMITTED and "by_status" not in unc
    assert all(set(p) == {"value", "status"} for p in unc["parameters"].values())
    full = r.to_dict(lean=False)["performance"]["candidate"]["uncertainty"]
    assert len(json.dumps(unc)) < 0.6 * len(json.dumps(full))
    assert expand_references(d)["performance"]["candidate"]["uncertainty"] == json.loads(json.dumps(full))


def test_sources_are_not_restored_from_another_model():
    lean = {"model_version": "nkieval-perf 0.1", "target": "trn2", "relative_band": 0.3,
            "parameters": {"a": {"value": 1, "status": "documented"}, "b": {"value": 2, "status": "assumed"}},
            "parameter_sources": SOURCES_OMITTED}
    calls = []

    def documented(version, target):
        calls.append((version, target))
        return None if version != "nkieval-perf 9.9" else {"a": {"value": 1, "status": "documented", "source": "s"},
                                                           "b": {"value": 2, "status": "assumed", "source": "t"}}

    out = restore_uncertainty(lean, documented)
    assert calls == [("nkieval-perf 0.1", "trn2")]
    assert out["parameter_sources"] == SOURCES_OMITTED and "source" not in out["parameters"]["a"]
    assert out["by_status"] == {"assumed": ["b"], "documented": ["a"]}
    same = restore_uncertainty(dict(lean, model_version="nkieval-perf 9.9"), documented)
    assert "parameter_sources" not in same and same["parameters"]["b"]["source"] == "t"
    changed = dict(lean, model_version="nkieval-perf 9.9",
                   parameters={**lean["parameters"], "a": {"value": 5, "status": "documented"}})
    assert restore_uncertainty(changed, documented)["parameter_sources"] == SOURCES_OMITTED


def test_task_check_runs_each_later_output_formula(tmp_path):
    from nkieval.tasks import check_task

    d = _task_copy(tmp_path, "fp8_quantize")
    ref = d / "reference.py"
    src = ref.read_text()
    assert check_task(d).errors == []
    ref.write_text(src + "\n\nVARIANTS['e4m3fn_range']['outputs'] = {'scale': lambda x: e4m3fn_range_oracle_scale(x)[:1]}\n")
    errs = check_task(d).errors
    assert any("VARIANTS['e4m3fn_range']['outputs']['scale'] returns shape (1,)" in e and "output scale" in e
               for e in errs), errs
