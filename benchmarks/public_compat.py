"""Public NKI code on nkieval, unmodified: each public suite run with its own test command.

Given local checkouts of the public repositories (it never downloads anything), runs

* ``--sdk PATH`` (a checkout of aws-neuron/aws-neuron-sdk):
  ``sdk-tests``    — its Beta-1 per-API tests, ``pytest nki/test`` with ``--nki-sim``;
  ``sdk-examples`` — the scripts and kernel modules under ``nki/examples`` and ``nki/deep-dives/src``
  (``nkieval compat``: scripts run, other modules import);
* ``--samples PATH`` (aws-neuron/nki-samples at any commit): ``samples-current`` — its current-API
  (``import nki``) files through ``nkieval compat``;
* ``--samples-ci PATH`` (nki-samples at a commit whose CI runs ``pytest test/unit --simulation-only``,
  e.g. ``fc5c69f``): ``samples-ci`` — that command, with ``src`` on ``PYTHONPATH`` and ``--nki-sim``;
* ``--library PATH`` with ``--library-env DIR`` (aws-neuron/nki-library and a directory of stand-ins for
  what its harness imports but neither the repository nor a package index has: see docs/compat-public.md):
  ``library`` — ``pytest test/integration --test-mode simulation -m fast`` on the node ids listed in
  ``--library-cases FILE`` (one per line; all fast cases take hours in simulation);
* ``--course DIR`` (a directory of checkouts of students' repositories of Stanford CS149's Trainium assignment):
  ``course`` — each checkout's own grading harness in simulation (``benchmarks/public_course.py``);
* ``--nkibench PATH`` (zhang677/AccelOpt or its ``NKIBench`` directory): ``nkibench`` — each compiler-generated
  Beta-1 kernel in simulation, checked against its NumPy reference with the benchmark's own gate
  (``benchmarks/public_nkibench.py``, which also prints each case's peak memory);
* ``--nxdi PATH`` (aws-neuron/neuronx-distributed-inference) and/or ``--moe PATH`` (aws-neuron/nki-moe), whose
  kernels are tested on Trainium only: ``nxdi`` — each kernel called as its model calls it and compared with a
  NumPy reference (``benchmarks/public_nxdi.py``; ``--library`` alone lends it the NKI Library's ``nkilib``);

and prints, per suite, how many cases pass, and for each case that does not, who is to blame:

* ``nkieval``   — nkieval refused legal code, crashed, or computed a value the test rejects (the test
  passes on the reference simulator); the default for every failure not explained below;
* ``kept``      — nkieval keeps a documented rule on purpose (``KEPT`` below names it);
* ``out of scope`` — the case needs what no CPU simulator gives (the Neuron compiler, XLA, JAX,
  hardware), a package or file that is not installed, or trips over the repository's own bug
  (``OUT_OF_SCOPE`` below, or a missing non-NKI import / fixture / file).

Pass rate = passed / (cases that ran − out of scope). Skipped cases are not counted.

Run: ``.venv/bin/python benchmarks/public_compat.py --sdk SDK --samples SAMPLES --samples-ci SAMPLES_CI
[--library LIB --library-env ENV --library-cases CASES] [--nxdi NXDI --moe MOE] [--course DIR] [--nkibench ACCELOPT]
[--timeout 1800] [--json out.json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

#: (suite, regular expression on the case id) -> why nkieval keeps its behaviour
KEPT: dict[tuple[str, str], str] = {
    ("sdk-tests", r"test_indirect_(load|store)_oob_err_negative"):
        "the test asserts type(exc) == IndexError; nkieval raises NkiIndexError (a subclass of IndexError and "
        "NkiValidationError carrying the out-of-bounds rule, with NumPy's message), so only the exact-type check fails",
}

#: (suite, regular expression on the case id) -> why the case is out of scope
OUT_OF_SCOPE: dict[tuple[str, str], str] = {
    ("sdk-tests", r"test_nki_nl_broadcast\.py::test_nl_broadcast"):
        "repository bug: a helper named test_* takes parameters pytest cannot supply",
    ("samples-ci", r"test_neuron_profile"): "asserts on profiler output that only hardware writes",
    ("samples-ci", r"test_double_row_matmul\.py"):
        "the test module reads the EC2 instance type from /sys/devices/virtual/dmi/id/product_name, and its "
        "fallback when the file is absent is the repository's bug (warnings is not imported: NameError)",
    ("library", r"test_gen_mask_tkg\.py::TestGenMaskTkg::"):
        "repository bug: the test's output descriptor reads kernel_input['mask_out_hbm'], but its input generator "
        "names that key 'mask_out_hbm.must_alias_input' and the harness passes the generator's dict unchanged "
        "(KeyError before any kernel runs)",
    ("library", r"utils/test_tensor_view\.py"):
        "needs the Neuron compiler: the harness's kernel tracer imports nki.compiler.frontend",
}


#: (suite, regular expression on the failure's text) -> why: the same, for failures told apart by what they say
KEPT_ERRORS: dict[tuple[str, str], str] = {
    ("library", r"memset: value \S+ is a float but dst dtype is u?int"):
        "NKI 0.3+ memset takes a value of dst's type (NKI's migration guide, 0.2 to 0.3: \"NKI 0.3.0 enforces that "
        "the value argument must match the destination tensor's dtype\"); the library's cross_partition_copy "
        "memsets integer tiles with 0.0",
}
OUT_OF_SCOPE_ERRORS: dict[tuple[str, str], str] = {
    ("library", r"PerRankLazyInputGenerator|collectives\.\w+ is not simulated"):
        "multi-rank collectives: the harness hands the simulator per-rank inputs of several devices; nkieval "
        "simulates one logical core",
    ("library", r"Unable to allocate [\d.]+ GiB for an array"):
        "the test's own inputs or NumPy reference do not fit the run's memory limit",
}


@dataclass
class Case:
    id: str
    outcome: str  # passed | failed | skipped
    blame: str | None = None  # nkieval | kept | out of scope
    why: str | None = None


@dataclass
class Suite:
    name: str
    command: str
    cases: list[Case] = field(default_factory=list)
    seconds: float = 0.0
    note: str | None = None

    def count(self, outcome: str, blame: str | None = None) -> int:
        return sum(1 for c in self.cases if c.outcome == outcome and (blame is None or c.blame == blame))

    @property
    def in_scope(self) -> int:
        return sum(1 for c in self.cases if c.outcome != "skipped" and c.blame != "out of scope")


# -- blame ----------------------------------------------------------------------------------------------
def blame_of(suite: str, case_id: str, kind: str | None, error: str | None) -> tuple[str, str | None]:
    """(blame, why) of a case that did not pass; ``kind`` is nkieval.frontends.compat's classification."""
    for (s, pat), why in KEPT.items():
        if s == suite and re.search(pat, case_id):
            return "kept", why
    for (s, pat), why in OUT_OF_SCOPE.items():
        if s == suite and re.search(pat, case_id):
            return "out of scope", why
    for table, blame in ((KEPT_ERRORS, "kept"), (OUT_OF_SCOPE_ERRORS, "out of scope")):
        for (s, pat), why in table.items():
            if s == suite and error and re.search(pat, error):
                return blame, why
    if kind in ("environment", "timeout"):
        return "out of scope", f"{kind}: {error}"
    if error and error.startswith("SyntaxError: file does not parse"):
        return "out of scope", "repository bug: the file does not parse"
    return "nkieval", f"{kind}: {error}" if kind else error


