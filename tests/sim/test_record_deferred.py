"""Recording with the replay's checks deferred (``record_program(defer=True)``, the judge's tracer).

What must hold: where a kernel breaks no rule, the program is byte for byte the one a recording that runs every
instruction gives (the built-in experts and baselines, and the flawed kernels that trace); a deferred instruction
is not run (a rule it breaks does not stop the recording); an instruction called where the kernel's Python could
catch what it raises (inside a ``try`` or a ``with``, in the kernel or in a function it calls) is run, so a
kernel that branches on a refusal records the branch it takes on hardware; and the exception-table reader that
decides this agrees with the interpreter's own.
"""

from __future__ import annotations

import contextlib
import dis
import json.decoder
import types

import numpy as np
import pytest

import nkieval.frontends

nkieval.frontends.install(force=True)

import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402

from nkieval.review.child import _kernel_entry  # noqa: E402
from nkieval.sim.errors import NkiValidationError  # noqa: E402
from nkieval.sim.isa.core import DEFERRABLE, INSTRUCTIONS  # noqa: E402
from nkieval.sim.options import SimOptions  # noqa: E402
from nkieval.sim.program import ArgSpec, record_program  # noqa: E402
from nkieval.sim.program import record as record_module  # noqa: E402
from nkieval.sim.program.record import handler_ranges  # noqa: E402
from nkieval.tasks.inputs import generate_inputs  # noqa: E402
from nkieval.tasks.loader import builtin_tasks, candidate_files  # noqa: E402

W = 64


def _refused_add(dst, a, bad):
    nisa.tensor_tensor(dst=dst, data1=a, data2=bad, op=nl.add)  # refused: bad is one column wider


