"""What a warm reward worker keeps between reviews of one task and seed: the task's CUDA kernel's runs on a
case's inputs, including a run that timed out (a later review that gives it no more time is not made to wait
for the same timeout again)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from nkieval.cuda import ExecutorTimeout
from nkieval.review.cache import new_case_data
from nkieval.review.stages.differential import _gpu_outputs


def _data():
    return new_case_data({"x": np.arange(4, dtype=np.float32)}, b"inputs")


def test_a_cuda_run_that_timed_out_is_not_run_again_within_the_same_limit() -> None:
    data, calls = _data(), []

    def run():
        calls.append(1)
        raise ExecutorTimeout("ran past its limit")

    with pytest.raises(ExecutorTimeout):
        _gpu_outputs(data, "kernel source", "exact", run, 2.0)
    for limit in (2.0, 0.5):  # no more time than the run that timed out: the timeout at once
        with pytest.raises(ExecutorTimeout, match="kept"):
            _gpu_outputs(data, "kernel source", "exact", run, limit)
    assert len(calls) == 1
    with pytest.raises(ExecutorTimeout):  # more time: it runs again
        _gpu_outputs(data, "kernel source", "exact", run, 3.0)
    assert len(calls) == 2
    with pytest.raises(ExecutorTimeout):  # another source (or input) is another run
        _gpu_outputs(data, "another source", "exact", run, 1.0)
    assert len(calls) == 3


def test_a_finished_cuda_run_is_kept_read_only_and_an_error_is_not_kept() -> None:
    data, calls = _data(), []

    def run():
        calls.append(1)
        return [np.ones(4, np.float32)], SimpleNamespace(options="o", warnings=["w"])

    out, (options, took, warnings) = _gpu_outputs(data, "src", "case", run, 1.0)
    again, _ = _gpu_outputs(data, "src", "case", run, 1.0)
    assert len(calls) == 1 and again[0] is out[0] and not out[0].flags.writeable
    assert (options, warnings) == ("o", ["w"]) and took >= 0

    def broken():
        calls.append(1)
        raise ValueError("not a timeout")

    for _ in range(2):
        with pytest.raises(ValueError):
            _gpu_outputs(data, "src", "edge/x/1", broken, 1.0)
    assert len(calls) == 3
