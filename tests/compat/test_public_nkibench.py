"""benchmarks/public_nkibench.py on a tree laid out as NKIBench lays its cases out (our own small operator, its
NumPy reference and Beta-1 kernels; no NKIBench code is in the repository): each case runs in its own
``nkieval run`` child and is judged by the benchmark's gate."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import public_nkibench

REFERENCE = '''\
import numpy as np

def get_inputs():
    return [np.random.randn(256, 64).astype(np.float32)]

def forward(x):
    return np.exp(x) * 2.0

def transform_to_nki_inputs(inputs):
    return [inputs[0].reshape(2, 128, 64)]

def transform_nki_outputs(out, ref):
    return [out.reshape(ref.shape)]
'''

KERNEL = '''\
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

@nki.jit
def kernel(x):
    out = nl.ndarray((2, 128, 64), dtype=np.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((2, nl.par_dim(128), 64), dtype=np.float32, buffer=nl.sbuf)
    for i in nl.affine_range(2):
        t[i] = nl.multiply(nl.exp(nl.load(x[i])), SCALE)
        nl.store(out[i], value=t[i])
    return out
'''


def _tree(tmp_path: Path, scales: dict[str, str]) -> Path:
    root = tmp_path / "NKIBench"
    (root / "reference").mkdir(parents=True)
    (root / "kernels").mkdir()
    summary = {}
    for op, scale in scales.items():
        (root / "reference" / f"{op}_numpy_1.py").write_text(REFERENCE)
        (root / "kernels" / f"{op}_0.py").write_text(KERNEL.replace("SCALE", scale))
        summary[op] = {"cases": {"1": {"impls": [{"task": f"./reference/{op}_numpy_1.py",
                                                   "kernel": f"./kernels/{op}_0.py"}]}}}
    (root / "summary.json").write_text(json.dumps(summary))
    return tmp_path


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, public_nkibench.Result]:
    checkout = _tree(tmp_path_factory.mktemp("accelopt"),
                     {"right": "2.0", "off": "2.001", "broken": "nl.no_such_thing"})
    root = public_nkibench.bench_dir(checkout)
    return {op: public_nkibench.run_case(op, t, k, 2, 300) for op, t, k in public_nkibench.cases(root)}


def test_a_right_kernel_passes_every_seed_with_its_error_and_resources(results):
    r = results["right"]
    assert r.outcome == "passed", r.error
    assert r.rel_l2 is not None and max(r.rel_l2) < public_nkibench.REL_TOL
    assert r.peak_gb is not None and 0 < r.peak_gb < 4 and r.cpu_s is not None and r.cpu_s > 0


def test_a_result_past_the_gate_fails_with_its_error(results):
    r = results["off"]
    assert r.outcome == "failed"
    assert r.rel_l2 is not None and 4e-4 < r.rel_l2[0] < 6e-4  # (2.001 / 2 - 1 = 5e-4)
    assert "over the gate 2e-05" in (r.error or "")
    assert public_nkibench.blame("off", r.error) == ("nkieval", r.error)


def test_a_kernel_that_raises_fails_with_the_error(results):
    r = results["broken"]
    assert r.outcome == "failed" and r.rel_l2 is None
    assert "no_such_thing" in (r.error or "")


def test_relative_l2_is_chunked_float64_and_refuses_a_shape_mismatch():
    import numpy as np

    want = np.arange(1, 10, dtype=np.float32)
    assert public_nkibench.rel_l2(want, want) == 0.0
    assert public_nkibench.rel_l2(want * 1.5, want) == pytest.approx(0.5)
    assert public_nkibench.rel_l2(want[:3], want) == float("inf")
