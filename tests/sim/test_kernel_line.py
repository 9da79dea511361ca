"""The kernel line of each instruction and allocation, read through ``context.frame_location``'s memo (per code
object and last instruction), is the frame's own line: per call site, per loop iteration, per function."""

import sys

import nki.isa as nisa
import nki.language as nl
import numpy as np

from nkieval.sim import context
from nkieval.sim.context import ForcedFrame, frame_code_location, frame_location, location_str
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


def _line_readers(n):
    """``n`` functions, each returning what ``frame_code_location`` and the frame itself say of two of its lines."""
    made = []
    for i in range(n):
        ns = {"sys": sys, "frame_code_location": frame_code_location}
        pad = "\n" * i  # (each function's lines at their own numbers)
        exec(compile(f"{pad}def reader_{i}():\n    f = sys._getframe()\n    a = frame_code_location(f), "
                     f"(f.f_code.co_filename, f.f_lineno, f.f_code.co_name), f.f_code\n"
                     f"    b = frame_code_location(f), (f.f_code.co_filename, f.f_lineno, f.f_code.co_name)\n"
                     f"    return a, b\n", f"reader_{i}.py", "exec"), ns)
        made.append(ns[f"reader_{i}"])
    return made


def test_the_memo_keeps_each_code_s_lines_apart_when_many_codes_take_turns():
    """More functions than the memo's identity slots (``_RECENT``), called in turn, and with the id-keyed table
    cleared in between: each read is the frame's own file, line and function, and the code returned is the
    frame's."""
    readers = _line_readers(context._RECENT_MAX * 2 + 1)
    for round_ in range(3):
        if round_ == 2:
            context._LINES.clear()
        for r in readers:
            ((code_a, loc_a), want_a, code), ((code_b, loc_b), want_b) = r()
            assert loc_a == want_a and loc_b == want_b and loc_b[1] == loc_a[1] + 1
            assert code_a is code and code_b is code
    assert len(context._RECENT) == context._RECENT_MAX


def test_a_forced_frame_gives_its_own_code():
    forced = ForcedFrame("kern.py", 5, "kern")
    code, loc = frame_code_location(forced)
    assert loc == ("kern.py", 5, "kern") and code.co_filename == "kern.py" and code.co_name == "kern"
