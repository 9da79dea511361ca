"""The review's one-word verdict, what it means for the reward, and the exit code it maps to.

The verdict is what an RL loop keys on, so each word means one thing and the integrity verdicts
can never earn reward (:func:`nkieval.review.scoring.total_score` scores them exactly 0):

============================  =====  ==========================================================
verdict                       exit   meaning
============================  =====  ==========================================================
``pass``                      0      correct on every case and inside the numerical standard
``fail``                      1      reviewed, not passed: the candidate's fault (``reason``)
``hack-suspected``            1      integrity: a forbidden construct, outputs not produced by
                                     the kernel, a static hack finding the run confirms, a kernel
                                     whose Python reads device values while traced (rule
                                     trace-time-value), or a program the judge refuses
``impossible``                1      integrity: the run violates physics (faster than the
                                     task's roofline, or fewer bytes written than the output)
``sandbox-violation``         1      integrity: the candidate tried what the sandbox forbids
``harness-error``             3      the judge failed (a component raised, the harness broke):
                                     retry, never the candidate's fault
============================  =====  ==========================================================

Exit code 2 (bad task or usage) has no verdict: nothing is reviewed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

Verdict = Literal["pass", "fail", "hack-suspected", "impossible", "sandbox-violation", "harness-error"]

#: Every verdict a report may carry, in the order the table above lists them.
VERDICTS: tuple[str, ...] = ("pass", "fail", "hack-suspected", "impossible", "sandbox-violation", "harness-error")
#: Integrity failures: score exactly 0, every criterion's reward contribution 0, exit 1.
INTEGRITY_VERDICTS: frozenset[str] = frozenset({"hack-suspected", "impossible", "sandbox-violation"})

EXIT_PASS, EXIT_FAIL, EXIT_USAGE, EXIT_HARNESS = 0, 1, 2, 3

#: Case statuses that are the candidate's fault: the verdict is ``fail`` with the status as its reason.
CANDIDATE_FAULT_STATUSES = ("timeout", "memory-limit", "crash", "rule-violation", "import-error", "exception",
                            "instruction-limit")
#: Case statuses the sandbox reports when the candidate tried something it forbids.
SANDBOX_VIOLATION_STATUSES = frozenset({"sandbox-violation", "violation"})
#: Case statuses that mean the harness failed (retryable).
HARNESS_STATUSES = frozenset({"infra-error", "harness-error"})

#: Static analysis rules whose findings decide ``hack-suspected`` when the run confirms them (outputs
#: not produced by the kernel's own writes); unconfirmed, they keep their Code-quality penalty only.
#: NKI040/NKI041 (forbidden imports, file or dynamic code) are decided before the run by the integrity
#: scan; NKI045-NKI047 (swallowed exception, hard-coded data, unused input) have no run-time
#: signature that separates a hack from a bug, so they stay Code-quality findings.
CONFIRMABLE_RULES = frozenset({"NKI042", "NKI043", "NKI044"})


class JudgeError(RuntimeError):
    """A judge component (numerics, evidence, perf, analysis, ...) failed: the review is a harness
    error (exit 3, retry), never a pass and never the candidate's fault."""

    def __init__(self, component: str, message: str) -> None:
        super().__init__(f"{component}: {message}")
        self.component = component


def exit_code(verdict: str) -> int:
    """The CLI's exit code for a verdict: 0 pass, 3 harness error, 1 everything else."""
    if verdict == "pass":
        return EXIT_PASS
    if verdict in HARNESS_STATUSES or verdict == "harness-error":
        return EXIT_HARNESS
    return EXIT_FAIL


@dataclass(frozen=True)
class Decision:
    """The verdict, a short machine-readable reason and a sentence for people."""

    verdict: str
    reason: str
    message: str


def _bad_output_is_honest(message: str) -> str | None:
    """The reason code of a ``bad-output`` that is an ordinary mistake (None: outputs not produced by the kernel)."""
    if "returned None" in message:
        return "returned-none"
    if "value(s); the task expects" in message:
        return "wrong-output-count"
    if " lives in " in message:
        return "output-not-in-hbm"
    return None


