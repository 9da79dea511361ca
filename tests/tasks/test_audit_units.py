"""Units of the task audit that need no review: mutation operators, generated kernels, the loader's
errors for a broken reference.py and an unknown numerics op, the CLI's exit codes on cheap criteria."""

from __future__ import annotations

import ast
import json
import shutil

from click.testing import CliRunner

from nkieval.cli import main
from nkieval.tasks import check_task, load_task
from nkieval.tasks.audit import CRITERION_IDS
from nkieval.tasks.audit.hostile import hostile_kernels, trivial_kernels
from nkieval.tasks.audit.mutate import KINDS, mutants
from nkieval.tasks.loader import BUILTIN_ROOT

_SRC = '''
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def k(x, eps=1e-6):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range((n + 127) // 128):
        rows = min(128, n - i * 128)
        t = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        u = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t[0:rows], src=x[i * 128:i * 128 + rows])
        nisa.tensor_scalar(dst=t[0:rows], data=t[0:rows], op0=nl.multiply, operand0=0.5)
        nisa.tensor_tensor(dst=t[0:rows], data1=t[0:rows], data2=u[0:rows], op=nl.subtract)
        if rows > 1:
            nisa.dma_copy(dst=out[i * 128:i * 128 + rows], src=t[0:rows])
    return out
'''


def test_mutants_cover_the_operators_and_change_one_thing() -> None:
    ms, sites = mutants(_SRC, max_mutants=100)
    kinds = {m.kind for m in ms}
    assert kinds == set(KINDS)
    base = ast.unparse(ast.parse(_SRC))
    for m in ms:
        assert m.source != base
        changed = [line for line in m.diff.splitlines() if line.startswith("+")]
        assert len(changed) == 1, m.diff  # one line changed
    # the default of `eps` is never perturbed (the task passes its params: an equivalent mutant)
    assert not any("1e-06" in m.description for m in ms)
    assert any(m.description.startswith("0.5 ->") for m in ms)
    assert sites >= len(ms)


def test_mutant_budget_is_spread_over_operators() -> None:
    ms, _ = mutants(_SRC, max_mutants=len(KINDS))
    assert len(ms) == len(KINDS) and {m.kind for m in ms} == set(KINDS)


def test_generated_kernels_parse_for_multi_output_and_mixed_dtype_tasks() -> None:
    for tid in ("row_argmax", "gemm_bf16", "embedding_gather", "fp8_quantize"):
        t = load_task(tid)
        assert t.solution_file is not None
        for g in trivial_kernels(t) + hostile_kernels(t, t.solution_file.read_text()):
            if g.source is not None:
                tree = ast.parse(g.source)
                assert any(isinstance(n, ast.FunctionDef) and n.name == t.kernel for n in tree.body), g.id
            else:
                assert g.why_not


def test_broken_reference_is_a_task_error_not_a_traceback(tmp_path) -> None:
    d = tmp_path / "relu_copy"
    shutil.copytree(BUILTIN_ROOT / "relu", d)
    (d / "reference.py").write_text((d / "reference.py").read_text() + "\ndef broken(:\n")
    rep = check_task(d)
    assert not rep.ok and "does not parse" in rep.errors[0] and "[task rule reference]" in rep.errors[0]
    assert "Traceback" not in rep.errors[0]


def test_unknown_numerics_op_fails_task_check(tmp_path) -> None:
    d = tmp_path / "relu_copy"
    shutil.copytree(BUILTIN_ROOT / "relu", d)
    p = d / "task.toml"
    p.write_text(p.read_text().replace('op = "relu"', 'op = "l2normalise"'))
    rep = check_task(d)
    assert any("l2normalise" in e and "[task rule op]" in e for e in rep.errors), rep.errors
    assert check_task("relu").ok