def _kernel(a, middle):
    """Copy ``a`` to a [1, n] tile, call ``middle(t, bad)`` (``bad`` one column wider than ``t``), copy it out."""
    n = a.shape[0]
    out = nl.ndarray((n,), dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((1, n), dtype=a.dtype, buffer=nl.sbuf)
    bad = nl.ndarray((1, n + 1), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a.reshape((1, n)))
    middle(t, bad)
    nisa.dma_copy(dst=out.reshape((1, n)), src=t)
    return out


def breaks_a_rule(a):
    return _kernel(a, lambda t, bad: _refused_add(t, t, bad))


def _catch_here(t, bad):
    try:
        nisa.tensor_tensor(dst=t, data1=t, data2=bad, op=nl.add)
    except NkiValidationError:
        nisa.tensor_tensor(dst=t, data1=t, data2=t, op=nl.multiply)  # the branch hardware's compiler would take


def _catch_one_call_up(t, bad):
    try:
        _refused_add(t, t, bad)  # the refusal is raised one call down, caught here
    except NkiValidationError:
        nisa.memset(dst=t, value=1.0)


def catches_a_refusal(a):
    return _kernel(a, _catch_here)


def catches_in_a_caller(a):
    return _kernel(a, _catch_one_call_up)


def _record(fn, defer, n=W):
    opts = SimOptions.from_env(record_trace=False)
    return record_program(fn, [ArgSpec((n,), "float32")], {}, target="trn2", options=opts, defer=defer)


def test_a_deferred_instruction_is_not_run_and_its_replay_refuses_it():
    with pytest.raises(NkiValidationError, match="mismatch"):
        _record(breaks_a_rule, defer=False)
    program = _record(breaks_a_rule, defer=True).program  # (recorded past the refused instruction)
    from nkieval.sim.program import Program, compile_program, replay_program

    prog = Program.from_json(program.to_json())
    compile_program(prog)
    with pytest.raises(NkiValidationError, match="mismatch") as e:
        replay_program(prog, [np.ones(W, np.float32)], {}, target="trn2")
    assert e.value.rule == "shape-mismatch" and e.value.instruction == "tensor_tensor"


@pytest.mark.parametrize("fn", [catches_a_refusal, catches_in_a_caller])
def test_an_instruction_a_try_could_catch_runs_so_the_kernel_records_its_branch(fn):
    full, deferred = (_record(fn, defer=d).program.to_json() for d in (False, True))
    assert deferred == full
    assert "multiply" in full or "memset" in full  # (the except branch was recorded)


def _cases():
    """Every task's expert and baseline and its first two flawed kernels."""
    kernels = [(task, path, name) for task in builtin_tasks()
               for name, path in [*((r, candidate_files(task).get(r)) for r in ("solution", "baseline")),
                                  *((fl.file, task.directory / fl.file) for fl in task.flawed[:2])] if path]
    return [pytest.param(task, path, id=f"{task.id}-{name}") for task, path, name in kernels]


@pytest.mark.parametrize(("task", "path"), _cases())
def test_a_deferred_recording_is_the_full_recording(task, path):
    entry = _kernel_entry(str(path), task.kernel)
    shape = min(task.shapes, key=lambda s: sum(int(np.prod(t.concrete(dict(s.dims)))) for t in task.inputs))
    dims = dict(shape.dims)
    inputs = generate_inputs([(t.name, t.concrete(dims), t.dtype, t.family) for t in task.inputs],
                             task.families[0], 1, shape.label)
    specs = [ArgSpec(inputs[t.name].shape, inputs[t.name].dtype.name) for t in task.inputs]
    opts = SimOptions.from_env(record_trace=False, **entry.options)
    docs = []
    for defer in (False, True):
        try:
            rec = record_program(entry.fn, specs, dict(task.params), target=task.targets[0], options=opts,
                                 lnc=entry.lnc, grid=entry.grid, defer=defer)
        except NkiValidationError as e:  # (a flawed kernel the full recording refuses: nothing to compare)
            assert not defer, f"deferred recording raised {e}"
            pytest.skip(f"the full recording refuses it: {e.rule}")
        docs.append(rec.program.to_json())
    assert docs[0] == docs[1]


def test_the_deferrable_instructions_write_a_dst_and_return_nothing():
    assert DEFERRABLE <= set(INSTRUCTIONS)
    for name in DEFERRABLE:
        import inspect

        fn = inspect.unwrap(INSTRUCTIONS[name].fn)
        assert list(inspect.signature(fn).parameters)[1] == "dst", name
        tree = __import__("ast").parse(__import__("textwrap").dedent(inspect.getsource(fn)))
        returns = [n for n in __import__("ast").walk(tree) if isinstance(n, __import__("ast").Return)]
        assert all(r.value is None or getattr(r.value, "value", 0) is None for r in returns), name


def _codes(code):
    yield code
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            yield from _codes(c)


def test_the_exception_table_reader_agrees_with_the_interpreters():
    n = 0
    for mod in (record_module, dis, types, contextlib, json.decoder, pytest):
        with open(mod.__file__, encoding="utf-8") as fh:
            top = compile(fh.read(), mod.__file__, "exec")
        for code in _codes(top):
            want = tuple((e.start, e.end) for e in dis._parse_exception_table(code))
            assert handler_ranges(code) == want, code.co_qualname
            n += bool(want)
    assert n > 20  # (the modules read have handlers to read)


#: The exception handlers of the simulator's functions that a kernel calls and that issue instructions themselves
#: (the current API's ``nl`` functions and device loops). A deferred call is judged from the kernel line up
#: (``Recorder.defers``), so none of these may catch what an instruction it issues raises: each entry here was read
#: for it. (A new handler fails this test: check it, then add it.)
_REVIEWED_HANDLERS = {
    ("sim/language_tile_sources.py", "shared_constant", "(OSError, ValueError)"),  # np.load of a constant file
    ("sim/language.py", "__iter__", "finally"),  # a range's loop frame, in a generator: not on the stack in the body
    ("sim/control.py", "_iterate", "finally"), ("sim/control.py", "while_loop", "finally"),
    ("sim/control.py", "no_reorder", "finally"),  # (finally re-raises; these restore loop frames)
    ("sim/control.py", "_trace_body", "with"),  # (above the kernel's body function: judged, and it defers nothing)
}


def test_the_simulators_kernel_facing_functions_catch_nothing_an_instruction_raises():
    import ast
    import pathlib

    import nkieval

    root = pathlib.Path(nkieval.__file__).parent
    files = [*(root / "frontends" / "nki").rglob("*.py"), *(root / "sim").glob("language*.py"), root / "sim" / "control.py"]
    found = set()
    for p in files:
        for fn in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for n in ast.walk(fn):
                rel = p.relative_to(root).as_posix()
                if isinstance(n, ast.Try):
                    for h in n.handlers:
                        found.add((rel, fn.name, ast.unparse(h.type) if h.type else "bare"))
                    if n.finalbody:
                        found.add((rel, fn.name, "finally"))
                elif isinstance(n, ast.With | ast.AsyncWith):
                    found.add((rel, fn.name, "with"))
    assert found == _REVIEWED_HANDLERS
