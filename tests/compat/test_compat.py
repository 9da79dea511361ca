"""`nkieval compat` on a fixture directory we wrote: each file's status and blame."""

from pathlib import Path

import pytest
from click.testing import CliRunner

from nkieval.frontends import compat
from nkieval.frontends.beta1 import Beta1Unsupported
from nkieval.sim.errors import NkiValidationError

FIXTURES = Path(__file__).parent / "fixtures"
pytestmark = pytest.mark.slow  # one subprocess per fixture file


@pytest.fixture(scope="module")
def report():
    found = [f for f in compat.discover(FIXTURES) if f[0].name != "slow.py"]
    return {r.path: r for r in compat.run_compat(FIXTURES, timeout=60, jobs=2, files=found)}


def test_discovery_by_api_generation():
    found = {p.relative_to(FIXTURES).as_posix(): (gen, kind) for p, gen, kind in compat.discover(FIXTURES)}
    assert "plain.py" not in found
    assert found["test_current_api.py"] == ("current", "pytest")
    assert found["sub/driver.py"] == ("beta1", "script")
    assert found["sub/kernels.py"] == ("beta1", "import")
    assert compat.nki_generation("import nki\nimport neuronxcc.nki as n\n") == "mixed"
    assert compat.nki_generation("from neuronxcc import nki\n") == "beta1"
    assert compat.nki_generation("def f(:\n") == "unparsable"


@pytest.mark.parametrize("path, status, blame", [
    ("test_b1_ok.py", "passed", None),
    ("test_current_api.py", "passed", None),
    ("sub/driver.py", "passed", None),
    ("sub/kernels.py", "imported", None),
    ("test_b1_rule.py", "failed", "kernel"),
    ("test_b1_gap.py", "failed", "nkieval"),
    ("test_mismatch.py", "failed", "assertion"),
    ("sub/torch_driver.py", "failed", "environment"),
])
def test_status_and_blame(report, path, status, blame):
    r = report[path]
    assert (r.status, r.blame) == (status, blame), r.error


def test_counts_and_first_error(report):
    assert report["test_b1_ok.py"].tests == {"passed": 2}
    gap = report["test_b1_gap.py"]
    assert gap.tests == {"failed": 2} and gap.blames == {"nkieval": 2}
    assert "builtin_custom_op" in gap.error
    assert "exceed architecture limitation of 128" in report["test_b1_rule.py"].error
    s = compat.summary(list(report.values()))
    assert s["by_generation"]["beta1"]["passed"] == 2 and s["by_generation"]["current"] == {"passed": 1}


def test_timeout_is_reported():
    slow = [f for f in compat.discover(FIXTURES) if f[0].name == "slow.py"]
    (r,) = compat.run_compat(FIXTURES, timeout=2, files=slow)
    assert (r.status, r.blame) == ("timeout", "timeout")


def test_classify():
    assert compat.classify(NkiValidationError("x", rule="argument")) == "kernel"
    assert compat.classify(Beta1Unsupported("x")) == "nkieval"
    assert compat.classify(ModuleNotFoundError("no", name="torch_xla")) == "environment"
    assert compat.classify(ModuleNotFoundError("no", name="neuronxcc.nki._private_kernels")) == "nkieval"
    assert compat.classify(AssertionError("mismatch")) == "assertion"


def test_cli_writes_json(tmp_path):
    from nkieval.cli import main

    out = tmp_path / "r.json"
    res = CliRunner().invoke(main, ["compat", str(FIXTURES / "plain.py"), "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert "0 files" in res.output and out.exists()
