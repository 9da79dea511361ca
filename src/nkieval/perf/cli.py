"""``nkieval profile FILE::KERNEL``: simulate a kernel, then estimate its profile on a target."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
from typing import Any

import click
import numpy as np

_SPEC = re.compile(r"^(?:(?P<name>[A-Za-z_]\w*)=)?(?P<shape>\d+(?:x\d+)*)(?::(?P<dtype>\w+))?$")


class InputSpecError(click.BadParameter):
    """An ``--input`` that is not ``[NAME=]SHAPE[:DTYPE]``."""


def parse_input_spec(spec: str) -> tuple[str | None, tuple[int, ...], str]:
    """``[NAME=]DIMxDIM[:DTYPE]`` → (name, shape, dtype name); dtype defaults to float32."""
    m = _SPEC.match(spec.strip())
    if not m:
        raise InputSpecError(f"--input {spec!r}: expected [NAME=]SHAPE[:DTYPE], e.g. a=128x512:bfloat16")
    return m["name"], tuple(int(d) for d in m["shape"].split("x")), (m["dtype"] or "float32")


def make_array(shape: tuple[int, ...], dtype: str, rng: np.random.Generator) -> np.ndarray:
    from nkieval.sim import dtypes as dt

    try:
        d = dt.to_dtype(dtype)
    except Exception as e:
        raise InputSpecError(f"unknown dtype {dtype!r}: {e}") from None
    vals = rng.standard_normal(shape, dtype=np.float32)
    if d.is_int:
        vals = np.round(vals * 8)
    return vals.astype(d.storage)


def load_kernel(target: str) -> tuple[Any, str]:
    """Import ``FILE::KERNEL`` (with the ``nki`` shim installed) and return (object, name)."""
    if "::" not in target:
        raise click.BadParameter(f"{target!r}: expected FILE::KERNEL (e.g. kernels.py::matmul)")
    path, name = target.rsplit("::", 1)
    if not os.path.isfile(path):
        raise click.BadParameter(f"{path}: no such file")
    from nkieval import frontends

    frontends.install()
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    spec = importlib.util.spec_from_file_location(f"_nkieval_profile_{abs(hash(path))}", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    if not hasattr(mod, name):
        kernels = [k for k, v in vars(mod).items() if callable(v) and not k.startswith("_")]
        raise click.BadParameter(f"{path} has no kernel {name!r}; callables there: {', '.join(kernels)}")
    return getattr(mod, name), name


def _param_names(obj: Any) -> list[str]:
    fn = getattr(obj, "fn", obj)
    code = getattr(fn, "__code__", None)
    return list(code.co_varnames[: code.co_argcount]) if code else []


@click.command("profile")
@click.argument("kernel_ref", metavar="FILE::KERNEL")
@click.option("--target", default=None, help="trn1 | trn2 | trn3 (default: NEURON_PLATFORM_TARGET_OVERRIDE or trn2)")
@click.option("--inputs", "npz", type=click.Path(exists=True, dir_okay=False), help="NumPy .npz with the arguments "
              "(by parameter name, else arr_0, arr_1, ... in order)")
@click.option("--input", "specs", multiple=True, help="random input [NAME=]SHAPE[:DTYPE], e.g. a=128x512:bfloat16 "
              "(repeatable, in parameter order)")
@click.option("--mode", type=click.Choice(["compiler", "physical", "serial"]), default="compiler",
              help="modelled compiler freedom (serial = strict program-order bound)")
@click.option("--engine-order", type=click.Choice(["program", "backfill"]), default="program", show_default=True,
              help="compute engines in program order, or backfilling idle gaps (list scheduling; opt-in)")
@click.option("--trace", "trace_out", type=click.Path(dir_okay=False), help="write the timeline as Perfetto/Chrome JSON")
@click.option("--json", "json_out", type=click.Path(dir_okay=False), help="write the estimate as JSON")
@click.option("--seed", default=0, show_default=True)
def profile(kernel_ref: str, target: str | None, npz: str | None, specs: tuple[str, ...], mode: str,
            engine_order: str, trace_out: str | None, json_out: str | None, seed: int) -> None:
    """Simulate FILE::KERNEL and print its estimated profile (an estimate, not a measurement)."""
    from nkieval.perf import SchedulePolicy, estimate, text_summary, write_perfetto

    obj, _name = load_kernel(kernel_ref)
    params = _param_names(obj)
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    if npz:
        data = np.load(npz)
        keys = list(data.keys())
        if all(k in params for k in keys):
            kwargs = {k: data[k] for k in keys}
        else:
            args = [data[k] for k in sorted(keys, key=lambda k: int(k[4:]) if k.startswith("arr_") else 0)]
    rng = np.random.default_rng(seed)
    for spec in specs:
        nm, shape, dtype = parse_input_spec(spec)
        arr = make_array(shape, dtype, rng)
        if nm:
            kwargs[nm] = arr
        else:
            args.append(arr)
    import nki

    from nkieval.frontends.nki import Kernel

    kern = obj if isinstance(obj, Kernel) else nki.jit(obj)
    nki.simulate(kern, target=target)(*args, **kwargs)
    result = nki.last_result()
    est = estimate(result.trace, result.target, policy=SchedulePolicy(mode=mode, engine_order=engine_order))  # type: ignore[arg-type]
    click.echo(text_summary(est))
    if trace_out:
        write_perfetto(est, trace_out)
        click.echo(f"timeline: {trace_out} (open in https://ui.perfetto.dev)")
    if json_out:
        with open(json_out, "w") as fh:
            json.dump(est.to_dict(), fh, indent=1, default=str)
        click.echo(f"estimate: {json_out}")
