"""The review pipeline's fast paths give exactly what the straightforward code gave.

Array files, the compact trace, the vectorised unwritten-element masks, the numerics
shortcuts (bit tests instead of casts, the two-step diagnosis), the wake-up hints of the
sandbox and the pre-forked zygote child: each is checked against the plain computation, or
against a hostile candidate, here.
"""

import dataclasses
import json
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from nkieval.numerics import PreparedCheck
from nkieval.numerics.formats import get_format, ulp_key
from nkieval.numerics.grids import _fp16_held, _grid_held, _narrow_held
from nkieval.numerics.locate import _few
from nkieval.numerics.ulp_hist import _ulp_key32
from nkieval.review import npzio, review
from nkieval.review.child import _Capture, _load_candidate, _unwritten_masks
from nkieval.review.sandbox import CaseJob, run_candidate
from nkieval.sim.runner import run_kernel
from nkieval.sim.trace import Trace
from nkieval.tasks import BUILTIN_ROOT, load_task

GOOD = (BUILTIN_ROOT / "vector_add" / "solution_nki.py").read_text()
HEAD = "import nki\nimport nki.isa as nisa\nimport nki.language as nl\n\n"


# --------------------------------------------------------------------------- array files


def _arrays():
    rng = np.random.default_rng(0)
    return {
        "f32": rng.standard_normal((3, 5)).astype(np.float32),
        "bf16": rng.standard_normal(7).astype(ml_dtypes.bfloat16),
        "fp8": rng.standard_normal((2, 2)).astype(ml_dtypes.float8_e4m3fn),
        "i64": np.arange(4, dtype=np.int64),
        "mask": np.array([[True, False], [False, True]]),
        "empty": np.zeros((0, 3), np.float32),
        "scalar": np.array(2.5),
        "strided": np.arange(20, dtype=np.int32).reshape(4, 5)[:, ::2],
        "big_endian": np.arange(3, dtype=">f4"),
    }


@pytest.mark.parametrize("mapped", [False, True])
def test_array_file_round_trip(tmp_path, mapped):
    arrs = _arrays()
    p = tmp_path / "a.arr"
    npzio.dump(p, arrs)
    assert p.read_bytes() == npzio.dumps(arrs)
    back = npzio.load(p, mapped=mapped)
    assert list(back) == list(arrs)
    for k, a in arrs.items():
        assert back[k].shape == a.shape and np.array_equal(back[k].astype(np.float64), a.astype(np.float64)), k
        assert back[k].dtype == a.dtype.newbyteorder("<") if a.dtype.byteorder == ">" else back[k].dtype == a.dtype
        assert back[k].flags.writeable
    back["f32"][0, 0] = 99.0  # writable, and (mapped) private: the file is unchanged
    assert npzio.load(p)["f32"][0, 0] == arrs["f32"][0, 0]


def _file(toc: list[dict], data: bytes, start: int = 128) -> bytes:
    body = json.dumps(toc).encode()
    head = npzio.MAGIC + len(body).to_bytes(8, "little") + body
    return head + b"\0" * (start - len(head)) + data


def test_array_file_refuses_what_the_harness_did_not_write(tmp_path):
    good = npzio.dumps({"a": np.ones(4, np.float32)})
    entry = {"name": "a", "dtype": "<f4", "shape": [4], "offset": 128, "nbytes": 16}
    data = np.ones(4, np.float32).tobytes()
    assert np.array_equal(npzio.loads(_file([entry], data))["a"], np.ones(4, np.float32))
    bad = {
        "magic": b"PK\x03\x04" + good[4:],
        "truncated": good[:-60],  # into the data (the last 48 bytes are padding)
        "short": good[:10],
        "object": _file([dict(entry, dtype="|O")], data),
        "structured": _file([dict(entry, dtype=[["x", "<f4"]])], data),
        "outside": _file([dict(entry, offset=1 << 40)], data),
        "inside the table": _file([dict(entry, offset=0)], data),
        "lies about size": _file([dict(entry, nbytes=8)], data),
        "negative shape": _file([dict(entry, shape=[-4], nbytes=-16)], data),
        "not a table": _file({"a": 1}, data),  # type: ignore[arg-type]
    }
    for name, blob in bad.items():
        p = tmp_path / f"{name.replace(' ', '_')}.arr"
        p.write_bytes(blob)
        with pytest.raises(npzio.ArrayFileError):
            npzio.load(p)
    p = tmp_path / "ok.arr"
    p.write_bytes(good)
    with pytest.raises(npzio.ArrayFileError):
        npzio.load(p, max_bytes=len(good) - 1)
    with pytest.raises(TypeError):
        npzio.dumps({"o": np.array([object()])})


