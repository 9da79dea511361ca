"""Simulator checks where mutation testing (seed 2) found them unchecked (issue #25, item 5): a reduction output is
[P, 1] (nki.isa: "reduce_res ... of shape [P, 1]"), a peak equal to the partition size fits, and the capacity
message lists six live tiles in full."""

from __future__ import annotations

import nki.isa as nisa
import nki.language as nl
import pytest
from isa_testlib import rand, sbuf, simulate

from nkieval.sim.capacity import CapacityPeak
from nkieval.sim.errors import NkiValidationError
from nkieval.sim.trace import AllocationRecord


@pytest.mark.parametrize("cols", [2, 4])
def test_a_reduction_output_wider_than_one_column_is_refused(cols):
    def body(x):
        d, r = sbuf(x.shape), sbuf((128, cols))
        nisa.activation(dst=d, op=nl.exp, data=x, reduce_cmd=nisa.reduce_cmd.reset_reduce, reduce_res=r)
        return d

    with pytest.raises(NkiValidationError, match=rf"reduce_res must be \[128, 1\], got \[128, {cols}\]") as e:
        simulate(body, rand((128, 64), 1))
    assert e.value.rule == "shape-mismatch"


def _tile(i: int, nbytes: int) -> AllocationRecord:
    return AllocationRecord(id=i, buffer="sbuf", name=f"t{i}", shape=(128, nbytes // 4), dtype="float32", address=0,
                            partition_offset=0, bytes_per_partition=nbytes, site=None, program=0, alloc_seq=i)


def test_a_peak_equal_to_the_partition_size_fits():
    live = (_tile(0, 1024),)
    assert not CapacityPeak("sbuf", 0, 1024, 1024, 0, live).exceeded
    assert CapacityPeak("sbuf", 0, 1025, 1024, 0, live).exceeded


def test_the_capacity_message_lists_up_to_six_tiles_then_counts_the_rest():
    six = tuple(_tile(i, 1024 * (i + 1)) for i in range(6))
    msg = CapacityPeak("sbuf", 0, 21504, 16384, 3, six).message()
    assert "6 live: " in msg and "more" not in msg, msg
    msg7 = CapacityPeak("sbuf", 0, 28672, 16384, 3, (*six, _tile(6, 7168))).message()
    assert msg7.endswith(" and 1 more"), msg7
