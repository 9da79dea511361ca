"""Pass ``engine-balance`` (off by default): place the ops whose engine the compiler may choose on the least
loaded of the engines allowed for them.

``engine=nki.isa.engine.unknown`` (the default of ``tensor_copy``, ``tensor_scalar`` and ``memset``) leaves
the engine to the compiler, and the simulator records its own default choice. The documented choices:
``tensor_copy`` on Vector, Scalar (not on NeuronCore-v2) or GpSimd (which cannot access PSUM);
``tensor_scalar`` on Vector or, on NeuronCore-v3+, Scalar for (multiply, add), (multiply) or (add); ``memset``
on Vector or GpSimd (not PSUM). In program order each such instruction goes to the allowed engine whose busy
time plus the instruction's own cost there is least (ties keep the recorded engine).

Off by default: the trace does not say whether the kernel pinned the engine (``engine=`` given), so this pass
treats every such instruction as the compiler's to place, an upper bound on what the compiler may do.
"""

from __future__ import annotations

from dataclasses import replace

from nkieval.hardware import get_target
from nkieval.perf.compiler.model import PassContext
from nkieval.perf.costs import cost_of
from nkieval.perf.params import load_params
from nkieval.sim.trace import TraceRecord

ENGINES = ("vector", "scalar", "gpsimd")
NEURONCORE_V2 = ("trn1", "inf2")
SCALAR_TENSOR_SCALAR_OPS = (("multiply", "add"), ("multiply", None), ("add", None))


def allowed_engines(r: TraceRecord, target: str) -> tuple[str, ...]:
    """The engines the documented rules allow for ``r`` (its own engine alone if it is not placeable)."""
    psum = any(o.buffer == "psum" for o in r.operands)
    v2 = target in NEURONCORE_V2
    if r.engine not in ENGINES or r.attrs.get("mask"):
        return (r.engine,)
    if r.opcode == "tensor_copy":
        out = ["vector"] + ([] if v2 else ["scalar"]) + ([] if psum else ["gpsimd"])
    elif r.opcode == "tensor_scalar" and not v2 and (r.attrs.get("op0"), r.attrs.get("op1")) in \
            SCALAR_TENSOR_SCALAR_OPS:
        out = ["vector", "scalar"]
    elif r.opcode == "memset":
        out = ["vector"] + ([] if psum else ["gpsimd"])
    else:
        return (r.engine,)
    return tuple(out) if r.engine in out else (r.engine,)


def run(records: list[TraceRecord], ctx: PassContext) -> list[TraceRecord]:
    target = ctx.trace.target
    p = load_params(get_target(target))
    busy = dict.fromkeys(ENGINES, 0.0)
    moved: dict[tuple[str, str], int] = {}
    out = []
    for r in records:
        if r.engine not in ENGINES:
            out.append(r)
            continue
        choices = allowed_engines(r, target)
        if len(choices) > 1:
            costs = {e: cost_of(r if e == r.engine else replace(r, engine=e), p)[0].occ for e in choices}
            best = min(choices, key=lambda e: (busy[e] + costs[e], e != r.engine))
            if best != r.engine:
                moved[(r.engine, best)] = moved.get((r.engine, best), 0) + 1
                r = replace(r, engine=best)
            busy[best] += costs[best]
        else:
            busy[r.engine] += cost_of(r, p)[0].occ
        out.append(r)
    if moved:
        ctx.notes.append(", ".join(f"{n} {a}->{b}" for (a, b), n in sorted(moved.items())))
        ctx.changed += sum(moved.values())
    return out
