"""Confusion table: the numerics standard vs fixed-tolerance baselines (issue 5, Acceptance).

Runs a zoo of *correct* computations (matmul over dtypes, K, accumulation orders and input
families; softmax, layernorm, activations, fp8 dequantisation) and of the *defective* ones the
issue lists, then judges every output with

* the standard (``nkieval.numerics.check`` under the declared recipe), and
* each fixed-tolerance baseline (``nkieval.numerics.baselines``) against the best reference a
  baseline could be given: the float64 oracle rounded to the declared output dtype.

Prints per method: correct cases accepted / rejected (false failures), defective cases
rejected / accepted (false passes), the standard's inconclusive count, and a per-defect
detection table. Usage::

    .venv/bin/python benchmarks/numerics_confusion.py [--quick]
"""

from __future__ import annotations

import argparse
import itertools
import time
import zlib
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass

import ml_dtypes
import numpy as np

from nkieval.numerics import PrecisionRecipe, check, emulate_matmul, generate, matmul_inputs
from nkieval.numerics.baselines import BASELINES
from nkieval.numerics.formats import round_to
from nkieval.numerics.oracle import ACTIVATIONS, evaluate


@dataclass
class Case:
    name: str  # "correct" or the defect's name
    op: str
    inputs: list
    actual: np.ndarray
    recipe: PrecisionRecipe
    family: str | None
    params: dict

    @property
    def defective(self) -> bool:
        return self.name != "correct"


def _seed(*parts: object) -> int:
    return zlib.crc32("/".join(map(str, parts)).encode())


def _softmax(x: np.ndarray, sub: bool = True, mask: np.ndarray | None = None) -> np.ndarray:
    x32 = x.astype(np.float32)
    if mask is not None:
        x32 = np.where(mask, x32, np.float32(-np.inf))
    with np.errstate(all="ignore"):
        e = np.exp(x32 - (x32.max(-1, keepdims=True) if sub else 0))
        return e / e.sum(-1, keepdims=True, dtype=np.float32)


def _layernorm(x: np.ndarray, one_pass: bool = False) -> np.ndarray:
    x32 = x.astype(np.float32)
    mu = x32.mean(-1, keepdims=True, dtype=np.float32)
    if one_pass:
        var = (x32 * x32).mean(-1, keepdims=True, dtype=np.float32) - mu * mu
    else:
        var = ((x32 - mu) ** 2).mean(-1, keepdims=True, dtype=np.float32)
    return (x32 - mu) / np.sqrt(np.maximum(var, 0) + np.float32(1e-5))


def _act(name: str, x: np.ndarray) -> np.ndarray:
    return round_to(ACTIVATIONS[name].f(x.astype(np.float64)), "fp32").astype(np.float32)


# the finding the standard must name (among its top three) for each defect
EXPECTED_CAUSE: dict[str, set[str]] = {
    "bf16 output where fp32 declared": {"bf16_output"},
    "TF32 inputs where fp32 declared": {"tf32_inputs"},
    "bf16 accumulation": {"bf16_accumulation", "bf16_psum"},
    "dropped last K tile": {"dropped_last_k_tile"},
    "softmax without max-subtraction": {"no_max_subtraction"},
    "off-by-one mask": {"mask_off_by_one_right"},
    "one-pass variance": {"one_pass_variance"},
    "gelu where gelu_apprx_tanh specified": {"computes_gelu"},
    "wrong fp8 dequantisation scale": {"constant_factor"},
    "NaN swallowed": {"nan_swallowed"},
    "NaN produced": {"nan_produced"},
    "zeros returned": {"zeros"},
}


