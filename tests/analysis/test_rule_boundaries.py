"""Boundary tests written to kill mutants of the static rules and the simulator's validation (issue #25,
item 5; benchmarks/mutation.py): each states its expectation from the hardware (128 partitions) or the
API's documented rule, not from the code."""

from __future__ import annotations

import numpy as np
import pytest

from nkieval.analysis import analyze_nki

HEAD = "import nki\nimport nki.isa as nisa\nimport nki.language as nl\n\n\n@nki.jit\n"


def _partition_kernel(p: int, buffer: str) -> str:
    return HEAD + (f"def k(x):\n    out = nl.ndarray((128, 4), dtype=x.dtype, buffer=nl.shared_hbm)\n"
                   f"    t = nl.ndarray(({p}, 4), dtype=nl.float32, buffer=nl.{buffer})\n"
                   f"    nisa.memset(dst=t, value=0.0)\n    return out\n")


@pytest.mark.parametrize("buffer", ["sbuf", "psum"])
@pytest.mark.parametrize(("p", "fires"), [(127, False), (128, False), (129, True), (256, True)])
def test_nki004_fires_above_128_partitions_exactly(buffer, p, fires):
    """A NeuronCore's SBUF and PSUM have 128 partitions: 128 is legal, 129 is not."""
    found = [f for f in analyze_nki(_partition_kernel(p, buffer), "k.py", target="trn2") if f.rule == "NKI004"]
    assert bool(found) is fires, found
    if fires:
        assert found[0].severity == "error" and str(p) in found[0].message and "128" in found[0].message


@pytest.mark.parametrize(("stationary", "moving", "ok"), [
    ("float32", "float32", True), ("bfloat16", "bfloat16", True), ("float32", "bfloat16", False),
    ("bfloat16", "float32", False), ("float16", "bfloat16", True),
])
def test_matmul_fp32_inputs_must_pair_with_fp32(stationary, moving, ok):
    """nisa.nc_matmul: an fp32 (or tf32) operand must be paired with another fp32/tf32 operand."""
    import nki
    import nki.isa as nisa
    import nki.language as nl

    from nkieval.sim.errors import NkiValidationError

    @nki.jit
    def k(a, b):
        out = nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        sa = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)
        sb = nl.ndarray((128, 64), dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=sa, src=a)
        nisa.dma_copy(dst=sb, src=b)
        ps = nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=ps, stationary=sa, moving=sb)
        res = nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res, src=ps)
        nisa.dma_copy(dst=out, src=res)
        return out

    import ml_dtypes

    def arr(name: str) -> np.ndarray:
        d = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16, "float16": np.float16}[name]
        return np.ones((128, 64), np.float32).astype(d)

    run = nki.simulate(k, target="trn2")
    if ok:
        out = run(arr(stationary), arr(moving))
        assert np.allclose(np.asarray(out, np.float32), 128.0)
    else:
        with pytest.raises(NkiValidationError, match="fp32/tf32 matmul inputs must pair"):
            run(arr(stationary), arr(moving))


@pytest.mark.parametrize(("cond", "fires"), [
    ("bias is not None", False), ("bias is None", False), ("bias is not None and x.shape[0] > 1", False),
    ("bias", True), ("bias is not None and t[0, 0] > 0", True), ("t[0, 0] is not None", False),
])
def test_nki005_an_optional_tensor_argument_tested_against_none_is_decided_when_traced(cond, fires):
    """Whether an optional tensor argument was given (`if bias is not None:`) is known when the kernel is traced;
    a test of tile contents is not (NKI's language guide: tracing runs the kernel's Python once per shape)."""
    src = HEAD + ("def k(x, bias=None):\n    out = nl.ndarray((128, 4), dtype=x.dtype, buffer=nl.shared_hbm)\n"
                  "    t = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.sbuf)\n"
                  "    nisa.dma_copy(dst=t, src=x)\n"
                  f"    if {cond}:\n        nisa.dma_copy(dst=t, src=bias)\n"
                  "    nisa.dma_copy(dst=out, src=t)\n    return out\n")
    found = [f for f in analyze_nki(src, "k.py", target="trn2") if f.rule == "NKI005"]
    assert bool(found) is fires, found
