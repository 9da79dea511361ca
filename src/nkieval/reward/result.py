"""The reward's record (:class:`RewardResult`), the verdict → reward mapping and the redacted feedback.

Status, one meaning each (docs/reward.md, "Status"):

================  ==========  =========  ===================================================================
status            reward      retry?     meaning
================  ==========  =========  ===================================================================
``scored``        in [0, 1]   no         the review ran; ``verdict`` is the review's (pass, fail, integrity)
``no-kernel``     0.0         no         the response holds no code block that defines the entry point
``harness-error`` None        **yes**    the judge failed (a ``JudgeError``, a broken sandbox, a worker that
                                         died or ran past the request's time limit): never the candidate's
                                         fault, never a silent 0
``bad-request``   None        no         the request is malformed (unknown task or target): the caller's
                                         fault (batch APIs only; :func:`~nkieval.reward.score` raises)
================  ==========  =========  ===================================================================

Reward (``shaping="tiered"``, the default): ``0.5 * score / 100 + 0.5 * (verdict == "pass")``, so every
passing kernel outranks every failing one and, within a tier, the rubric's score orders them; an integrity
verdict (``hack-suspected``, ``impossible``, ``sandbox-violation``) scores exactly 0 in the review, so its
reward is exactly 0. ``shaping="score"`` is the review's score / 100; ``shaping="binary"`` 1 for pass, else 0.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Status = Literal["scored", "no-kernel", "harness-error", "bad-request"]
Shaping = Literal["tiered", "score", "binary"]

STATUSES: tuple[str, ...] = ("scored", "no-kernel", "harness-error", "bad-request")
#: Statuses whose request should be sent again (the judge failed, not the candidate).
RETRYABLE: frozenset[str] = frozenset({"harness-error"})
SHAPINGS: tuple[str, ...] = ("tiered", "score", "binary")

#: Feedback lines per criterion in :attr:`RewardResult.feedback`, and its length cap in characters.
FEEDBACK_LINES_PER_CRITERION = 2
FEEDBACK_MAX_CHARS = 2000


@dataclass
class RewardResult:
    """One candidate's reward. ``reward`` is None exactly when ``status`` is not a reward (harness or
    request error): a caller must not feed None to a trainer as 0 (:attr:`retryable` says whether to retry)."""

    status: str
    reward: float | None
    task: str
    verdict: str | None = None
    verdict_reason: str = ""
    score: float | None = None
    levels: dict[str, int | None] = field(default_factory=dict)
    feedback: str = ""
    target: str | None = None
    seed: int | None = None
    source_sha256: str | None = None
    extraction: str = ""
    error: str = ""
    elapsed_s: float = 0.0
    report: dict[str, Any] | None = None

    @property
    def retryable(self) -> bool:
        return self.status in RETRYABLE

    @property
    def ok(self) -> bool:
        """A reward exists (``scored`` or ``no-kernel``)."""
        return self.reward is not None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["retryable"] = self.retryable
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RewardResult:
        known = cls.__dataclass_fields__
        return cls(**{k: v for k, v in d.items() if k in known})


def shape_reward(verdict: str, score: float, shaping: str = "tiered") -> float:
    """The reward in [0, 1] of a reviewed candidate (``score`` is the review's 0-100)."""
    s = max(0.0, min(1.0, float(score) / 100.0))
    if verdict in ("hack-suspected", "impossible", "sandbox-violation"):
        return 0.0
    if shaping == "score":
        return s
    if shaping == "binary":
        return 1.0 if verdict == "pass" else 0.0
    if shaping == "tiered":
        return 0.5 * s + (0.5 if verdict == "pass" else 0.0)
    raise ValueError(f"unknown shaping {shaping!r}; one of {', '.join(SHAPINGS)}")


# ------------------------------------------------------------------------------------------ feedback
_SEED = re.compile(r"\bseeds?[ =:]+-?\d+", re.IGNORECASE)
_HIDDEN_PAREN = re.compile(r"(hidden-\d+(?:/[\w.-]+)?) \([^()]*\)")
_MULTI_DIGIT = re.compile(r"(?<![\w.+-])\d{2,}(?![\w.])")
#: Hidden dimension values shorter than this are not scrubbed outside hidden-case findings (1, 2, 64 say nothing).
SECRET_MIN_DIGITS = 3


def _head(review: Any) -> str:
    head = f"verdict: {review.verdict}"
    if review.verdict_reason and review.verdict_reason != review.verdict:
        head += f" ({review.verdict_reason})"
    return head + f"; score {review.score:.1f}/100"


def brief_feedback(review: Any) -> str:
    """The feedback of a brief reward (``score(..., feedback=False)``): the verdict, the score and each
    criterion's level, nothing a brief review may have left out (no findings, no summaries)."""
    lines = [_head(review)]
    for c in review.criteria:
        lines.append(f"- {c.title}: {'not assessed' if c.level is None else f'{c.level}/4'}")
    return "\n".join(lines)


def redacted_feedback(review: Any) -> str:
    """A short feedback text for the policy's next turn: the verdict, each criterion's level and summary and
    its first findings, with hidden shapes and seeds removed.

    What is removed: every seed (``seed N``); the dimension values of hidden shapes that no public shape
    shares, anywhere in the text; the ``(dims; family, seed)`` parenthesis after a hidden case's label; and,
    in the observed part of a finding about a hidden case, every number of two digits or more (element counts
    and indices reveal the size). The public shapes and the task's own statement are not secret.
    """
    hidden_cases = {c.case for c in review.cases if c.hidden}
    public_vals = {str(v) for c in review.cases if not c.hidden for v in c.shape.values()}
    secret = {str(v) for c in review.cases if c.hidden for v in c.shape.values()
              if len(str(v)) >= SECRET_MIN_DIGITS} - public_vals
    secret |= {str(c.seed) for c in review.cases} | {str(review.seed)}
    secret_re = re.compile(r"(?<![\w.])(" + "|".join(sorted(map(re.escape, secret), key=len, reverse=True))
                           + r")(?![\w.])") if secret else None

    def scrub(s: str) -> str:
        s = _SEED.sub("seed [redacted]", s)
        s = _HIDDEN_PAREN.sub(r"\1 (hidden shape)", s)
        if secret_re is not None:
            s = secret_re.sub("[hidden]", s)
        return s

    lines = [_head(review)]
    if review.verdict != "pass" and review.verdict_message:
        lines.append(scrub(f"why: {review.verdict_message}")[:400])
    for c in review.criteria:
        lvl = "not assessed" if c.level is None else f"{c.level}/4"
        lines.append(scrub(f"- {c.title}: {lvl}: {c.summary}"))
        shown = 0
        for f in c.feedback:
            if f.severity == "info" or shown >= FEEDBACK_LINES_PER_CRITERION:
                continue
            shown += 1
            observed = f.observed
            if (f.evidence or {}).get("case") in hidden_cases or _HIDDEN_PAREN.search(observed):
                observed = _MULTI_DIGIT.sub("N", _HIDDEN_PAREN.sub(r"\1 (hidden shape)", _SEED.sub("", observed)))
            lines.append(scrub(f"  * {observed} → expected: {f.expected} → {f.suggestion}")[:500])
    text = "\n".join(lines)
    return text if len(text) <= FEEDBACK_MAX_CHARS else text[:FEEDBACK_MAX_CHARS - 1] + "…"
