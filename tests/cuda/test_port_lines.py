"""The port's side of a mutation cause (review/stages/port_lines.py) and bf16 in two places at once (pairs of
precision mutations in review/stages/mutation_causes.py).

The port lines are checked against the lines where a flawed port differs from its task's expert port (the
test reads both files; the code under test sees only the flawed port's trace)."""

from __future__ import annotations

import difflib
from pathlib import Path

import numpy as np
import pytest

from nkieval.cuda import run_task_cuda
from nkieval.cuda.mutate import combine, mutations
from nkieval.cuda.program import preprocess
from nkieval.review.pipeline import review
from nkieval.review.stages.mutation_causes import mutation_causes
from nkieval.tasks.inputs import generate_inputs
from nkieval.tasks.loader import PORTS_ROOT, load_task

SNIPPET = """\
__global__ void k(const float* x, const float* w, float* y, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    y[i] = expf(x[i]) / w[i] + x[i] * w[i];
}
void host(const float* x, const float* w, float* y, int n) { k<<<(n + 255) / 256, 256>>>(x, w, y, n); }
"""
BF16 = "__bfloat162float(__float2bfloat16({}))"


def _precision(what: str) -> object:
    return next(m for m in mutations(SNIPPET) if m.kind == "precision" and m.what.startswith(what))


def test_two_roundings_combine_into_one_edit_disjoint_or_nested() -> None:
    text = preprocess(SNIPPET)
    quotient = _precision("`expf(x[i]) / w[i]` rounded")
    call = _precision("`expf(x[i])` rounded")
    product = _precision("`x[i] * w[i]` rounded")
    nested = combine(call, quotient, text)
    assert nested is not None
    assert "y[i] = " + BF16.format(BF16.format("expf(x[i])") + " / w[i]") + " + x[i] * w[i];" \
        in nested.apply(text)
    disjoint = combine(product, quotient, text)
    assert disjoint is not None
    assert "y[i] = " + BF16.format("expf(x[i]) / w[i]") + " + " + BF16.format("x[i] * w[i]") + ";" \
        in disjoint.apply(text)
    assert combine(call, call, text) is None  # (one expression rounded twice is one rounding)
    formula = next(m for m in mutations(SNIPPET) if m.kind == "formula")
    assert combine(formula, call, text) is None


def test_a_float_array_element_read_may_be_rounded_but_never_a_written_one() -> None:
    whats = [m.what for m in mutations(SNIPPET) if m.kind == "precision"]
    assert "the element `x[i]` read in bf16" in whats and "the element `w[i]` read in bf16" in whats
    assert not any("`y[i]` read" in w for w in whats)


def _runs(task_id: str, cuda_port: str) -> tuple[object, str, list[tuple[object, ...]]]:
    task = load_task(PORTS_ROOT / task_id)
    src = task.cuda_file.read_text()
    runs = []
    for s in sorted(task.shapes, key=lambda s: sum(s.dims.values()))[:2]:
        dims = dict(s.dims)
        specs = [(x.name, x.concrete(dims), x.dtype, x.family) for x in task.inputs]
        inp = generate_inputs(specs, "normal", 11, str(dims))
        gpu, _ = run_task_cuda(task, inp, dims)
        port, _ = run_task_cuda(task, inp, dims, source=cuda_port)
        runs.append((str(dims), dims, inp, gpu, port))
    return task, src, runs


@pytest.mark.slow
def test_bf16_in_two_statements_is_named_as_a_pair() -> None:
    task = load_task(PORTS_ROOT / "rope_half")
    src = task.cuda_file.read_text()
    port = src.replace("x1 * c - x2 * s;", "x1 * c - " + BF16.format("x2 * s") + ";").replace(
        "x2 * c + x1 * s;", "x2 * c + " + BF16.format("x1 * s") + ";")
    task, src, runs = _runs("rope_half", port)
    assert any(not np.array_equal(r[3][0], r[4][0]) for r in runs)
    causes = mutation_causes(task, src, runs, ["y"])
    assert len(causes) == 1, causes
    c = causes[0]
    assert c["kind"] == "precision"
    assert "kernel.cu:18 and kernel.cu:19" in c["summary"]
    assert "`x2 * s` rounded to bf16" in c["mutation"] and "`x1 * s` rounded to bf16" in c["mutation"]


