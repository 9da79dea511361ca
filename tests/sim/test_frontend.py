"""Entry points and the front end: @nki.jit, nki.simulate, kernel[lnc], targets, in-place
inputs, the import shim (never shadowing a real SDK), `nkieval run` and the pytest plugin."""

import importlib
import os
import subprocess
import sys
import textwrap

import ml_dtypes
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

from nkieval import frontends
from nkieval.sim.errors import NkiValidationError

VENV_BIN = os.path.dirname(sys.executable)


@nki.jit
def add_kernel(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.add(nl.load(a), nl.load(b)))
    return out


@nki.jit
def who_am_i(out_ids):
    """Each program writes (program_id, num_programs, program_ndim) into its own row."""
    pid = nl.program_id(0)
    vals = nl.ndarray((1, 3), dtype=nl.int32, buffer=nl.sbuf)
    nisa.memset(vals[:, 0:1], pid)
    nisa.memset(vals[:, 1:2], nl.num_programs())
    nisa.memset(vals[:, 2:3], nl.program_ndim())
    nl.store(out_ids[pid:pid + 1, :], vals)


def test_jit_call_and_simulate_return_numpy():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    out = add_kernel(a, a)
    assert isinstance(out, np.ndarray)
    np.testing.assert_array_equal(out, 2 * a)
    out2 = nki.simulate(add_kernel)(a, a)
    np.testing.assert_array_equal(out2, out)
    assert nki.last_result().trace.kernel.endswith("add_kernel")


def test_simulate_accepts_plain_function_and_tuple_outputs():
    def two(a):
        x = nl.load(a)
        o1 = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        o2 = nl.ndarray(a.shape, dtype=nl.bfloat16, buffer=nl.shared_hbm)
        nl.store(o1, nl.multiply(x, 3.0))
        nl.store(o2, nl.copy(x, dtype=nl.bfloat16))
        return o1, o2

    a = np.ones((2, 3), np.float32)
    o1, o2 = nki.simulate(two)(a)
    assert (o1 == 3).all() and o2.dtype == ml_dtypes.bfloat16


def test_inputs_written_by_kernel_are_updated_in_place():
    @nki.jit
    def scale_inplace(a):
        nl.store(a, nl.multiply(nl.load(a), 2.0))

    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = a.copy()
    assert scale_inplace(a) is None
    np.testing.assert_array_equal(a, 2 * b)


def test_unwritten_inputs_are_untouched():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    before = a.copy()
    add_kernel(a, a)
    np.testing.assert_array_equal(a, before)


def test_output_must_be_shared_hbm():
    def bad(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.hbm)
        nl.store(out, nl.load(a))
        return out

    # (an nl.hbm output compiled under NKI 0.2: the error says since when it is one)
    with pytest.raises(NkiValidationError, match=r"buffer=nl.shared_hbm \(since NKI 0\.3: NKI 0\.2 compiled"):
        nki.simulate(bad)(np.ones((2, 2), np.float32))

    def on_chip(a):
        t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        return t

    with pytest.raises(NkiValidationError, match=r"buffer=nl.shared_hbm \[rule kernel\]"):
        nki.simulate(on_chip)(np.ones((2, 2), np.float32))


def test_lnc2_program_ids_and_counts():
    ids = np.zeros((2, 3), np.int32)
    who_am_i[2](ids)
    np.testing.assert_array_equal(ids, [[0, 2, 1], [1, 2, 1]])
    assert nki.last_result().trace.num_programs == 2
    ids1 = np.zeros((1, 3), np.int32)
    nki.simulate(who_am_i)(ids1)
    np.testing.assert_array_equal(ids1, [[0, 1, 0]])


def test_lnc_degree_rules():
    with pytest.raises(NkiValidationError, match="LNC degree must be 1 or 2, got 8"):
        add_kernel[8]
    with pytest.raises(NkiValidationError, match="N-D SPMD grids are a Beta-1"):
        add_kernel[2, 2]
    with pytest.raises(NkiValidationError, match="not available on trn1"):
        nki.simulate(who_am_i[2], target="trn1")(np.zeros((2, 3), np.int32))


