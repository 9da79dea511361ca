"""benchmarks/public_course.py's reading of a grading harness's output (our own sample outputs, in the two wordings
the harness has had; no student code is in the repository)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import public_course

OLD_WORDING = """\
Running correctness test for conv2d kernel with smaller images...Passed 😎
Running correctness test for conv2d kernel with larger images...Passed 😇
Running correctness test for conv2d kernel with larger images + bias...
Output mismatch for input_channels: 128, output_channels: 128
Failed 😢
"""

NEW_WORDING = """\
Comparing nothing yet
Running correctness test for conv2d kernel with smaller image [simulated]... Passed 😎

Running correctness test for conv2d kernel with larger image [simulated]... Traceback (most recent call last):
  File "conv2d.py", line 12, in fused_conv2d_maxpool
    raise NkiValidationError(
ValueError: an inner error first

During handling of the above exception, another exception occurred:

nkieval.sim.errors.NkiValidationError: tensor_tensor: data1[128, 4] and data2[128, 3] do not broadcast [rule x]
"""


def test_both_wordings_and_a_result_on_its_own_line():
    assert public_course.parse(OLD_WORDING) == [
        ("smaller images", "passed", None), ("larger images", "passed", None),
        ("larger images + bias", "failed", None)]


def test_a_case_that_raised_takes_the_last_error_printed_after_it():
    got = public_course.parse(NEW_WORDING)
    assert got[0] == ("smaller image", "passed", None)
    assert got[1][0:2] == ("larger image", "failed")
    assert got[1][2].startswith("nkieval.sim.errors.NkiValidationError: tensor_tensor")


def test_a_harness_cut_off_in_a_case_fails_that_case_and_runs_no_later_one():
    out = "Running correctness test for conv2d kernel with larger image [simulated]... "
    assert public_course.parse(out) == [
        ("larger image", "failed", "the harness stopped in this case (time limit or crash)")]
    assert public_course.parse("ImportError: cannot import name 'x' from 'y'\n") == []


def test_blame_reads_the_tables_and_defaults_to_nkieval():
    assert public_course.blame("Ni2002ka+asst4-trainium2::larger image + bias + maxpool", "E")[0] == "kept"
    assert public_course.blame("kenny1G+asst4-trainium::larger images + bias + maxpool", "E")[0] == "out of scope"
    assert public_course.blame("kenny1G+asst4-trainium::larger images", "E") == ("nkieval", "E")
    assert public_course.blame("someone+asst4::smaller image", "RuntimeError: Please fill your implementation of")[0] \
        == "out of scope"
    assert public_course.blame("someone+asst4::smaller image", None) == ("nkieval", "a wrong result")
