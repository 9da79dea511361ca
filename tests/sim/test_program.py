"""Trace, then execute: a kernel recorded as a program over placeholder inputs, replayed on real ones.

The property that matters: the replay of a recorded program gives bit-for-bit the outputs and the same
instruction trace as running the kernel eagerly on the same inputs, for every construct whose value only
the device knows (runtime-indexed views, registers, scalars, device loops) — while the recording itself
never sees an input value. Malformed or out-of-bounds programs are refused before they touch memory.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import nkieval.frontends

nkieval.frontends.install(force=True)

import nki  # noqa: E402
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402

from nkieval.sim.errors import NkiValidationError  # noqa: E402
from nkieval.sim.program import ArgSpec, Program, ProgramError, record_program, replay_program  # noqa: E402
from nkieval.sim.runner import run_kernel  # noqa: E402


def _roundtrip(fn, args, kwargs=None, *, target="trn2", lnc=1):
    """(eager result, replay result) on the same inputs; the recording sees only shapes and dtypes."""
    kwargs = kwargs or {}
    eager = run_kernel(fn, [a.copy() for a in args], dict(kwargs), target=target, lnc=lnc)
    rec = record_program(fn, [ArgSpec(a.shape, a.dtype.name) for a in args], dict(kwargs), target=target, lnc=lnc)
    prog = Program.from_json(rec.program.to_json())
    replay = replay_program(prog, [a.copy() for a in args], dict(kwargs), target=target)
    return eager, replay


def _same(eager, replay):
    e = eager.outputs if isinstance(eager.outputs, tuple | list) else [eager.outputs]
    r = replay.outputs if isinstance(replay.outputs, tuple | list) else [replay.outputs]
    assert len(e) == len(r)
    for a, b in zip(e, r):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))
    assert [(x.opcode, x.line, x.loops) for x in eager.trace.records] == \
        [(x.opcode, x.line, x.loops) for x in replay.trace.records]


def k_add(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(a.shape[0] // 128):
        ta = nl.load(a[i * 128:(i + 1) * 128])
        tb = nl.load(b[i * 128:(i + 1) * 128])
        nl.store(out[i * 128:(i + 1) * 128], nl.add(ta, tb))
    return out


def test_plain_kernel_replays_bit_for_bit():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((256, 64), dtype=np.float32), rng.standard_normal((256, 64), dtype=np.float32)
    eager, replay = _roundtrip(k_add, [a, b])
    _same(eager, replay)
    np.testing.assert_array_equal(replay.outputs, a + b)


def k_gather(table, ids):
    n, d = ids.shape[0], table.shape[1]
    out = nl.ndarray((n, d), dtype=table.dtype, buffer=nl.shared_hbm)
    idx = nl.ndarray((n, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=idx, src=ids.reshape((n, 1)))
    nisa.dma_copy(dst=out, src=table.ap(pattern=[[d, n], [1, d]], offset=0, vector_offset=idx, indirect_dim=0))
    return out


def k_scalar_offset(table, row):
    d = table.shape[1]
    out = nl.ndarray((1, d), dtype=table.dtype, buffer=nl.shared_hbm)
    r = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=r, src=row)
    t = nl.ndarray((1, d), dtype=table.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=table.ap(pattern=[[d, 1], [1, d]], offset=0, scalar_offset=r, indirect_dim=0))
    nisa.dma_copy(dst=out, src=t)
    return out


def test_indirect_and_scalar_offset_views_use_the_replayed_index():
    """The recording sees zeros for the index; the replay must gather the rows the real index names."""
    rng = np.random.default_rng(1)
    table = rng.standard_normal((64, 32), dtype=np.float32)
    ids = rng.integers(0, 64, size=128).astype(np.int32)
    eager, replay = _roundtrip(k_gather, [table, ids])
    _same(eager, replay)
    np.testing.assert_array_equal(replay.outputs, table[ids])
    row = np.array([[37]], dtype=np.int32)
    eager, replay = _roundtrip(k_scalar_offset, [table, row])
    _same(eager, replay)
    np.testing.assert_array_equal(replay.outputs, table[37:38])


def k_dynamic_loop(x, n):
    out = nl.ndarray((1, x.shape[1]), dtype=x.dtype, buffer=nl.shared_hbm)
    cnt = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=cnt, src=n)
    reg = nisa.register_alloc(cnt)
    acc = nl.ndarray((1, x.shape[1]), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=0.0)
    row = nl.ndarray((1, x.shape[1]), dtype=nl.float32, buffer=nl.sbuf)
    for i in nl.dynamic_range(reg):
        nisa.dma_copy(dst=row, src=x[nl.ds(i, 1), :])
        nisa.tensor_tensor(dst=acc, data1=acc, data2=row, op=nl.add)
    nisa.dma_copy(dst=out, src=acc)
    return out


def test_device_loop_runs_as_often_as_the_device_value_says():
    """Traced once (the recording's count is a zero); replayed as many times as the real register holds."""
    x = np.arange(10 * 8, dtype=np.float32).reshape(10, 8)
    for count in (0, 3, 7):
        n = np.array([[count]], dtype=np.int32)
        eager, replay = _roundtrip(k_dynamic_loop, [x, n])
        _same(eager, replay)
        np.testing.assert_array_equal(replay.outputs[0], x[:count].sum(axis=0))
    rec = record_program(k_dynamic_loop, [ArgSpec((10, 8), "float32"), ArgSpec((1, 1), "int32")], {}, target="trn2")
    loops = [e for e in rec.program.programs[0].events if e[0] == "L"]
    assert len(loops) == 1 and len([e for e in loops[0][4] if e[0] == "i"]) == 2


def k_host_read(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    host = np.asarray(a) * 2
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.memset(dst=t, value=float(host.ravel()[0]))
    nisa.dma_copy(dst=out, src=t)
    return out


def k_branch_on_register(a, n):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    cnt = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=cnt, src=n)
    reg = nisa.register_alloc(cnt)
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.memset(dst=t, value=1.0 if reg else 0.0)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_python_reading_device_values_is_refused_with_the_kernel_line():
    with pytest.raises(NkiValidationError) as info:
        record_program(k_host_read, [ArgSpec((128, 4), "float32")], {}, target="trn2")
    assert info.value.rule == "trace-time-value" and "test_program.py" in str(info.value)
    with pytest.raises(NkiValidationError) as info:
        record_program(k_branch_on_register, [ArgSpec((128, 4), "float32"), ArgSpec((1, 1), "int32")], {},
                       target="trn2")
    assert info.value.rule == "trace-time-value"


def k_passes_object(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.memset(dst=t, value=object())
    nisa.dma_copy(dst=out, src=t)
    return out


def test_an_argument_no_instruction_takes_is_refused():
    with pytest.raises(NkiValidationError) as info:
        record_program(k_passes_object, [ArgSpec((128, 4), "float32")], {}, target="trn2")
    assert info.value.rule == "trace-argument"


def test_the_recording_never_sees_input_values():
    seen = []

    def spy(a):
        seen.append(a.data.copy())  # a hostile kernel reading the backing array directly
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=a)
        return out

    record_program(spy, [ArgSpec((128, 4), "float32")], {}, target="trn2")
    assert not seen[0].any()  # zeros: the recording has only the shape and dtype


def k_lnc2(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    half = a.shape[0] // 2
    pid = nl.program_id(0)
    t = nl.load(a[pid * half:(pid + 1) * half])
    nl.store(out[pid * half:(pid + 1) * half], nl.multiply(t, 3.0))
    return out


def test_lnc2_programs_record_and_replay_separately():
    a = np.random.default_rng(2).standard_normal((256, 16), dtype=np.float32)
    eager, replay = _roundtrip(k_lnc2, [a], lnc=2)
    np.testing.assert_array_equal(replay.outputs, eager.outputs)
    rec = record_program(k_lnc2, [ArgSpec(a.shape, "float32")], {}, target="trn2", lnc=2)
    assert len(rec.program.programs) == 2


def test_one_compiled_program_replays_many_inputs_without_leaking_state():
    """The judge compiles a program once and replays it on every case of its shape: each replay must equal an
    eager run on that case's inputs (no view, allocation or register of one run reaches the next)."""
    rng = np.random.default_rng(3)
    shape = (256, 32)
    rec = record_program(k_add, [ArgSpec(shape, "float32")] * 2, {}, target="trn2")
    prog = Program.from_json(rec.program.to_json())
    for _ in range(3):
        a, b = rng.standard_normal(shape, dtype=np.float32), rng.standard_normal(shape, dtype=np.float32)
        eager = run_kernel(k_add, [a.copy(), b.copy()], {}, target="trn2")
        _same(eager, replay_program(prog, [a, b], {}, target="trn2"))
        np.testing.assert_array_equal(eager.outputs, a + b)


def test_a_bad_event_anywhere_is_refused_before_the_first_instruction_runs():
    """Every event is checked when the program is compiled, so a program that goes bad late (here: the last
    event names an unknown instruction) runs nothing at all — not even its valid first instructions."""
    doc = _program()
    body = doc["programs"][0]
    bad = [e for e in body["events"] if e[0] == "i"][-1]
    body["calls"].append(["os_system", *body["calls"][bad[1]][1:]])  # (its own call site, naming the instruction)
    bad[1] = len(body["calls"]) - 1
    ran = []
    from nkieval.sim.isa import core

    real = core.INSTRUCTIONS["dma_copy"]
    core.INSTRUCTIONS["dma_copy"] = real.__class__(real.name, real.engine, real.min_generation,
                                                   lambda *a, **k: ran.append(1) or real.fn(*a, **k), real.doc)
    try:
        with pytest.raises(ProgramError) as info:
            _replay(doc)
    finally:
        core.INSTRUCTIONS["dma_copy"] = real
    assert info.value.rule == "program-format" and "os_system" in str(info.value)
    assert ran == []


def _program() -> dict:
    rec = record_program(k_add, [ArgSpec((128, 8), "float32"), ArgSpec((128, 8), "float32")], {}, target="trn2")
    return json.loads(rec.program.to_json())


def _replay(doc: dict) -> None:
    a = np.ones((128, 8), np.float32)
    replay_program(Program.from_json(json.dumps(doc)), [a, a], {}, target="trn2")


def _first(doc: dict, kind: str) -> list:
    return next(e for e in doc["programs"][0]["events"] if e[0] == kind)


def _entry(doc: dict, table: str, ev: list) -> list:
    """The table entry an event names (its call or allocation site)."""
    return doc["programs"][0][table][ev[2] if ev[0] == "a" else ev[1]]


def _view(doc: dict, aid: object, dname: str, sname: str, off: object, shape: list, strides: list) -> dict:
    """A view operand naming a new views table entry (and a new layout)."""
    body = doc["programs"][0]
    body["layouts"].append([dname, sname, shape, strides])
    body["views"].append([aid, len(body["layouts"]) - 1, off])
    return {"T": len(body["views"]) - 1}


def _swap_view(doc: dict, view: dict) -> None:
    """Put ``view`` in place of the first tensor operand of the first instruction."""
    def walk(x):
        if isinstance(x, list):
            for i, v in enumerate(x):
                if isinstance(v, dict) and ("T" in v or "V" in v):
                    x[i] = view
                    return True
                if walk(v):
                    return True
        elif isinstance(x, dict):
            return any(walk(v) for v in x.values())
        return False

    ev = _first(doc, "i")
    assert walk(ev[2]) or walk(ev[3])


@pytest.mark.parametrize("tamper, rule", [
    (lambda d: d.update(version=99), "program-format"),
    (lambda d: d["programs"].append(d["programs"][0]), "program-format"),
    (lambda d: _entry(d, "calls", _first(d, "i")).__setitem__(0, "os_system"), "program-format"),
    (lambda d: _swap_view(d, _view(d, 1, "float32", "float32", 1 << 40, [8], [4])), "program-bounds"),
    (lambda d: _swap_view(d, _view(d, 1, "float32", "float32", 0, [128, 8], [-4, 4])), "program-bounds"),
    (lambda d: _swap_view(d, _view(d, 999, "float32", "float32", 0, [8], [4])), "program-format"),
    (lambda d: _swap_view(d, {"V": ["__class__", {"el": 0}, [], {"d": []}]}), "program-format"),
    (lambda d: _entry(d, "allocs", _first(d, "a")).__setitem__(0, [1 << 20, 1 << 20]), "program-bounds"),
    (lambda d: d["programs"][0]["events"].append(["x"]), "program-format"),
])
def test_tampered_programs_are_refused_before_they_touch_memory(tamper, rule):
    doc = _program()
    _replay(doc)  # the untampered document replays
    tamper(doc)
    with pytest.raises(ProgramError) as info:
        _replay(doc)
    assert info.value.rule == rule


def test_a_document_that_is_not_a_program_is_refused():
    for text in ("[]", "{", '{"format": "nkieval-program", "version": 2}', "NaN"):
        with pytest.raises(ProgramError):
            Program.from_json(text)


def test_eager_front_end_still_runs_the_same_machine():
    """nki.simulate (eager, one process) and the recorded path give the same outputs."""
    a = np.random.default_rng(3).standard_normal((128, 8), dtype=np.float32)
    direct = nki.simulate(nki.jit(k_add))(a, a)
    _, replay = _roundtrip(k_add, [a, a])
    np.testing.assert_array_equal(direct, replay.outputs)


def test_front_end_modules_expose_no_implementation_modules():
    """``nl.inspect`` / ``nki.threading`` once handed a kernel importlib and threads without an import line."""
    import types

    import neuronxcc.nki
    import neuronxcc.nki.isa
    import neuronxcc.nki.language
    import nki.isa
    import nki.language

    allowed = {"isa", "language", "lnc", "typing", "constants", "compiler", "collectives"}
    for mod in (nki, nki.language, nki.isa, neuronxcc.nki, neuronxcc.nki.language, neuronxcc.nki.isa):
        leaked = {k for k, v in vars(mod).items()
                  if isinstance(v, types.ModuleType) and k.isidentifier() and not k.startswith("_")}
        assert leaked <= allowed, (mod.__name__, leaked - allowed)


def k_rank9(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_a_tensor_of_rank_nine_records_and_replays():
    """Beta-1 compiler dumps declare block tensors with seven block dimensions (a partition and a free dimension
    besides): a program's rank bound must not refuse what the eager front ends run."""
    x = np.arange(128 * 256, dtype=np.float32).reshape(128, *[2] * 8)
    eager, replay = _roundtrip(k_rank9, [x])
    _same(eager, replay)
    np.testing.assert_array_equal(replay.outputs, x)


def _k_tiles(hold_all_to_the_end: bool):
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        held = []
        for _ in range(4):  # four [128, 16384] fp32 tiles: 64 KiB of the 192 KiB partition each
            t = nl.ndarray((128, 16384), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=a)
            held.append(t)  # referenced to the end; used only in its own iteration unless hold_all_to_the_end
            if not hold_all_to_the_end:
                nisa.dma_copy(dst=out, src=t)
        if hold_all_to_the_end:
            for t in held:
                nisa.dma_copy(dst=out, src=t)
        return out
    return kernel


@pytest.mark.parametrize("record_trace", [False, True])
def test_a_recording_leaves_on_chip_capacity_to_the_replay(record_trace):
    """Tiles held past their last use are no over-subscription: live ranges never overlap beyond 192 KiB. A
    recording without a trace could only count referenced tiles at each allocation (256 KiB); it judges no
    capacity, whatever the options say, and the replay judges it on its trace, as an eager run does."""
    from dataclasses import replace

    from nkieval.sim.options import SimOptions

    a = np.random.default_rng(3).standard_normal((128, 16384), dtype=np.float32)
    strict = SimOptions.from_env(capacity_check="error")
    kernel = _k_tiles(hold_all_to_the_end=False)
    eager = run_kernel(kernel, [a.copy()], {}, target="trn2", options=strict)
    rec = record_program(kernel, [ArgSpec(a.shape, "float32")], {}, target="trn2",
                         options=replace(strict, record_trace=record_trace))
    replay = replay_program(Program.from_json(rec.program.to_json()), [a.copy()], {}, target="trn2", options=strict)
    _same(eager, replay)

    over = _k_tiles(hold_all_to_the_end=True)  # all four live at once: a real over-subscription
    rec = record_program(over, [ArgSpec(a.shape, "float32")], {}, target="trn2",
                         options=replace(strict, record_trace=record_trace))
    with pytest.raises(NkiValidationError) as e:
        replay_program(Program.from_json(rec.program.to_json()), [a.copy()], {}, target="trn2", options=strict)
    assert e.value.rule == "sbuf-capacity"
