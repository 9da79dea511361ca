"""``nkieval task import``: KernelBench-style and NKIBench-style tasks written for these tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from nkieval.cli import main
from nkieval.tasks import check_task, load_reference, load_task
from nkieval.tasks.audit import audit_task
from nkieval.tasks.audit.importers import TaskImportError, import_task

EX = Path(__file__).parent / "import_examples"


def _has_torch() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def test_kernelbench_elementwise_imports_and_checks(tmp_path: Path) -> None:
    r = CliRunner().invoke(main, ["task", "import", str(EX / "kb_leaky_relu.py"), "--dir", str(tmp_path)])
    assert r.exit_code == 0, r.output
    d = tmp_path / "kb_leaky_relu"
    rep = check_task(d)
    assert rep.ok, rep.errors
    t = load_task(d)
    assert t.public_shapes[0].dims == {"N": 16, "D": 1000}
    assert any(any(v % 128 for v in s.dims.values()) for s in t.hidden_shapes)
    x = np.random.default_rng(1).standard_normal((5, 9)).astype(np.float32)
    want = np.where(x > 0, x, np.float32(0.01) * x)  # leaky ReLU written out independently
    np.testing.assert_allclose(load_reference(t)(x), want, rtol=1e-6)


def test_kernelbench_softmax_output_shape_and_rows(tmp_path: Path) -> None:
    d = import_task(EX / "kb_row_softmax.py", tmp_path)
    t = load_task(d)
    assert [s.shape for s in t.outputs] == [("N", "D")] and t.numerics.k == "D"
    x = np.random.default_rng(2).standard_normal((3, 11)).astype(np.float32) * 30
    y = load_reference(t)(x)
    np.testing.assert_allclose(y.sum(axis=1), 1.0, rtol=1e-6)
    assert np.argmax(y, axis=1).tolist() == np.argmax(x, axis=1).tolist()


@pytest.mark.skipif(_has_torch(), reason="checks the torch-free translation's refusal")
def test_unsupported_forward_is_refused_with_the_construct(tmp_path: Path) -> None:
    src = tmp_path / "kb_conv.py"
    src.write_text((EX / "kb_row_softmax.py").read_text().replace("torch.softmax(x, dim=1)", "torch.conv1d(x, x)"))
    with pytest.raises(TaskImportError, match="conv1d"):
        import_task(src, tmp_path / "out")


def test_with_torch_the_reference_runs_the_module(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    d = import_task(EX / "kb_row_softmax.py", tmp_path)
    x = np.random.default_rng(3).standard_normal((4, 7)).astype(np.float32)
    want = torch.softmax(torch.from_numpy(x.astype(np.float64)), dim=1).numpy()
    np.testing.assert_allclose(load_reference(load_task(d))(x), want, rtol=1e-6)


@pytest.mark.slow
def test_nkibench_task_with_kernel_imports_and_audits(tmp_path: Path) -> None:
    d = import_task(EX / "nkib_add.py", tmp_path)
    assert (d / "solution_nki.py").is_file()
    rep = audit_task(d, criteria=("well_formed", "reference", "discriminates", "coverage"), max_mutants=4,
                     probe_survivors=False)
    disc = rep.criterion("discriminates")
    assert disc.measurements["expert"]["passed"], disc.summary
    assert not [f for f in disc.findings if f.rule in ("trivial-passes", "expert-fails")]
    assert rep.criterion("reference").level == 4
