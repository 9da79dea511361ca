"""Oracles of contractions and reductions: matmul (fp8 scales included), sums and means, prefix sums,
softmax and log-softmax, layer and RMS normalisation. Each carries ``S = Σ|terms|`` and ``Q = Σ terms²`` per
output for the bounds."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .formats import Format
from .opspec import (
    OPS,
    OracleBlock,
    Prepared,
    _check_axis,
    _f32_bits,
    _f64,
    _fits_f32,
    _row_view,
    grid_exponent,
)
from .recipe import PrecisionRecipe

# --------------------------------------------------------------------------- contractions


def _special_contract(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """IEEE special values of ``a @ b`` without trusting BLAS with NaN/inf.

    Uses 0/1 indicator matmuls: an output is NaN if its row of ``a`` or column of ``b``
    holds a NaN, if some term is inf·0, or if it has both +inf and -inf terms.
    """
    an, bn = np.isnan(a), np.isnan(b)
    ai, bi = np.isinf(a), np.isinf(b)

    def any_mm(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return (x.astype(np.float64) @ y.astype(np.float64)) > 0

    ones_a = np.ones_like(a, dtype=bool)
    ones_b = np.ones_like(b, dtype=bool)
    nan = any_mm(an, ones_b) | any_mm(ones_a, bn) | any_mm(ai, b == 0) | any_mm(a == 0, bi)
    with np.errstate(invalid="ignore"):
        pos = (any_mm(ai & (a > 0), b > 0) | any_mm(ai & (a < 0), b < 0)
               | any_mm(a > 0, bi & (b > 0)) | any_mm(a < 0, bi & (b < 0)))
        neg = (any_mm(ai & (a > 0), b < 0) | any_mm(ai & (a < 0), b > 0)
               | any_mm(a > 0, bi & (b < 0)) | any_mm(a < 0, bi & (b > 0)))
    nan = nan | (pos & neg)
    return nan, pos & ~nan, neg & ~nan




def _subnormal_part(x: np.ndarray, fmt: Format | None) -> np.ndarray | None:
    """|x| restricted to values subnormal in ``fmt`` (None if there are none): the terms a
    kernel that treats denormal operands as zero (DAZ/FTZ, undocumented on Neuron, default
    under CUDA fast-math) may drop."""
    if fmt is None or fmt.kind != "float":
        return None
    ax = np.abs(x)
    sub = (ax > 0) & (ax < fmt.tiny)
    if not sub.any():
        return None
    return np.where(sub, ax, 0.0)

def _mag_range(x: np.ndarray, scale: Any) -> tuple[float, float]:
    """(max, min non-zero) finite magnitude of ``x`` times ``scale`` (0, inf if none)."""
    hi, lo = 0.0, math.inf
    flat = np.asarray(x).reshape(-1)
    if _fits_f32(flat):
        # magnitudes of positive floats order like their bit patterns: two integer reductions
        inf_bits = np.uint32(0x7F800000)
        for c0 in range(0, flat.size, 1 << 20):
            mag = _f32_bits(flat[c0:c0 + (1 << 20)])
            mag &= np.uint32(0x7FFFFFFF)
            fin = mag < inf_bits
            h = np.max(mag, where=fin, initial=np.uint32(0))
            if h == 0:
                continue
            lw = np.min(mag, where=fin & (mag > 0), initial=inf_bits)
            hi = max(hi, float(np.array(h, dtype=np.uint32).view(np.float32)))
            lo = min(lo, float(np.array(lw, dtype=np.uint32).view(np.float32)))
        flat = flat[:0]
    for c0 in range(0, flat.size, 1 << 20):
        v = np.abs(_f64(flat[c0:c0 + (1 << 20)]))
        v = v[np.isfinite(v) & (v > 0)]
        if v.size:
            hi, lo = max(hi, float(v.max())), min(lo, float(v.min()))
    if hi == 0.0:
        return 0.0, math.inf
    sc = np.abs(np.asarray(scale, dtype=np.float64))
    return hi * float(sc.max()), lo * float(sc.min())


def _scale_array(s: Any, n: int, what: str) -> np.ndarray | float:
    if s is None:
        return 1.0
    arr = _f64(s)
    if arr.ndim == 0:
        return float(arr)
    arr = arr.reshape(-1)
    if arr.size != n:
        raise ValueError(f"{what} has {arr.size} entries, expected 1 or {n}")
    return arr


def _prepare_matmul(inputs: list[np.ndarray], params: dict[str, Any], recipe: PrecisionRecipe) -> Prepared:
    a, b = (np.asarray(x) for x in inputs[:2])
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError("matmul operands must have at least one dimension")
    a2 = a.reshape(1, -1) if a.ndim == 1 else a
    b2 = b.reshape(-1, 1) if b.ndim == 1 else b
    if a2.shape[-1] != b2.shape[-2]:
        raise ValueError(f"matmul contraction mismatch: a {a.shape} and b {b.shape}")
    batch = np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
    m, k = a2.shape[-2:]
    n = b2.shape[-1]
    a3 = np.broadcast_to(a2, (*batch, m, k)).reshape(-1, m, k)
    b3 = np.broadcast_to(b2, (*batch, k, n)).reshape(-1, k, n)
    nb = a3.shape[0]
    out_shape: tuple[int, ...] = (*batch, m, n)
    if a.ndim == 1 and b.ndim == 1:
        out_shape = tuple(batch)
    elif a.ndim == 1:
        out_shape = (*batch, n)
    elif b.ndim == 1:
        out_shape = (*batch, m)
    sa = params.get("scale_a")
    sb = params.get("scale_b")
    if sa is None and len(recipe.scales) >= 1:
        sa = recipe.scales[0]
    if sb is None and len(recipe.scales) >= 2:
        sb = recipe.scales[1]
    scale_a = _scale_array(sa, m, "scale_a")
    scale_b = _scale_array(sb, n, "scale_b")
    # flush-to-zero allowance: operands subnormal *in the accumulator's format* (fp32 denormals);
    # fp16/fp8 subnormals are normal fp32 numbers and must be handled exactly
    fa = fb = recipe.acc_format
    cache: dict[int, tuple[np.ndarray, ...]] = {}
    # S and Q may be computed in float32 when no product or sum can leave its normal range
    amax, amin = _mag_range(a3, scale_a)
    bmax, bmin = _mag_range(b3, scale_b)
    fast_mag = (amax * bmax) ** 2 * k <= 2.0**100 and (amin * bmin) ** 2 >= 2.0**-100 and k < 2**20
    mag_inflate = 1.0 + k * 2.0**-23

    def b_parts(bi: int) -> tuple[np.ndarray, ...]:
        if bi not in cache:
            cache.clear()
            bf = _f64(b3[bi])
            if not isinstance(scale_b, float) or scale_b != 1.0:
                bf = bf * (scale_b if isinstance(scale_b, float) else scale_b[None, :])
            finite = np.isfinite(bf)
            has_special = not finite.all()
            bz = np.where(finite, bf, 0.0) if has_special else bf
            babs, bsq = np.abs(bz), bz * bz
            if fast_mag:
                babs, bsq = babs.astype(np.float32), bsq.astype(np.float32)
            cache[bi] = (bf, bz, babs, bsq, has_special, _subnormal_part(_f64(b3[bi]), fb))
        return cache[bi]

    psum_tile = recipe.tile_k if recipe.structure.get("psum_rounds") else 0

    def evaluate(r0: int, r1: int) -> OracleBlock:
        ys, ss, qs, subs, psq = [], [], [], [], []
        any_sub = False
        r = r0
        while r < r1:
            bi, i0 = divmod(r, m)
            i1 = min(m, i0 + (r1 - r))
            af = _f64(a3[bi, i0:i1])
            if not isinstance(scale_a, float) or scale_a != 1.0:
                af = af * (scale_a if isinstance(scale_a, float) else scale_a[i0:i1, None])
            bf, bz, babs, bsq, b_special, b_sub = b_parts(bi)
            afin = np.isfinite(af)
            a_special = not afin.all()
            az = np.where(afin, af, 0.0) if a_special else af
            y = az @ bz
            if fast_mag:
                # magnitudes only need a few digits: float32 BLAS, inflated by its own γ_K
                s = (np.abs(az).astype(np.float32) @ babs).astype(np.float64) * mag_inflate
                q = ((az * az).astype(np.float32) @ bsq).astype(np.float64) * mag_inflate
            else:
                s = np.abs(az) @ babs
                q = (az * az) @ bsq
            if psum_tile:
                # running PSUM values after each K tile (declared tile order), for the
                # probabilistic bound λ·u·sqrt(Σ_t P_t²) of per-tile PSUM roundings
                run = np.zeros_like(y)
                sq = np.zeros_like(y)
                for t0 in range(0, k, psum_tile):
                    run += az[:, t0:t0 + psum_tile] @ bz[t0:t0 + psum_tile]
                    sq += run * run
                psq.append(sq.ravel())
            if a_special or b_special:
                nan, pinf, ninf = _special_contract(af, bf)
                y = np.where(nan, np.nan, np.where(pinf, np.inf, np.where(ninf, -np.inf, y)))
            a_sub = _subnormal_part(_f64(a3[bi, i0:i1]), fa)
            sub = None
            if a_sub is not None:
                sub = a_sub @ babs
            if b_sub is not None:
                part = np.abs(az) @ b_sub
                sub = part if sub is None else sub + part
            ys.append(y.ravel())
            ss.append(s.ravel())
            qs.append(q.ravel())
            subs.append(None if sub is None else sub.ravel())
            any_sub = any_sub or sub is not None
            r += i1 - i0
        y = np.concatenate(ys)
        subn = None
        if any_sub:
            subn = np.concatenate([np.zeros(len(yy)) if sb_ is None else sb_ for yy, sb_ in zip(ys, subs)])
        aux: dict[str, Any] = {"scaled": not (isinstance(scale_a, float) and isinstance(scale_b, float)
                                              and scale_a == 1.0 and scale_b == 1.0)}
        if psq:
            aux["psum_sq"] = np.concatenate(psq)
        return OracleBlock(y=y, scale=np.concatenate(ss), sumsq=np.concatenate(qs), k=k,
                           subnormal_scale=subn, aux=aux)

    ga = grid_exponent(a)
    gb = grid_exponent(b)
    scales_pow2 = all(
        isinstance(s, float) and s != 0 and math.frexp(abs(s))[0] == 0.5 for s in (scale_a, scale_b)
    )
    grid = None if (ga is None or gb is None or not scales_pow2) else ga + gb + (
        int(math.log2(abs(scale_a))) + int(math.log2(abs(scale_b)))  # type: ignore[arg-type]
    )
    return Prepared(
        spec=OPS["matmul"], out_shape=out_shape, row_len=n, n_rows=nb * m, work_per_row=max(n, k),
        evaluate=evaluate, inputs=[a, b], params=params, k=k,
        facts={"K": k, "M": m, "N": n, "batch": int(nb), "grid": grid, "operands": 2},
    )


def _prepare_reduce(kind: str):
    def prepare(inputs: list[np.ndarray], params: dict[str, Any], recipe: PrecisionRecipe) -> Prepared:
        x = np.asarray(inputs[0])
        axis = params.get("axis", -1)
        if axis is None:
            rows = x.reshape(1, -1)
            out_shape: tuple[int, ...] = ()
        else:
            ax = _check_axis(x.ndim, axis)
            rows, moved = _row_view(x, ax)
            out_shape = moved[:-1]
        n_rows, k = rows.shape
        if k == 0:
            raise ValueError(f"{kind} over an empty axis")
        fx = recipe.acc_format

        def evaluate(r0: int, r1: int) -> OracleBlock:
            ys, ss, qs, subs = [], [], [], []
            step = max(1, (1 << 20) // k)
            cstep = 1 << 20  # long rows are summed in column chunks: bounded memory
            for c0 in range(r0, r1, step):
                c1 = min(r1, c0 + step)
                y = np.zeros(c1 - c0)
                s_ = np.zeros(c1 - c0)
                q_ = np.zeros(c1 - c0)
                sb = np.zeros(c1 - c0)
                for k0 in range(0, k, cstep):
                    xf = _f64(rows[c0:c1, k0:k0 + cstep])
                    fin = np.isfinite(xf)
                    xz = np.where(fin, xf, 0.0)
                    with np.errstate(invalid="ignore", over="ignore"):
                        y += xf.sum(axis=1)  # IEEE special semantics from float64
                    s_ += np.abs(xz).sum(axis=1)
                    q_ += (xz * xz).sum(axis=1)
                    sp = _subnormal_part(xz, fx)
                    if sp is not None:
                        sb += sp.sum(axis=1)
                ys.append(y)
                ss.append(s_)
                qs.append(q_)
                subs.append(sb)
            y = np.concatenate(ys)
            s = np.concatenate(ss)
            q = np.concatenate(qs)
            sub = np.concatenate(subs)
            if kind == "mean":
                y, s, q, sub = y / k, s / k, q / (k * k), sub / k
            return OracleBlock(y=y, scale=s, sumsq=q, k=k, subnormal_scale=sub if sub.any() else None,
                               aux={"divide": kind == "mean"})

        return Prepared(
            spec=OPS[kind], out_shape=tuple(out_shape), row_len=1, n_rows=n_rows, work_per_row=k,
            evaluate=evaluate, inputs=[x], params=params, k=k,
            facts={"K": k, "grid": grid_exponent(x), "operands": 1},
        )

    return prepare


def _prepare_cumsum(inputs: list[np.ndarray], params: dict[str, Any], recipe: PrecisionRecipe) -> Prepared:
    x = np.asarray(inputs[0])
    ax = _check_axis(x.ndim, params.get("axis", -1))
    rows, _ = _row_view(x, ax)
    n_rows, n = rows.shape
    if ax != x.ndim - 1 and x.ndim > 1:
        raise ValueError("cumsum is supported along the last axis only; move the axis first")

    def evaluate(r0: int, r1: int) -> OracleBlock:
        xf = _f64(rows[r0:r1])
        fin = np.isfinite(xf)
        xz = np.where(fin, xf, 0.0)
        with np.errstate(invalid="ignore", over="ignore"):
            y = np.cumsum(xf, axis=1)
        s = np.cumsum(np.abs(xz), axis=1)
        q = np.cumsum(xz * xz, axis=1)
        kk = np.broadcast_to(np.arange(1, n + 1, dtype=np.float64), xf.shape)
        return OracleBlock(y=y.ravel(), scale=s.ravel(), sumsq=q.ravel(), k=kk.ravel())

    return Prepared(
        spec=OPS["cumsum"], out_shape=x.shape if x.ndim else (1,), row_len=n, n_rows=n_rows,
        work_per_row=n, evaluate=evaluate, inputs=[x], params=params, k=n,
        facts={"K": n, "grid": grid_exponent(x), "operands": 1},
    )


# --------------------------------------------------------------------------- softmax family


def _prepare_softmax(log: bool):
    def prepare(inputs: list[np.ndarray], params: dict[str, Any], recipe: PrecisionRecipe) -> Prepared:
        x = np.asarray(inputs[0])
        ax = _check_axis(x.ndim, params.get("axis", -1))
        if x.ndim > 1 and ax != x.ndim - 1:
            raise ValueError("softmax is supported along the last axis only; move the axis first")
        rows, moved = _row_view(x, ax)
        n_rows, n = rows.shape
        mask = params.get("mask")
        mrows = None
        if mask is not None:
            mk = np.broadcast_to(np.asarray(mask, dtype=bool), x.shape)
            mrows, _ = _row_view(mk, ax)

        def evaluate(r0: int, r1: int) -> OracleBlock:
            xf = _f64(rows[r0:r1])
            keep = np.ones_like(xf, dtype=bool) if mrows is None else mrows[r0:r1]
            xm = np.where(keep, xf, -np.inf)
            with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
                m = np.max(xm, axis=1, keepdims=True)
                d = xm - m
                e = np.exp(d)
                z = e.sum(axis=1, keepdims=True)
                if log:
                    y = d - np.log(z)
                else:
                    y = e / z
            nkeep = keep.sum(axis=1, keepdims=True).astype(np.float64)
            aux = {
                # masked/-inf entries have exp(d) == 0 exactly; their bound is the floor
                "absd": np.where(np.isfinite(d), np.abs(d), 0.0).ravel(),
                "absd_rowmax": np.broadcast_to(
                    np.max(np.where(keep & np.isfinite(d), np.abs(d), 0.0), axis=1, keepdims=True), xf.shape
                ).ravel(),
                "absx": np.where(keep & np.isfinite(xf), np.abs(xf), 0.0).ravel(),
                "xmax": np.broadcast_to(m, xf.shape).ravel(),
                "n": np.broadcast_to(nkeep, xf.shape).ravel(),
                "logz": np.broadcast_to(np.abs(np.log(z)), xf.shape).ravel(),
                "keep": keep.ravel(),
                "x": xf.ravel(),
            }
            return OracleBlock(y=y.ravel(), k=n, aux=aux)

        name = "log_softmax" if log else "softmax"
        return Prepared(
            spec=OPS[name], out_shape=tuple(moved), row_len=n, n_rows=n_rows, work_per_row=n,
            evaluate=evaluate, inputs=[x], params=params, k=n, facts={"N": n, "axis": ax, "moved": ax != x.ndim - 1},
        )

    return prepare


# --------------------------------------------------------------------------- normalisation


def _prepare_norm(kind: str):
    def prepare(inputs: list[np.ndarray], params: dict[str, Any], recipe: PrecisionRecipe) -> Prepared:
        x = np.asarray(inputs[0])
        ax = _check_axis(x.ndim, params.get("axis", -1))
        if ax != x.ndim - 1:
            raise ValueError(f"{kind} is supported along the last axis only")
        rows, moved = _row_view(x, ax)
        n_rows, n = rows.shape
        eps = float(params.get("eps", 1e-5 if kind == "layernorm" else 1e-6))
        gamma = inputs[1] if len(inputs) > 1 and inputs[1] is not None else params.get("gamma")
        beta = inputs[2] if len(inputs) > 2 and inputs[2] is not None else params.get("beta")
        g = None if gamma is None else np.broadcast_to(_f64(gamma), (n,))
        bt = None if beta is None else np.broadcast_to(_f64(beta), (n,))

        def evaluate(r0: int, r1: int) -> OracleBlock:
            xf = _f64(rows[r0:r1])
            with np.errstate(invalid="ignore", over="ignore"):
                if kind == "layernorm":
                    mu = xf.mean(axis=1, keepdims=True)
                    dev = xf - mu
                    var = (dev * dev).mean(axis=1, keepdims=True)
                    rstd = 1.0 / np.sqrt(var + eps)
                    xhat = dev * rstd
                else:
                    mu = np.zeros((xf.shape[0], 1))
                    dev = xf
                    var = (xf * xf).mean(axis=1, keepdims=True)
                    rstd = 1.0 / np.sqrt(var + eps)
                    xhat = xf * rstd
                y = xhat if g is None else xhat * g
                if bt is not None and kind == "layernorm":
                    y = y + bt
            shape = xf.shape
            aux = {
                "xhat": np.abs(xhat).ravel(),
                "absdev": np.abs(dev).ravel(),
                "rstd": np.broadcast_to(rstd, shape).ravel(),
                "var": np.broadcast_to(var, shape).ravel(),
                "eps": eps,
                "mean_abs": np.broadcast_to(np.abs(xf).mean(axis=1, keepdims=True), shape).ravel(),
                "mean_sq": np.broadcast_to((xf * xf).mean(axis=1, keepdims=True), shape).ravel(),
                "mu": np.broadcast_to(np.abs(mu), shape).ravel(),
                "gamma": np.ones(xf.size) if g is None else np.broadcast_to(np.abs(g), shape).ravel(),
                "has_beta": bt is not None,
            }
            return OracleBlock(y=y.ravel(), k=n, aux=aux)

        return Prepared(
            spec=OPS[kind], out_shape=tuple(moved), row_len=n, n_rows=n_rows, work_per_row=n,
            evaluate=evaluate, inputs=[x], params={**params, "eps": eps}, k=n, facts={"N": n, "eps": eps},
        )

    return prepare