def test_cli_exit_codes_on_cheap_criteria(tmp_path) -> None:
    r = CliRunner().invoke(main, ["task", "audit", "relu", "--criteria", "well_formed,coverage", "--format", "json",
                                  "--out", str(tmp_path / "out")])
    assert r.exit_code == 0, r.output
    rep = json.loads((tmp_path / "out" / "audit.json").read_text())
    assert rep["summary"]["verdict"] == "clean" and rep["summary"]["levels"]["coverage"] == 4
    assert (tmp_path / "out" / "audit.md").read_text().startswith("# Task audit: `relu`")
    d = tmp_path / "relu_copy"
    shutil.copytree(BUILTIN_ROOT / "relu", d)
    p = d / "task.toml"
    p.write_text(p.read_text().replace('hidden = [\n', 'hidden = [\n  { N = 256, D = 512 },\n', 1)
                 .replace("{ N = 300, D = 1000, note = \"ragged rows and columns\" },\n", "")
                 .replace("{ N = 1, D = 7, note = \"fewer elements than partitions\" },\n", "")
                 .replace('  { N = 129, D = 4100, note = "one row past a tile; more than one 4096-column tile when '
                          'flattened, ragged tail" },\n', ""))
    r = CliRunner().invoke(main, ["task", "audit", str(d), "--criteria", "coverage"])
    assert r.exit_code == 1, r.output
    assert "hidden-equals-public" in r.output
    (d / "reference.py").write_text("def broken(:\n")
    r = CliRunner().invoke(main, ["task", "audit", str(d)])
    assert r.exit_code == 2 and "bad-task" in r.output
    r = CliRunner().invoke(main, ["task", "audit", "relu", "--criteria", "nonsense"])
    assert r.exit_code == 2


