"""``nkieval compat PATH``: the compatibility report over public kernels and tests."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click


@click.command()
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.option("--timeout", default=120.0, show_default=True, help="seconds per file")
@click.option("--jobs", default=0, help="files run in parallel (default: half the CPUs)")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="also write the full report as JSON")
@click.option("--strict", is_flag=True, help="exit 1 if any file fails for a reason blamed on nkieval")
@click.option("--env", "env", multiple=True, metavar="KEY=VALUE",
              help="environment for the runs, e.g. NKI_PRECISE_FP=0 (all-fp32 storage, as the Beta-1 simulator)")
def compat(path: Path, timeout: float, jobs: int, json_out: Path | None, strict: bool, env: tuple[str, ...]) -> None:
    """Run the NKI kernels/tests under PATH on nkieval's simulator and report per file who failed.

    Files that import `neuronxcc.nki` (Beta 1) or `nki` run in subprocesses with the import shim;
    pytest files per test, scripts as __main__, kernel modules by import.
    """
    import os

    from nkieval.frontends.compat import format_report, run_compat, to_json

    for item in env:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="--env")
        os.environ[key] = value
    results = run_compat(path.resolve(), timeout=timeout, jobs=jobs or None)
    click.echo(format_report(results))
    if json_out is not None:
        json_out.write_text(json.dumps(to_json(results), indent=2))
    if strict and any(r.blame == "nkieval" for r in results):
        sys.exit(1)