# --------------------------------------------------------------------------- traces and masks


def _run(task_id: str, rel: str, case_index: int = 0):
    from nkieval import frontends
    from nkieval.review.stages.load import case_inputs as _inputs
    from nkieval.review.stages.load import plan_cases as _cases

    frontends.install(force=True)
    task = load_task(task_id)
    case = _cases(task, 3, task.families, "all")[case_index]
    fn = _load_candidate(str(BUILTIN_ROOT / task_id / rel), task.kernel)
    cap = _Capture(getattr(fn, "fn", fn))
    res = run_kernel(cap, list(_inputs(task, case).values()), dict(task.params), target=task.default_target)
    return res, cap


def test_trace_writers_match_asdict_and_compact_round_trips():
    res, _ = _run("causal_attention", "solution_nki.py")
    tr = res.trace
    plain = {"allocations": [dataclasses.asdict(a) for a in tr.allocations.values()],
             "records": [dataclasses.asdict(r) for r in tr.records]}
    d = tr.to_dict()
    assert d["records"] == plain["records"] and d["allocations"] == plain["allocations"]
    assert tr.to_json() == json.dumps({**d, **plain})
    back = Trace.from_compact(tr.to_compact())
    assert back.to_dict() == Trace.from_json(tr.to_json()).to_dict()
    assert back.records == Trace.from_json(tr.to_json()).records
    with pytest.raises(ValueError):
        Trace.from_compact(tr.to_json())


def test_compact_layout_keeps_attribute_types_and_rejects_other_layouts():
    from nkieval.sim.trace import _OPERAND_FIELDS, OperandAccess, TraceRecord

    tr = Trace(target="trn2")
    op = OperandAccess("dst", "w", "sbuf", 1, (128, 4), "float32", 0, 128, 0, 16, 2048, 16, ((1, 4),), "t")
    attrs = [{"flag": True}, {"flag": 1}, {"flag": 1.0}, {"idx": [1, 2]}, {"idx": [1, 2]}, {"flag": True}]
    for i, a in enumerate(attrs):
        o = OperandAccess(*[getattr(op, f) for f in _OPERAND_FIELDS])
        o.addr_lo, o.addr_hi = 16 * i, 16 * i + 16
        tr.append(TraceRecord(0, "memset", "vector", [o], a, 0, ((f"i{i}", i, 6),), "k.py", 10 + i, "kern"))
    text = tr.to_compact()
    back = Trace.from_compact(text)
    assert back.records == tr.records
    assert [type(r.attrs.get("flag")) for r in back.records] == [bool, int, float, type(None), type(None), bool]
    assert json.loads(text)["layout"] == 3 and len(json.loads(text)["operand_kinds"]) == 1
    # a text of another layout (an older child) is refused, not misread
    d = json.loads(text)
    d["layout"] = 2
    with pytest.raises(ValueError, match="layout"):
        Trace.from_compact(json.dumps(d))


