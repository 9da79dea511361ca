"""The kernel line of each instruction and allocation, read through ``context.frame_location``'s memo (per code
object and last instruction), is the frame's own line: per call site, per loop iteration, per function."""

import sys

import nki.isa as nisa
import nki.language as nl
import numpy as np

from nkieval.sim.context import ForcedFrame, frame_location, location_str
from nkieval.sim.runner import run_kernel


def _lines(res, opcode):
    return [r.line for r in res.trace.records if r.opcode == opcode]


def test_each_call_site_records_its_own_line_in_every_iteration():
    def kernel(x):
        t = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf)
        for _ in range(3):
            nisa.memset(dst=t, value=1.0)
            nisa.memset(dst=t, value=2.0)
        nisa.dma_copy(dst=x, src=t)

    res = run_kernel(kernel, (np.zeros((4, 8), np.float32),))
    lines = _lines(res, "memset")
    assert len(lines) == 6 and len(set(lines)) == 2  # one line per call site, whatever the iteration
    assert lines[0::2] == [lines[0]] * 3 and lines[1::2] == [lines[0] + 1] * 3


def _site_of(fn):
    box = {}

    def kernel():
        box["t"] = fn()

    res = run_kernel(kernel, ())
    return res.trace.allocations[box["t"].alloc.id].site


def test_allocation_sites_of_two_functions_and_two_lines():
    def one():
        return nl.ndarray((2, 2), dtype=nl.float32, buffer=nl.sbuf)

    def two():
        _ = 0
        return nl.ndarray((2, 2), dtype=nl.float32, buffer=nl.sbuf)

    file = __file__.rsplit("/", 1)[-1]
    assert _site_of(one) == f"{file}:{one.__code__.co_firstlineno + 1}"
    assert _site_of(two) == f"{file}:{two.__code__.co_firstlineno + 2}"
    assert _site_of(one) == f"{file}:{one.__code__.co_firstlineno + 1}"  # (from the memo)


def test_the_line_of_a_running_frame_follows_it():
    f = sys._getframe()
    first = frame_location(f)
    second = frame_location(f)  # the same frame and code, a later instruction
    start = f.f_code.co_firstlineno
    assert first == (f.f_code.co_filename, start + 2, "test_the_line_of_a_running_frame_follows_it")
    assert second[1] == start + 3


def test_a_forced_frame_is_read_as_it_is():
    forced = ForcedFrame("kern.py", 17, "kern")
    assert frame_location(forced) == ("kern.py", 17, "kern")
    forced.f_lineno = 18
    assert frame_location(forced) == ("kern.py", 18, "kern")


def test_location_str_names_the_calling_line():
    def site():
        return location_str(1)

    assert site() == f"{__file__.rsplit('/', 1)[-1]}:{site.__code__.co_firstlineno + 1}"
