"""Table types and kernel helpers for the op-level conformance suite.

A ``Case`` is one legal use of an API: a kernel, NumPy inputs, and either a NumPy
expectation written from the documented semantics (``expect``) or a property check
(``check``, for random instructions). An ``Illegal`` is a misuse and the rule id the
simulator must report. Adding an instruction costs one entry per use.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np

from nkieval.sim.errors import NkiSimulatorWarning, NkiValidationError
from nkieval.sim.runner import run_kernel

RNG = np.random.default_rng(1234)


@dataclass
class Case:
    api: str  # "nisa.<name>" or "nl.<name>"
    kernel: Callable[..., Any]
    args: tuple[Any, ...] = ()
    expect: Callable[..., Any] | None = None  # NumPy reference(*args) -> array or tuple of arrays
    check: Callable[..., None] | None = None  # custom assertion(out, *args)
    target: str = "trn2"
    lnc: int = 1
    rtol: float = 1e-6
    atol: float = 1e-6
    frontend: str = "nki"  # "nki" (current API) or "beta1" (neuronxcc.nki)
    id: str = ""
    kwargs: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{self.api}[{self.id or self.target}]" if self.id or self.target != "trn2" else self.api


@dataclass
class Illegal:
    api: str
    kernel: Callable[..., Any]
    args: tuple[Any, ...] = ()
    rule: str = "argument"
    target: str = "trn2"
    lnc: int = 1
    frontend: str = "nki"
    id: str = ""

    @property
    def name(self) -> str:
        return f"{self.api}!{self.id or self.rule}"


def frontend_available(name: str) -> bool:
    """Import the front end ``name`` serves (``nki`` or ``beta1``, i.e. ``neuronxcc.nki``): both ship with
    nkieval, so a front end that does not import is a failure (the error propagates), never a reason to skip."""
    importlib.import_module({"nki": "nki", "beta1": "neuronxcc.nki"}[name])
    return True


def run(case: Case | Illegal) -> Any:
    """Run a case's kernel on the simulator through its front end."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NkiSimulatorWarning)
        if case.frontend == "beta1":
            import neuronxcc.nki as b1  # type: ignore[import-not-found]

            # the hardware's rounding (the Beta-1 front end's default keeps bf16/fp8 results in fp32, as the Beta-1
            # simulator did; conformance checks the real formats)
            was = os.environ.get("NKI_PRECISE_FP")
            os.environ["NKI_PRECISE_FP"] = "1"
            try:
                return b1.simulate_kernel(case.kernel, *case.args)
            finally:
                if was is None:
                    del os.environ["NKI_PRECISE_FP"]
                else:
                    os.environ["NKI_PRECISE_FP"] = was
        if case.lnc == 1:
            return nki.simulate(case.kernel, target=case.target)(*case.args)
        return run_kernel(case.kernel, case.args, target=case.target, lnc=case.lnc).outputs


def compare(out: Any, want: Any, rtol: float, atol: float) -> None:
    if isinstance(want, tuple):
        assert isinstance(out, tuple | list) and len(out) == len(want), (type(out), len(want))
        for o, w in zip(out, want, strict=True):
            compare(o, w, rtol, atol)
        return
    o = np.asarray(out)
    w = np.asarray(want)
    assert o.shape == w.shape or o.size == w.size, (o.shape, w.shape)
    if o.dtype.kind in "fV" or w.dtype.kind == "f":
        np.testing.assert_allclose(o.astype(np.float64).reshape(w.shape), w.astype(np.float64), rtol=rtol, atol=atol,
                                   equal_nan=True)
    else:
        np.testing.assert_array_equal(o.reshape(w.shape), w)


def expect_rule(case: Illegal) -> NkiValidationError:
    try:
        run(case)
    except NkiValidationError as e:
        assert e.rule == case.rule, f"{case.name}: expected rule {case.rule}, got {e.rule}: {e}"
        return e
    raise AssertionError(f"{case.name}: no NkiValidationError raised")


# -- kernel helpers (current API) ---------------------------------------------------------
def load(t: Any, dtype: Any = None) -> Any:
    """HBM argument → SBUF tile of the same shape (DMA, casting via fp32 when dtype differs)."""
    s = nl.ndarray(t.shape, dtype=dtype or t.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=t)
    return s


def tile(shape: Any, dtype: Any = None, buffer: Any = None) -> Any:
    return nl.ndarray(tuple(shape), dtype=dtype or nl.float32, buffer=buffer or nl.sbuf)


def ret(t: Any) -> Any:
    """On-chip tile → new shared-HBM output (PSUM goes through SBUF first)."""
    if t.buffer.kind == "psum":
        s = tile(t.shape, t.dtype)
        nisa.tensor_copy(dst=s, src=t)
        t = s
    o = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=o, src=t)
    return o


def randn(*shape: int, dtype: Any = np.float32, scale: float = 1.0) -> np.ndarray:
    return (RNG.standard_normal(shape) * scale).astype(dtype)


def randint(lo: int, hi: int, *shape: int, dtype: Any = np.int32) -> np.ndarray:
    return RNG.integers(lo, hi, shape).astype(dtype)