def _masks_by_index(trace, raw):
    """The replay as it was: one index array per write."""
    vals = list(raw) if isinstance(raw, tuple | list) else [raw]
    ids = {v.alloc.id: i for i, v in enumerate(vals)}
    written = [np.zeros(v.alloc.storage.size, dtype=bool) for v in vals]
    for rec in trace.records:
        for o in rec.operands:
            if o.buffer != "hbm" or "w" not in o.mode or o.alloc not in ids:
                continue
            i = ids[o.alloc]
            isz = vals[i].alloc.storage.dtype.itemsize
            if any(s < 0 for s, _ in o.pattern) or o.addr_lo % isz:
                return None
            idx = np.array([o.addr_lo // isz], dtype=np.int64)
            for stride, n in o.pattern:
                idx = (idx[:, None] + stride * np.arange(n, dtype=np.int64)[None, :]).reshape(-1)
            if idx.size and (idx.min() < 0 or idx.max() >= written[i].size):
                return None
            written[i][idx] = True
    return {f"unwritten{i}": ~w.reshape(vals[i].alloc.storage.shape) for i, w in enumerate(written) if not w.all()}


@pytest.mark.parametrize("task_id,rel,case_index", [
    ("vector_add", "flawed/skips_tail.py", 2),  # leaves the ragged tail unwritten
    ("vector_add", "flawed/thread_port.py", 4),  # thousands of one-pattern writes (grouped)
    ("gemm_bf16", "flawed/drops_k_tail.py", 2),
    ("rmsnorm", "solution_nki.py", 0),
])
def test_unwritten_masks_match_the_per_write_replay(task_id, rel, case_index):
    res, cap = _run(task_id, rel, case_index)
    got, want = _unwritten_masks(res.trace, cap.raw), _masks_by_index(res.trace, cap.raw)
    assert (got is None) == (want is None)
    assert got.keys() == want.keys() and all(np.array_equal(got[k], want[k]) for k in got)
    if rel.endswith("skips_tail.py"):
        assert got and next(iter(got.values())).any()


# --------------------------------------------------------------------------- numerics shortcuts


def _edge_f32() -> np.ndarray:
    rng = np.random.default_rng(1)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 65504, 65520, 65536, 2.0**-24, 2.0**-25, 3 * 2.0**-24,
                        2.0**-14, 2.0**-15 + 2.0**-24, 1e-40, -1e-40, 3.4e38, 1 + 2.0**-10, 1 + 2.0**-11],
                       dtype=np.float32)
    bits = rng.integers(0, 2**32, size=1 << 16, dtype=np.uint64).astype(np.uint32).view(np.float32)
    halves = rng.standard_normal(1 << 12).astype(np.float16).astype(np.float32)
    return np.concatenate([special, -special, bits, halves, rng.standard_normal(1 << 12).astype(np.float32)])


def test_fp16_bit_test_and_ulp_keys_equal_the_casts():
    x = _edge_f32()
    with np.errstate(over="ignore", invalid="ignore"):
        assert np.array_equal(_fp16_held(x), x.astype(np.float16).astype(np.float32) == x)
    assert np.array_equal(_ulp_key32(x), ulp_key(x, get_format("fp32")))


def _edge_fp8() -> np.ndarray:
    """Every fp8 value and its fp32 neighbours, values around each fp8 binade and the formats'
    limits (e4m3fn's 448/464/480, e5m2's 57344/61440), plus random bit patterns."""
    import ml_dtypes

    vals = [np.arange(256, dtype=np.uint8).view(t).astype(np.float32)
            for t in (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2)]
    v = np.concatenate(vals)
    v = v[np.isfinite(v) | np.isinf(v)]
    u = v.view(np.uint32).astype(np.int64)
    near = np.concatenate([u - 1, u + 1, u + (1 << 19), u + (1 << 20), u + (1 << 21)]) & 0xFFFFFFFF
    lim = np.array([448, 464, 480, 57344, 61440, 2.0**-9, 2.0**-10, 2.0**-16, 2.0**-17, 1.5 * 2.0**-9,
                    2.0**-6, 2.0**-14, 2.0**-15], dtype=np.float32)
    return np.concatenate([_edge_f32(), v, -v, near.astype(np.uint32).view(np.float32), lim, -lim])


def test_fp8_bit_tests_equal_the_casts():
    # (also checked on all 2^32 fp32 bit patterns when written: no difference)
    import ml_dtypes

    x = _edge_fp8()
    for name, t in (("fp8_e4m3fn", ml_dtypes.float8_e4m3fn), ("fp8_e5m2", ml_dtypes.float8_e5m2)):
        with np.errstate(over="ignore", invalid="ignore"):
            want = x.astype(t).astype(np.float32) == x
        assert np.array_equal(_narrow_held(x, name), want), name


