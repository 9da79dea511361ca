"""Record-only runs (``SimOptions.compute_values=False``): instructions are checked and traced, no value is computed.

What must hold: recording a program without values gives exactly the program a computing recording gives (the
kernel's Python cannot read a device value, so nothing recorded may depend on one), the same instruction trace
and so the same performance estimate; and a record-only run neither computes nor stores anything — its
outputs are zeros, the caller's arrays are left alone, and memory it never wrote costs no pages.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import nkieval.frontends

nkieval.frontends.install(force=True)

import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402

from nkieval.perf import estimate  # noqa: E402
from nkieval.review.child import _kernel_entry  # noqa: E402
from nkieval.sim.options import SimOptions  # noqa: E402
from nkieval.sim.program import ArgSpec, record_program  # noqa: E402
from nkieval.sim.runner import run_kernel  # noqa: E402
from nkieval.tasks.inputs import generate_inputs  # noqa: E402
from nkieval.tasks.loader import builtin_tasks, candidate_files  # noqa: E402


def _smallest_shape(task):
    return min(task.shapes, key=lambda s: sum(int(np.prod(t.concrete(dict(s.dims)))) for t in task.inputs))


def _cases():
    out = []
    for task in builtin_tasks():
        files = candidate_files(task)
        for role in ("solution", "baseline"):
            if role in files:
                out.append(pytest.param(task, files[role], id=f"{task.id}-{role}"))
    return out


@pytest.mark.parametrize(("task", "path"), _cases())
def test_a_recording_without_values_or_trace_is_the_recording_with_values(task, path):
    entry = _kernel_entry(str(path), task.kernel)
    shape = _smallest_shape(task)
    dims = dict(shape.dims)
    inputs = generate_inputs([(t.name, t.concrete(dims), t.dtype, t.family) for t in task.inputs],
                             task.families[0], 1, shape.label)
    specs = [ArgSpec(inputs[t.name].shape, inputs[t.name].dtype.name) for t in task.inputs]
    target = task.targets[0]
    opts = SimOptions.from_env(**entry.options)
    runs = [record_program(entry.fn, specs, dict(task.params), target=target, options=opts, lnc=entry.lnc,
                           grid=entry.grid, compute_values=cv) for cv in (True, False)]
    assert runs[0].program.to_json() == runs[1].program.to_json()
    # the tracer records without keeping a trace (the judge's replay makes the one it uses): the same program
    untraced = record_program(entry.fn, specs, dict(task.params), target=target,
                              options=SimOptions.from_env(record_trace=False, **entry.options), lnc=entry.lnc,
                              grid=entry.grid)
    assert untraced.program.to_json() == runs[1].program.to_json()


def k_exp_rows(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[0] // 128):
        t = nl.ndarray((128, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[i * 128:(i + 1) * 128])
        u = nl.ndarray((128, x.shape[1]), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.activation(dst=u, op=nl.exp, data=t, scale=0.5)
        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128], src=u)
    return out


def k_matmul(a_t, b):
    """out[M, N] = a_t.T @ b with K = 128 rows, M = 128, N = 512."""
    out = nl.ndarray((a_t.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    sa = nl.ndarray(a_t.shape, dtype=a_t.dtype, buffer=nl.sbuf)
    sb = nl.ndarray(b.shape, dtype=b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=sa, src=a_t)
    nisa.dma_copy(dst=sb, src=b)
    acc = nl.ndarray((a_t.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=acc, stationary=sa, moving=sb)
    nisa.nc_matmul(dst=acc, stationary=sa, moving=sb)  # accumulates: the PSUM state is kept without values
    res = nl.ndarray(acc.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=acc)
    nisa.dma_copy(dst=out, src=res)
    return out


@pytest.mark.parametrize(("kernel", "shapes"), [(k_exp_rows, [(256, 512)]), (k_matmul, [(128, 128), (128, 512)])])
def test_a_run_without_values_has_the_same_trace_and_estimate(kernel, shapes):
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    wet = run_kernel(kernel, [a.copy() for a in args], {}, target="trn2")
    dry = run_kernel(kernel, [a.copy() for a in args], {}, target="trn2", options=SimOptions(compute_values=False))
    assert [(r.opcode, r.engine, r.line, sorted(r.attrs.items())) for r in wet.trace.records] == \
        [(r.opcode, r.engine, r.line, sorted(r.attrs.items())) for r in dry.trace.records]
    assert wet.trace.to_compact() == dry.trace.to_compact()
    e_wet, e_dry = estimate(wet.trace, wet.target), estimate(dry.trace, dry.target)
    assert e_wet.total_time_us == e_dry.total_time_us and e_wet.total_time_us > 0
    assert np.abs(wet.outputs).max() > 0  # (the computing run did compute)


def test_a_run_without_values_computes_and_stores_nothing():
    x = np.full((256, 512), 2.0, np.float32)
    dry = run_kernel(k_exp_rows, [x], {}, target="trn2", options=SimOptions(compute_values=False))
    assert dry.outputs.shape == (256, 512) and not dry.outputs.any()
    np.testing.assert_array_equal(x, 2.0)


def test_memory_a_run_without_values_never_writes_costs_no_pages():
    """A 512 MiB input, read tile by tile: without values the peak RSS stays far below the input's size (a
    computing run holds a private copy of the input and of the output, over 1 GiB)."""
    script = textwrap.dedent("""
        import json, sys
        import numpy as np
        import nkieval.frontends
        nkieval.frontends.install(force=True)
        sys.path.insert(0, sys.argv[1])
        from test_record_only import k_exp_rows
        from nkieval.sim.options import SimOptions
        from nkieval.sim.runner import run_kernel
        x = np.zeros((8192, 16384), np.float32)
        r = run_kernel(k_exp_rows, [x], {}, target="trn2", options=SimOptions(compute_values=False))
        # VmHWM: this process image's own peak (ru_maxrss would include the forking parent's)
        hwm = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
        print(json.dumps({"rss_mb": hwm / 1024, "n": len(r.trace.records)}))
    """)
    from pathlib import Path

    out = subprocess.run([sys.executable, "-c", script, str(Path(__file__).parent)], capture_output=True, text=True,
                         timeout=300, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["n"] == 3 * 64
    assert got["rss_mb"] < 300, got