def _changed(task_dir: Path, flawed: Path) -> set[int]:
    a, b = (task_dir / "solution_nki.py").read_text().splitlines(), flawed.read_text().splitlines()
    body = next(i for i, ln in enumerate(b) if ln.startswith(("import", "from")))
    out: set[int] = set()
    for tag, _i1, _i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag in ("replace", "insert"):
            out |= {j + 1 for j in range(j1, j2) if j >= body}
    return out


def _cause(task_id: str, name: str) -> object:
    task = load_task(PORTS_ROOT / task_id)
    path = task.directory / "flawed" / f"{name}.py"
    r = review(str(task.directory), str(path), seed=5, compare_references=False)
    mig = next(c for c in r.criteria if c.id == "migration")
    causes = [f for f in mig.feedback if f.observed.startswith("semantic infidelity (")]
    assert len(causes) == 1, [f.observed for f in mig.feedback]
    return causes[0], _changed(task.directory, path)


@pytest.mark.slow
@pytest.mark.parametrize(("task_id", "name"), [
    ("rope_half", "second_half_sign"),  # the second of two combinations of x, cos and sin
    ("sgd_nesterov", "decay_sign"),
    ("embedding_pos", "flat_position"),  # an index: the DMA that reads wpe
    ("rope_half", "bf16_products"),  # two roundings: the bf16 tile's allocation
    # host-side values the trace records no value of:
    ("adam_lerp", "no_m_bias_correction"),  # the one reader of the tile stored as the CUDA stores m1
    ("causal_softmax", "mask_one_ahead"),  # the offset argument of the one index comparison
    ("layernorm_block", "unbiased_variance"),  # the multiply after the second of two reductions of x
])
def test_the_port_line_is_where_the_flawed_port_differs(task_id: str, name: str) -> None:
    cause, changed = _cause(task_id, name)
    loc = cause.evidence["port_location"]
    assert loc is not None and "in the port:" in cause.observed, cause.observed
    assert int(loc.split(":")[1]) in changed, (cause.observed, changed)
    assert loc in cause.observed and cause.evidence["cuda_location"] in cause.observed


@pytest.mark.slow
def test_a_dropped_term_whose_input_the_port_never_computes_with_is_said_so() -> None:
    cause, _ = _cause("gemm_bias_relu", "no_bias")
    assert "in the port: no compute instruction of the port reads bias" in cause.observed


def test_an_output_is_told_apart_by_rank_only_when_no_other_output_shares_it() -> None:
    # (where it cannot be, the port line is not established: never a guess between two outputs' tiles)
    from types import SimpleNamespace

    from nkieval.review.stages.port_lines import _device_text, _output_alloc

    src = SNIPPET.replace("float* y, int n)", "float* y, float* z, int n)").replace(
        "y[i] = expf(x[i]) / w[i] + x[i] * w[i];", "y[i] = x[i] * w[i]; z[i] = w[i];").replace(
        "void host(const float* x, const float* w, float* y, int n) { k<<<(n + 255) / 256, 256>>>(x, w, y, n); }",
        "void host(const float* x, const float* w, float* y, float* z, int n) "
        "{ k<<<(n + 255) / 256, 256>>>(x, w, y, z, n); }")
    spec = SimpleNamespace
    task = SimpleNamespace(kernel="host", params={}, inputs=[spec(name="x", shape=["N"]), spec(name="w", shape=["N"])],
                           outputs=[spec(name="y", shape=["N"]), spec(name="z", shape=["M", "N"])])
    hbm = [SimpleNamespace(id=7, buffer="hbm", kernel_arg=False, shape=(8,)),
           SimpleNamespace(id=8, buffer="hbm", kernel_arg=False, shape=(2, 4))]
    trace = SimpleNamespace(allocations={a.id: a for a in hbm})
    device = _device_text(preprocess(src))
    assert _output_alloc(task, trace, src, device, "x[i] * w[i]") == 7
    assert _output_alloc(task, trace, src, device, "w[i]") == 8
    task.outputs[1].shape = ["N"]  # (two outputs of rank 1: neither is told apart)
    assert _output_alloc(task, trace, src, device, "x[i] * w[i]") is None


