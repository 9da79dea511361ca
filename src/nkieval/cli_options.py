"""Options shared by the command-line tools: ``--target`` checked once, the same way everywhere."""

from __future__ import annotations

from typing import Any

import click


def check_target_option(ctx: click.Context | None, param: click.Parameter | None, value: str | None) -> str | None:
    """The ``--target`` callback: the canonical target name (``gen3`` → ``trn2``), or a usage error (exit 2)
    naming the known targets. ``None`` stays ``None`` (the default target), once the environment's
    ``NEURON_PLATFORM_TARGET_OVERRIDE``, which then decides it, is known to name a target."""
    from nkieval.hardware.targets import TARGET_ENV_VAR, UnknownTargetError, resolve_target_name

    try:
        if value is None:
            resolve_target_name(None)
            return None
        return resolve_target_name(value)
    except UnknownTargetError as e:
        if value is None:
            raise click.UsageError(f"{TARGET_ENV_VAR}: {e}", ctx) from None
        raise click.BadParameter(str(e), ctx, param) from None


def target_option(help: str) -> Any:
    """``@target_option("...")``: a ``--target`` option checked by :func:`check_target_option`."""
    return click.option("--target", default=None, callback=check_target_option, help=help)
