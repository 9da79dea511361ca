"""The review with the tracer's checks deferred to the judge's replay (``tracing.DEFER_CHECKS``, the default).

What must hold: a review is the review without deferring — the same report (timings aside) for a kernel that
passes, one that breaks a rule in a deferred instruction (its case errors are the trace's failure records, with
the candidate's frames, got by tracing the shape again without deferring), and one whose Python catches an
instruction's refusal and takes another branch; and the tracer does defer (its programs are recorded with fewer
instruction runs).
"""

from __future__ import annotations

import json

import pytest
from review_testlib import report_outcome

from nkieval.review import review, tracing
from nkieval.review.cache import TRACES

HEADER = '''
import nki
import nki.isa as nisa
import nki.language as nl

W = 512
'''

LOOP = '''

@nki.jit
def vector_add(a, b):
    n = a.shape[0]
    out = nl.ndarray((n,), dtype=a.dtype, buffer=nl.shared_hbm)
    for lo in range(0, n, W):
        w = min(W, n - lo)
        ta = nl.ndarray((1, w), dtype=a.dtype, buffer=nl.sbuf)
        tb = nl.ndarray((1, w), dtype=b.dtype, buffer=nl.sbuf)
        wide = nl.ndarray((1, w + 1), dtype=b.dtype, buffer=nl.sbuf)   # one column too wide
        nisa.dma_copy(dst=ta, src=a[lo:lo + w].reshape((1, w)))
        nisa.dma_copy(dst=tb, src=b[lo:lo + w].reshape((1, w)))
BODY
        nisa.dma_copy(dst=out[lo:lo + w].reshape((1, w)), src=ta)
    return out
'''

BREAKS_A_RULE = HEADER + '''

def add(dst, a, b):
    nisa.tensor_tensor(dst=dst, data1=a, data2=b, op=nl.add)
''' + LOOP.replace("BODY", "        add(ta, ta, wide)")

CATCHES_A_REFUSAL = HEADER + LOOP.replace("BODY", '''        try:
            nisa.tensor_tensor(dst=ta, data1=ta, data2=wide, op=nl.add)   # refused: the shapes differ
        except Exception:
            nisa.tensor_tensor(dst=ta, data1=ta, data2=tb, op=nl.add)''')


def _both(source: str, monkeypatch: pytest.MonkeyPatch) -> tuple[dict, dict, object]:
    out = {}
    for defer in (False, True):
        monkeypatch.setattr(tracing, "DEFER_CHECKS", [defer])
        TRACES.clear()
        r = review("vector_add", source, seed=2)
        out[defer] = (report_outcome(r), r)
    return out[False][0], out[True][0], out[True][1]


def _same(a: dict, b: dict) -> bool:
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


def test_a_rule_broken_in_a_deferred_instruction_gets_the_traces_failure_record(monkeypatch):
    retraced: list[str] = []
    real = tracing.ProgramStream.retrace

    def spy(self, key):
        retraced.append(key)
        return real(self, key)

    monkeypatch.setattr(tracing.ProgramStream, "retrace", spy)
    full, deferred, r = _both(BREAKS_A_RULE, monkeypatch)
    assert _same(full, deferred)
    assert retraced, "the deferred programs replayed to the refusal, and their shapes were traced again"
    c = r.cases[0]
    assert c.status == "rule-violation" and c.error["rule"] == "shape-mismatch"
    assert any("in add:" in f for f in c.error["frames"]), c.error  # (the trace's record: the kernel's frames)


def test_a_kernel_that_catches_a_refusal_is_reviewed_on_the_branch_it_takes(monkeypatch):
    full, deferred, r = _both(CATCHES_A_REFUSAL, monkeypatch)
    assert _same(full, deferred)
    assert all(c.status == "ok" for c in r.cases)


def test_a_passing_kernel_is_reviewed_alike_and_the_tracer_defers(monkeypatch, tmp_path):
    from nkieval.tasks import load_task

    source = (load_task("vector_add").directory / "flawed" / "thread_port.py").read_text()
    full, deferred, r = _both(source, monkeypatch)
    assert _same(full, deferred)
    assert r.verdict == "pass"
    # the tracer's recording of one shape, in this process, with and without deferring
    from nkieval.review import tracer
    from nkieval.sim.program.record import DEFERRED

    req = {"source": source, "kernel": "vector_add", "target": "trn2", "max_instructions": 100000,
           "shapes": [{"key": "k", "args": [{"shape": [4096], "dtype": "float32"}] * 2, "params": {}}]}
    before = DEFERRED[0]
    path = tmp_path / "candidate.py"
    path.write_text(source)
    kernel = tracer._kernel_entry(str(path), "vector_add")
    res, program = tracer._record(kernel, req["shapes"][0], req, str(path), True)
    assert res["status"] == "ok" and DEFERRED[0] - before >= 4 * 16  # (4 instructions a 256-element block)
    assert program == tracer._record(kernel, req["shapes"][0], req, str(path), False)[1]