@pytest.mark.slow
def test_bf16_in_three_places_is_found_by_the_beam_and_no_pair_is_stated() -> None:
    from nkieval.cuda.mutate import combine_all

    task = load_task(PORTS_ROOT / "rmsnorm_warp")
    src = task.cuda_file.read_text()
    roundings = ("ss / (float)n_cols", "xr[c] * inv_rms", "1.0f + w[c]")
    port = src.replace("rsqrtf(ss / (float)n_cols + 1e-6f)", "rsqrtf(" + BF16.format(roundings[0]) + " + 1e-6f)") \
        .replace("xr[c] * inv_rms * (1.0f + w[c])", BF16.format(roundings[1]) + " * " + BF16.format(roundings[2]))
    task, src, runs = _runs("rmsnorm_warp", port)
    assert any(not np.array_equal(r[3][0], r[4][0]) for r in runs)
    # (the premise: no pair of the three reproduces the port on the runs, so a pair search alone misses it)
    singles = [next(m for m in mutations(src) if m.kind == "precision" and m.what == f"`{r}` rounded to bf16")
               for r in roundings]
    text = preprocess(src)
    for a, b in [(0, 1), (0, 2), (1, 2)]:
        pair = combine_all((singles[a], singles[b]), text)
        assert pair is not None
        out, _ = run_task_cuda(task, runs[1][2], runs[1][1], source=pair.apply(text))
        assert not np.allclose(out[0], runs[1][4][0], rtol=task.rtol, atol=task.atol)
    causes = mutation_causes(task, src, runs, ["y"])
    assert len(causes) == 1, causes
    c = causes[0]
    assert c["kind"] == "precision" and "kernel.cu:20 and kernel.cu:22" in c["summary"]
    # (the mean rounded with or without the 1e-6 added: one bf16 value on these inputs, the eps being far below
    # half a bf16 step of a mean of squares near 1)
    assert "`ss / (float)n_cols` rounded to bf16" in c["mutation"] or \
        "`ss / (float)n_cols + 1e-6f` rounded to bf16" in c["mutation"], c["mutation"]
    assert all(f"`{r}` rounded to bf16" in c["mutation"] for r in roundings[1:]), c["mutation"]
    assert c["mutation"].count("rounded to bf16") == 3


def test_a_field_is_not_a_variable_and_a_stored_result_is_found_through_a_returning_function() -> None:
    from nkieval.review.stages.port_lines import _IDENT, _argument_line, _device_text, _stores_result

    assert _IDENT.findall("blockIdx.x * k + p->x + x[i]") == ["blockIdx", "k", "p", "x", "i"]
    src = preprocess(SNIPPET.replace("y[i] = expf(x[i]) / w[i] + x[i] * w[i];", "y[i] = g(x[i]) ;") .replace(
        "__global__", "__device__ float g(float u) { return u *  2.0f; }\n__global__", 1))
    device = _device_text(src)
    assert _stores_result(src, device, "u * 2.0f")
    assert not _stores_result(src, device, "u")
    assert _stores_result(preprocess(SNIPPET), _device_text(preprocess(SNIPPET)), "expf(x[i]) / w[i] + x[i] * w[i]")
    port = "f(dst=a,\n  data=b,\n  offset=3)\n"
    assert _argument_line(port, 1, "offset") == 3 and _argument_line(port, 1, "scale") is None
