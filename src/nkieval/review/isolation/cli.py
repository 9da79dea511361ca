"""``nkieval doctor``: can this machine sandbox candidate code?"""

from __future__ import annotations

import json
import sys

import click


@click.command("doctor")
@click.option("--json", "as_json", is_flag=True, help="print the probe as JSON")
def doctor(as_json: bool) -> None:
    """Check the OS isolation candidate kernels run under; exit 0 when all of it is available, 2 otherwise."""
    from nkieval.review.isolation import probe

    report = probe()
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
    else:
        for name, (ok, reason) in report.checks.items():
            click.echo(f"{'ok  ' if ok else 'MISSING'}  {name}" + ("" if ok else f": {reason}"))
        for key, value in report.details.items():
            click.echo(f"        {key}: {value}")
        click.echo(f"isolation level: {report.level}")
        if report.level != "full":
            click.echo("candidate code cannot be sandboxed here; --unsafe-no-sandbox is for trusted code only")
    sys.exit(0 if report.level == "full" else 2)
