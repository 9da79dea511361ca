"""``nkieval profile FILE::KERNEL``: simulate a kernel, then estimate its profile on a target."""

from __future__ import annotations

import importlib.util
import inspect
import json
import os
import re
import sys
import traceback
from typing import Any

import click
import numpy as np

from nkieval.cli_options import target_option

_SPEC = re.compile(r"^(?:(?P<name>[A-Za-z_]\w*)=)?(?P<shape>\d+(?:x\d+)*)(?::(?P<dtype>\w+))?$")


class InputSpecError(click.BadParameter):
    """An ``--input`` that is not ``[NAME=]SHAPE[:DTYPE]``."""


def parse_input_spec(spec: str) -> tuple[str | None, tuple[int, ...], str]:
    """``[NAME=]DIMxDIM[:DTYPE]`` → (name, shape, dtype name); dtype defaults to float32."""
    m = _SPEC.match(spec.strip())
    if not m:
        raise InputSpecError(f"--input {spec!r}: expected [NAME=]SHAPE[:DTYPE], e.g. a=128x512:bfloat16")
    return m["name"], tuple(int(d) for d in m["shape"].split("x")), (m["dtype"] or "float32")


def _nki_dtype(dtype: str) -> Any:
    from nkieval.sim import dtypes as dt

    try:
        return dt.to_dtype(dtype)
    except Exception as e:
        raise InputSpecError(f"unknown dtype {dtype!r}: {e}") from None


def _np_dtype(dtype: str) -> np.dtype:
    return np.dtype(_nki_dtype(dtype).storage)


def make_array(shape: tuple[int, ...], dtype: str, rng: np.random.Generator) -> np.ndarray:
    d = _nki_dtype(dtype)
    vals = rng.standard_normal(shape, dtype=np.float32)
    if d.is_int:
        vals = np.round(vals * 8)
    return vals.astype(d.storage)


def check_input_bytes(shapes: list[tuple[tuple[int, ...], str]], target: str | None) -> None:
    """Refuse ``--input`` shapes before allocating them when together they exceed one NeuronCore's HBM
    (the target's ``hbm_bytes``) or half this machine's physical memory: a usage error, not a traceback
    or a machine driven out of memory."""
    from nkieval.hardware import get_target
    from nkieval.sim import dtypes as dt

    total = 0
    for shape, dtype in shapes:
        try:
            n = dt.to_dtype(dtype).itemsize
        except Exception as e:
            raise InputSpecError(f"unknown dtype {dtype!r}: {e}") from None
        for d in shape:
            n *= d
        total += n
    hbm = int(get_target(target).hbm_bytes)
    try:
        host = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2
    except (ValueError, OSError, AttributeError):
        host = hbm
    limit = min(hbm, host)
    if total > limit:
        which = "one NeuronCore's HBM" if limit == hbm else "half of this machine's memory"
        raise InputSpecError(f"the inputs need {total / (1 << 30):,.1f} GiB; {which} is "
                             f"{limit / (1 << 30):,.1f} GiB", param_hint="--input")


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
    try:
        spec.loader.exec_module(mod)
    except SyntaxError as e:
        raise click.ClickException(f"{path}:{e.lineno}: cannot import the kernel file: SyntaxError: {e.msg}") from None
    except Exception as e:  # the file's own top-level code failed
        raise click.ClickException(f"{_where(e, path)}: cannot import the kernel file: "
                                   f"{type(e).__name__}: {e}") from None
    if not hasattr(mod, name):
        kernels = [k for k, v in vars(mod).items() if callable(v) and not k.startswith("_")]
        raise click.BadParameter(f"{path} has no kernel {name!r}; callables there: {', '.join(kernels)}")
    return getattr(mod, name), name


def _signature(obj: Any) -> inspect.Signature | None:
    try:
        return inspect.signature(getattr(obj, "fn", obj))
    except (TypeError, ValueError):
        return None


def _param_names(obj: Any) -> list[str]:
    sig = _signature(obj)
    if sig is None:
        return []
    return [n for n, p in sig.parameters.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY,
                                                                 p.POSITIONAL_ONLY)]