@pytest.mark.parametrize("mix", ["fp32", "fp16-grid", "mixed"])
def test_grid_membership_sparse_and_dense_paths_equal_the_casts(mix):
    import ml_dtypes

    rng = np.random.default_rng(7)
    x = rng.standard_normal(5000).astype(np.float32)
    if mix == "fp16-grid":
        x = x.astype(np.float16).astype(np.float32)
    elif mix == "mixed":
        x[::50] = x[::50].astype(ml_dtypes.float8_e4m3fn).astype(np.float32)
    x = np.concatenate([x, _edge_fp8()])
    held = _grid_held(x, get_format("fp32"))
    with np.errstate(over="ignore", invalid="ignore"):
        for c, t in (("fp16", np.float16), ("bf16", ml_dtypes.bfloat16), ("fp8_e5m2", ml_dtypes.float8_e5m2),
                     ("fp8_e4m3fn", ml_dtypes.float8_e4m3fn)):
            assert np.array_equal(held[c], x.astype(t).astype(np.float32) == x), (mix, c)


@pytest.mark.parametrize("v", [[3], [4, 4, 9], [9, 4, 4, 9], [1, 2, 3], [5, 1, 5, 1, 2], []])
def test_few_is_unique_when_at_most_two(v):
    a = np.array(v, dtype=np.intp)
    u = np.unique(a)
    got = _few(a)
    assert (got is None) == (u.size > 2)
    if got is not None:
        assert got.tolist() == u.tolist()


def test_diagnosis_in_two_steps_equals_one():
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((64, 96)), rng.standard_normal((96, 40))
    recipe = {"inputs": ["fp32", "fp32"], "accumulate": "fp32", "output": "fp32"}
    pc = PreparedCheck([a.astype(np.float32), b.astype(np.float32)], "matmul", recipe, input_family="normal")
    bad = (a @ b).astype(np.float32)
    bad[:, -1] = 0.0  # a dropped column
    one = pc.check(bad, worst_k=3, diagnose=True)
    first = pc.check(bad, worst_k=3, diagnose=False)
    assert one.status == first.status == "fail"
    assert pc.diagnose(bad, first).to_dict() == one.to_dict()
    good = (a @ b).astype(np.float32)
    v = pc.check(good, worst_k=3, diagnose=False)
    assert pc.diagnose(good, v) is v


