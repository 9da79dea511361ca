"""One use of a value: a port that changes a parameter or a constant where the CUDA source uses it at one of
several sites is named at that site (cuda/sites.py; review/stages/differential.py, ``_site_hypotheses``).

The flawed ports are the task's expert port with one edit made here; the test knows the CUDA line that the
edit corresponds to, the code under test does not."""

from __future__ import annotations

from pathlib import Path

import pytest

from nkieval.cuda.program import preprocess
from nkieval.cuda.sites import c_float, named_constants, parameter_sites
from nkieval.tasks.loader import PORTS_ROOT, load_task

SOURCE = """\
constexpr float K = 0.5f;
__device__ float h(float a, float e) { return a * e + K; }
__global__ void k(const float* x, float* y, float eps) {
    y[0] = h(x[0], eps) + eps * 2.0f;
    y[1] = x[1] * K;
}
void host(const float* x, float* y, float epsilon) { k<<<1, 1>>>(x, y, epsilon); }
"""


def test_a_parameter_s_sites_follow_it_through_the_launch_and_a_device_call() -> None:
    sites = parameter_sites(SOURCE, "host", "epsilon")
    # (the launch is host code: not a site; inside the kernel the value is `eps`, inside h it is `e`)
    assert [(s.function, s.name, s.line) for s in sites] == [("h", "e", 2), ("k", "eps", 4), ("k", "eps", 4)]
    text = preprocess(SOURCE)
    changed = sites[2].replace(text, c_float(1e-6))
    assert "eps * 2.0f" not in changed and "(1e-06f) * 2.0f" in changed and "h(x[0], eps)" in changed
    assert c_float(2.0) == "(2.0f)" and c_float(-1e30) == "(-1e+30f)"


def test_a_named_constant_s_uses_in_device_code() -> None:
    consts = {name: (value, [s.line for s in sites]) for name, value, _at, sites in named_constants(SOURCE)}
    assert consts == {"K": (0.5, [2, 5])}


def _review(task_dir: Path, tmp_path: Path, old: str, new: str) -> tuple[list[str], int]:
    from nkieval.review.pipeline import review

    task = load_task(task_dir)
    src = task.solution_file.read_text()
    assert src.count(old) == 1
    bad = src.replace(old, new)
    line = next(i + 1 for i, ln in enumerate(bad.splitlines()) if new in ln)
    path = tmp_path / "candidate.py"
    path.write_text(bad)
    r = review(str(task_dir), str(path), seed=5, compare_references=False)
    mig = next(c for c in r.criteria if c.id == "migration")
    return [f.observed for f in mig.feedback if f.observed.startswith("semantic infidelity")], line


@pytest.mark.slow
def test_the_scale_changed_in_the_max_shift_only_is_named_at_that_use(tmp_path: Path) -> None:
    """The scale kept in the exponent but a tenth of it in the max shift: exp overflows on the scores a large
    row holds. Changing the scale everywhere does not reproduce it (every use scaled down keeps the softmax
    stable); only its first use, kernel.cu:36, does. Without one-use hypotheses: "cause not identified"."""
    task_dir = Path(load_task("scaled_masked_softmax").directory)
    causes, line = _review(task_dir, tmp_path, "op0=nl.multiply, operand0=scale)", "op0=nl.multiply, operand0=0.2)")
    assert len(causes) == 1, causes
    assert "the parameter scale = 2 at its use kernel.cu:36" in causes[0]
    assert f"candidate.py:{line}" in causes[0] and "use 1 of 3" in causes[0]


@pytest.mark.slow
def test_beta1_changed_in_the_bias_correction_only_is_named_at_that_use(tmp_path: Path) -> None:
    """adam_lerp uses beta1 in the moment's lerp and in the bias correction; the port changes the second only,
    so its m_new agrees and its param_new does not. The third use, kernel.cu:18, is named."""
    causes, line = _review(PORTS_ROOT / "adam_lerp", tmp_path, "bc1 = 1.0 - beta1 ** step", "bc1 = 1.0 - 0.95 ** step")
    assert len(causes) == 1, causes
    assert "the parameter beta1 = 0.9 at its use kernel.cu:18" in causes[0]
    assert f"candidate.py:{line}" in causes[0] and "the port's param_new on" in causes[0]


def test_hypotheses_of_one_use_and_of_every_use_of_a_repeated_literal() -> None:
    from types import SimpleNamespace

    from nkieval.review.stages.differential import _cuda_literals, _Lit, _site_hypotheses

    source = "#define HALF 0.5f\n" + SOURCE.replace("x[1] * K", "x[1] * K + HALF * HALF")
    text = preprocess(source)
    task = SimpleNamespace(kernel="host", inputs=[], outputs=[], params={"epsilon": 1e-5})
    lits = _cuda_literals(source)
    half = next(c for c in lits if c.text == "0.5f" and c.line == 6)
    port = _Lit(0.4, "0.4", 7)
    k = next(c for c in lits if c.line == 2)
    hyps = [((False, 0.0), "param", "epsilon", _Lit(1e-6, "1e-6", 3)), ((False, 0.2), "literal", half, port),
            ((False, 0.2), "literal", k, port)]
    out = _site_hypotheses(task, source, text, hyps, lits)
    descs = [d.split(" (")[0] for d, *_ in out]
    assert descs[:3] == ["the parameter epsilon = 1e-05 at its use kernel.cu:3",
                         "the parameter epsilon = 1e-05 at its use kernel.cu:5",
                         "the parameter epsilon = 1e-05 at its use kernel.cu:5"]
    # (HALF's two expansions and K's declaration are three literals 0.5f, each tried alone in the first pass,
    # all at once here; K itself, declared once, is used at two sites, each tried alone)
    assert descs[3] == "the constant 0.5f at all its 3 uses"
    assert descs[4:] == ["the constant K = 0.5f at its use kernel.cu:3", "the constant K = 0.5f at its use kernel.cu:6"]
    assert [one for *_, one in out] == [True, True, True, False, True, True]
    assert "x[1] * K + 0.4f * 0.4f" in out[3][4] and "K = 0.4f" in out[3][4]
    assert "x[1] * (0.4f) + 0.5f * 0.5f" in out[5][4] and "K = 0.5f" in out[5][4] and "a * e + K" in out[5][4]
