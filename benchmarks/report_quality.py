"""How readable the review's reports are, over the built-in flawed candidates (issue 30's acceptance figures).

For every flawed candidate of every built-in task (on the task's default target, one fixed seed) it reviews
the candidate, renders the Markdown, and measures:

* the length of the Markdown's Findings section (characters; target: median <= 1,500);
* repeated text: findings of one report whose observed text is the same, and clauses (the ``;``-separated
  parts of a finding, 40 characters or longer) that appear in more than one finding of one report
  (target: none);
* stated causes without a confidence, and suspected causes not worded as suspected (target: none);
* findings per report and the lean JSON report's size, against the same report in schema 3.1's layout and by part;
* later outputs of multi-output tasks that fail their own oracle, and the causes diagnosed for them.

Usage: ``.venv/bin/python benchmarks/report_quality.py [--tasks PATTERN] [--workers 2] [--seed 7]``; on a loaded
machine, shards in separate processes that append their records (``--shard 0/2 --records a.jsonl``, ...), then
``--summarize a.jsonl b.jsonl`` prints the figures of them all.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any


def findings_section(md: str) -> str:
    m = re.search(r"^## Findings\n(.*?)(?=^## |\Z)", md, flags=re.S | re.M)
    return m.group(0).rstrip() if m else ""


def measure_one(task_dir: str, path: str, seed: int) -> dict[str, Any]:
    from nkieval.review import review
    from nkieval.review.report import to_markdown

    r = review(task_dir, Path(path), seed=seed)
    md = to_markdown(r)
    sec = findings_section(md)
    observed = [f.observed for f in r.findings]
    dup_obs = len(observed) - len(set(observed))
    clauses: dict[str, int] = {}
    for f in r.findings:
        for part in {p.strip() for p in re.split(r"; | → ", f"{f.observed}; {f.suggestion}") if len(p.strip()) >= 40}:
            clauses[part] = clauses.get(part, 0) + 1
    repeated = [c for c, n in clauses.items() if n > 1]
    no_conf = [f.key for f in r.findings if f.cause and not f.confidence]
    unworded = [f.key for f in r.findings if f.confidence == "suspected" and f.cause
                and "suspected" not in " ".join([f.observed, *f.also]).lower()]
    return {"task": Path(task_dir).name, "candidate": Path(path).name, "verdict": r.verdict,
            "findings_chars": len(sec), "findings": len(r.findings), "duplicate_observed": dup_obs,
            "repeated_clauses": repeated, "cause_without_confidence": no_conf,
            "suspected_not_worded": unworded, "stated_causes": sum(bool(f.cause) for f in r.findings),
            "confidence": [f.confidence for f in r.findings if f.cause],
            "json_bytes": len(r.to_json()), "json_bytes_full": len(json.dumps(r.to_dict(lean=False))),
            "json_bytes_31": len(json.dumps(as_31(r))), "json_parts": json_parts(r.to_dict()),
            "later_outputs_failing": later_failing(r), "later_outputs_diagnosed": later_diagnosed(r)}


def as_31(r: Any) -> dict[str, Any]:
    """The lean report in schema 3.1's layout (each case's diagnosis and explanation inline, empty gate fields
    kept, the uncertainty statement whole): what the 3.2 lean report is measured against."""
    from nkieval.review.lean import References, round_floats

    d, full = r.to_dict(), r.to_dict(lean=False)
    for c, cf in zip(d["cases"], full["cases"]):
        n, nf = c.get("numerics"), cf.get("numerics")
        if isinstance(n, dict) and isinstance(nf, dict):
            c["numerics"] = n | round_floats({k: nf[k] for k in ("findings", "explanation", "gates", "worst")
                                              if k in nf})
        for o, of in zip(c.get("outputs") or [], cf.get("outputs") or []):
            if isinstance(o.get("numerics"), dict) and isinstance(of.get("numerics"), dict):
                o["numerics"] = round_floats(of["numerics"])
    refs = References(lambda v: v)
    unc = (full["performance"].get("candidate") or {}).get("uncertainty")
    if unc:
        d["performance"]["candidate"]["uncertainty"] = refs.put("uncertainty", "model", unc)
    d["references"] = {h: v for h, v in d["references"].items()
                       if v["kind"] not in ("diagnosis", "uncertainty")} | refs.table
    return d


def json_parts(d: dict[str, Any]) -> dict[str, int]:
    """Bytes of each top-level part of the lean report, and of the references by kind."""
    out = {k: len(json.dumps(v)) for k, v in d.items() if k != "references"}
    for v in d.get("references", {}).values():
        out[f"references:{v['kind']}"] = out.get(f"references:{v['kind']}", 0) + len(json.dumps(v))
    return out


def later_failing(r: Any) -> int:
    """Cases x later outputs that fail their own numerics oracle."""
    return sum(1 for c in r.cases for o in c.outputs[1:] if (o.get("numerics") or {}).get("status") == "fail")


def later_diagnosed(r: Any) -> list[str]:
    """The top cause id of each diagnosed later output (output:id)."""
    return [f"{o['name']}:{o['numerics']['findings'][0].get('id')}" for c in r.cases for o in c.outputs[1:]
            if (o.get("numerics") or {}).get("findings")]


def _run(args: tuple[str, str, int]) -> dict[str, Any]:
    return measure_one(*args)


def measure(a: argparse.Namespace) -> list[dict[str, Any]]:
    import multiprocessing as mp

    from nkieval.review.suite import plan

    entries = plan(None, a.tasks, roles=("flawed",))
    if a.shard:
        k, n = (int(x) for x in a.shard.split("/"))
        entries = entries[k::n]
    jobs = [(e.task_dir, e.path, a.seed) for e in entries]
    recs = []
    with ProcessPoolExecutor(max_workers=a.workers, mp_context=mp.get_context("spawn")) as pool:
        for rec in pool.map(_run, jobs):
            recs.append(rec)
            if a.records:
                with open(a.records, "a") as f:
                    f.write(json.dumps(rec) + "\n")
            print(f"  {len(recs)}/{len(jobs)} {rec['task']}/{rec['candidate']}: findings {rec['findings_chars']} "
                  f"chars, JSON {rec['json_bytes']} bytes (3.1 layout {rec['json_bytes_31']})", flush=True)
    return recs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", default=None, help="comma-separated fnmatch patterns over task ids")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", dest="json_out", default=None, help="write the per-candidate records here")
    ap.add_argument("--records", default=None,
                    help="append each candidate's record to this JSON-lines file as it is measured")
    ap.add_argument("--shard", default=None, help="K/N: measure every N-th candidate from the K-th (0-based) only")
    ap.add_argument("--summarize", nargs="+", default=None, metavar="FILE",
                    help="measure nothing: print the figures of the records in these JSON-lines files")
    a = ap.parse_args()
    t0 = time.perf_counter()
    if a.summarize:
        recs = [json.loads(ln) for f in a.summarize for ln in Path(f).read_text().splitlines() if ln.strip()]
    else:
        recs = measure(a)
    chars = sorted(r["findings_chars"] for r in recs)
    q = lambda f: chars[min(len(chars) - 1, int(f * (len(chars) - 1) + 0.5))]  # noqa: E731
    causes = sum(r["stated_causes"] for r in recs)
    conf: dict[str, int] = {}
    for r in recs:
        for c in r["confidence"]:
            conf[str(c)] = conf.get(str(c), 0) + 1
    print(f"flawed candidates reviewed: {len(recs)} (seed {a.seed}, {time.perf_counter() - t0:.0f} s)"
          + (f" from {', '.join(a.summarize)}" if a.summarize else ""))
    print(f"Findings section, characters: median {statistics.median(chars):.0f}, p90 {q(0.9)}, max {chars[-1]} "
          f"(target: median <= 1500)")
    print(f"findings per report: median {statistics.median(r['findings'] for r in recs):.0f}, "
          f"max {max(r['findings'] for r in recs)}")
    print(f"reports with a finding's observed text repeated: {sum(r['duplicate_observed'] > 0 for r in recs)}")
    print(f"reports with a clause (>= 40 chars) in more than one finding: {sum(bool(r['repeated_clauses']) for r in recs)}")
    print(f"stated causes: {causes}; without a confidence: {sum(len(r['cause_without_confidence']) for r in recs)}; "
          f"suspected but not worded so: {sum(len(r['suspected_not_worded']) for r in recs)}; by confidence: "
          f"{dict(sorted(conf.items()))}")
    sizes = sorted(r["json_bytes"] for r in recs)
    s31 = sorted(r["json_bytes_31"] for r in recs)
    full = sorted(r["json_bytes_full"] for r in recs)
    print(f"JSON report bytes: median {statistics.median(sizes):.0f} lean (3.2), {statistics.median(s31):.0f} in "
          f"3.1's layout ({100 * (1 - statistics.median(sizes) / statistics.median(s31)):.1f}% smaller), "
          f"{statistics.median(full):.0f} with everything inline")
    parts: dict[str, list[int]] = {}
    for r in recs:
        for k, v in r["json_parts"].items():
            parts.setdefault(k, []).append(v)
    top = sorted(((statistics.median(v + [0] * (len(recs) - len(v))), k) for k, v in parts.items()), reverse=True)
    print("  median bytes by part: " + ", ".join(f"{k} {m:.0f}" for m, k in top[:8]))
    fails = sum(r["later_outputs_failing"] for r in recs)
    diag = [x for r in recs for x in r["later_outputs_diagnosed"]]
    print(f"later outputs failing their own oracle (case x output): {fails}; diagnosed: {len(diag)} "
          f"({dict(sorted({x: diag.count(x) for x in set(diag)}.items()))})")
    bad = [r for r in recs if r["repeated_clauses"] or r["duplicate_observed"]]
    for r in bad[:10]:
        print(f"  repeated in {r['task']}/{r['candidate']}: {r['repeated_clauses'][:2]}")
    if a.json_out:
        Path(a.json_out).write_text(json.dumps(recs, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