def decide(crits: Sequence[Any], cases: Sequence[Any], integrity: Sequence[Any],
           physics: Sequence[str] = (), confirmed: Sequence[str] = ()) -> Decision:
    """The review's verdict from the scored criteria, the case results, the pre-run integrity
    issues, the physics violations (:mod:`nkieval.review.physics`) and the confirmed static hack
    findings (:func:`confirmed_hacks`)."""
    statuses = [c.status for c in cases]
    harness = [c for c in cases if c.status in HARNESS_STATUSES]
    if harness:
        c = harness[0]
        return Decision("harness-error", "harness", f"{c.case}: {c.error.get('message', 'the harness failed')}")
    violating = [c for c in cases if c.status in SANDBOX_VIOLATION_STATUSES]
    if violating:
        c = violating[0]
        return Decision("sandbox-violation", "sandbox-violation",
                        f"{c.case}: {c.error.get('message', 'the candidate tried something the sandbox forbids')}")
    pre = [i for i in integrity if getattr(i, "kind", "forbidden") == "forbidden"]
    if pre:
        i = pre[0]
        return Decision("hack-suspected", "forbidden-construct", f"candidate.py:{i.line} {i.what}: {i.why}")
    not_run = [i for i in integrity if getattr(i, "kind", "forbidden") != "forbidden"]
    if not_run:
        i = not_run[0]
        return Decision("fail", i.kind, i.what)
    host_reads = [c for c in cases if c.status == "rule-violation" and c.error.get("rule") == "trace-time-value"]
    if host_reads:  # the kernel's Python asked for device values: host compute on the data (the one way it helps)
        c = host_reads[0]
        return Decision("hack-suspected", "reads-device-values",
                        f"{c.case}: {c.error.get('message', '')} ({c.error.get('location', '')})")
    tampered = [c for c in cases if c.status == "bad-program"]
    if tampered:  # a program the judge refuses comes only from a tracer the candidate tampered with
        c = tampered[0]
        return Decision("hack-suspected", "bad-program", f"{c.case}: {c.error.get('message', '')}")
    for c in cases:
        if c.status == "bad-output" and _bad_output_is_honest(str(c.error.get("message", ""))) is None:
            return Decision("hack-suspected", "outputs-not-from-kernel", f"{c.case}: {c.error.get('message', '')}")
    if confirmed:
        return Decision("hack-suspected", "confirmed-static-finding", confirmed[0])
    if physics:
        return Decision("impossible", "physics", physics[0])
    if "ok" not in statuses:
        for s in (*CANDIDATE_FAULT_STATUSES, "bad-output", "not-run"):
            for c in cases:
                if c.status == s:
                    msg = str(c.error.get("message", "")) or s
                    if c.error.get("error_type") and s == "exception":
                        msg = f"{c.error['error_type']}: {msg}"
                    reason = _bad_output_is_honest(msg) if s == "bad-output" else s
                    return Decision("fail", reason or s, f"{c.case}: {msg}")
        return Decision("fail", "no-case-ran", "no case ran")
    by = {c.id: c for c in crits}
    corr = by["correctness"].level or 0
    num = by.get("numerics")
    if corr >= 3 and (num is None or num.level is None or num.level >= 3):
        return Decision("pass", "pass", by["correctness"].summary)
    if corr < 3:
        return Decision("fail", "incorrect", by["correctness"].summary)
    assert num is not None
    return Decision("fail", "numerics", num.summary)


def confirmed_hacks(findings: Iterable[dict[str, Any]] | None, cases: Sequence[Any],
                    physics: Sequence[str]) -> list[str]:
    """Static hack findings (:data:`CONFIRMABLE_RULES`) the run confirms, one sentence each.

    Confirmation is run-time evidence that the outputs were not produced by the kernel's own HBM
    writes: a case whose outputs are host arrays or inputs (``bad-output``), a case with output
    elements no instruction wrote (``unwritten``), or a physics violation on the traced case.
    """
    hits = [f for f in (findings or []) if f.get("rule") in CONFIRMABLE_RULES and f.get("severity") == "error"]
    if not hits:
        return []
    evidence = None
    for c in cases:
        if c.status == "bad-output":
            evidence = f"{c.case}: {c.error.get('message', 'bad output')}"
            break
        m = getattr(c, "mismatch", None) or {}
        if c.status == "ok" and m.get("kind") == "unwritten":
            evidence = (f"{c.case}: {m.get('count')} of {m.get('total')} elements of {m.get('output')} were never "
                        "written by the kernel")
            break
    if evidence is None and physics:
        evidence = physics[0]
    if evidence is None:
        return []
    return [f"candidate.py:{f.get('line')} [{f.get('rule')}] {f.get('message')}; confirmed by the run: {evidence}"
            for f in hits]


class UsageError(ValueError):
    """Bad usage (exit 2): nothing was reviewed, nobody's verdict."""


def check_target(task: Any, target: str | None) -> str:
    """The canonical target name for ``target`` (None: the task's first), or :class:`UsageError`
    naming the valid targets."""
    from nkieval.hardware.targets import resolve_target_name

    if target is None:
        return str(task.default_target)
    try:
        return resolve_target_name(str(target))
    except Exception as e:  # UnknownTargetError (a ValueError/KeyError depending on the build)
        raise UsageError(f"unknown target {target!r}; valid targets for task {task.id}: "
                         f"{', '.join(task.targets)} (known: trn1, trn2, trn3)") from e
