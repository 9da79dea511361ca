"""CUDA built-in functions: barriers, warp primitives, atomics, the math library and its fast-math
intrinsics, conversions between float, half, bfloat16 and fp8, vector constructors, and the few runtime
calls launch code makes (``cudaMemsetAsync``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from nkieval.cuda import arith
from nkieval.cuda.arith import cast, dtype, promote
from nkieval.cuda.values import (
    BF16,
    BOOL,
    F16,
    F32,
    F64,
    FP8_E4M3,
    FP8_E5M2,
    I32,
    U32,
    VECTORS,
    ArrRef,
    CudaError,
    KernelFault,
    Ptr,
    Scalar,
    StructVal,
    Unsupported,
)

if TYPE_CHECKING:
    from nkieval.cuda.interp import Frame, Interpreter

Mask = np.ndarray | None


def _ptr(v: Any, line: int) -> Ptr:
    from nkieval.cuda.interp import decay

    if isinstance(v, ArrRef):
        v = decay(v)
    if not isinstance(v, Ptr) or v.buf is None:
        raise CudaError("expected a pointer", line)
    return v


def syncthreads(it: Interpreter, name: str, args: list[Any], line: int) -> Callable[[Frame, Mask], Any]:
    def sync(fr: Frame, m: Mask) -> Any:
        L = fr.L
        for buf in L.shared_bufs:  # a new barrier phase: no element is written in it yet
            if buf.dirty:
                buf.writer.fill(-1)  # type: ignore[union-attr]
                buf.dirty = False
        if m is not None:
            # the barrier must be reached by every live thread of a block or by none of them
            per_block = m.reshape(L.nb, L.nt)
            waiting = (m | L.exited).reshape(L.nb, L.nt)  # threads that returned are not waited for
            partial = per_block.any(axis=1) & ~waiting.all(axis=1)
            if partial.any():
                b = int(np.flatnonzero(partial)[0])
                raise KernelFault(f"__syncthreads() reached by {int(per_block[b].sum())} of {L.nt} threads of a "
                                  f"block (a divergent barrier)", line)
        if name == "__syncthreads":
            return np.int32(0)
        pred = arith.cast(args[0](fr, m), BOOL) if args else np.bool_(False)
        pv = np.broadcast_to(pred, (L.T,)).copy()
        if m is not None:
            pv &= m
        blocks = pv.reshape(L.nb, L.nt)
        if name == "__syncthreads_count":
            r = blocks.sum(axis=1).astype(I32)
        elif name == "__syncthreads_and":
            act = np.ones_like(blocks) if m is None else m.reshape(L.nb, L.nt)
            r = (blocks | ~act).all(axis=1).astype(I32)
        else:
            r = blocks.any(axis=1).astype(I32)
        return np.repeat(r, L.nt)
    return sync


# ---------------------------------------------------------------------------------------------
# warp primitives


def _full(v: Any, T: int) -> Any:
    if isinstance(v, StructVal):
        return StructVal(v.stype, {k: _full(x, T) for k, x in v.fields.items()})
    return v if isinstance(v, np.ndarray) and v.shape == (T,) else np.broadcast_to(v, (T,)).copy()


def _gather_lanes(v: Any, src: np.ndarray) -> Any:
    if isinstance(v, StructVal):
        return StructVal(v.stype, {k: _gather_lanes(x, src) for k, x in v.fields.items()})
    return v[src]


def shfl(kind: str, fr: Frame, v: Any, arg: Any, width: Any) -> Any:
    L = fr.L
    T = L.T
    w = int(width) if width is not None else 32
    tid = L.tid
    lanew = tid % w
    if kind == "down":
        d = np.asarray(arg, np.int64)
        ok = (lanew + d < w) & (tid + d < L.nt)
        src = np.where(ok, tid + d, tid)
    elif kind == "up":
        d = np.asarray(arg, np.int64)
        ok = lanew >= d
        src = np.where(ok, tid - d, tid)
    elif kind == "xor":
        x = np.asarray(arg, np.int64)
        s = tid ^ x
        ok = (s // w == tid // w) & (s < L.nt)
        src = np.where(ok, s, tid)
    else:
        lane = np.asarray(arg, np.int64) % w
        s = tid - lanew + lane
        src = np.where(s < L.nt, s, tid)
    glob = L.blk * L.nt + src
    return _gather_lanes(_full(v, T), glob)


def ballot(fr: Frame, pred: Any, m: Mask) -> np.ndarray:
    L = fr.L
    p = np.broadcast_to(arith.cast(pred, BOOL), (L.T,)).copy()
    if m is not None:
        p &= m
    nw = (L.nt + 31) // 32
    wid = L.blk * nw + L.tid // 32
    bits = p.astype(np.uint64) << (L.tid % 32).astype(np.uint64)
    acc = np.zeros(L.nb * nw, np.uint64)
    np.bitwise_or.at(acc, wid, bits)
    return acc[wid].astype(U32)


# ---------------------------------------------------------------------------------------------
# atomics: applied thread by thread in the order of the threads' linear index (block-major) within one
# statement; the value returned is the one each thread saw under that order


def atomic(kind: str, fr: Frame, p: Ptr, v: Any, m: Mask, value_used: bool, line: int, cmp: Any = None) -> Any:
    from nkieval.cuda.interp import _check

    buf = p.buf
    assert buf is not None
    if not isinstance(p.elem, Scalar):
        raise Unsupported("an atomic on a struct", line)
    T = fr.L.T
    off = np.broadcast_to(np.asarray(p.off, np.int64), (T,))
    val = np.broadcast_to(cast(v, buf.data.dtype), (T,))
    sel = np.arange(T) if m is None else np.flatnonzero(m)
    if _check(buf, off, m, True, line) is None:
        return buf.data.dtype.type(0)
    idx, vals = off[sel], val[sel]
    data = buf.data
    if not value_used and kind in ("add", "max", "min", "or", "and", "xor", "sub"):
        ufunc = {"add": np.add, "max": np.maximum, "min": np.minimum, "or": np.bitwise_or,
                 "and": np.bitwise_and, "xor": np.bitwise_xor, "sub": np.subtract}[kind]
        if data.dtype == F32 and kind == "add":
            vals = arith.ftz(vals)  # atom.add.f32 flushes subnormals
        ufunc.at(data, idx, vals)
        return None
    old = np.zeros(T, data.dtype)
    cmpv = None if cmp is None else np.broadcast_to(cast(cmp, data.dtype), (T,))
    for j, (a, x) in enumerate(zip(idx.tolist(), vals)):
        cur = data[a]
        old[sel[j]] = cur
        if kind == "add":
            data[a] = cur + x
        elif kind == "sub":
            data[a] = cur - x
        elif kind == "max":
            data[a] = max(cur, x)
        elif kind == "min":
            data[a] = min(cur, x)
        elif kind == "exch":
            data[a] = x
        elif kind == "cas":
            assert cmpv is not None
            if cur == cmpv[sel[j]]:
                data[a] = x
        elif kind == "or":
            data[a] = cur | x
        elif kind == "and":
            data[a] = cur & x
        else:
            raise Unsupported(f"atomic{kind}", line)
    return old


# ---------------------------------------------------------------------------------------------
# dispatch


def lookup(it: Interpreter, name: str, arg_nodes: list[Any], value_used: bool, line: int
           ) -> Callable[[Frame, Mask], Any] | None:
    args = [it.expr(a) for a in arg_nodes]
    opts = it.opts
    n = len(args)

    def ev(fr: Frame, m: Mask) -> list[Any]:
        return [a(fr, m) for a in args]

    if name in ("__shfl_down_sync", "__shfl_up_sync", "__shfl_xor_sync", "__shfl_sync"):
        kind = {"__shfl_down_sync": "down", "__shfl_up_sync": "up", "__shfl_xor_sync": "xor",
                "__shfl_sync": "idx"}[name]

        def sh(fr: Frame, m: Mask) -> Any:
            a = ev(fr, m)
            return shfl(kind, fr, a[1], a[2], a[3] if len(a) > 3 else None)
        return sh
    if name == "__ballot_sync":
        return lambda fr, m: ballot(fr, args[1](fr, m), m)
    if name in ("__any_sync", "__all_sync"):
        def vote(fr: Frame, m: Mask) -> Any:
            p = args[1](fr, m)
            b = ballot(fr, p, m)
            if name == "__any_sync":
                return b != 0
            act = ballot(fr, np.bool_(True), m)
            return b == act
        return vote
    if name == "__activemask":
        return lambda fr, m: ballot(fr, np.bool_(True), m)
    if name.startswith("atomic"):
        kind = name[6:].lower()
        if kind not in ("add", "sub", "max", "min", "exch", "cas", "or", "and", "xor"):
            return None

        def at(fr: Frame, m: Mask) -> Any:
            a = ev(fr, m)
            p = _ptr(a[0], line)
            if kind == "cas":
                return atomic(kind, fr, p, a[2], m, True, line, cmp=a[1])
            return atomic(kind, fr, p, a[1], m, value_used, line)
        return at
    if name == "__ldg":
        from nkieval.cuda.interp import load

        return lambda fr, m: load(_ptr(args[0](fr, m), line), m, line)
    if name in ("cudaMemsetAsync", "cudaMemset"):
        def memset(fr: Frame, m: Mask) -> Any:
            a = ev(fr, m)
            p = _ptr(a[0], line)
            nbytes = int(a[2])
            assert p.buf is not None
            nel = nbytes // p.buf.data.dtype.itemsize
            if int(a[1]) != 0:
                raise Unsupported("cudaMemset with a non-zero byte", line)
            start = int(p.off)
            if p.buf.growable:
                p.buf.grow(start + nel)
            if start + nel > p.buf.data.size:
                raise KernelFault(f"cudaMemset past the end of {p.buf.name}", line)
            p.buf.data[start:start + nel] = 0
            return np.int32(0)
        return memset
    if name.startswith("make_") and name[5:] in VECTORS:
        t = VECTORS[name[5:]]

        def mk(fr: Frame, m: Mask) -> Any:
            from nkieval.cuda.interp import convert

            a = ev(fr, m)
            return StructVal(t, {f: convert(a[i], ft, line) for i, (f, ft) in enumerate(t.fields)})
        return mk
    conv = _CONVERSIONS.get(name)
    if conv is not None:
        return lambda fr, m: conv(*ev(fr, m))
    if name in ("max", "min", "fmaxf", "fminf", "fmax", "fmin", "__hmax", "__hmin"):
        is_max = "max" in name
        fl = name.startswith("f")

        def mm(fr: Frame, m: Mask) -> Any:
            a, b = ev(fr, m)
            t = promote(dtype(a), dtype(b))
            if name in ("fmaxf", "fminf"):
                t = F32
            elif name in ("fmax", "fmin"):
                t = F64 if t == F64 else t
            av, bv = cast(a, t), cast(b, t)
            if t.kind == "f" or fl or t in (BF16, F16):
                r = np.fmax(av, bv) if is_max else np.fmin(av, bv)
            else:
                r = np.maximum(av, bv) if is_max else np.minimum(av, bv)
            return cast(r, t)
        return mm
    if name in ("abs", "fabsf", "fabs") and n == 1:
        def ab(fr: Frame, m: Mask) -> Any:
            x = args[0](fr, m)
            dt = dtype(x)
            if name == "fabsf":
                dt = F32
            return cast(np.abs(cast(x, dt)), dt)
        return ab
    if name in ("fmaf", "__fmaf_rn", "__fmaf_rz", "fma"):
        def fm(fr: Frame, m: Mask) -> Any:
            a, b, c = ev(fr, m)
            if name == "fma" and F64 in (dtype(a), dtype(b), dtype(c)):
                return cast(np.asarray(a, F64) * np.asarray(b, F64) + np.asarray(c, F64), F64)
            r = arith.fma32(cast(a, F32), cast(b, F32), cast(c, F32))
            return arith.ftz(r) if opts.ftz else r
        return fm
    if name in ("__fdividef", "fdividef", "__fdiv_rn"):
        def dv(fr: Frame, m: Mask) -> Any:
            a, b = ev(fr, m)
            if name == "__fdiv_rn":
                return (cast(a, F32) / cast(b, F32)).astype(F32)
            return arith.fast_div(a, b)
        return dv
    if name in ("powf", "pow", "__powf", "atan2f", "atan2", "fmodf", "fmod", "copysignf", "copysign", "hypotf"):
        def two(fr: Frame, m: Mask) -> Any:
            a, b = ev(fr, m)
            dt = F64 if name in ("pow", "atan2", "fmod", "copysign") and F64 in (dtype(a), dtype(b)) else F32
            if name == "__powf" or (name == "powf" and opts.fast_math):
                return arith.fast_pow(a, b)
            fa, fb = np.asarray(a, F64), np.asarray(b, F64)
            fn = {"pow": np.power, "atan2": np.arctan2, "fmod": np.fmod, "copysign": np.copysign,
                  "hypot": np.hypot}[name.rstrip("f").replace("powf", "pow")]
            with np.errstate(all="ignore"):
                return cast(fn(fa, fb), dt)
        return two
    if name in ("__expf", "__exp10f", "__logf", "__log2f", "__sinf", "__cosf", "__tanf", "__tanhf",
                "__saturatef", "__frcp_rn") or (opts.fast_math and name in arith.FAST_MATH_MAP):
        nm = arith.FAST_MATH_MAP.get(name, name) if opts.fast_math else name

        def fast(fr: Frame, m: Mask) -> Any:
            x = cast(args[0](fr, m), F32)
            if opts.ftz:
                x = arith.ftz(x)
            if nm == "__expf":
                r = arith.fast_exp(x)
            elif nm == "__logf":
                r = arith.fast_log(x)
            elif nm == "__saturatef":
                r = cast(np.clip(x, np.float32(0), np.float32(1)), F32)
            else:
                base = {"__exp10f": "exp10f", "__log2f": "log2f", "__sinf": "sinf", "__cosf": "cosf",
                        "__tanf": "tanf", "__tanhf": "tanhf", "__frcp_rn": "__frcp_rn"}[nm]
                if base == "exp10f":
                    r = cast(np.power(10.0, np.asarray(x, F64)), F32)
                else:
                    r = arith.UNARY32[base](x)
            return arith.ftz(r) if opts.ftz else r
        return fast
    if name in ("isnan", "isinf", "isfinite", "signbit", "__isnanf", "__isinff"):
        fn = {"isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite, "signbit": np.signbit,
              "__isnanf": np.isnan, "__isinff": np.isinf}[name]
        return lambda fr, m: fn(np.asarray(args[0](fr, m), F64) if dtype(args[0](fr, m)) in (BF16, F16) else
                                args[0](fr, m))
    if name in arith.UNARY32 or name in arith.UNARY64:
        f32name = name if name in arith.UNARY32 else arith.OVERLOAD_F32.get(name)

        def un(fr: Frame, m: Mask) -> Any:
            x = args[0](fr, m)
            dt = dtype(x)
            if (name in arith.UNARY64 and dt == F64) or (name in arith.UNARY64 and dt.kind in "iub"):
                return arith.UNARY64[name](cast(x, F64))
            x = cast(x, F32)
            if opts.ftz:
                x = arith.ftz(x)
            r = arith.UNARY32[f32name](x)  # type: ignore[index]
            return arith.ftz(r) if opts.ftz else r
        return un
    if name in ("nanf", "nan"):
        return lambda fr, m: np.float32(np.nan) if name == "nanf" else np.float64(np.nan)
    if name in ("__float_as_int", "__float_as_uint", "__int_as_float", "__uint_as_float"):
        to = {"__float_as_int": I32, "__float_as_uint": U32, "__int_as_float": F32, "__uint_as_float": F32}[name]
        src = F32 if name.startswith("__float") else (I32 if "int_as" in name and "uint" not in name else U32)

        def bits(fr: Frame, m: Mask) -> Any:
            x = np.asarray(cast(args[0](fr, m), src))
            r = x.view(to)
            return r if r.ndim else r[()]
        return bits
    return None


#: Work units (:func:`~nkieval.cuda.values.executor_work`) each lane of a call of a math builtin counts beyond
#: the call's syntax nodes (which count as any expression's do: ``interp.STATEMENT_WORK`` + lanes each). The
#: interpreter's node weight fits additions and loads; these functions cost more per lane: ``erff`` and its
#: kin call Python's ``math.erf`` per element (some 100 ns), others compute in fp64 and round. A CUDA name
#: (fast-math maps ``expf`` to ``__expf`` first: :func:`lane_work`). Measured, per function, as the CPU of a
#: kernel calling it 16 times per lane over 65,536 lanes less what the interpreter counts for it, at the rate
#: (work units per CPU second) of the same kernel without the call run alternately beside it (minimum of 9 runs
#: each, median of three rounds); then scaled by the one factor that fits the built-in port tasks' runs
#: (0.48: the microbenchmark's plain kernel counts more work per CPU second than the average run). Only functions
#: measured at 16 units a lane or more before the scale are listed (below it, the spread between rounds); the
#: fp64 functions not measured take their fp32 twin's weight. docs/cuda.md, "Work units: math builtins", has the
#: commands and the fit. Changing an entry changes what a run counts, so what fits a budget: a deliberate,
#: documented change
MATH_LANE_WORK: dict[str, int] = {
    "acosf": 15, "asinf": 9, "atan": 13, "atan2f": 12, "atanf": 13, "ceil": 8, "ceilf": 8, "cos": 20, "__cosf": 21,
    "cosf": 23, "cosh": 8, "coshf": 8, "erf": 335, "erfc": 370, "erfcf": 402, "erff": 332, "__exp10f": 24,
    "__expf": 8, "expf": 11, "expm1": 16, "expm1f": 16, "__float2half": 15, "__float2int_rn": 15, "fmodf": 65,
    "__frsqrt_rn": 20, "hypotf": 61, "log10": 24, "log10f": 24, "__log2f": 8, "__logf": 9, "normcdf": 363,
    "normcdff": 363, "pow": 9, "__powf": 15, "powf": 18, "round": 21, "roundf": 21, "rsqrt": 10, "rsqrtf": 19,
    "sin": 29, "__sinf": 27, "sinf": 12, "sinh": 9, "sinhf": 9, "sqrtf": 10, "tan": 14, "tanf": 14, "tanhf": 9,
}


def lane_work(name: str, opts: Any) -> int:
    """:data:`MATH_LANE_WORK` of a call of ``name`` built with ``opts`` (0 for any other call)."""
    if opts.fast_math:
        name = arith.FAST_MATH_MAP.get(name, name)
    return MATH_LANE_WORK.get(name, 0)


def weighted(it: Interpreter, name: str, impl: Callable[[Frame, Mask], Any]) -> Callable[[Frame, Mask], Any]:
    """``impl``, the call of builtin ``name``, counting :func:`lane_work` per element of its value (its lanes,
    or one for a value uniform across them) in ``it``'s work: a function of the launch, not of the machine."""
    weight = lane_work(name, it.opts)
    if weight <= 0:
        return impl

    def call(fr: Frame, m: Mask) -> Any:
        r = impl(fr, m)
        it.work += weight * (r.size if isinstance(r, np.ndarray) else 1)
        return r
    return call


def _f2i_rn(x: Any) -> Any:
    return cast(np.rint(np.asarray(x, F64)), I32)


_CONVERSIONS: dict[str, Callable[..., Any]] = {
    "__float2bfloat16": lambda x: cast(cast(x, F32), BF16),
    "__float2bfloat16_rn": lambda x: cast(cast(x, F32), BF16),
    "__bfloat162float": lambda x: cast(x, F32),
    "__float2half": lambda x: cast(cast(x, F32), F16),
    "__float2half_rn": lambda x: cast(cast(x, F32), F16),
    "__half2float": lambda x: cast(x, F32),
    "__int2float_rn": lambda x: cast(x, F32),
    "__float2int_rn": _f2i_rn,
    "__float2int_rz": lambda x: cast(x, I32),
    "__nv_cvt_float_to_fp8": lambda x, *_: cast(cast(x, F32), FP8_E4M3),
    "__uint2float_rn": lambda x: cast(x, F32),
    "__double2float_rn": lambda x: cast(x, F32),
    "__float2uint_rn": lambda x: cast(np.rint(np.asarray(x, F64)), U32),
    "__nv_fp8_e5m2": lambda x: cast(cast(x, F32), FP8_E5M2),
}
