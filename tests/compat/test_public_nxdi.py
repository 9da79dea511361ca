"""benchmarks/public_nxdi.py's own machinery, on a kernel file of ours laid out like a model's module (the public
kernels it runs are never in the repository)."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import public_nxdi

MODULE = textwrap.dedent('''
    import torch
    import nki
    import nki.isa as nisa
    import nki.language as nl


    def _double(dst, src):
        nisa.tensor_tensor(dst=dst, data1=src, data2=src, op=nl.add)


    @nki.jit(mode="torchxla")
    def twice(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        _double(t, t)
        nisa.dma_copy(dst=out, src=t)
        return out


    def host_side(x: torch.Tensor = torch.zeros(1)) -> torch.Tensor:
        return x


    class Layer(torch.nn.Module):
        pass
''')


def test_a_models_module_is_reduced_to_its_kernels_and_the_helpers_they_call(tmp_path, nki_sim):
    path = tmp_path / "model_kernels.py"
    path.write_text(MODULE)
    mod = public_nxdi._functions_only("model_kernels", path)
    assert {n for n in vars(mod) if not n.startswith("_") or n == "_double"} >= {"twice", "_double"}
    assert not hasattr(mod, "host_side") and not hasattr(mod, "Layer")  # (they need torch, never imported here)
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    np.testing.assert_array_equal(mod.twice(x), 2 * x)


def test_a_case_without_its_checkout_is_skipped_and_one_missing_its_files_is_out_of_scope():
    res = public_nxdi._one("moe-rmsnorm", {"nxdi": None, "moe": None}, None)
    assert res["outcome"] == "skipped" and "--moe" in res["why"]
    res = public_nxdi._one("deltanet-step", {"nxdi": Path("/nonexistent"), "moe": None}, None)
    assert res["outcome"] == "failed" and res["blame"] == "out of scope"


def test_a_kernel_nkieval_refuses_is_nkievals_fault(tmp_path, monkeypatch):
    path = tmp_path / "nki_custom_rmsnorm.py"
    path.write_text("import nki\nimport nki.language as nl\n\n\n@nki.jit\ndef nki_rmsnorm_kernel(x, w, eps):\n"
                    "    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)\n    return out\n")
    res = public_nxdi._one("moe-rmsnorm", {"nxdi": None, "moe": tmp_path}, None)
    assert res["outcome"] == "failed" and "blame" not in res and "shared_hbm" in res["why"]


def test_the_deltanet_reference_is_the_recurrence_it_states():
    # one token from a zero state: S = k (v beta)^T, o = S^T q = (k . q) beta v
    q, k, v = (np.random.default_rng(0).standard_normal((1, public_nxdi.D)) for _ in range(3))
    out, state = public_nxdi._deltanet(q, k, v, np.array([-0.3]), np.array([0.7]))
    np.testing.assert_allclose(state, np.outer(k[0], 0.7 * v[0]))
    np.testing.assert_allclose(out[0], (k[0] @ q[0]) * 0.7 * v[0])


def test_public_compat_tells_a_failure_apart_by_what_it_says():
    import public_compat

    kept = public_compat.blame_of("library", "m.py::c", None,
                                  "NkiValidationError: memset: value 0.0 is a float but dst dtype is uint32")
    assert kept[0] == "kept" and "migration guide" in kept[1]
    assert public_compat.blame_of("library", "m.py::c", None, "AttributeError: 'PerRankLazyInputGenerator' object "
                                  "has no attribute 'items'")[0] == "out of scope"
    # (the same text in another suite, or another failure, stays nkieval's)
    assert public_compat.blame_of("samples-ci", "m.py::c", None, "memset: value 0.0 is a float but dst dtype is "
                                  "uint32")[0] == "nkieval"
    assert public_compat.blame_of("library", "m.py::c", None, "AssertionError: outputs differ")[0] == "nkieval"