def build_cases(quick: bool) -> list[Case]:
    cases: list[Case] = []
    dtypes = ("fp32", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2")
    families = ("normal", "uniform", "heavy_tailed", "cancellation", "ill_conditioned", "large_magnitude", "tiny",
                "special", "integers")
    ks = (64, 512, 4096) if quick else (64, 128, 129, 512, 4096, 16384)
    orders = ("sequential", "pairwise", "chunked", "split_k", "random_permutation")
    m, n = (4, 8) if quick else (8, 16)
    # correct matmuls
    for i, (dt, fam, k) in enumerate(itertools.product(dtypes, families, ks)):
        order = orders[i % len(orders)]
        out = "fp32" if i % 2 else "bf16"
        a, b = matmul_inputs(fam, m, k, n, dt, seed=_seed(dt, fam, k), out=out)
        got = emulate_matmul(a, b, order=order, out=out, seed=i)
        cases.append(Case("correct", "matmul", [a, b], got, PrecisionRecipe(inputs=dt, output=out), fam, {}))
    # defective matmuls
    for k in ks:
        a, b = matmul_inputs("normal", m, k, n, "fp32", seed=_seed("d32", k))
        r32 = PrecisionRecipe()
        good = emulate_matmul(a, b, order="chunked", out="fp32")
        cases.append(Case("bf16 output where fp32 declared", "matmul", [a, b],
                          round_to(good, "bf16").astype(np.float32), r32, "normal", {}))
        cases.append(Case("TF32 inputs where fp32 declared", "matmul", [a, b],
                          emulate_matmul(a, b, order="chunked", input_format="tf32", out="fp32"), r32, "normal", {}))
        ab, bb = matmul_inputs("normal", m, k, n, "bf16", seed=_seed("d16", k))
        for out in ("bf16", "fp32"):
            rb = PrecisionRecipe(inputs="bf16", output=out)
            cases.append(Case("bf16 accumulation", "matmul", [ab, bb],
                              emulate_matmul(ab, bb, order="pairwise", acc="bf16", out=out), rb, "normal", {}))
            if k > 128:
                cases.append(Case("dropped last K tile", "matmul", [ab, bb],
                                  emulate_matmul(ab, bb, order="chunked", drop_k=slice(((k - 1) // 128) * 128, None),
                                                 out=out), rb, "normal", {}))
    # softmax, layernorm, activations, dequantisation
    for seed in range(2 if quick else 4):
        x = (generate("normal", (16, 512), "fp32", seed=seed).astype(np.float64) * 40).astype(np.float32)
        cases.append(Case("correct", "softmax", [x], _softmax(x), PrecisionRecipe(), "normal", {}))
        cases.append(Case("softmax without max-subtraction", "softmax", [x], _softmax(x, sub=False),
                          PrecisionRecipe(), "normal", {}))
        xm = generate("normal", (96, 96), "fp32", seed=seed)
        mask = np.tril(np.ones((96, 96), bool))
        cases.append(Case("correct", "softmax", [xm], _softmax(xm, mask=mask), PrecisionRecipe(), "normal",
                          {"mask": mask}))
        bad = np.tril(np.ones((96, 96), bool), k=1)
        cases.append(Case("off-by-one mask", "softmax", [xm], _softmax(xm, mask=bad), PrecisionRecipe(), "normal",
                          {"mask": mask}))
        xo = generate("offset", (16, 1024), "fp32", seed=seed)
        cases.append(Case("correct", "layernorm", [xo], _layernorm(xo), PrecisionRecipe(), "offset", {}))
        cases.append(Case("one-pass variance", "layernorm", [xo], _layernorm(xo, True), PrecisionRecipe(), "offset",
                          {}))
        xg = (generate("normal", (2048,), "fp32", seed=seed).astype(np.float64) * 3).astype(np.float32)
        cases.append(Case("correct", "gelu_tanh", [xg], _act("gelu_tanh", xg), PrecisionRecipe(), "normal", {}))
        cases.append(Case("gelu where gelu_apprx_tanh specified", "gelu_tanh", [xg], _act("gelu", xg),
                          PrecisionRecipe(), "normal", {}))
        xb = generate("normal", (2048,), "bf16", seed=seed)
        rb = PrecisionRecipe(inputs="bf16", output="bf16")
        cases.append(Case("correct", "silu", [xb], _act("silu", xb).astype(ml_dtypes.bfloat16), rb, "normal", {}))
        q = generate("normal", (64, 64), "fp8_e4m3fn", seed=seed)
        s = np.float32(0.0173)
        rq = PrecisionRecipe(inputs=("fp8_e4m3fn", "fp32"), output="fp32")
        cases.append(Case("correct", "dequantize", [q, s], q.astype(np.float32) * s, rq, "normal", {}))
        cases.append(Case("wrong fp8 dequantisation scale", "dequantize", [q, s],
                          q.astype(np.float32) * np.float32(0.0171), rq, "normal", {}))
        a, b = matmul_inputs("special", m, 256, n, "bf16", seed=seed)
        good = emulate_matmul(a, b, order="chunked", out="fp32")
        rsp = PrecisionRecipe(inputs="bf16")
        cases.append(Case("NaN swallowed", "matmul", [a, b], np.nan_to_num(good, nan=0.0, posinf=0.0, neginf=0.0),
                          rsp, "special", {}))
        an, bn = matmul_inputs("normal", m, 256, n, "bf16", seed=seed)
        prod = emulate_matmul(an, bn, order="chunked", out="fp32")
        prod[1, 1] = np.nan
        cases.append(Case("NaN produced", "matmul", [an, bn], prod, rsp, "normal", {}))
        xw = generate("normal", (8, 4096), "fp32", seed=seed)  # a wide softmax: every y_i < 1e-2
        cases.append(Case("correct", "softmax", [xw], _softmax(xw), PrecisionRecipe(), "normal", {}))
        cases.append(Case("zeros returned", "softmax", [xw], np.zeros_like(xw), PrecisionRecipe(), "normal", {}))
    return cases


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer K values and seeds")
    args = ap.parse_args()
    t0 = time.perf_counter()
    cases = build_cases(args.quick)
    methods: list[str] = ["nkieval standard", *BASELINES]
    tally: dict[str, Counter] = {m: Counter() for m in methods}
    per_defect: dict[str, dict[str, Counter]] = defaultdict(lambda: {m: Counter() for m in methods})
    named: Counter = Counter()
    judge: dict[str, Callable[[Case, np.ndarray], str]] = {}
    for name, fn in BASELINES.items():
        judge[name] = lambda c, ref, fn=fn: "pass" if fn(c.actual, ref, c.recipe.output) else "fail"
    for c in cases:
        ref = round_to(evaluate(c.op, c.inputs, c.recipe, **c.params), c.recipe.out_format)
        v = check(c.actual, c.inputs, c.op, c.recipe, input_family=c.family, diagnose=c.defective, **c.params)
        if c.defective and EXPECTED_CAUSE[c.name] & set(v.finding_ids()[:3]):
            named[c.name] += 1
        outcomes = {"nkieval standard": v.status}
        for name in BASELINES:
            outcomes[name] = judge[name](c, ref)
        for mth, st in outcomes.items():
            kind = ("defect " if c.defective else "correct ") + st
            tally[mth][kind] += 1
            if c.defective:
                per_defect[c.name][mth][st] += 1
    n_ok = sum(1 for c in cases if not c.defective)
    n_bad = len(cases) - n_ok
    print(f"{len(cases)} cases: {n_ok} correct, {n_bad} defective ({time.perf_counter() - t0:.1f} s)\n")
    hdr = f"{'method':<24}{'correct: pass':>14}{'false fail':>12}{'inconcl.':>10}{'defect: fail':>14}{'false pass':>12}"
    print(hdr)
    print("-" * len(hdr))
    for mth in methods:
        t = tally[mth]
        print(f"{mth:<24}{t['correct pass']:>14}{t['correct fail']:>12}"
              f"{t['correct inconclusive'] + t['defect inconclusive']:>10}{t['defect fail']:>14}{t['defect pass']:>12}")
    print("\nDefects caught (fail / total) per method, and whether the standard named the right cause:")
    short = {m: m.split(" ")[0][:12] for m in methods}
    print(f"{'defect':<36}" + "".join(f"{short[m]:>14}" for m in methods) + f"{'cause named':>14}")
    for d, bym in sorted(per_defect.items()):
        tot = sum(bym[methods[0]].values())
        print(f"{d:<36}" + "".join(f"{bym[m]['fail']:>9}/{tot:<4}" for m in methods) + f"{named[d]:>9}/{tot:<4}")


if __name__ == "__main__":
    main()
