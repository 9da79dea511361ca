"""Random instruction sequences for the simulator fuzz test (shared by tests/fuzz and benchmarks/fuzz_long.py).

A program is a target plus a list of steps; each step calls one registered ``nki.isa``
instruction with arguments drawn by parameter name: tensors (random shape, dtype, buffer,
mostly sharing one [P, F] so that many calls get past validation), operators, enums,
numbers (including NaN/inf/huge/negative) and occasional garbage. The contract under test:
every run ends in a correct result or an ``NkiValidationError`` — never another exception
from inside nkieval. A few instructions also get their result checked against NumPy.
"""

from __future__ import annotations

import inspect
import os
import traceback
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
from hypothesis import strategies as st

import nkieval
from nkieval.sim import dtypes as dt
from nkieval.sim.errors import NkiValidationError
from nkieval.sim.isa import INSTRUCTIONS
from nkieval.sim.isa.enums import engine, reduce_cmd
from nkieval.sim.ops import OPS
from nkieval.sim.runner import run_kernel
from nkieval.sim.tensor import NkiTensor, allocate

NKIEVAL_DIR = os.path.dirname(os.path.abspath(nkieval.__file__))
NAMES = sorted(n for n in INSTRUCTIONS if n not in ("core_barrier", "sendrecv"))  # those need an LNC-2 pair
DTYPES = list(dt.ALL_DTYPES)
COMMON_DTYPES = [dt.float32, dt.bfloat16, dt.float16, dt.int32, dt.uint8, dt.uint32, dt.uint16]
OP_NAMES = sorted(OPS)
WEIRD = [None, "add", [1, 2], (), {}, object(), -1, 0, 1, 2.5, float("nan"), float("inf"), 1e30, -7, True, 2**40]
TENSOR_ROLES = {"dst", "data", "src", "data0", "data1", "data2", "stationary", "moving", "on_true_tile", "predicate",
                "indices", "index", "vals", "bound0", "bound1", "reduce_res", "dst_idx", "src_buffer", "segment_ids",
                "val_dst", "idx_dst", "src_seeds", "stationary_scale", "moving_scale", "dst_scale", "on_true"}
MAYBE_TENSOR = {"operand0", "operand1", "imm0", "imm1", "scale", "bias", "prob", "min", "max", "initial", "max_value",
                "reduce_init", "relu_param", "on_false", "on_false_value"}


@dataclass(frozen=True)
class TensorSpec:
    shape: tuple[int, ...]
    dtype: str
    buffer: str
    seed: int


@dataclass(frozen=True)
class Step:
    name: str
    kwargs: tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class Program:
    target: str
    steps: tuple[Step, ...]


