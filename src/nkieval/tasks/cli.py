"""``nkieval task new NAME``, ``nkieval task check DIR``, ``nkieval tasks list``."""

from __future__ import annotations

import sys
from pathlib import Path

import click

_TASK_TOML = '''schema = "nkieval.task/1"
id = "{id}"
title = "TODO: one-line title"
level = 1
api = "nki"
targets = ["trn2"]
kernel = "{id}"
statement = """
TODO: the problem statement exactly as a kernel author sees it: inputs, outputs, layouts,
which sizes must be supported (say that sizes need not be multiples of 128).
"""

[signature]
inputs = [{{ name = "x", shape = ["N", "F"], dtype = "float32" }}]
outputs = [{{ name = "out", shape = ["N", "F"], dtype = "float32" }}]

[numerics]
op = "exp"
recipe = {{ inputs = ["fp32"], accumulate = "fp32", output = "fp32", transcendental = "scalar_engine" }}

[correctness]
rtol = 1e-3
atol = 1e-5

[inputs]
families = ["normal"]

[shapes]
public = [{{ N = 128, F = 512 }}]
hidden = [{{ N = 300, F = 1000 }}, {{ N = 1, F = 7 }}]

[perf]
bound = "memory"

# [[flawed]]
# file = "flawed/skips_tail.py"
# flaw = "what is wrong, in one line"
# criterion = "correctness"
'''

_REFERENCE = '''"""Reference for {id}: NumPy, computed in float64 and rounded once to the output dtype."""

import numpy as np


def reference(x):
    return np.exp(x.astype(np.float64)).astype(np.float32)
'''

_KERNEL = '''"""{label} for {id}."""

import math

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def {id}(x):
    n, f = x.shape
    out = nl.ndarray((n, f), dtype=x.dtype, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    for i in range(math.ceil(n / p)):
        rows = min(p, n - i * p)
        t = nl.ndarray((p, f), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t[0:rows], src=x[i * p:i * p + rows])
        nisa.activation(dst=t[0:rows], op=nl.exp, data=t[0:rows])
        nisa.dma_copy(dst=out[i * p:i * p + rows], src=t[0:rows])
    return out
'''


@click.group("task")
def task_group() -> None:
    """Create and validate task directories."""


@task_group.command("new")
@click.argument("name")
@click.option("--dir", "parent", type=click.Path(file_okay=False), default=".", show_default=True,
              help="where to create the task directory")
def new_cmd(name: str, parent: str) -> None:
    """Scaffold a task directory NAME with a task.toml, reference and kernels to edit."""
    from nkieval.tasks.schema import _ID_RE

    if not _ID_RE.match(name):
        click.echo(f"error: task name {name!r} must be lower-case letters, digits and '_' (starting with a letter)",
                   err=True)
        sys.exit(2)
    d = Path(parent) / name
    if d.exists():
        click.echo(f"error: {d} already exists", err=True)
        sys.exit(2)
    (d / "flawed").mkdir(parents=True)
    (d / "task.toml").write_text(_TASK_TOML.format(id=name))
    (d / "reference.py").write_text(_REFERENCE.format(id=name))
    (d / "baseline_nki.py").write_text(_KERNEL.format(id=name, label="Baseline"))
    (d / "solution_nki.py").write_text(_KERNEL.format(id=name, label="Expert solution"))
    click.echo(f"created {d}: edit task.toml, reference.py and the kernels, then run `nkieval task check {d}`")


@task_group.command("check")
@click.argument("path")
@click.option("--no-run", is_flag=True, help="skip running the reference on every shape")
def check_cmd(path: str, no_run: bool) -> None:
    """Validate a task directory (or built-in task id): schema, files, reference, shapes.
    Exit 0 valid (warnings allowed), 2 the task has errors."""
    from nkieval.tasks.loader import check_task

    rep = check_task(path, run_reference=not no_run)
    for e in rep.errors:
        click.echo(f"ERROR   {e}")
    for w in rep.warnings:
        click.echo(f"WARNING {w}")
    if rep.ok:
        t = rep.task
        assert t is not None
        click.echo(f"OK      {t.id}: {len(t.public_shapes)} public + {len(t.hidden_shapes)} hidden shapes, "
                   f"{len(t.families)} input families, {len(t.flawed)} flawed candidates")
    sys.exit(0 if rep.ok else 2)  # a task with errors is a bad task: exit 2, as `nkieval review` says


@click.group("tasks")
def tasks_group() -> None:
    """The built-in task suite."""


@tasks_group.command("list")
def list_cmd() -> None:
    """List the built-in tasks."""
    from nkieval.tasks.loader import builtin_tasks

    for t in builtin_tasks():
        files = "".join(x for x, f in (("C", t.cuda_file), ("B", t.baseline_file), ("S", t.solution_file)) if f)
        click.echo(f"{t.id:<24} L{t.level}  {files:<3} {len(t.hidden_shapes)} hidden  {len(t.flawed)} flawed  "
                   f"{t.title}")


def _register_audit() -> None:
    """``task audit`` and ``task import`` live in nkieval.tasks.audit (which composes the review)."""
    from nkieval.tasks.audit.cli import audit_cmd, import_cmd

    task_group.add_command(audit_cmd)
    task_group.add_command(import_cmd)


_register_audit()
