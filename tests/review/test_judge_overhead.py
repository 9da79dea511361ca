"""The warm judge's candidate-dependent work: what it keeps per source and its cheaper paths give what the
work done in full gives (docs/reward.md, "The warm judge's candidate-dependent work")."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nkieval.review import adapters
from nkieval.review.stages import clear_caches, differential
from nkieval.review.stages import evidence as stage_evidence
from nkieval.tasks import load_task


def _ratios_in_full(want: np.ndarray, got: np.ndarray, rtol: float, atol: float) -> tuple[np.ndarray, np.ndarray]:
    """The tolerance ratios by their definition, with a NaN and infinity rule for every element."""
    with np.errstate(all="ignore"):
        d = np.where((np.isnan(want) & np.isnan(got)) | (np.isinf(want) & (want == got)), 0.0, np.abs(got - want))
        d = np.where(np.isnan(d), np.inf, d)
        ratio = np.where(d == 0, 0.0, d / (atol + rtol * np.abs(np.where(np.isfinite(want), want, 0.0))))
    return d, ratio


_values = st.one_of(st.floats(-1e6, 1e6), st.sampled_from([0.0, -0.0, 1e-300, 1e308, -1e308]))


@settings(max_examples=200, deadline=None)
@given(pairs=st.lists(st.tuples(_values, _values, st.booleans()), min_size=1, max_size=40),
       rtol=st.sampled_from([0.0, 1e-6, 1e-2]), atol=st.sampled_from([0.0, 1e-12, 1e-3]),
       special=st.sampled_from([None, np.nan, np.inf, -np.inf]))
def test_tolerance_ratios_are_bit_identical_to_the_definition(pairs: list[tuple[float, float, bool]], rtol: float,
                                                               atol: float, special: float | None) -> None:
    # equal elements (the bool), overflowing differences, zero tolerances, and (special) a NaN or infinity that
    # takes the NaN-aware path
    want = np.array([w for w, _, _ in pairs], np.float64)
    got = np.array([w if same else g for w, g, same in pairs], np.float64)
    if special is not None:
        got[0] = special
    d, r = differential.tolerance_ratios(want, got, rtol, atol)
    d0, r0 = _ratios_in_full(want, got, rtol, atol)
    assert d.tobytes() == d0.tobytes() and r.tobytes() == r0.tobytes()
    assert not np.isnan(r).any()


def test_exact_tolerance_and_a_2d_output() -> None:
    want = np.array([[0.0, 1.0], [2.0, -3.0]])
    got = np.array([[0.0, 1.0], [2.5, -3.0]])
    d, r = differential.tolerance_ratios(want, got, 0.0, 0.0)
    assert d.shape == r.shape == (2, 2)
    assert r.tolist() == [[0.0, 0.0], [np.inf, 0.0]] and d[1, 0] == 0.5


def _loaded(task, source: str, use_cache: bool = True) -> SimpleNamespace:
    return SimpleNamespace(task=task, source=source, target=task.targets[0], use_cache=use_cache)


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The sources static analysis really ran on (each review's call of ``adapters.static_findings``)."""
    calls: list[str] = []
    real = adapters.static_findings

    def count(source: str, *args: object) -> object:
        calls.append(source)
        return real(source, *args)

    monkeypatch.setattr(adapters, "static_findings", count)
    clear_caches()
    yield calls
    clear_caches()


def test_static_findings_of_a_source_seen_are_kept(counted: list[str]) -> None:
    task = load_task("rmsnorm")
    source = task.solution_file.read_text()
    first = stage_evidence.static_analysis(_loaded(task, source))
    again = stage_evidence.static_analysis(_loaded(task, source))
    assert counted == [source]
    assert again == first
    # a copy each time: a reader that changes one review's findings changes no later review's
    assert again.analysis[0] is not first.analysis[0]
    first.analysis[0].append({"rule": "changed by a reader"})
    assert stage_evidence.static_analysis(_loaded(task, source)) == again
    # another source, another target or another CUDA source is analysed anew
    other = source + "\n# another candidate\n"
    stage_evidence.static_analysis(_loaded(task, other))
    assert counted == [source, other]


def test_static_findings_are_keyed_by_the_cuda_source_too(counted: list[str]) -> None:
    port = load_task("layernorm_block")
    plain = load_task("layernorm")
    source = port.solution_file.read_text()
    a = stage_evidence.static_analysis(_loaded(port, source))
    b = stage_evidence.static_analysis(_loaded(plain, source))
    assert len(counted) == 2
    # (each names its own task's CUDA kernel)
    assert a.migration[0] and b.migration[0] and a.migration != b.migration


def test_a_review_that_keeps_nothing_analyses_every_time(counted: list[str]) -> None:
    task = load_task("rmsnorm")
    source = task.solution_file.read_text()
    for _ in range(2):
        stage_evidence.static_analysis(_loaded(task, source, use_cache=False))
    assert len(counted) == 2


def test_port_constants_are_parsed_once_per_source(monkeypatch: pytest.MonkeyPatch) -> None:
    import ast

    parsed: list[str] = []
    real = ast.parse
    monkeypatch.setattr(ast, "parse", lambda text, *a, **k: parsed.append(text) or real(text, *a, **k))
    differential._port_literals.cache_clear()
    src = "def f(x, eps=1e-5):\n    return x * 0.5 - 2.0\n"
    first = differential._port_literals(src)
    assert differential._port_literals(src) == first and parsed == [src]
    assert sorted(lit.value for lit in first) == [0.5, 2.0]  # (not the default 1e-5)
    differential._port_literals.cache_clear()


def test_default_perf_parameters_are_read_once_and_overrides_do_not_leak() -> None:
    from nkieval.hardware import get_target
    from nkieval.perf.params import load_params

    tgt = get_target("trn2")
    p = load_params(tgt)
    assert load_params(tgt) is p and load_params(tgt, {}) is p
    q = load_params(tgt, {"dma_fixed_ns": 1.0})
    assert q is not p and q.dma_fixed_ns == 1.0 and q.sources["dma_fixed_ns"].status == "override"
    assert load_params(tgt) is p and p.sources["dma_fixed_ns"].status != "override"
    assert load_params(get_target("trn1")) is not p


def test_an_estimate_states_its_parameters_as_read() -> None:
    from nkieval.hardware import get_target
    from nkieval.perf import estimate
    from nkieval.perf.params import load_params
    from nkieval.sim.trace import Trace

    tgt = get_target("trn2")
    for params in (None, {"dma_fixed_ns": 1.0}):
        p = load_params(tgt, params)
        unc = estimate(Trace(target="trn2"), tgt, params=params).uncertainty
        assert {k: dict(v) for k, v in unc.parameters.items()} == p.to_dict()
        assert {k: list(v) for k, v in unc.by_status.items()} == p.by_status()