def test_a_one_dimensional_launch_grid_is_the_lnc_degree():
    # ``kernel[(2,)]``: the SPMD launch grid NKI 0.5 and earlier took for LNC 2 (kernels written for it still pass
    # one in a tuple); a grid of one dimension is the degree, a wider one stays a Beta-1 feature
    ids = np.zeros((2, 3), np.int32)
    who_am_i[(2,)](ids)
    np.testing.assert_array_equal(ids, [[0, 2, 1], [1, 2, 1]])
    assert who_am_i[(1,)].lnc == 1
    with pytest.raises(NkiValidationError, match="LNC degree must be 1 or 2, got 4"):
        add_kernel[(4,)]
    with pytest.raises(NkiValidationError, match="only one number"):
        add_kernel[(2, 1)]


@pytest.mark.parametrize("env,expected", [("trn1", "trn1"), ("inf2", "trn1"), ("gen2", "trn1"), ("trn2", "trn2"),
                                          ("gen3", "trn2"), ("trn3", "trn3"), ("gen4", "trn3")])
def test_target_from_environment(monkeypatch, env, expected):
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", env)
    a = np.ones((2, 2), np.float32)
    add_kernel(a, a)
    assert nki.last_result().target.name == expected
    assert nki.last_result().trace.target == expected


def test_explicit_target_beats_environment(monkeypatch):
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn1")
    a = np.ones((2, 2), np.float32)
    nki.simulate(add_kernel, target="trn3")(a, a)
    assert nki.last_result().target.name == "trn3"


def test_unknown_target_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn9")
    with pytest.raises(ValueError, match="unknown target 'trn9'"):
        add_kernel(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32))


def test_nki_simulator_env_routes_jit_to_the_simulator(monkeypatch):
    monkeypatch.setenv("NKI_SIMULATOR", "1")
    a = np.ones((2, 2), np.float32)
    np.testing.assert_array_equal(add_kernel(a, a), 2 * a)


def test_precise_fp_env(monkeypatch):
    @nki.jit
    def to_bf16_and_back(a):
        t = nl.load(a, dtype=nl.bfloat16)
        out = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nl.copy(t, dtype=nl.float32))
        return out

    a = np.array([[1.0 + 2**-12]], np.float32)
    assert to_bf16_and_back(a)[0, 0] == 1.0  # precise (default): bf16 rounding happens
    monkeypatch.setenv("NKI_PRECISE_FP", "0")
    assert to_bf16_and_back(a)[0, 0] == a[0, 0]  # all-fp32 mode keeps the value


def test_unsupported_argument_dtype():
    with pytest.raises(NkiValidationError, match=r"kernel argument 'a'.*float64"):
        add_kernel(np.ones((2, 2)), np.ones((2, 2)))


def test_subkernel_call_inside_a_kernel_is_inline():
    @nki.jit
    def outer(a):
        return add_kernel(a, a)

    a = np.ones((2, 2), np.float32)
    np.testing.assert_array_equal(outer(a), 2 * a)


def test_isa_and_typing_modules():
    import nki.typing as nt

    assert nt.tensor[(128, 512), nl.float32] is not None
    assert nisa.engine.tensor == 1 and nisa.reduce_cmd.reset_reduce == 3 and nisa.oob_mode.skip == 1
    assert callable(nisa.nc_matmul) and callable(nisa.dma_copy)


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed")
def test_torch_tensors_in_and_out():
    import torch

    a = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    out = nki.simulate(add_kernel)(a, a)
    assert isinstance(out, torch.Tensor)
    assert torch.equal(out, 2 * a)
    # (tensors given by keyword: the NKI Library's top-k calls its kernel so)
    out = nki.simulate(add_kernel)(a=a, b=a)
    assert isinstance(out, torch.Tensor) and torch.equal(out, 2 * a)