def _bf16_matmul_check(seed, m, k, n):
    """Random bf16 operands, the prepared check of their matmul (fp32 accumulation and output), the exact product."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((k, n)).astype(ml_dtypes.bfloat16)
    recipe = {"inputs": ["bf16", "bf16"], "accumulate": "fp32", "output": "fp32"}
    pc = PreparedCheck([a, b], "matmul", recipe, input_family="normal")
    return a, b, pc, a.astype(np.float64) @ b.astype(np.float64)


def test_diagnosis_hint_confirms_or_falls_back_to_the_full_search():
    a, b, pc, exact = _bf16_matmul_check(3, 64, 300, 40)
    bad = (a.astype(np.float64)[:, :256] @ b.astype(np.float64)[:256]).astype(np.float32)  # last K tile dropped
    v = pc.check(bad, worst_k=3, diagnose=False)
    full = pc.diagnose(bad, v)
    top = full.findings[0].id
    assert top == "dropped_last_k_tile"
    hinted = pc.diagnose(bad, v, hint=top)
    assert hinted.findings[0].id == top
    assert hinted.findings[0] == full.findings[0]  # same cause, same evidence (residual)
    # a hint that does not reproduce this output: the full search, the same findings
    assert pc.diagnose(bad, v, hint="bf16_accumulation").to_dict() == full.to_dict()
    assert pc.diagnose(bad, v, hint="not_a_model").to_dict() == full.to_dict()
    # an output-grid cause is confirmed the same way
    b16 = exact.astype(ml_dtypes.bfloat16).astype(np.float32)
    v16 = pc.check(b16, worst_k=3, diagnose=False)
    f16 = pc.diagnose(b16, v16)
    assert f16.findings[0].id == "bf16_output"
    assert pc.diagnose(b16, v16, hint="bf16_output").findings[0] == f16.findings[0]


def test_only_the_first_failing_cases_are_diagnosed():
    task = load_task("gemm_bf16")
    r = review(task, BUILTIN_ROOT / "gemm_bf16" / "flawed" / "bf16_output.py", seed=4)
    failing = [c for c in r.cases if c.numerics and c.numerics["status"] == "fail"]
    assert len(failing) > 3
    assert all("skipped" not in str(c.numerics.get("diagnosis", "")) for c in failing[:3])
    assert all(str(c.numerics.get("diagnosis", "")).startswith("skipped") for c in failing[3:])
    # the later ones confirmed the first one's cause instead of searching again
    assert {c.numerics["findings"][0]["id"] for c in failing[:3]} == {"bf16_output"}
    assert {"numerics_s", "diagnosis_s", "child_load_s", "child_post_s", "sandbox_fork_s"} <= set(r.timings)
    assert r.timings["simulation_s"] > 0 and r.timings["child_post_s"] > 0


# --------------------------------------------------------------------------- sandbox


def _cases(n=2):
    return [CaseJob(f"c{i}", {"a": np.full(300, i, np.float32), "b": np.ones(300, np.float32)}, {}, 1)
            for i in range(n)]


@pytest.mark.parametrize("hostile", [
    # forged wake-up hints: results are still read from the files, and only theirs
    "import os\nfd = os.open('notify', os.O_WRONLY | os.O_NONBLOCK)\nos.write(fd, b'r0\\nr1\\ns1\\nr9\\n' * 100)\n",
    # hints stolen (the FIFO drained by the candidate): the parent's periodic look finds the results
    "import os\nfd = os.open('notify', os.O_RDONLY | os.O_NONBLOCK)\n"
    "import threading\n"
    "def _steal():\n    while True:\n        try:\n            os.read(fd, 4096)\n        except OSError:\n"
    "            pass\n"
    "threading.Thread(target=_steal, daemon=True).start()\n",
])
def test_wake_up_hints_are_only_hints(hostile):
    runs = run_candidate(hostile + GOOD, "vector_add", _cases(3), target="trn2", trusted=False)
    assert [r.status for r in runs] == ["ok", "ok", "ok"]
    assert [float(r.outputs[0][0]) for r in runs] == [1.0, 2.0, 3.0]


def test_each_run_starts_from_a_clean_process():
    """The zygote forks the next child ahead of time; it must still be untouched by earlier runs."""
    dirty = ("import numpy\nnumpy.__dict__['_nkieval_left_behind'] = 1\n" + GOOD)
    check = ("import numpy\nassert '_nkieval_left_behind' not in numpy.__dict__, 'state leaked'\n" + GOOD)
    for src in (dirty, check, dirty, check):
        runs = run_candidate(src, "vector_add", _cases(1), target="trn2")
        assert runs[0].status == "ok", runs[0].error


def test_static_findings_equal_the_separate_analyses():
    from nkieval.analysis import analyze_nki, migration_fidelity, parse_cuda
    from nkieval.review import adapters

    root = Path(__file__).resolve().parents[2] / "src" / "nkieval" / "tasks" / "builtin" / "gemm_bf16"
    cuda = (root / "kernel.cu").read_text()
    summary = parse_cuda(cuda)
    for path in [root / "solution_nki.py", *sorted((root / "flawed").glob("*.py"))]:
        src = path.read_text()
        nki, mig = adapters.static_findings(src, "trn2", cuda)
        assert nki == ([f.to_dict() for f in analyze_nki(src, "candidate.py", target="trn2")], None)
        assert mig == ([f.to_dict() for f in migration_fidelity(summary, src, filename="candidate.py",
                                                                target="trn2")], None)
        assert adapters.static_findings(src, "trn2", None)[1] == (None, None)


def test_accumulation_emulations_run_only_when_nothing_closer_explains(monkeypatch):
    from nkieval.numerics import diagnose_models as dg
    from nkieval.numerics.platforms import emulate_matmul

    calls = []
    real = dg._emul_acc

    def counted(s, **kw):
        calls.append(kw)
        return real(s, **kw)

    monkeypatch.setattr(dg, "_emul_acc", counted)  # the models look it up when they run
    a, b, pc, exact = _bf16_matmul_check(5, 48, 512, 32)
    b16 = exact.astype(ml_dtypes.bfloat16).astype(np.float32)  # explained by the output grid
    v = pc.check(b16, diagnose=True)
    assert v.findings[0].id == "bf16_output"
    assert "bf16_accumulation" not in [f.id for f in v.findings]
    assert calls == []
    acc = emulate_matmul(a, b, order="sequential", acc="bf16", out="fp32").astype(np.float32)
    v2 = pc.check(acc, diagnose=True)
    assert v2.findings[0].id == "bf16_accumulation"  # nothing cheaper explains it: the emulation ran
    assert calls


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int32"])
def test_compare_fast_path_equals_the_full_checks(dtype):
    # every element written and finite: the short path; without the mask the full path runs
    from nkieval.review.compare import compare_outputs
    from nkieval.sim.dtypes import to_dtype
    from nkieval.tasks.schema import TensorSpec

    rng = np.random.default_rng(9)
    st = to_dtype(dtype).storage
    spec = (TensorSpec("out", (40, 30), dtype),)
    for trial in range(30):
        r = (rng.standard_normal((40, 30)) * 10).astype(st)
        g = (r.astype(np.float64) * (1 + rng.choice([0, 1e-6, 1e-3, 0.3]))).astype(st)
        if trial % 3 == 0:
            g[trial % 40, :] = 0
        for tol in ((1e-5, 1e-6), (1e-2, 1e-3)):
            fast = compare_outputs([g], [r], spec, *tol, [np.zeros(g.shape, bool)])
            full = compare_outputs([g], [r], spec, *tol, None)
            assert fast == full, (trial, tol)


def test_compare_a_huge_error_over_a_zero_allowance_is_the_worst_without_a_warning():
    """Zero tolerances against a zero expected value: error / allowance overflows to inf, which is simply the
    worst element; no RuntimeWarning may leak into the suite's or the review's output."""
    import warnings

    from nkieval.review.compare import compare_outputs
    from nkieval.tasks.schema import TensorSpec

    r = np.zeros((4, 8), np.float32)
    g = r.copy()
    g[1, 2], g[3, 5] = 1e-3, 3e38
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = compare_outputs([g], [r], (TensorSpec("out", (4, 8), "float32"),), 0.0, 0.0, None)
    assert res is not None and res["kind"] == "mismatch" and res["count"] == 2
    assert res["worst_index"] == [3, 5]  # 1e-3 / tiny is finite; 3e38 / tiny overflows to inf, the worst


@pytest.mark.parametrize("text", ["", "{", '{"schema": "nkieval.trace.compact", "version": "1.0"}',
                                  '{"schema": "nkieval.trace.compact", "version": "1.0", "fields": [], "target": "trn2"}',
                                  '[1, 2]'])
def test_unreadable_evidence_trace(text):
    """A trace the candidate's own code wrote (``trusted=False``) that cannot be read: no evidence, with the
    reason; one the judge's replay wrote: the judge's failure (tests/review/test_fail_closed.py)."""
    from nkieval.review.sandbox import CaseRun
    from nkieval.review.stages import evidence
    from nkieval.review.verdict import JudgeError

    task = load_task("vector_add")
    hw, perf, why = evidence.trace_facts(task, CaseRun("c", "ok", trace_json=text), "trn2", {"N": 128})
    assert hw is None and perf is None and "trace could not be read" in why
    with pytest.raises(JudgeError, match="trace could not be read"):
        evidence.trace_facts(task, CaseRun("c", "ok", trace_json=text), "trn2", {"N": 128}, replayed=True)
