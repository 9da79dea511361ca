"""Sealed inputs: one copy of a case's input bytes serves every review, and no child can change it."""

import json
import os
import shutil
import sys

import numpy as np
import pytest

from nkieval.review import npzio
from nkieval.review.sandbox import CaseJob, _zygote, run_candidate, seal_input
from nkieval.tasks import BUILTIN_ROOT

GOOD = (BUILTIN_ROOT / "vector_add" / "solution_nki.py").read_text()

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="memfd seals are Linux-only")


def _job(sealed: bool = True) -> tuple[CaseJob, bytes]:
    inputs = {"a": np.arange(300, dtype=np.float32), "b": np.ones(300, np.float32)}
    packed = npzio.dumps(inputs)
    return CaseJob("c", inputs, {}, 1, packed=packed, sealed=seal_input(packed) if sealed else None), packed


def test_sealed_bytes_cannot_be_written_grown_or_shrunk():
    data = b"x" * 5000
    s = seal_input(data)
    assert s is not None and bytes(s.data) == data
    fd = os.open(s.path, os.O_RDWR)
    try:
        with pytest.raises(PermissionError):
            os.write(fd, b"y")
        with pytest.raises(PermissionError):
            os.ftruncate(fd, 10)
        with pytest.raises(PermissionError):
            os.ftruncate(fd, 10_000)
    finally:
        os.close(fd)
    assert bytes(s.data) == data


def test_forked_child_maps_the_sealed_input_instead_of_a_written_file():
    job, _ = _job()
    assert _zygote().sealed_inputs  # the zygote read the probe back through /proc
    # (the candidate's own child: the judge's executor replays in-process and reads the arrays themselves)
    runs = run_candidate(GOOD, "vector_add", [job], target="trn2", keep_dir=True, trusted=False)
    assert runs[0].status == "ok"
    assert np.array_equal(runs[0].outputs[0], np.arange(300, dtype=np.float32) + 1)
    # (keep_dir leaves the job directory: the spec names the sealed path, and no input file was written)
    kept = max((p for p in _job_dirs() if (p / "job.json").exists()), key=lambda p: p.stat().st_mtime)
    try:
        spec = json.loads((kept / "job.json").read_text())
        assert spec["cases"][0]["inputs"] == job.sealed.path
        assert not list(kept.glob("in_*.arr"))
    finally:
        shutil.rmtree(kept, ignore_errors=True)


def _job_dirs():
    from pathlib import Path

    roots = {Path("/dev/shm"), Path(os.environ.get("TMPDIR", "/tmp"))}
    return [p for r in roots if r.is_dir() for p in r.glob("nkieval-review-*")]


def test_a_child_that_tries_to_overwrite_its_input_changes_nothing():
    job, packed = _job()
    hostile = (
        "import json\n"
        "for c in json.load(open('job.json'))['cases']:\n"
        "    try:\n"
        "        with open(c['inputs'], 'r+b') as f:\n"
        "            f.seek(200)\n"
        "            f.write(b'\\xff' * 1000)\n"
        "    except OSError:\n"
        "        pass\n" + GOOD)
    assert run_candidate(hostile, "vector_add", [job], target="trn2", trusted=False)[0].status == "ok"
    assert bytes(job.sealed.data) == packed
    # the next candidate on the same sealed input sees the original values
    runs = run_candidate(GOOD, "vector_add", [job], target="trn2", trusted=False)
    assert np.array_equal(runs[0].outputs[0], np.arange(300, dtype=np.float32) + 1)


def test_without_a_seal_the_input_file_is_written():
    job, _ = _job(sealed=False)
    runs = run_candidate(GOOD, "vector_add", [job], target="trn2", trusted=False)
    assert runs[0].status == "ok"
    assert np.array_equal(runs[0].outputs[0], np.arange(300, dtype=np.float32) + 1)


def test_sealed_inputs_are_bounded_and_release_their_descriptors(monkeypatch):
    import gc

    from nkieval.review import sandbox

    # (earlier tests may leave sealed inputs in unreachable cycles: collect them first, with the
    # collector off meanwhile, so that only ``a`` is released below)
    gc.collect()
    gc.disable()
    try:
        monkeypatch.setattr(sandbox, "MAX_SEALED_INPUTS", sandbox._SEALED_OPEN[0] + 2)
        a, b = seal_input(b"a"), seal_input(b"b")
        assert a is not None and b is not None
        assert seal_input(b"c") is None  # over the bound: the caller writes a file instead
        before = sandbox._SEALED_OPEN[0]
        del a  # (no cycle: released at once)
        assert sandbox._SEALED_OPEN[0] == before - 1  # its descriptor closed with it
    finally:
        gc.enable()
    assert seal_input(b"d") is not None