def test_the_outputs_kind_follows_keyword_arguments_too(monkeypatch):
    # (without torch installed: what the outputs are converted like must include the keyword arguments)
    import nkieval.frontends.nki as front

    seen = []
    monkeypatch.setattr(front, "_like_inputs", lambda outputs, inputs: seen.append(inputs) or outputs)
    a = np.ones((2, 3), np.float32)
    b = np.full((2, 3), 2, np.float32)
    nki.simulate(add_kernel)(a, b=b)
    assert len(seen) == 1 and any(x is b for x in seen[0]) and any(x is a for x in seen[0])


# -- the import shim -----------------------------------------------------------------------------------------
def test_shim_never_shadows_a_real_sdk(tmp_path, monkeypatch):
    fake = tmp_path / "nki"
    fake.mkdir()
    (fake / "__init__.py").write_text("REAL = True\n")
    (fake / "language.py").write_text("")
    was = frontends.installed()
    frontends.uninstall()
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    try:
        with pytest.raises(frontends.ShadowingError, match="real Neuron SDK package is importable as nki"):
            frontends.install()
        assert not frontends.installed()
        frontends.install(force=True)
        mod = importlib.import_module("nki")
        assert not hasattr(mod, "REAL") and hasattr(mod, "simulate")
    finally:
        frontends.uninstall()
        monkeypatch.undo()
        importlib.invalidate_caches()
        if was:
            frontends.install()
    import nki as again

    assert hasattr(again, "simulate")


def _run(args, cwd, env_extra=None):
    env = {**os.environ, **(env_extra or {})}
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, env=env, timeout=120)


def test_nkieval_run_script(tmp_path):
    script = tmp_path / "user_kernel.py"
    script.write_text(textwrap.dedent("""
        import sys
        import numpy as np
        import nki
        import nki.language as nl

        @nki.jit
        def double(a):
            out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
            nl.store(out, nl.multiply(nl.load(a), 2.0))
            return out

        print("ARGS", sys.argv[1:])
        print("SUM", float(double(np.ones((4, 4), np.float32)).sum()))
    """))
    res = _run([os.path.join(VENV_BIN, "nkieval"), "run", str(script), "x", "--flag"], tmp_path)
    assert res.returncode == 0, res.stderr
    assert "ARGS ['x', '--flag']" in res.stdout
    assert "SUM 32.0" in res.stdout


def test_pytest_plugin_option_and_fixture(tmp_path):
    (tmp_path / "test_user.py").write_text(textwrap.dedent("""
        import numpy as np

        def test_import_nki_under_flag():
            import nki
            assert hasattr(nki, "simulate")

        def test_fixture(nki_sim):
            nl = nki_sim.language
            def k(a):
                out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
                nl.store(out, nl.exp(nl.load(a)))
                return out
            np.testing.assert_allclose(nki_sim.simulate(k)(np.zeros((2, 2), np.float32)), 1.0)
    """))
    res = _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nki-sim", "test_user.py"],
               tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "2 passed" in res.stdout
    res = _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "fixture", "test_user.py"],
               tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr


@nki.jit
def _double_in_place(x):
    t = nl.load(x)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
    nl.store(x, t)


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed")
def test_torch_bf16_outputs_and_in_place_inputs():
    import torch

    a = (torch.arange(128 * 4, dtype=torch.float32).reshape(128, 4) / 7).to(torch.bfloat16)
    out = nki.simulate(add_kernel)(a, a)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.bfloat16
    assert torch.equal(out, a + a)
    x = torch.arange(128 * 4, dtype=torch.float32).reshape(128, 4)
    nki.simulate(_double_in_place)(x)
    assert torch.equal(x, 2 * torch.arange(128 * 4, dtype=torch.float32).reshape(128, 4))
