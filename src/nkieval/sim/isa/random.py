"""Random numbers: rng, rand2, dropout, set_rng_seed, rand_get_state, rand_set_state.

Each program keeps one PRNG state per engine (Vector, GpSimd), per partition lane, as the
hardware does: XORWOW (5 state words + a Weyl counter = 6 uint32 per generator); GpSimd has
one generator per lane, Vector four (24 words). ``rand_get_state``/``rand_set_state`` expose
that state, so saving and restoring it reproduces a stream exactly. The documented
algorithm is XORWOW for rand2 and the state APIs; v2/v3 Vector hardware uses an LFSR whose
bits we do not model, so only statistics (not bit patterns) of v2/v3 ``rng`` match hardware.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nkieval.sim import dtypes as dt
from nkieval.sim.errors import NkiValidationError
from nkieval.sim.isa.core import (
    check_buffer,
    check_dtype,
    check_engine_operands,
    check_partitions,
    check_same_free,
    free_size,
    instruction,
    read,
    record,
    resolve_engine,
    scalar_or_vector,
    tensor_arg,
    write,
)

_LANES = 128
_INT_OUT = (dt.int8, dt.int16, dt.int32, dt.uint8, dt.uint16, dt.uint32)
_RAND2_OUT = (dt.float8_e4m3, dt.float8_e5m2, dt.float16, dt.bfloat16, dt.float32, dt.tfloat32, *_INT_OUT)
_U32 = np.uint32


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser: spreads a seed over all state words."""
    x = x.astype(np.uint64)
    with np.errstate(over="ignore"):
        x = (x + np.uint64(0x9E3779B97F4A7C15)) & np.uint64(0xFFFFFFFFFFFFFFFF)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return (x ^ (x >> np.uint64(31))) & np.uint64(0xFFFFFFFF)


def seeded_state(seed: int, generators: int) -> np.ndarray:
    """A [128, generators, 6] XORWOW state derived from a 32-bit seed (distinct per lane/generator)."""
    lane = np.arange(_LANES, dtype=np.uint64)[:, None, None]
    gen = np.arange(generators, dtype=np.uint64)[None, :, None]
    word = np.arange(6, dtype=np.uint64)[None, None, :]
    key = (np.uint64(seed & 0xFFFFFFFF) << np.uint64(32)) ^ (lane << np.uint64(12)) ^ (gen << np.uint64(4)) ^ word
    st = _mix(key).astype(_U32)
    st[..., 0] |= _U32(1)  # an all-zero xorshift state never leaves zero
    return st


