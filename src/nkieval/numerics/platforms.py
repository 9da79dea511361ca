"""How a GPU reference and a Trainium kernel compute, and how far apart they may land.

Why emulate both: a Trainium result and a GPU result are never compared with each other by a
fixed tolerance (research note §4.1). Each is judged against the float64 oracle under its
own recipe; the emulations here (a) generate correct and defective computations for the
discrimination suite and (b) back the expected disagreement envelope ``|ŷ_A − ŷ_B| ≤ τ_A + τ_B``
and the attribution table of §4.8 (both in :mod:`.discrepancy`).

All emulations are *models* built from NumPy float32 arithmetic and ml_dtypes casts:

* GPU: fp32 SGEMM (``order="blas"``), tensor-core fp32 accumulation of K chunks
  (``tensor_core``), TF32 operands (RNE to 10 mantissa bits, :func:`round_mantissa`),
  FP8 with a limited-precision accumulator (13-14 bits, truncating, optional promotion to
  fp32 every 128 products; DeepSeek-V3 §3.3), split-K and atomic (random) reduction orders,
  and ``__expf`` fast math (``exp2(fl32(x·log2 e))``: 2 + ~1.17|x| ulp).
* Trainium: fp32 accumulation down the 128-row PE chain, fp32 PSUM across K tiles
  (``chunked`` order), engines computing in fp32 and casting on output, RNE or stochastic
  rounding, and NeuronCore-v4 bf16 PSUM (rounded once per K tile).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from .formats import Format, format_of, get_format, round_mantissa, round_stochastic, round_to
from .oracle import ACTIVATIONS
from .recipe import PrecisionRecipe

__all__ = [
    "ORDERS",
    "PRESETS",
    "emulate_matmul",
    "emulate_sum",
    "engine_activation",
    "gpu_fast_expf",
    "gpu_matmul",
    "trainium_matmul",
]

Order = Literal["sequential", "pairwise", "chunked", "split_k", "random_permutation", "blas", "tensor_core",
                "atomic"]
ORDERS: tuple[str, ...] = ("sequential", "pairwise", "chunked", "split_k", "random_permutation", "blas",
                           "tensor_core", "atomic")


# --------------------------------------------------------------------------- accumulation core


class _Acc:
    """One accumulator register model: fp32 natively, other formats by an exact float64 add
    rounded once (RNE via ml_dtypes, SR, or a limited mantissa with truncation)."""

    def __init__(self, fmt: str | Format, *, bits: int | None = None, mode: str = "rne",
                 rng: np.random.Generator | None = None) -> None:
        self.fmt = get_format(fmt)
        self.bits = bits
        self.mode = mode
        self.rng = rng or np.random.default_rng(0)
        self.native32 = self.fmt.name == "fp32" and bits is None and mode == "rne"

    def zeros(self, shape: tuple[int, ...]) -> np.ndarray:
        return np.zeros(shape, dtype=np.float32 if self.native32 else np.float64)

    def add(self, s: np.ndarray, t: np.ndarray) -> np.ndarray:
        if self.native32:
            return s + t.astype(np.float32)
        return self.round(s.astype(np.float64) + t)

    def round(self, v: np.ndarray) -> np.ndarray:
        if self.native32:
            return v.astype(np.float32)
        if self.bits is not None:
            return round_mantissa(v.astype(np.float32), self.bits, "truncate" if self.mode == "truncate" else "rne"
                                  ).astype(np.float64)
        if self.mode == "sr":
            return round_stochastic(v, self.fmt, self.rng)
        return round_to(v, self.fmt)


def _sequential(t: np.ndarray, acc: _Acc) -> np.ndarray:
    s = acc.zeros(t.shape[:-1])
    for k in range(t.shape[-1]):
        s = acc.add(s, t[..., k])
    return np.asarray(s, dtype=np.float64)


def _pairwise(t: np.ndarray, acc: _Acc) -> np.ndarray:
    v = t.astype(np.float32) if acc.native32 else t
    while v.shape[-1] > 1:
        if v.shape[-1] % 2:
            last = v[..., -1:]
            v = v[..., :-1]
        else:
            last = None
        v = acc.add(v[..., 0::2], v[..., 1::2].astype(np.float64))
        if last is not None:
            v = np.concatenate([v, last.astype(v.dtype)], axis=-1)
    return np.asarray(v[..., 0], dtype=np.float64)


def _chunks(t: np.ndarray, chunk: int) -> np.ndarray:
    k = t.shape[-1]
    nt = -(-k // chunk)
    pad = nt * chunk - k
    if pad:
        t = np.concatenate([t, np.zeros((*t.shape[:-1], pad))], axis=-1)
    return t.reshape(*t.shape[:-1], nt, chunk)


def accumulate(terms: np.ndarray, *, order: str = "sequential", acc: str | Format = "fp32", chunk: int = 128,
               splits: int = 4, acc_bits: int | None = None, acc_rounding: str = "rne",
               promote_every: int | None = None, psum: str | None = None, psum_rounding: str = "rne",
               seed: int = 0) -> np.ndarray:
    """Sum ``terms`` over the last axis in a given order and accumulator model (float64 out).

    ``acc_bits``/``acc_rounding`` model a limited-precision register (FP8 fast accumulation);
    ``promote_every`` adds its partial sums into an fp32 register every that many terms;
    ``psum`` (``"bf16"``) rounds the running PSUM value once per ``chunk`` (NeuronCore-v4).
    """
    rng = np.random.default_rng(seed)
    t = np.asarray(terms, dtype=np.float64)
    if promote_every:
        inner = _Acc(acc, bits=acc_bits, mode=acc_rounding, rng=rng)
        parts = _chunks(t, promote_every)
        partial = _sequential(parts, inner)
        return _sequential(partial, _Acc("fp32"))
    a = _Acc(acc, bits=acc_bits, mode=acc_rounding, rng=rng)
    if order == "random_permutation":
        t = rng.permuted(t, axis=-1)
        order = "sequential"
    if order == "sequential":
        return _sequential(t, a)
    if order == "pairwise":
        return _pairwise(t, a)
    if order == "blas":
        if a.native32:
            return t.astype(np.float32).sum(axis=-1, dtype=np.float32).astype(np.float64)
        return _pairwise(t, a)
    if order in ("chunked", "tensor_core"):
        c = _chunks(t, chunk)
        if order == "tensor_core":
            # multi-operand adder: the chunk's exact sum rounded once, then sequential
            part = a.round(c.sum(axis=-1))
        else:
            part = _sequential(c, a)  # vectorised over the chunks
        if psum:
            p = _Acc(psum, mode=psum_rounding, rng=rng)
            s = np.zeros(part.shape[:-1])
            for j in range(part.shape[-1]):
                s = p.round(s + np.asarray(part[..., j], dtype=np.float64))
            return s
        return _sequential(np.asarray(part, dtype=np.float64), a)
    if order in ("split_k", "atomic"):
        k = t.shape[-1]
        bounds = np.linspace(0, k, splits + 1).astype(int)
        parts = np.stack([_sequential(t[..., b0:b1], a) for b0, b1 in itertools.pairwise(bounds)], axis=-1)
        if order == "atomic":
            parts = rng.permuted(parts, axis=-1)
        return _sequential(parts, a)
    raise ValueError(f"unknown order {order!r}; known: {', '.join(ORDERS)}")


def _finish(v: np.ndarray, out: str | Format | None, rounding: str, seed: int) -> np.ndarray:
    if out is None:
        return v
    if rounding == "sr":
        return round_stochastic(v, out, np.random.default_rng(seed + 7))
    return round_to(v, out)


def _operand(x: np.ndarray, fmt: str | None, rounding: str) -> np.ndarray:
    x64 = np.asarray(x).astype(np.float64)
    if fmt is None:
        return x64
    f = get_format(fmt)
    if f.name == "tf32":
        return round_mantissa(x64.astype(np.float32), 10, "truncate" if rounding == "truncate" else "rne").astype(
            np.float64)
    return round_to(x64, f)


def emulate_matmul(a: np.ndarray, b: np.ndarray, *, order: str = "sequential", acc: str | Format = "fp32",
                   out: str | Format | None = "fp32", chunk: int = 128, splits: int = 4,
                   input_format: str | None = None, input_rounding: str = "rne", acc_bits: int | None = None,
                   acc_rounding: str = "rne", promote_every: int | None = None, psum: str | None = None,
                   psum_rounding: str = "rne", out_rounding: str = "rne", product_rounding: bool | None = None,
                   drop_k: slice | None = None, seed: int = 0) -> np.ndarray:
    """``a @ b`` (2-D) computed as a modelled machine would; returns float64 values on the
    output grid. ``input_format`` rounds operands first (TF32, bf16 auto-cast, fp8);
    ``product_rounding`` rounds each product to fp32 (default: when an operand is fp32/tf32
    and products are not exact in fp32). ``drop_k`` removes K indices (defect models)."""
    with np.errstate(all="ignore"):
        return _emulate_matmul(a, b, order=order, acc=acc, out=out, chunk=chunk, splits=splits,
                               input_format=input_format, input_rounding=input_rounding, acc_bits=acc_bits,
                               acc_rounding=acc_rounding, promote_every=promote_every, psum=psum,
                               psum_rounding=psum_rounding, out_rounding=out_rounding,
                               product_rounding=product_rounding, drop_k=drop_k, seed=seed)


def _emulate_matmul(a, b, *, order, acc, out, chunk, splits, input_format, input_rounding, acc_bits, acc_rounding,
                    promote_every, psum, psum_rounding, out_rounding, product_rounding, drop_k, seed):
    A = _operand(a, input_format, input_rounding)
    B = _operand(b, input_format, input_rounding)
    if drop_k is not None:
        keep = np.ones(A.shape[-1], dtype=bool)
        keep[drop_k] = False
        A, B = A[..., keep], B[keep, :]
    terms = A[:, None, :] * B.T[None, :, :]  # (M, N, K), exact in float64 for ≤ 26-bit operands
    if product_rounding is None:
        fa = get_format(input_format) if input_format else _fmt(a)
        fb = get_format(input_format) if input_format else _fmt(b)
        product_rounding = fa.p + fb.p > 24
    if product_rounding:
        terms = (A[:, None, :].astype(np.float32) * B.T[None, :, :].astype(np.float32)).astype(np.float64)
    s = accumulate(terms, order=order, acc=acc, chunk=chunk, splits=splits, acc_bits=acc_bits,
                   acc_rounding=acc_rounding, promote_every=promote_every, psum=psum, psum_rounding=psum_rounding,
                   seed=seed)
    return _finish(s, out, out_rounding, seed)


def _fmt(x: np.ndarray) -> Format:

    try:
        return format_of(np.asarray(x))
    except ValueError:
        return get_format("fp32")


def emulate_sum(x: np.ndarray, *, out: str | Format | None = "fp32", out_rounding: str = "rne", seed: int = 0,
                **kw: Any) -> np.ndarray:
    """Sum over the last axis with :func:`accumulate`, then round to ``out``."""
    s = accumulate(np.asarray(x).astype(np.float64), seed=seed, **kw)
    return _finish(s, out, out_rounding, seed)


def gpu_matmul(a: np.ndarray, b: np.ndarray, *, precision: Literal["ieee", "tf32", "bf16"] = "ieee",
               split_k: int = 1, atomic: bool = False, fp8_fast_accum: bool = False, promote_every: int | None = None,
               out: str | Format | None = None, seed: int = 0) -> np.ndarray:
    """GPU reference model. ``precision="tf32"`` is PyTorch's ``allow_tf32``/cuDNN conv default
    and JAX/TF's f32 default on Ampere+; ``"bf16"`` is ``set_float32_matmul_precision('medium')``.
    FP8 fast accumulation keeps 14 significand bits and truncates (13 explicit bits)."""
    out = out or _fmt(a).name
    inp = {"ieee": None, "tf32": "tf32", "bf16": "bf16"}[precision]
    if fp8_fast_accum:
        return emulate_matmul(a, b, order="sequential", acc="fp32", acc_bits=13, acc_rounding="truncate",
                              promote_every=promote_every or b.shape[0], out=out, seed=seed)
    if split_k > 1:
        return emulate_matmul(a, b, order="atomic" if atomic else "split_k", splits=split_k, input_format=inp,
                              out=out, seed=seed)
    order = "tensor_core" if precision != "ieee" or _fmt(a).p <= 11 else "blas"
    return emulate_matmul(a, b, order=order, chunk=16, input_format=inp, out=out, seed=seed)


def trainium_matmul(a: np.ndarray, b: np.ndarray, *, psum: Literal["fp32", "bf16"] = "fp32",
                    rounding: Literal["rne", "sr"] = "rne", tile_k: int = 128, out: str | Format | None = None,
                    seed: int = 0) -> np.ndarray:
    """Trainium model: sequential fp32 down each 128-row K tile (PE chain), PSUM accumulation
    across tiles in fp32, or in bf16 rounded (RNE/SR) once per tile on NeuronCore-v4."""
    out = out or ("bf16" if psum == "bf16" else "fp32")
    return emulate_matmul(a, b, order="chunked", chunk=tile_k, psum="bf16" if psum == "bf16" else None,
                          psum_rounding=rounding, out=out, out_rounding=rounding, seed=seed)


def gpu_fast_expf(x: np.ndarray) -> np.ndarray:
    """Model of CUDA ``__expf``: ``ex2.approx(fl32(x·log2 e))``; the rounded argument gives
    the documented ``2 + 1.17|x|`` ulp growth. Flushes subnormal results to zero (FTZ)."""
    x32 = np.asarray(x, dtype=np.float32)
    arg = (x32 * np.float32(math.log2(math.e))).astype(np.float64)
    with np.errstate(over="ignore"):
        r = np.exp2(arg).astype(np.float32)
    tiny = np.float32(2.0**-126)
    return np.where(np.abs(r) < tiny, np.float32(0), r)


def engine_activation(name: str, x: np.ndarray, *, out: str | Format = "fp32") -> np.ndarray:
    """Trainium engine model: fp32 input, function evaluated (here: exactly, then rounded to
    fp32 as the engine's internal format), cast to ``out``."""

    y = ACTIVATIONS[name].f(np.asarray(x).astype(np.float32).astype(np.float64))
    return round_to(round_to(y, "fp32"), out)


# --------------------------------------------------------------------------- presets


@dataclass(frozen=True)
class Preset:
    """A named platform configuration: its recipe and a matmul emulation."""

    name: str
    recipe: PrecisionRecipe
    doc: str
    matmul: Callable[..., np.ndarray] | None = None


def _p(name: str, doc: str, matmul: Callable[..., np.ndarray] | None = None, **recipe: Any) -> Preset:
    return Preset(name, PrecisionRecipe(name=name, **recipe), doc, matmul)


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in [
        _p("gpu_fp32_ieee", "PyTorch CUDA fp32 matmul with TF32 off (the PyTorch matmul default)",
           lambda a, b, **k: gpu_matmul(a, b, out="fp32", **k), inputs="fp32", output="fp32", platform="gpu",
           accumulation="tensor_core_fp32"),
        _p("gpu_fp32_tf32", "fp32 matmul with TF32 operands (cuDNN conv default; JAX/TF default on Ampere+)",
           lambda a, b, **k: gpu_matmul(a, b, precision="tf32", out="fp32", **k), inputs="fp32", compute="tf32",
           output="fp32", platform="gpu", accumulation="tensor_core_fp32"),
        _p("gpu_bf16", "bf16 tensor cores, fp32 accumulate, bf16 out",
           lambda a, b, **k: gpu_matmul(a, b, out="bf16", **k), inputs="bf16", output="bf16", platform="gpu",
           accumulation="tensor_core_fp32"),
        _p("gpu_fp8_fast_accum", "Hopper FP8 with cuBLASLt fast accumulation (~14-bit accumulator)",
           lambda a, b, **k: gpu_matmul(a, b, fp8_fast_accum=True, out="fp32", **k), inputs="fp8_e4m3fn",
           output="fp32", platform="gpu", accumulation="fp8_fast_accum"),
        _p("gpu_fast_math", "CUDA -use_fast_math transcendentals (__expf)", None, transcendental="cuda_fast_math",
           platform="gpu"),
        _p("trn2_bf16", "Trainium2: bf16 operands, fp32 PE/PSUM accumulation over 128-row K tiles, bf16 out",
           lambda a, b, **k: trainium_matmul(a, b, out="bf16", **k), inputs="bf16", output="bf16", platform="trn2",
           accumulation="psum_fp32_k128"),
        _p("trn2_fp32", "Trainium2: fp32 operands (4-pass cost), fp32 PSUM, fp32 out",
           lambda a, b, **k: trainium_matmul(a, b, out="fp32", **k), inputs="fp32", output="fp32", platform="trn2",
           accumulation="psum_fp32_k128"),
        _p("trn2_fp8_e4m3", "Trainium2: fp8 e4m3 (IEEE-like, max 240) operands, fp32 accumulation",
           lambda a, b, **k: trainium_matmul(a, b, out="fp32", **k), inputs="fp8_e4m3", output="fp32",
           platform="trn2", accumulation="psum_fp32_k128"),
        _p("trn3_bf16_psum_rne", "Trainium3 (NeuronCore-v4): bf16 PSUM, RNE once per K tile",
           lambda a, b, **k: trainium_matmul(a, b, psum="bf16", **k), inputs="bf16", output="bf16",
           platform="trn3", accumulation="bf16_psum_rne"),
        _p("trn3_bf16_psum_sr", "Trainium3 (NeuronCore-v4): bf16 PSUM with stochastic rounding",
           lambda a, b, **k: trainium_matmul(a, b, psum="bf16", rounding="sr", **k), inputs="bf16",
           output="bf16", platform="trn3", accumulation="bf16_psum_sr", rounding="sr"),
    ]
}


# --------------------------------------------------------------------------- envelope
