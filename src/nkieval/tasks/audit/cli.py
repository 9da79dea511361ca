"""``nkieval task audit DIR`` and ``nkieval task import SRC``.

Exit codes of ``task audit`` (the review's conventions, nkieval.review.verdict): 0 the task audits clean
(no finding above info); 1 audited, with findings; 2 bad usage or a task that does not load; 3 a review
failed as a harness (retry).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click


@click.command("audit")
@click.argument("path")
@click.option("--format", "fmt", type=click.Choice(["md", "json", "html"]), default="md",
              show_default=True)
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="write audit.json, audit.md and audit.html into this directory")
@click.option("--seed", type=int, default=0, show_default=True, help="input seed of every review the audit runs")
@click.option("--target", default=None, help="target of the tests (default: the task's first)")
@click.option("--max-mutants", type=click.IntRange(0, 500), default=16, show_default=True,
              help="mutants of the expert solution to review")
@click.option("--mutation-budget", type=float, default=60.0, show_default=True,
              help="CPU seconds of mutant reviews, the sandbox's processes included (the rest of the sample is "
                   "reported as not run)")
@click.option("--criteria", default=None, help="comma-separated subset of the rubric's criteria")
@click.option("--default-target-only", is_flag=True, help="hardware criterion on the first target only")
@click.option("--no-probe", is_flag=True, help="do not look for shapes that kill surviving mutants")
def audit_cmd(path: str, fmt: str, out_dir: str | None, seed: int, target: str | None, max_mutants: int,
              mutation_budget: float, criteria: str | None, default_target_only: bool, no_probe: bool) -> None:
    """Audit a task directory (or built-in task id): is the task itself correct, discriminating, hard to game?"""
    from nkieval.review.verdict import EXIT_FAIL, EXIT_HARNESS, EXIT_PASS, EXIT_USAGE
    from nkieval.tasks.audit import CRITERION_IDS, HarnessError, audit_task, to_markdown
    from nkieval.tasks.schema import TARGETS

    crit = tuple(c.strip() for c in criteria.split(",") if c.strip()) if criteria else None
    bad = [c for c in crit or () if c not in CRITERION_IDS]
    if bad or (target is not None and target not in TARGETS):
        click.echo(f"error: unknown criteria {bad} (known: {', '.join(CRITERION_IDS)})" if bad else
                   f"error: unknown target {target!r} (known: {', '.join(TARGETS)})", err=True)
        sys.exit(EXIT_USAGE)
    try:
        rep = audit_task(path, seed=seed, target=target, max_mutants=max_mutants, criteria=crit,
                         mutation_budget_s=mutation_budget,
                         all_targets=not default_target_only, probe_survivors=not no_probe,
                         progress=lambda c: click.echo(f"auditing {c} ...", err=True))
    except HarnessError as e:
        click.echo(f"harness-error: {e}", err=True)
        sys.exit(EXIT_HARNESS)
    from nkieval.tasks.audit.render import to_html

    text = {"md": to_markdown, "json": lambda r: r.to_json(), "html": to_html}
    if out_dir:
        d = Path(out_dir)
        d.mkdir(parents=True, exist_ok=True)
        for kind, render in text.items():
            (d / f"audit.{kind}").write_text(render(rep))
    click.echo(text[fmt](rep))
    if rep.verdict == "bad-task":
        sys.exit(EXIT_USAGE)
    sys.exit(EXIT_PASS if rep.verdict == "clean" else EXIT_FAIL)


@click.command("import")
@click.argument("source", type=click.Path(exists=True))
@click.option("--format", "kind", type=click.Choice(["auto", "kernelbench", "nkibench"]), default="auto",
              show_default=True)
@click.option("--dir", "parent", type=click.Path(file_okay=False), default=".", show_default=True,
              help="where to create the task directory")
@click.option("--id", "task_id", default=None, help="task id (default: from the file name)")
def import_cmd(source: str, kind: str, parent: str, task_id: str | None) -> None:
    """Import a KernelBench-style (PyTorch Model + get_inputs) or NKIBench-style task into a task directory."""
    from nkieval.tasks.audit.importers import TaskImportError, import_task

    try:
        d = import_task(Path(source), Path(parent), kind=kind, task_id=task_id)
    except TaskImportError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(2)
    click.echo(f"created {d}: check it with `nkieval task check {d}`, then `nkieval task audit {d}`")
