"""End-to-end reviews of the vector_add task: expert passes, each flawed candidate is caught where it belongs."""

import json

import pytest

from nkieval.review import to_markdown, validate_report
from nkieval.tasks import load_task

TASK = load_task("vector_add")


def test_expert_solution_passes_everywhere(reviewed):
    r = reviewed("vector_add", "solution_nki.py")
    assert r.verdict == "pass"
    assert r.criterion("correctness").level == 4
    assert all(c.correct for c in r.cases)
    assert any(c.hidden for c in r.cases)
    num = r.criterion("numerics")
    assert num.level is not None and num.level >= 3, num.summary  # a judge that cannot judge fails closed


def test_expert_hardware_evidence_matches_a_hand_count(reviewed):
    """The hardware evidence of the expert on the largest shape, N = 300007, counted by hand from its source
    (not compared with itself, as the hardware level would be: the expert is its own yardstick).
    m = 300007 // 128 = 2343 columns in two bulk tiles (_spans: t = 2, w = ceil(3 * 2343 / 5) = 1406), each
    two loads, one add, one store, then the 103-element tail the same way: 9 DMAs, 3 adds; every input byte
    read once (2 x 4 x 300007) and every output byte written once (4 x 300007)."""
    r = reviewed("vector_add", "solution_nki.py")
    hw = r.to_dict()["hardware"]["candidate"]
    n = max(s.dims["N"] for s in TASK.shapes)
    assert n == 300007
    assert hw["dma_count"] == 9 and hw["per_opcode"] == {"dma_copy": 9, "tensor_tensor": 3}
    assert hw["hbm_read_bytes"] == 2 * 4 * n and hw["hbm_write_bytes"] == 4 * n
    assert hw["reload_factor"] == 1.0 and hw["write_factor"] == 1.0
    # 2343 columns x 4 bytes / 2 tiles: the median DMA moves 1406 or 937 columns per partition
    assert hw["dma_median_bytes_per_partition"] in (1406 * 4, 937 * 4)


@pytest.mark.parametrize("flaw", TASK.flawed, ids=lambda f: f.file)
def test_flawed_candidate_caught_in_its_criterion(reviewed, flaw):
    r = reviewed("vector_add", flaw.file)
    c = r.criterion(flaw.criterion)
    assert c.level is not None and c.level < 4, (flaw.file, c.summary)
    assert c.feedback, f"{flaw.file}: no feedback line in {flaw.criterion}"
    for fb in c.feedback:
        assert fb.observed and fb.expected and fb.suggestion and fb.evidence


def test_reports_validate_against_schema(reviewed):
    for f in ["solution_nki.py", *[fl.file for fl in TASK.flawed]]:
        d = reviewed("vector_add", f).to_dict()
        validate_report(d)
        json.dumps(d, allow_nan=False)


def test_schema_rejects_a_broken_report(reviewed):
    import jsonschema

    d = reviewed("vector_add", "solution_nki.py").to_dict()
    d["criteria"][0]["level"] = 7
    with pytest.raises(jsonschema.ValidationError):
        validate_report(d)


def test_markdown_is_evidence_tied(reviewed):
    md = to_markdown(reviewed("vector_add", "flawed/skips_tail.py"))
    assert "never written" in md and "seed" in md and "hidden-0" in md


def test_gate_caps_performance_when_incorrect(reviewed):
    r = reviewed("vector_add", "flawed/skips_tail.py")
    perf = r.criterion("performance")
    if perf.level is not None:
        assert perf.level <= 1


def test_integrity_scan_blocks_run(tmp_path):
    from nkieval.review import review

    src = "import subprocess\nimport nki\n\n@nki.jit\ndef vector_add(a, b):\n    return a\n"
    r = review(TASK, src, seed=1, shapes="public")
    assert r.verdict == "hack-suspected"
    assert r.criterion("correctness").level == 0
    assert all(c.status == "not-run" for c in r.cases)