def _state(ctx: Any, engine: str) -> np.ndarray:
    states = ctx.__dict__.setdefault("prng_states", {})
    if engine not in states:
        words = ctx.target.prng_state_words_vector if engine == "vector" else ctx.target.prng_state_words_gpsimd
        states[engine] = seeded_state(0, words // 6)
    return states[engine]


def _xorwow(s: np.ndarray) -> np.ndarray:
    """Advance every generator in ``s`` [..., 6] (in place) and return one uint32 per generator."""
    x, v = s[..., 0].copy(), s[..., 4].copy()
    t = x ^ (x >> _U32(2))
    s[..., 0:4] = s[..., 1:5]
    s[..., 4] = (v ^ (v << _U32(4))) ^ (t ^ (t << _U32(1)))
    s[..., 5] += _U32(362437)
    return s[..., 4] + s[..., 5]


def random_bits(ctx: Any, engine: str, p: int, n: int) -> np.ndarray:
    """``n`` uint32 random words for each of lanes 0..p-1, advancing that engine's state."""
    st = _state(ctx, engine)[:p]
    g = st.shape[1]
    steps = -(-n // g)
    out = np.empty((p, steps, g), dtype=_U32)
    with np.errstate(over="ignore"):
        for i in range(steps):
            out[:, i, :] = _xorwow(st)
    _state(ctx, engine)[:p] = st
    return out.reshape(p, steps * g)[:, :n]


def uniform01(ctx: Any, engine: str, p: int, n: int) -> np.ndarray:
    """fp32 uniforms in [0, 1) from the top 24 bits of each random word."""
    return (random_bits(ctx, engine, p, n) >> _U32(8)).astype(np.float32) * np.float32(2.0**-24)


@instruction("rng", "vector")
def rng(ctx: Any, dst: Any, engine: Any = None, name: str | None = None) -> None:
    """32 random bits per element, truncated to ``dst``'s integer width (least significant bits)."""
    dst = tensor_arg(dst, "dst")
    eng = resolve_engine(engine, "vector", ("vector", "gpsimd"), "rng")
    if eng == "gpsimd" and not ctx.target.has("gpsimd_rng"):
        raise NkiValidationError("rng on the GpSimd engine needs trn2 or later", operand="engine", rule="generation")
    check_engine_operands(ctx, [("dst", dst)], allow_psum=eng != "gpsimd", engine=eng)
    check_dtype(dst, "dst", _INT_OUT, " (rng writes integer random bits)")
    p = dst.shape[0]
    bits = random_bits(ctx, eng, p, free_size(dst))
    width = dst.dtype.itemsize * 8
    raw = (bits & _U32((1 << width) - 1)).astype(np.dtype(f"uint{width}")).view(dst.data.dtype)
    write(ctx, dst, raw.reshape(dst.shape))
    record(ctx, "rng", eng, [(dst, "dst", "w")])


@instruction("rand2", "vector", min_generation=4)
def rand2(ctx: Any, dst: Any, min: Any, max: Any, name: str | None = None) -> None:
    """Uniform fp32 values in [min, max] (XORWOW on the Vector engine), cast to ``dst``."""
    dst = tensor_arg(dst, "dst")
    check_engine_operands(ctx, [("dst", dst)])
    check_dtype(dst, "dst", _RAND2_OUT)
    p = dst.shape[0]
    lo = scalar_or_vector(ctx, min, "min", p)
    hi = scalar_or_vector(ctx, max, "max", p)
    bad = np.asarray(np.asarray(lo) >= np.asarray(hi))
    if bad.any():
        raise NkiValidationError(f"min must be less than max (got min={np.asarray(lo).min()}, "
                                 f"max={np.asarray(hi).max()})", operand="min", rule="argument")
    u = uniform01(ctx, "vector", p, free_size(dst))
    write(ctx, dst, lo + u * (hi - lo))
    operands = [(dst, "dst", "w")]
    for role, x in (("min", min), ("max", max)):
        if hasattr(x, "access"):
            operands.append((x, role, "r"))
    record(ctx, "rand2", "vector", operands)


@instruction("dropout", "vector")
def dropout(ctx: Any, dst: Any, data: Any, prob: Any, name: str | None = None) -> None:
    """Zero each element of ``data`` with probability ``prob`` (scalar or [P, 1] per partition); no rescaling."""
    dst = tensor_arg(dst, "dst")
    data = tensor_arg(data, "data")
    pairs = [("dst", dst), ("data", data)]
    check_engine_operands(ctx, pairs)
    check_same_free(pairs)
    if dst.dtype != data.dtype:
        raise NkiValidationError(f"dst dtype {dst.dtype} must equal data dtype {data.dtype}", operand="dst",
                                 rule="dtype")
    p = data.shape[0]
    if hasattr(prob, "dtype"):
        if data.dtype.is_int and prob.dtype != dt.float32:
            raise NkiValidationError(f"prob must be float32 for integer data, got {prob.dtype}", operand="prob",
                                     rule="dtype")
        if not prob.dtype.is_float:
            raise NkiValidationError(f"prob must be a float tensor, got {prob.dtype}", operand="prob", rule="dtype")
    pr = scalar_or_vector(ctx, prob, "prob", p)
    pa = np.asarray(pr)
    if not hasattr(prob, "dtype") and not 0.0 <= float(pa) <= 1.0:
        raise NkiValidationError(f"prob {float(pa)} must be in [0, 1]", operand="prob", rule="argument")
    u = uniform01(ctx, "vector", p, free_size(data))
    x = read(data).reshape(p, -1)
    vals = np.where(u < pr, np.zeros((), dtype=x.dtype), x)
    if data.dtype == dst.dtype and not data.dtype.is_float:
        vals = np.where(u < pr, 0, data.data.reshape(p, -1)).astype(data.data.dtype)
    write(ctx, dst, vals.reshape(dst.shape))
    operands = [(dst, "dst", "w"), (data, "data", "r")]
    if hasattr(prob, "access"):
        operands.append((prob, "prob", "r"))
    record(ctx, "dropout", "vector", operands)


def _seed_value(t: Any) -> int:
    raw = t.data.reshape(-1)[:1]
    if t.dtype == dt.float32:
        return int(raw.view(np.uint32)[0])
    return int(raw.astype(np.int64)[0]) & 0xFFFFFFFF


@instruction("set_rng_seed", "vector")
def set_rng_seed(ctx: Any, src_seeds: Any, name: str | None = None) -> None:
    """Seed the Vector engine PRNG from a [1, 1] 32-bit value (same seed → same ``rng`` stream)."""
    src = tensor_arg(src_seeds, "src_seeds")
    check_buffer(src, "src_seeds", ("sbuf", "psum"))
    if src.size != 1:
        raise NkiValidationError(f"src_seeds must be a [1, 1] tensor, got {list(src.shape)}", operand="src_seeds",
                                 rule="shape-mismatch")
    check_dtype(src, "src_seeds", (dt.int32, dt.uint32, dt.float32), " (the seed is a 32-bit value)")
    words = ctx.target.prng_state_words_vector
    _state(ctx, "vector")[...] = seeded_state(_seed_value(src), words // 6)
    record(ctx, "set_rng_seed", "vector", [(src, "src_seeds", "r")])


def _state_engine(ctx: Any, engine: Any, what: str) -> str:
    eng = resolve_engine(engine, "gpsimd", ("gpsimd", "vector"), what)
    if eng == "vector" and not ctx.target.has("vector_rng"):
        raise NkiValidationError(f"{what} on the Vector engine needs trn3 (NeuronCore-v4)", operand="engine",
                                 rule="generation")
    return eng


def _check_state_tensor(ctx: Any, t: Any, role: str, eng: str) -> int:
    check_partitions(ctx, t, role)
    check_dtype(t, role, (dt.uint32,), " (PRNG state words are uint32)")
    words = ctx.target.prng_state_words_vector if eng == "vector" else ctx.target.prng_state_words_gpsimd
    if free_size(t) != words:
        raise NkiValidationError(f"{role} must hold {words} uint32 state words per partition for the {eng} engine, "
                                 f"got {free_size(t)}", operand=role, rule="shape-mismatch")
    return words


@instruction("rand_set_state", "gpsimd", min_generation=3)
def rand_set_state(ctx: Any, src_seeds: Any, engine: Any = None, name: str | None = None) -> None:
    """Load per-lane XORWOW state (6 uint32 per GpSimd lane, 24 per Vector lane) from SBUF."""
    src = tensor_arg(src_seeds, "src_seeds")
    eng = _state_engine(ctx, engine, "rand_set_state")
    check_buffer(src, "src_seeds", ("sbuf",))
    words = _check_state_tensor(ctx, src, "src_seeds", eng)
    p = src.shape[0]
    _state(ctx, eng)[:p] = np.asarray(src.data).reshape(p, words // 6, 6).astype(_U32)
    record(ctx, "rand_set_state", eng, [(src, "src_seeds", "r")])


@instruction("rand_get_state", "gpsimd", min_generation=3)
def rand_get_state(ctx: Any, dst: Any, engine: Any = None, name: str | None = None) -> None:
    """Store the per-lane PRNG state of an engine (GpSimd: SBUF only; Vector v4: SBUF or PSUM)."""
    dst = tensor_arg(dst, "dst")
    eng = _state_engine(ctx, engine, "rand_get_state")
    check_buffer(dst, "dst", ("sbuf", "psum") if eng == "vector" else ("sbuf",),
                 "" if eng == "vector" else "the GpSimd engine cannot access PSUM")
    _check_state_tensor(ctx, dst, "dst", eng)
    p = dst.shape[0]
    write(ctx, dst, _state(ctx, eng)[:p].reshape(dst.shape).copy())
    record(ctx, "rand_get_state", eng, [(dst, "dst", "w")])