# -- pytest suites: a child process runs pytest with a recorder --------------------------------------------
def _pytest_child(out: str, args: list[str]) -> int:
    """Run pytest in this process (the nki shim installed), writing one JSON record per test to ``out``."""
    import pytest

    from nkieval import frontends
    from nkieval.frontends.compat import classify, one_line

    frontends.install(force=True)
    rows: dict[str, dict[str, Any]] = {}

    def save() -> None:  # after every test: a child that dies (memory, a hard crash) still reports what ran
        tmp = out + ".part"
        with open(tmp, "w") as f:
            json.dump(rows, f)
        os.replace(tmp, out)

    class Recorder:
        def pytest_runtest_makereport(self, item: Any, call: Any) -> None:
            if call.excinfo is not None and call.when in ("setup", "call") and \
                    not call.excinfo.errisinstance(pytest.skip.Exception):
                row = rows.setdefault(item.nodeid, {})
                row.setdefault("kind", classify(call.excinfo.value))
                row.setdefault("error", one_line(call.excinfo.value))

        def pytest_runtest_logreport(self, report: Any) -> None:
            row = rows.setdefault(report.nodeid, {})
            if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
                row["outcome"] = "failed" if report.outcome == "failed" else report.outcome
            if report.failed and "kind" not in row:
                row["kind"], row["error"] = "environment", str(report.longrepr).strip().splitlines()[-1][:300]
            if report.when == "teardown":
                save()

        def pytest_collectreport(self, report: Any) -> None:
            if report.failed:
                text = str(report.longrepr).strip().splitlines()[-1][:300]
                nki_missing = re.search(r"No module named '(nki|neuronxcc)[.']", text)
                rows[report.nodeid or "collection"] = {"outcome": "failed", "error": text,
                                                       "kind": "nkieval" if nki_missing else "environment"}

    code = pytest.main([*args, "-q", "-p", "no:cacheprovider"], plugins=[Recorder()])
    save()
    return int(code)


