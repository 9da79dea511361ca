"""``nkieval lint``: run the static analysis on a kernel (and optionally its CUDA source)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from nkieval.cli_options import target_option


@click.command("lint")
@click.argument("kernel", required=False, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--cuda", "cuda_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="the CUDA kernel.cu the NKI kernel ports (adds MIG findings)")
@target_option("trn1 | trn2 | trn3 (hardware facts quoted in messages)")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--select", default=None, help="comma-separated rule ids to run (default: all)")
@click.option("--list-rules", is_flag=True, help="print the rule catalogue and exit")
def lint(kernel: Path | None, cuda_path: Path | None, target: str | None, fmt: str, select: str | None,
         list_rules: bool) -> None:
    """Static analysis of an NKI KERNEL file (never executes it). Exit 1 if any finding is an error."""
    from nkieval.analysis import RULES, CudaParseError, analyze_nki, migration_fidelity, parse_cuda

    if list_rules:
        for r in RULES.values():
            click.echo(f"{r.id}  {r.name:<36} {r.severity:<8} {r.category:<12} {r.summary}")
        return
    if kernel is None:
        raise click.UsageError("give a KERNEL file (or --list-rules)")
    ids = [s.strip() for s in select.split(",")] if select else None
    nki_ids = [i for i in ids if i.startswith("NKI")] if ids is not None else None
    mig_ids = [i for i in ids if i.startswith("MIG")] if ids is not None else None
    source = kernel.read_text(encoding="utf-8", errors="replace")
    findings = analyze_nki(source, str(kernel), target=target, select=nki_ids)
    if cuda_path is not None:
        try:
            summary = parse_cuda(cuda_path.read_bytes())
        except CudaParseError as e:
            raise click.ClickException(f"{cuda_path}: {e}") from e
        findings += [f for f in migration_fidelity(summary, source, filename=str(kernel), target=target,
                                                   select=mig_ids) if f.rule.startswith("MIG")]
    if fmt == "json":
        click.echo(json.dumps([f.to_dict() for f in findings], indent=2))
    else:
        for f in findings:
            where = cuda_path if f.source == "cuda" else kernel
            click.echo(f"{where}:{f.line}:{f.col}: {f.rule} [{f.severity}] {f.message}")
            if f.suggestion:
                click.echo(f"    suggestion: {f.suggestion}")
        click.echo(f"{len(findings)} finding(s)", err=True)
    sys.exit(1 if any(f.severity == "error" for f in findings) else 0)
