"""The worst element's relative-error hint in numerics feedback names a format only when it fits one."""

from nkieval.review.scoring import _precision_hint


def test_bf16_sized_error_names_bf16():
    h = _precision_hint({"got": 1.0 + 2.0**-8, "expected": 1.0})
    assert "2^-8.0" in h and "bf16" in h


def test_wrong_value_is_not_given_a_bit_count():
    # 0 where a tiny negative value is due: relative error 1, no "2^--0.0" and no format guess
    h = _precision_hint({"got": -0.0, "expected": -1.8e-15})
    assert h == "; worst relative error 1"
    assert "2^" not in _precision_hint({"got": 3.0, "expected": 1.0})


def test_exact_or_unusable_values_give_no_hint():
    assert _precision_hint({"got": 1.0, "expected": 1.0}) == ""
    assert _precision_hint({"got": float("nan"), "expected": 1.0}) == ""
    assert _precision_hint({"expected": 1.0}) == ""


def test_correctness_line_names_a_reproduced_cause_only():
    from nkieval.review.model import CaseResult
    from nkieval.review.scoring import _reproduced_cause

    def case(findings):
        c = CaseResult("public-0/normal", {"n": 4}, False, "normal", 1, "ok")
        c.numerics = {"findings": findings}
        return c

    hit = {"id": "bias_after_gelu", "cause": "adds the bias after the GELU", "action": "add it first",
           "evidence": "evaluating that formula reproduces the kernel's output (residual 1e-06 of the error)"}
    guess = {"id": "tf32_inputs", "cause": "TF32 operands", "action": "",
             "evidence": "the errors are 3σ (RMS) under the declared recipe but 0.9σ under 'tf32'"}
    assert _reproduced_cause(case([hit, guess])) == hit
    assert _reproduced_cause(case([guess, hit])) is None  # a fingerprint guess ranked first is not a named cause
    assert _reproduced_cause(case([])) is None