def check_arguments(obj: Any, name: str, args: list[Any], kwargs: dict[str, Any]) -> None:
    """Bind the inputs to the kernel's parameters before running it, so a wrong name or count is reported
    as a usage error naming the parameters, not as a traceback from inside the simulator."""
    sig = _signature(obj)
    if sig is None:
        return
    takes_any = any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())
    unknown = [k for k in kwargs if k not in sig.parameters]
    if unknown and not takes_any:
        raise click.UsageError(f"{name}{sig} has no parameter {', '.join(map(repr, unknown))}; "
                               f"name an --input after one of: {', '.join(_param_names(obj)) or '(none)'}")
    try:
        sig.bind(*args, **kwargs)
    except TypeError as e:
        required = [n for n, p in sig.parameters.items()
                    if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        raise click.UsageError(
            f"inputs do not fit {name}{sig}: {e}; give one --input [NAME=]SHAPE[:DTYPE] per parameter "
            f"(required: {', '.join(required) or 'none'}) or an .npz with --inputs") from None


def _where(exc: BaseException, path: str) -> str:
    """``FILE:LINE`` of the innermost frame of ``exc`` in the kernel file (the file alone if none)."""
    target = os.path.abspath(path)
    where = path
    for fs in traceback.extract_tb(exc.__traceback__):
        if os.path.abspath(fs.filename) == target:
            where = f"{path}:{fs.lineno}"
    return where


def _in_file(exc: BaseException, path: str) -> bool:
    target = os.path.abspath(path)
    return any(os.path.abspath(fs.filename) == target for fs in traceback.extract_tb(exc.__traceback__))


_GRID = re.compile(r"^\d+(?:x\d+)*$")


def parse_grid(text: str | None) -> int | tuple[int, ...] | None:
    """``--grid`` ``4`` or ``2x2`` → the launch index (an int, or a tuple for an N-D Beta-1 grid)."""
    if text is None:
        return None
    if not _GRID.match(text.strip()):
        raise click.BadParameter(f"{text!r}: expected N or NxM (e.g. 2, 2x2)", param_hint="--grid")
    dims = tuple(int(d) for d in text.strip().split("x"))
    return dims[0] if len(dims) == 1 else dims


def _simulate(obj: Any, target: str | None, args: list[Any], kwargs: dict[str, Any],
              grid: int | tuple[int, ...] | None = None, capacity_check: str | None = None,
              compute_values: bool = True) -> Any:
    """Run the kernel once on the simulator through its own front end (a ``neuronxcc.nki`` Beta-1 kernel
    through the Beta-1 one, anything else through ``nki``), launched as ``kernel[grid]`` when a grid is given,
    and return the RunResult. ``capacity_check`` overrides the front end's default (error for ``nki``, warn
    for Beta-1); ``compute_values`` False makes it a record-only run (``SimOptions.compute_values``)."""
    import nki

    from nkieval.frontends.beta1.launch import Kernel as Beta1Kernel
    from nkieval.frontends.beta1.launch import default_sim_options
    from nkieval.frontends.nki import Kernel
    from nkieval.sim.options import SimOptions

    overrides: dict[str, Any] = {}
    if capacity_check:
        overrides["capacity_check"] = capacity_check
    if not compute_values:
        overrides["compute_values"] = False

    if not isinstance(obj, Beta1Kernel | Kernel):
        obj = nki.jit(obj)
    if grid is not None:
        obj = obj[grid]
    # (the overrides change the front end's own defaults, nothing else)
    beta1 = isinstance(obj, Beta1Kernel)
    sim_options = (default_sim_options if beta1 else SimOptions.from_env)(**overrides) if overrides else None
    if beta1:
        opts = dict(obj.options)
        if target is not None:
            opts["platform_target"] = target
        if sim_options is not None:
            opts["sim_options"] = sim_options
        return Beta1Kernel(obj.fn, "simulation", obj.grid, obj.cores, **opts).launch(tuple(args), kwargs)
    nki.simulate(obj, target=target, **({"options": sim_options} if sim_options else {}))(*args, **kwargs)
    return nki.last_result()


def _npz_value(a: np.ndarray) -> Any:
    """An .npz entry as the kernel takes it: a 0-d array (``np.savez(f, eps=1e-5)``) is a Python scalar
    parameter, as a caller in Python would pass it; anything else is an input array."""
    return a.item() if a.ndim == 0 else a


@click.command("profile")
@click.argument("kernel_ref", metavar="FILE::KERNEL")
@target_option("trn1 | trn2 | trn3 (default: NEURON_PLATFORM_TARGET_OVERRIDE or trn2)")
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
@click.option("--grid", default=None, help="launch as kernel[GRID]: the LNC degree (1 or 2) of an nki kernel, or a "
              "Beta-1 SPMD grid such as 4 or 2x2")
@click.option("--capacity-check", type=click.Choice(["error", "warn"]), default=None,
              help="SBUF/PSUM over-subscription: an error, or a warning (SBUF spill is then estimated and "
              "scheduled; a PSUM excess is not modelled). Default: the front end's, error for nki, warn for Beta-1")
@click.option("--spill-traffic", type=click.Choice(["prefetch", "on_demand", "off"]), default="prefetch",
              show_default=True, help="SBUF spill saves and reloads as DMAs, a reload running ahead of its use "
              "(prefetch) or waiting for the space it takes (on_demand); or only reported (off)")
@click.option("--compiler-pass", "compiler_passes", multiple=True, metavar="NAME=on|off",
              help="switch a compiler-model pass on or off: broadcast-lowering, dead-stores, redundant-loads, merge-iterations (on by "
              "default), engine-balance (off by default); all=off runs none (repeatable, later ones win)")
@click.option("--rotation-room", type=click.Choice(["fit", "spill"]), default="fit", show_default=True,
              help="rotation buffers only in the room the kernel's tiles leave (fit), or also in a long-lived "
              "tile's room, which is then spilled (spill, opt-in)")
@click.option("--values/--no-values", "compute_values", default=True, show_default=True,
              help="--no-values estimates from the instruction stream alone: no element value is computed or "
              "stored (--input arrays are never filled), so a kernel at its published shape profiles in a fraction "
              "of the time and memory. The estimate is the same unless the instruction stream depends on values "
              "(indirect-DMA addresses, loops driven by registers): those then see zeros")
@click.option("--seed", default=0, show_default=True)
def profile(kernel_ref: str, target: str | None, npz: str | None, specs: tuple[str, ...], mode: str,
            engine_order: str, trace_out: str | None, json_out: str | None, grid: str | None,
            capacity_check: str | None, spill_traffic: str, compiler_passes: tuple[str, ...], rotation_room: str,
            compute_values: bool, seed: int) -> None:
    """Simulate FILE::KERNEL and print its estimated profile (an estimate, not a measurement)."""
    from nkieval.perf import SchedulePolicy, estimate, text_summary, write_perfetto
    from nkieval.perf.compiler import CompilerOptionError, parse_options
    from nkieval.sim.errors import NkiValidationError

    try:
        compiler = parse_options(compiler_passes)
    except CompilerOptionError as e:
        raise click.BadParameter(str(e), param_hint="--compiler-pass") from None
    launch = parse_grid(grid)
    obj, name = load_kernel(kernel_ref)
    path = kernel_ref.rsplit("::", 1)[0]
    params = _param_names(obj)
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    if npz:
        data = np.load(npz)
        keys = list(data.keys())
        if keys and all(re.fullmatch(r"arr_\d+", k) for k in keys):
            args = [_npz_value(data[k]) for k in sorted(keys, key=lambda k: int(k[4:]))]
        elif all(k in params for k in keys):
            kwargs = {k: _npz_value(data[k]) for k in keys}
        else:
            unknown = [k for k in keys if k not in params]
            raise click.BadParameter(f"{npz}: arrays {', '.join(unknown)} name no parameter of {name} "
                                     f"({', '.join(params)}); name them after the parameters, or save them "
                                     "unnamed (arr_0, arr_1, ...)", param_hint="--inputs")
    for opt, out in (("--trace", trace_out), ("--json", json_out)):
        parent = os.path.dirname(os.path.abspath(out)) if out else None
        if parent is not None and not os.path.isdir(parent):
            raise click.BadParameter(f"{out}: directory {parent} does not exist", param_hint=opt)
    rng = np.random.default_rng(seed)
    parsed = [parse_input_spec(spec) for spec in specs]
    check_input_bytes([(shape, dtype) for _, shape, dtype in parsed], target)
    for nm, shape, dtype in parsed:
        # (without values an input is only a shape: zeros, whose pages are never touched)
        arr = make_array(shape, dtype, rng) if compute_values else np.zeros(shape, _np_dtype(dtype))
        if nm:
            kwargs[nm] = arr
        else:
            args.append(arr)
    check_arguments(obj, name, args, kwargs)
    try:
        result = _simulate(obj, target, args, kwargs, launch, capacity_check, compute_values)
    except NkiValidationError as e:
        hint = ("; --capacity-check warn estimates it with the spill traffic the compiler would add"
                if e.rule == "sbuf-capacity" else "")
        raise click.ClickException(f"{_where(e, path)}: {e}{hint}") from None
    except Exception as e:
        if not _in_file(e, path):
            raise  # not the kernel's doing: a fault of nkieval's, shown with its traceback
        raise click.ClickException(f"{_where(e, path)}: the kernel raised {type(e).__name__}: {e}") from None
    policy = SchedulePolicy(mode=mode, engine_order=engine_order, spill_traffic=spill_traffic,  # type: ignore[arg-type]
                            rotation_room=rotation_room)  # type: ignore[arg-type]
    est = estimate(result.trace, result.target, policy=policy, compiler=compiler)
    click.echo(text_summary(est))
    if trace_out:
        write_perfetto(est, trace_out)
        click.echo(f"timeline: {trace_out} (open in https://ui.perfetto.dev)")
    if json_out:
        with open(json_out, "w") as fh:
            json.dump(est.to_dict(), fh, indent=1, default=str)
        click.echo(f"estimate: {json_out}")