def test_html_audit_report_shows_verdict_every_criterion_and_finding(tmp_path) -> None:
    from html.parser import HTMLParser

    d = tmp_path / "relu_copy"
    shutil.copytree(BUILTIN_ROOT / "relu", d)
    p = d / "task.toml"
    p.write_text(p.read_text().replace("rtol = 0.0", "rtol = 100.0"))  # one finding to show (tolerance-absurd)
    r = CliRunner().invoke(main, ["task", "audit", str(d), "--criteria", "well_formed,tolerance,coverage",
                                  "--format", "html", "--out", str(tmp_path / "out")])
    assert r.exit_code == 1, r.output
    page = (tmp_path / "out" / "audit.html").read_text()
    assert r.output.strip().endswith(page.strip())  # (the output also holds the progress lines)

    class Dom(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.attrs: list[dict[str, str | None]] = []
            self.tags: list[str] = []

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            self.tags.append(tag)
            self.attrs.append(dict(attrs))

    dom = Dom()
    dom.feed(page)
    verdict = [a for a in dom.attrs if a.get("id") == "verdict"]
    assert verdict and verdict[0]["data-verdict"] == "findings"
    rows = {a["data-criterion"] for a in dom.attrs if a.get("class") == "criterion"}
    assert rows == set(CRITERION_IDS)
    rules = {a["data-rule"] for a in dom.attrs if "data-rule" in a}
    assert "tolerance-absurd" in rules
    assert "script" not in dom.tags and "http" not in page.split("<body>")[1]  # self-contained, nothing fetched
    for k in ("audit.json", "audit.md"):
        assert (tmp_path / "out" / k).is_file()


def test_the_screen_decides_a_kill_and_leaves_the_rest_to_the_full_review() -> None:
    from nkieval.tasks.audit.context import AuditContext

    task = load_task("relu")
    ctx = AuditContext(task, 0, task.default_target)
    screen = ctx.screen_task()
    assert screen is not None
    big = max(task.hidden_shapes, key=lambda s: s.dims["N"] * s.dims["D"])
    assert big not in screen.shapes and len(screen.shapes) == len(task.shapes) - 1
    assert {s.label for s in screen.shapes} < {s.label for s in task.shapes}  # the same cases, by label
    # the screens, cheapest first: the public shape alone, then the screen; neither runs kernel.cu
    public, second = ctx.screens()
    assert public.shapes == task.public_shapes and second.shapes == screen.shapes
    assert task.cuda_file is not None and public.cuda_file is None and second.cuda_file is None
    zeros = next(g for g in trivial_kernels(task) if g.id == "zeros")
    o = ctx.run_screened("trivial:zeros", zeros.source)
    assert o.killed_by_tests and ctx.times["reviews"] == 1  # killed on the public shape: no other review
    assert all(c.startswith(task.public_shapes[0].label) for c in o.failing)
    ex = ctx.run_screened("expert", task.solution_file.read_text())
    assert ex.passed and ctx.times["reviews"] == 4  # both screens, then every case
    assert any(label.startswith(big.label) for label in ex.errors)


def test_a_tests_only_review_skips_the_cuda_check_and_keeps_the_verdicts_of_the_cases() -> None:
    # mutants are asked only whether the task's cases reject them: the same case verdicts without kernel.cu
    from nkieval.tasks.audit.context import AuditContext

    task = load_task("relu")
    ctx = AuditContext(task, 0, task.default_target)
    assert ctx.tests_only() is ctx.tests_only() and ctx.tests_only().cuda_file is None
    src = task.solution_file.read_text().replace("op=nl.relu", "op=nl.copy")
    assert src != task.solution_file.read_text()
    with_cuda = ctx.run("m", src)
    without = ctx.run("m", src, task=ctx.tests_only())
    assert with_cuda.failing and with_cuda.failing == without.failing and with_cuda.errors == without.errors
    assert "has no CUDA source" in without.text and "has no CUDA source" not in with_cuda.text


def test_the_audit_clock_counts_a_live_child_process_cpu_time() -> None:
    # the mutation budget is CPU time of the audit's process tree: a sandbox process's work counts while it is
    # alive (not only once reaped), and a sleeping process adds nothing
    import subprocess
    import sys
    import time

    from nkieval.tasks.audit.clock import tree_cpu_s

    burn = ("import sys, time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass\n"
            "print('done', flush=True)\ntime.sleep(30)\n")
    before = tree_cpu_s()
    child = subprocess.Popen([sys.executable, "-c", burn], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "done"
        mid = tree_cpu_s()
        assert mid - before >= 0.45
        time.sleep(0.3)
        assert tree_cpu_s() - mid < 0.2  # the child sleeps
    finally:
        child.kill()
        child.wait()


def test_the_probe_shape_is_the_public_shape_grown_by_one_on_every_axis() -> None:
    from nkieval.tasks.audit.discriminate import probe_shapes

    task = load_task("relu")
    (probe,) = probe_shapes(task)
    pub = task.public_shapes[0]
    assert dict(probe.dims) == {k: v + 1 for k, v in pub.dims.items()} and probe.hidden
    assert probe.label not in {s.label for s in task.shapes}  # a new case, never one of the task's own


def test_the_reference_check_builds_the_numerics_checks_the_reviews_reuse() -> None:
    # the audit's check of the reference fills the review's case cache: a review after it finds every case's
    # prepared numerics check there (one oracle per case for the whole audit)
    from nkieval.review.cache import CASE_CACHE, task_fingerprint
    from nkieval.review.stages.load import plan_cases
    from nkieval.tasks.audit.context import AuditContext

    task = load_task("relu")
    ctx = AuditContext(task, 12345, task.default_target)
    shared = ctx.prepared_checks()
    cases = plan_cases(task, 12345, task.families, "all")
    assert set(shared) == {c.label for c in cases}
    fp = task_fingerprint(task)
    for c in cases:
        hit = CASE_CACHE.get((fp, c.label, tuple(sorted(c.dims.items())), c.family, c.seed))
        assert hit is not None and hit.prepared_done and hit.prepared is shared[c.label]
    assert ctx.prepared_checks() is shared