@st.composite
def tensor_specs(draw: Any, base: tuple[int, int]) -> TensorSpec:
    p, f = base
    kind = draw(st.integers(0, 9))
    if kind < 6:
        shape: tuple[int, ...] = (p, f)
    elif kind == 6:
        shape = (p, 1)
    elif kind == 7:
        shape = (draw(st.integers(1, 130)), draw(st.integers(1, 70)))
    elif kind == 8:
        shape = (p, 2, max(1, f // 2))
    else:
        shape = tuple(draw(st.lists(st.integers(1, 9), min_size=1, max_size=4)))
    pick = draw(st.integers(0, 5))
    dtype = dt.float32 if pick < 3 else draw(st.sampled_from(COMMON_DTYPES if pick < 5 else DTYPES))
    buffer = draw(st.sampled_from(["sbuf"] * 8 + ["psum", "hbm"]))
    return TensorSpec(shape, dtype.name, buffer, draw(st.integers(0, 2**16)))


def _value(draw: Any, pname: str, base: tuple[int, int]) -> Any:
    r = draw(st.integers(0, 19))
    if r == 0:
        return draw(st.sampled_from(WEIRD))
    if pname in TENSOR_ROLES or (pname in MAYBE_TENSOR and r < 10) or (pname == "srcs" and r < 4):
        return draw(tensor_specs(base))
    if pname == "srcs":
        return [draw(tensor_specs(base)) for _ in range(draw(st.integers(1, 3)))]
    if pname.startswith(("op", "comp_op", "cmp_op", "reduce_op")):
        likely = ["add", "multiply", "maximum", "subtract", "exp", "greater", "bypass", "relu", "copy", "minimum"]
        return OPS[draw(st.sampled_from(likely if r < 14 else OP_NAMES))]
    if pname == "engine":
        return None if r < 10 else draw(st.sampled_from(list(engine)))
    if pname == "reduce_cmd":
        return draw(st.sampled_from(list(reduce_cmd)))
    if pname == "axis":
        return draw(st.sampled_from([0, 1, 2, -1, (1,), (1, 2), (2,), 5]))
    if pname == "pattern":
        return [[draw(st.integers(-3, 3)), draw(st.integers(1, 70))] for _ in range(draw(st.integers(1, 3)))]
    if pname == "shuffle_mask":
        return [draw(st.sampled_from([0, 1, 31, 255, 40])) for _ in range(draw(st.sampled_from([32, 32, 5])))]
    if pname in ("tile_position", "tile_size"):
        return draw(st.sampled_from([(), None, (0, 0), (32, 32), (64, 128), (0, 128), (1,)]))
    if pname in ("reverse0", "reverse1", "negate", "keepdims", "reverse_pred", "accumulate", "unique_indices",
                 "reduce_res_negate", "is_transpose"):
        return draw(st.sampled_from([True, False, None]))
    return draw(st.one_of(st.integers(-3, 70), st.floats(allow_nan=True, allow_infinity=True, width=32)))


@st.composite
def steps(draw: Any, base: tuple[int, int]) -> Step:
    name = draw(st.sampled_from(NAMES))
    sig = inspect.signature(INSTRUCTIONS[name].fn)
    kwargs = []
    for pname, prm in sig.parameters.items():
        if pname == "name":
            continue
        required = prm.default is inspect.Parameter.empty
        if not required and draw(st.integers(0, 2)):
            continue
        kwargs.append((pname, _value(draw, pname, base)))
    return Step(name, tuple(kwargs))


@st.composite
def programs(draw: Any, max_steps: int = 4) -> Program:
    base = (draw(st.sampled_from([1, 8, 16, 32, 64, 128, 129])), draw(st.sampled_from([1, 4, 8, 12, 32, 64, 513])))
    return Program(draw(st.sampled_from(["trn1", "trn2", "trn3"])),
                   tuple(draw(st.lists(steps(base), min_size=1, max_size=max_steps))))


def materialize(spec: TensorSpec) -> NkiTensor:
    """Allocate a spec'd tensor (may itself raise NkiValidationError) and fill it with random host data."""
    d = next(x for x in dt.ALL_DTYPES if x.name == spec.dtype)  # by name, nl.int64 included
    t = allocate(spec.shape, d, {"sbuf": None, "psum": _psum(), "hbm": _hbm()}[spec.buffer], instruction="fuzz")
    rng = np.random.default_rng(spec.seed)
    if d.kind == "packed":
        t.data[...] = rng.integers(0, 2**16, t.shape).astype(t.data.dtype)
    elif d.is_int:
        t.data[...] = dt.cast(rng.integers(-50, 50, t.shape), d)
    else:
        t.data[...] = dt.cast(rng.standard_normal(t.shape).astype(np.float32) * 4, d)
    t.alloc.written = True
    return t


def _psum() -> Any:
    from nkieval.sim.memory import PSUM

    return PSUM


def _hbm() -> Any:
    from nkieval.sim.memory import PRIVATE_HBM

    return PRIVATE_HBM


def _resolve(v: Any) -> Any:
    if isinstance(v, TensorSpec):
        return materialize(v)
    if isinstance(v, list) and v and all(isinstance(x, TensorSpec) for x in v):
        return [materialize(x) for x in v]
    return v


class InternalError(AssertionError):
    """A non-validation exception raised from inside nkieval."""


def _check_result(step: Step, args: dict[str, Any]) -> None:
    """Reference checks for instructions whose result is easy to state exactly."""
    dst = args.get("dst")
    if step.name == "tensor_copy" and isinstance(dst, NkiTensor) and isinstance(args.get("src"), NkiTensor):
        src = args["src"]
        if src.dtype == dst.dtype and "engine" not in args and not dst.dtype.tf32:
            assert np.array_equal(np.asarray(dst.data).reshape(-1).view(np.uint8),
                                  np.asarray(src.data).reshape(-1).view(np.uint8)) or src.alloc is dst.alloc, \
                "tensor_copy with equal dtypes is not bit-exact"
    if step.name == "memset" and isinstance(dst, NkiTensor) and dst.dtype == dt.float32:
        v = args.get("value")
        if isinstance(v, int | float) and np.isfinite(v) and abs(v) < 1e30:
            assert np.all(np.asarray(dst.data) == np.float32(v)), "memset wrote the wrong value"


def run_program(prog: Program) -> str:
    """Run one program; return "ok" or the validation rule that stopped it; raise InternalError on a crash."""
    outcome: dict[str, str] = {}

    def kernel() -> None:
        for step in prog.steps:
            args = {k: _resolve(v) for k, v in step.kwargs}
            INSTRUCTIONS[step.name].fn(**args)
            _check_result(step, args)
        outcome["end"] = "ok"

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            run_kernel(kernel, (), target=prog.target)
        except NkiValidationError as e:
            return e.rule or "validation"
        except AssertionError:
            raise
        except Exception as e:
            tb = traceback.extract_tb(e.__traceback__)
            inside = [f for f in tb if f.filename.startswith(NKIEVAL_DIR)]
            where = f"{inside[-1].filename}:{inside[-1].lineno}" if inside else "harness"
            raise InternalError(f"{type(e).__name__} from {where}: {e}\nprogram: {prog}") from e
    return outcome.get("end", "ok")