def run_pytest_per_file(name: str, cwd: Path, test_dir: str, args: list[str], timeout: float,
                        env: dict[str, str] | None = None) -> Suite:
    """``pytest test_dir ARGS``, one pytest process per test file: a file whose cases exhaust the machine's
    memory (the process is killed) then costs only its own cases, which are reported as not run."""
    suite = Suite(name, f"(cd CHECKOUT && pytest {' '.join(args[:1])} {test_dir} {' '.join(args[1:])}), "
                        "one process per test file")
    t0 = time.perf_counter()
    notes = []
    for f in sorted((cwd / test_dir).glob("test_*.py")):
        part = run_pytest(name, cwd, [args[0], f"{test_dir}/{f.name}", *args[1:]], timeout, env)
        suite.cases += part.cases
        if part.note:
            notes.append(f"{f.name}: {part.note}")
    suite.note = "; ".join(notes) or None
    suite.seconds = time.perf_counter() - t0
    return suite


def run_pytest(name: str, cwd: Path, args: list[str], timeout: float, env: dict[str, str] | None = None,
               where: str = ".") -> Suite:
    suite = Suite(name, f"(cd CHECKOUT/{where} && pytest {' '.join(args)})")
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="nkieval-public-") as tmp:
        out = os.path.join(tmp, "rows.json")
        cmd = [sys.executable, str(Path(__file__).resolve()), "--pytest-child", out, "--", *args]
        full_env = {**os.environ, **(env or {}), "MPLBACKEND": "Agg"}
        try:
            proc = subprocess.run(cmd, cwd=str(cwd), env=full_env, timeout=timeout, capture_output=True, text=True)
            if proc.returncode not in (0, 1, 5):
                suite.note = f"pytest exited {proc.returncode}" + (" (killed: out of memory?)" if proc.returncode == -9
                                                                    else "")
        except subprocess.TimeoutExpired:
            suite.note = f"stopped after {timeout:.0f} s; cases that had not finished are not counted"
        rows = json.load(open(out)) if os.path.exists(out) else {}
    for node, row in sorted(rows.items()):
        outcome = row.get("outcome", "failed")
        case = Case(node, outcome)
        if outcome == "failed":
            case.blame, case.why = blame_of(name, node, row.get("kind"), row.get("error"))
        suite.cases.append(case)
    suite.seconds = time.perf_counter() - t0
    return suite


