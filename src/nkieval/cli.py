"""The ``nkieval`` command line."""

from __future__ import annotations

import importlib
import os
import runpy
import sys
from typing import Any

import click

from nkieval.cli_options import target_option

# Sub-commands defined next to the code they drive: name -> ("module:attribute" of a click command, the
# one-line help `nkieval --help` prints). Modules are imported only when their command runs, so the front
# door stays fast (`nkieval --help` imports click and this file). Add one line here per command; a missing
# module is a bug, so import errors are not hidden (tests/test_cli.py imports every one and checks its help).
COMMANDS: dict[str, tuple[str, str]] = {
    "profile": ("nkieval.perf.cli:profile", "Simulate FILE::KERNEL and print its estimated profile."),
    "lint": ("nkieval.analysis.cli:lint", "Static analysis of an NKI KERNEL file (never executes it)."),
    "review": ("nkieval.review.cli:review_cmd", "Review CANDIDATE (an NKI kernel file) on TASK."),
    "task": ("nkieval.tasks.cli:task_group", "Create and validate task directories."),
    "tasks": ("nkieval.tasks.cli:tasks_group", "The built-in task suite."),
    "suite": ("nkieval.review.suite:suite_group", "Run the built-in task suite through the review."),
    "compat": ("nkieval.frontends.cli:compat", "Run the NKI kernels/tests under PATH on nkieval's simulator."),
    "doctor": ("nkieval.review.isolation.cli:doctor", "Check the OS isolation candidate kernels run under."),
    "serve": ("nkieval.reward.serve.cli:serve", "Serve rewards over HTTP."),
}


class LazyGroup(click.Group):
    """A group whose sub-commands in :data:`COMMANDS` are imported when used, not when the group is built."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.commands:
            return self.commands[cmd_name]
        spec = COMMANDS.get(cmd_name)
        if spec is None:
            return None
        mod, attr = spec[0].split(":")
        cmd = getattr(importlib.import_module(mod), attr)
        self.add_command(cmd, cmd_name)
        return cmd

    def format_commands(self, ctx: click.Context, formatter: Any) -> None:
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(map(len, names))
        rows = [(n, self.commands[n].get_short_help_str(limit) if n in self.commands else COMMANDS[n][1])
                for n in names]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup)
@click.version_option(package_name="nkieval")
def main() -> None:
    """nkieval: evaluate NKI kernels without Trainium hardware."""


@main.command()
@target_option("trn1 | trn2 | trn3 (default: NEURON_PLATFORM_TARGET_OVERRIDE or trn2)")
def demo(target: str | None) -> None:
    """Simulate the bundled example kernels, check them against NumPy and summarise their instructions."""
    import numpy as np

    from nkieval import frontends

    frontends.install()
    import ml_dtypes
    import nki  # the shim's module

    from nkieval.examples import kernels as ex

    rng = np.random.default_rng(0)
    cases = [
        ("tiled_add (ragged 300x200 fp32)", ex.tiled_add, ex.tiled_add_ref,
         (rng.standard_normal((300, 200), dtype=np.float32), rng.standard_normal((300, 200), dtype=np.float32)), 0.0),
        ("row_softmax (200x1000 fp32)", ex.row_softmax, ex.row_softmax_ref,
         ((rng.standard_normal((200, 1000)) * 4).astype(np.float32),), 1e-5),
        ("matmul_bf16 (K=512, M=256, N=1024)", ex.matmul_bf16, ex.matmul_ref,
         (rng.standard_normal((512, 256)).astype(ml_dtypes.bfloat16),
          rng.standard_normal((512, 1024)).astype(ml_dtypes.bfloat16)), 1e-4),
    ]
    failed = 0
    for label, kern, ref, args, rtol in cases:
        out = nki.simulate(kern, target=target)(*args)
        result = nki.last_result()
        want = ref(*args).astype(np.float32)
        got = np.asarray(out).astype(np.float32)
        err = float(np.max(np.abs(got - want)))
        scale = float(np.max(np.abs(want))) or 1.0
        ok = err <= rtol * scale
        failed += not ok
        click.echo(f"{'PASS' if ok else 'FAIL'}  {label}: max |sim - numpy| = {err:.3g} (allowed {rtol * scale:.3g})")
        for line in result.trace.summary().splitlines():
            click.echo("      " + line)
    sys.exit(1 if failed else 0)


@main.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.argument("script", type=click.Path(exists=True, dir_okay=False))
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.option("--force", is_flag=True, help="shadow a real Neuron SDK even if one is installed")
def run(script: str, args: tuple[str, ...], force: bool) -> None:
    """Run a Python SCRIPT with `import nki` served by nkieval's simulator."""
    from nkieval import frontends

    frontends.install(force=force or os.environ.get("NKIEVAL_FORCE_SHIM") == "1")
    sys.argv = [script, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    runpy.run_path(script, run_name="__main__")


@main.command()
def rules() -> None:
    """List the hardware/API rules the simulator enforces."""
    from nkieval.sim.errors import RULES

    for r in RULES.values():
        click.echo(f"{r.id:<18} {r.title}")


if __name__ == "__main__":  # pragma: no cover
    main()
