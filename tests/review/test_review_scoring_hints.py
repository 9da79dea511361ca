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
