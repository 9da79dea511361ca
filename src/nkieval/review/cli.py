"""``nkieval review TASK CANDIDATE.py``: review one candidate kernel and print or write the report.

Exit codes (for scripts and RL loops), one meaning each (``nkieval.review.verdict``):
0 the candidate passed; 1 reviewed and not passed, the candidate's fault, never retry (``fail``
and every integrity verdict: ``hack-suspected``, ``impossible``, ``sandbox-violation``); 2 bad
usage or a malformed task, checked before anything runs (an unknown ``--target`` included);
3 the judge failed (``harness-error``: a judge component raised, the harness broke): retry.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from nkieval.review.verdict import EXIT_FAIL, EXIT_HARNESS, EXIT_PASS, EXIT_USAGE

EXIT_INFRA = EXIT_HARNESS  # (the former name)
__all__ = ["EXIT_FAIL", "EXIT_HARNESS", "EXIT_INFRA", "EXIT_PASS", "EXIT_USAGE", "review_cmd"]


@click.command("review")
@click.argument("task")
@click.argument("candidate", type=click.Path(exists=True, dir_okay=False))
@click.option("--target", default=None, help="trn1 | trn2 | trn3 (default: the task's first target)")
@click.option("--format", "fmt", type=click.Choice(["md", "json", "html"]), default="md", show_default=True,
              help="what to print: Markdown, the JSON report, or one self-contained HTML page")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="write review.json, review.md and review.html into this directory")
@click.option("--redact-hidden", is_flag=True,
              help="withhold hidden shapes and input seeds (feedback meant for the model under training)")
@click.option("--seed", type=int, default=None, help="input seed (default: fresh and secret, recorded in the report)")
@click.option("--isolation", type=click.Choice(["forkserver", "subprocess"]), default="forkserver", show_default=True)
@click.option("--no-progress", is_flag=True, help="no progress bar")
@click.option("--unsafe-no-sandbox", is_flag=True,
              help="trace the candidate without OS isolation (trusted code only; the report records it)")
def review_cmd(task: str, candidate: str, target: str | None, fmt: str, out_dir: str | None, redact_hidden: bool,
               seed: int | None, isolation: str, no_progress: bool, unsafe_no_sandbox: bool) -> None:
    """Review CANDIDATE (an NKI kernel file) on TASK (a task directory or a built-in task id)."""
    from tqdm import tqdm

    from nkieval.review import tracing

    tracing.UNSAFE_NO_SANDBOX[0] = unsafe_no_sandbox

    from nkieval.review.pipeline import review
    from nkieval.review.report import to_html, to_markdown
    from nkieval.review.stages.load import plan_cases
    from nkieval.review.verdict import JudgeError, UsageError, check_target, exit_code
    from nkieval.tasks import TaskError, load_task

    try:
        t = load_task(task)
        target = check_target(t, target)
    except (TaskError, UsageError) as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(EXIT_USAGE)
    total = len(plan_cases(t, 0, t.families, "all"))
    bar = tqdm(total=total, desc=f"review {t.id}", unit="case", disable=no_progress or None, file=sys.stderr,
               leave=False)
    try:
        r = review(t, Path(candidate), target=target, seed=seed, isolation=isolation,  # type: ignore[arg-type]
                   progress=lambda label: bar.update(1))
    except (TaskError, UsageError) as e:  # found while reviewing: still the task's or the caller's
        bar.close()
        click.echo(f"error: {e}", err=True)
        sys.exit(EXIT_USAGE)
    except JudgeError as e:  # a judge component failed: retryable, never the candidate's verdict
        bar.close()
        click.echo(f"harness-error: the judge component {e.component!r} failed: {e}", err=True)
        sys.exit(EXIT_HARNESS)
    except Exception as e:  # the harness itself failed: retryable, never the candidate's verdict
        bar.close()
        click.echo(f"harness-error: {type(e).__name__}: {e}", err=True)
        sys.exit(EXIT_HARNESS)
    bar.close()
    if redact_hidden:
        from nkieval.review.redact import redact_hidden as redact

        r = redact(r)
    render = {"md": to_markdown, "json": lambda x: x.to_json(indent=2), "html": to_html}
    if out_dir:
        d = Path(out_dir)
        d.mkdir(parents=True, exist_ok=True)
        for ext, fn in render.items():
            (d / f"review.{ext}").write_text(fn(r))
    click.echo(render[fmt](r))
    if r.verdict != "pass":
        click.echo(f"{r.verdict}: {r.verdict_message}", err=True)
    sys.exit(exit_code(r.verdict))
