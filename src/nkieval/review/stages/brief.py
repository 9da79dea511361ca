"""The brief review (``review(..., brief=True)``): the differential check against the CUDA source, or its cause
search, is left out when no outcome of it can change the review's verdict, score or levels.

Why this is exact, not a heuristic: the differential check reaches the review's outcome through one number
only, what it charges the migration criterion (``scoring._differential_feedback``): two levels when a cause
is identified, one or none for a disagreement without an identified cause, none otherwise. The verdict does
not read the migration criterion (``verdict.decide``), and every later step (the level's clamp to 0..4, the
rubric's gates, the integrity verdict's zeroing, the weighted score) is monotone in that level. So the
outcome with any charge lies between the outcome charging nothing and the outcome charging two levels; when
those two agree, every outcome does. Both are scored here with stand-in differential records (the stand-ins
never reach a report):

* before the differential runs: no charge (no record) against a stand-in record with an identified cause;
  when they agree (an integrity verdict, a port that does not run, a migration level the gates cap anyway)
  the whole check is left out;
* after it ran without its cause search (:func:`~nkieval.review.stages.differential.differential_before_causes`):
  its record as it is (no cause) against the same record with a stand-in cause; when they agree the search
  (up to seconds of CUDA re-runs per review) is left out.

What the brief review leaves out of the report is said in it: the migration criterion's feedback states that
the check, or the cause search, was not run. Where the check runs, it runs without the envelope (the expected
GPU-vs-Trainium difference: its near-exact CUDA runs and magnitude bands) and without saying what an agreeing
output's difference from the GPU comes from (the envelope's ablations): report text that no outcome reads (an
info line of the migration criterion), and the ablations' port-side replays are each candidate's own CPU.
``tests/reward/test_brief.py`` checks on flawed and hostile candidates that verdict, score and levels equal the
full review's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nkieval.review.sandbox import CaseRun
from nkieval.review.stages.differential import differential_before_causes
from nkieval.review.stages.load import Loaded
from nkieval.review.stages.score import Scored
from nkieval.review.stages.timing import Timings, timed

#: the migration feedback's reason when the brief review leaves the whole differential check out
LEFT_OUT = "left out of this brief review: no outcome of it can change the verdict, score or levels"
#: what replaces "cause not identified" when the brief review leaves the cause search out
NOT_SEARCHED = "cause not searched (brief review: no cause found could change the verdict, score or levels)"

Differential = tuple[dict[str, Any] | None, str | None]

#: a stand-in identified cause: what a found cause charges (two levels), never shown
_STAND_IN_CAUSE = {"kind": "stand-in", "outputs": [], "cuda_line": None, "cuda_text": "", "port_line": None,
                   "port_text": "", "case": "", "summary": "", "mutation": "", "reproduced": []}
_EMPTY_RECORD: dict[str, Any] = {"outputs": [], "disagree": [], "unexplained": [], "causes": [], "cases": [],
                                 "gpu_build": None, "cuda_races": [], "envelope_exact_cases": 0,
                                 "envelope_cases": 0}


def outcome(s: Scored) -> tuple[Any, ...]:
    """What a reward reads from a scored review: verdict, its reason, score and every criterion's level."""
    return (s.decision.verdict, s.decision.reason, s.score, tuple((c.id, c.level) for c in s.criteria))


def _with_stand_in_cause(record: dict[str, Any] | None) -> dict[str, Any]:
    base = dict(record) if record is not None else dict(_EMPTY_RECORD)
    base["causes"] = [*base.get("causes", []), dict(_STAND_IN_CAUSE)]
    return base


def brief_score(loaded: Loaded, runs: list[CaseRun], judged: list[Any],
                score_with: Callable[[Differential], Scored], timings: Timings) -> tuple[Scored, str]:
    """The scored review of the brief mode, and what it left out: ``"nothing"``, ``"differential"`` or
    ``"cause-search"``. ``score_with(differential)`` scores the review with a differential record."""

    def scored(d: Differential) -> Scored:
        with timed(timings, "scoring_s"):
            return score_with(d)

    if loaded.task.cuda_file is None:
        return scored((None, None)), "nothing"
    without = scored((None, LEFT_OUT))
    if outcome(without) == outcome(scored((_with_stand_in_cause(None), None))):
        return without, "differential"
    with timed(timings, "differential_s"):
        record, why, search = differential_before_causes(loaded, runs, judged, explain=False)
    if search is None or record is None:
        return scored((record, why)), "nothing"
    pending = scored((record, why))
    if outcome(pending) == outcome(scored((_with_stand_in_cause(record), why))):
        _say_not_searched(pending)
        return pending, "cause-search"
    with timed(timings, "differential_s"):
        record = search()
    return scored((record, why)), "nothing"


def _say_not_searched(s: Scored) -> None:
    """The migration feedback of a disagreement whose cause was not searched says so (scoring words it as
    searched and not found)."""
    for c in s.criteria:
        if c.id != "migration":
            continue
        for f in c.feedback:
            f.observed = f.observed.replace("cause not identified", NOT_SEARCHED)