# -- script / module suites: nkieval compat --------------------------------------------------------------
def run_compat_suite(name: str, root: Path, dirs: list[Path], timeout: float, generation: str | None = None) -> Suite:
    from nkieval.frontends.compat import discover, run_compat

    rel = " ".join(str(d.relative_to(root)) for d in dirs)
    suite = Suite(name, f"nkieval compat {rel} (from the checkout)" + (f", {generation}-API files" if generation else ""))
    t0 = time.perf_counter()
    for d in dirs:
        found = [f for f in discover(d) if generation is None or f[1] == generation]
        for r in run_compat(d, timeout=timeout, jobs=1, files=found):
            case_id = f"{d.relative_to(root)}/{r.path}"
            if r.kind == "pytest":
                for outcome, n in r.tests.items():
                    for i in range(n):
                        c = Case(f"{case_id}#{outcome}{i}", "failed" if outcome in ("failed", "collect_error") else
                                 outcome)
                        if c.outcome == "failed":
                            c.blame, c.why = blame_of(name, case_id, r.blame, r.error)
                        suite.cases.append(c)
                continue
            if r.status in ("passed", "imported"):
                suite.cases.append(Case(case_id + ("" if r.status == "passed" else " (imported)"), "passed"))
            else:
                c = Case(case_id, "failed")
                c.blame, c.why = blame_of(name, case_id, r.blame, r.error)
                suite.cases.append(c)
    suite.seconds = time.perf_counter() - t0
    return suite


# -- kernels with no simulator test of their own: benchmarks/public_nxdi.py's cases --------------------------
def run_nxdi_suite(nxdi: Path | None, moe: Path | None, library: Path | None, timeout: float) -> Suite:
    sys.path.insert(0, str(Path(__file__).parent))
    import public_nxdi

    t0 = time.perf_counter()
    suite = Suite("nxdi", "benchmarks/public_nxdi.py (each kernel called as its model calls it, against NumPy)")
    for r in public_nxdi.run_cases(list(public_nxdi.CASES), nxdi, moe, library, timeout):
        blame = None if r["outcome"] != "failed" else r.get("blame", "nkieval")
        suite.cases.append(Case(r["case"], r["outcome"], blame, r.get("why")))
    suite.seconds = time.perf_counter() - t0
    return suite


# -- students' kernels graded by their course's harness: benchmarks/public_course.py -----------------------
def run_course_suite(root: Path, timeout: float) -> Suite:
    sys.path.insert(0, str(Path(__file__).parent))
    import public_course

    t0 = time.perf_counter()
    suite = Suite("course", "(cd CHECKOUT/part2 && nkieval run test_harness.py --simulate --test_maxpool), every "
                            "checkout of the course's assignment under the directory")
    for repo in public_course.checkouts(root):
        out, _status = public_course.run_checkout(repo, timeout)
        parsed = public_course.parse(out)
        for what, outcome, error in parsed:
            case = Case(f"{repo.name}::{what}", outcome)
            if outcome == "failed":
                case.blame, case.why = public_course.blame(case.id, error)
            suite.cases.append(case)
        if not parsed:  # (the harness stopped before its first correctness case, or runs none)
            c = Case(f"{repo.name}::(no correctness case)", "failed")
            c.blame, c.why = public_course.blame(c.id, out.strip().splitlines()[-1] if out.strip() else "no output")
            suite.cases.append(c)
    suite.seconds = time.perf_counter() - t0
    return suite


# -- compiler-generated kernels with NumPy references: benchmarks/public_nkibench.py -------------------------
def run_nkibench_suite(checkout: Path, timeout: float) -> Suite:
    sys.path.insert(0, str(Path(__file__).parent))
    import public_nkibench

    t0 = time.perf_counter()
    suite = Suite("nkibench", "nkieval run public_nkibench.py --child OP REFERENCE KERNEL 1 (nki.simulate_kernel on "
                              "the reference's inputs, relative L2 error under the benchmark's gate), every case of "
                              "NKIBench/summary.json")
    for op, task, kernel in public_nkibench.cases(public_nkibench.bench_dir(checkout)):
        r = public_nkibench.run_case(op, task, kernel, 1, timeout)
        case = Case(op, r.outcome)
        if r.outcome == "failed":
            case.blame, case.why = public_nkibench.blame(op, r.error)
        suite.cases.append(case)
    suite.seconds = time.perf_counter() - t0
    return suite


