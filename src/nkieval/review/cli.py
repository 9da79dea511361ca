"""``nkieval review TASK CANDIDATE.py``: review one candidate kernel and print or write the report.

Exit codes (for scripts and RL loops): 0 the candidate passed; 1 it was reviewed and failed
(any verdict other than pass); 2 bad usage or a malformed task; 3 a harness (infra) error.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

EXIT_PASS, EXIT_FAIL, EXIT_USAGE, EXIT_INFRA = 0, 1, 2, 3


@click.command("review")
@click.argument("task")
@click.argument("candidate", type=click.Path(exists=True, dir_okay=False))
@click.option("--target", default=None, help="trn1 | trn2 | trn3 (default: the task's first target)")
@click.option("--format", "fmt", type=click.Choice(["md", "json"]), default="md", show_default=True)
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="write review.json and review.md into this directory")
@click.option("--seed", type=int, default=None, help="input seed (default: fresh and secret, recorded in the report)")
@click.option("--isolation", type=click.Choice(["forkserver", "subprocess"]), default="forkserver", show_default=True)
@click.option("--no-progress", is_flag=True, help="no progress bar")
@click.option("--unsafe-no-sandbox", is_flag=True,
              help="trace the candidate without OS isolation (trusted code only; the report records it)")
def review_cmd(task: str, candidate: str, target: str | None, fmt: str, out_dir: str | None, seed: int | None,
               isolation: str, no_progress: bool, unsafe_no_sandbox: bool) -> None:
    """Review CANDIDATE (an NKI kernel file) on TASK (a task directory or a built-in task id)."""
    from tqdm import tqdm

    from nkieval.review import sandbox

    sandbox.UNSAFE_NO_SANDBOX[0] = unsafe_no_sandbox

    from nkieval.review.pipeline import _cases, review
    from nkieval.review.report import to_markdown
    from nkieval.tasks import TaskError, load_task

    try:
        t = load_task(task)
    except TaskError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(EXIT_USAGE)
    total = len(_cases(t, 0, t.families, "all"))
    bar = tqdm(total=total, desc=f"review {t.id}", unit="case", disable=no_progress or None, file=sys.stderr,
               leave=False)
    try:
        r = review(t, Path(candidate), target=target, seed=seed, isolation=isolation,  # type: ignore[arg-type]
                   progress=lambda label: bar.update(1))
    except Exception as e:  # the harness itself failed: retryable, never the candidate's verdict
        bar.close()
        click.echo(f"infra-error: {type(e).__name__}: {e}", err=True)
        sys.exit(EXIT_INFRA)
    bar.close()
    md = to_markdown(r)
    js = r.to_json(indent=2)
    if out_dir:
        d = Path(out_dir)
        d.mkdir(parents=True, exist_ok=True)
        (d / "review.json").write_text(js)
        (d / "review.md").write_text(md)
    click.echo(js if fmt == "json" else md)
    sys.exit(EXIT_INFRA if r.verdict == "infra-error" else EXIT_PASS if r.verdict == "pass" else EXIT_FAIL)