# -- report --------------------------------------------------------------------------------------------
def table(suites: list[Suite]) -> str:
    lines = ["| suite | passed | in scope | pass rate | nkieval's fault | kept (documented rule) | out of scope | "
             "skipped | seconds |", "|---|---|---|---|---|---|---|---|---|"]
    for s in suites:
        rate = f"{100 * s.count('passed') / s.in_scope:.1f} %" if s.in_scope else "-"
        lines.append(f"| {s.name} | {s.count('passed')} | {s.in_scope} | {rate} | {s.count('failed', 'nkieval')} | "
                     f"{s.count('failed', 'kept')} | {s.count('failed', 'out of scope')} | {s.count('skipped')} | "
                     f"{s.seconds:.0f} |")
    out = ["\n".join(lines), ""]
    for s in suites:
        out.append(f"{s.name}: {s.command}" + (f" [{s.note}]" if s.note else ""))
        for c in s.cases:
            if c.outcome == "failed":
                out.append(f"  [{c.blame}] {c.id}: {c.why}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--pytest-child"]:
        return _pytest_child(argv[1], argv[3:])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sdk", type=Path, help="checkout of aws-neuron/aws-neuron-sdk")
    ap.add_argument("--samples", type=Path, help="checkout of aws-neuron/nki-samples (its current-API files)")
    ap.add_argument("--samples-ci", type=Path, help="checkout of nki-samples whose CI runs test/unit --simulation-only")
    ap.add_argument("--library", type=Path, help="checkout of aws-neuron/nki-library")
    ap.add_argument("--library-env", type=Path, help="directory of stand-ins the library harness imports")
    ap.add_argument("--library-cases", type=Path, help="file of library test node ids to run, one per line")
    ap.add_argument("--nxdi", type=Path, help="checkout of aws-neuron/neuronx-distributed-inference (its NKI kernels)")
    ap.add_argument("--moe", type=Path, help="checkout of aws-neuron/nki-moe (its NKI kernels)")
    ap.add_argument("--course", type=Path, help="directory of checkouts of a course's NKI assignment "
                                                  "(benchmarks/public_course.py)")
    ap.add_argument("--nkibench", type=Path, help="checkout of zhang677/AccelOpt (its NKIBench kernels; "
                                                    "benchmarks/public_nkibench.py)")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per suite (per file for compat suites)")
    ap.add_argument("--json", type=Path, help="write every case with its blame here")
    args = ap.parse_args(argv)
    suites: list[Suite] = []
    if args.sdk:
        suites.append(run_pytest("sdk-tests", args.sdk / "nki" / "test", ["--nki-sim", "."], args.timeout,
                                 where="nki/test"))
        dirs = [d for d in (args.sdk / "nki" / "examples", args.sdk / "nki" / "deep-dives" / "src") if d.is_dir()]
        suites.append(run_compat_suite("sdk-examples", args.sdk, dirs, min(args.timeout, 600.0)))
    if args.samples:
        suites.append(run_compat_suite("samples-current", args.samples, [args.samples], min(args.timeout, 600.0),
                                       generation="current"))
    if args.samples_ci:
        env = {"PYTHONPATH": os.pathsep.join([str(args.samples_ci / "src"), os.environ.get("PYTHONPATH", "")])}
        suites.append(run_pytest_per_file("samples-ci", args.samples_ci, "test/unit", ["--nki-sim", "--simulation-only"],
                                          args.timeout, env))
    if args.library and (args.library_env or args.library_cases or not (args.nxdi or args.moe)):
        if not (args.library_env and args.library_cases):
            ap.error("--library needs --library-env and --library-cases (or --nxdi / --moe, for its nkilib alone)")
        cases = [ln.strip() for ln in args.library_cases.read_text().splitlines() if ln.strip()]
        env = {"PYTHONPATH": os.pathsep.join([str(args.library_env), str(args.library / "src"),
                                              os.environ.get("PYTHONPATH", "")])}
        suites.append(run_pytest("library", args.library, ["--nki-sim", *cases, "--test-mode", "simulation"],
                                 args.timeout, env))
    if args.nxdi or args.moe:
        suites.append(run_nxdi_suite(args.nxdi, args.moe, args.library, args.timeout))
    if args.course:
        suites.append(run_course_suite(args.course, min(args.timeout, 900.0)))
    if args.nkibench:
        suites.append(run_nkibench_suite(args.nkibench, args.timeout))
    if not suites:
        ap.error("give at least one checkout")
    print(table(suites))
    if args.json:
        args.json.write_text(json.dumps([asdict(s) for s in suites], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
