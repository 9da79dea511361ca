"""Issue 31 item 3 (speed on the big public kernels): the caches added for speed change nothing recorded.

* ``NkiTensor._geometry`` shares its layout arithmetic between allocations with the same layout (a tile
  re-allocated on every loop iteration); each operand must still carry its own allocation's id, name and
  address, with the values worked out by hand here.
* ``OnChipAllocator`` keeps its live blocks sorted for first-fit; the addresses it hands out must be those
  of a plain first-fit over the live blocks (a model written here), for any allocate/free sequence.
"""

import gc

import nki.language as nl
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from nkieval.sim.memory import Allocation, OnChipAllocator
from nkieval.sim.runner import run_kernel


def _accesses(make):
    """Run ``make()`` in a kernel; return the trace operands of the views it returns."""
    box = {}

    def kernel(a):
        box["acc"] = [(v.access("src", "r"), v.alloc.address) for v in make()]

    run_kernel(kernel, [np.zeros((2, 2), np.float32)])
    return box["acc"]


def test_an_operand_of_a_reallocated_tile_has_its_own_id_name_and_the_hand_computed_geometry():
    def make():
        out = []
        for i in range(3):  # the same tile allocated afresh each iteration: same address, same view
            t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf, name=f"tile{i}")
            out.append(t[0:64, 8:16])
            out.append(t)  # keep the allocation alive: the next one is placed after it
        return out

    acc = _accesses(make)
    views = [a for k, a in enumerate(acc) if k % 2 == 0]
    ids = {v.alloc for v, _ in views}
    assert len(ids) == 3
    for i, (v, address) in enumerate(views):
        assert v.name == f"tile{i}"
        assert v.buffer == "sbuf" and v.shape == (64, 8) and v.dtype == "float32"
        assert (v.partition_start, v.partitions) == (0, 64)
        assert v.addr_lo == address + 8 * 4  # column 8 of fp32
        assert v.addr_hi == address + 16 * 4
        assert v.nbytes == 64 * 8 * 4 and v.contiguous_bytes == 8 * 4 and v.pattern == ((1, 8),)
    assert len({address for _, address in views}) == 3  # three live tiles: three addresses


def test_a_tile_freed_and_reallocated_at_the_same_address_reports_the_new_allocation():
    def make():
        a = nl.ndarray((32, 16), dtype=nl.bfloat16, buffer=nl.sbuf, name="first")
        first = a[:, 4:12].access("src", "r")
        addr = a.alloc.address
        del a
        gc.collect()
        b = nl.ndarray((32, 16), dtype=nl.bfloat16, buffer=nl.sbuf, name="second")
        assert b.alloc.address == addr
        second = b[:, 4:12]
        return [first, second, b]

    box = {}

    def kernel(x):
        first, second, b = make()
        box["v"] = (first, second.access("src", "r"), b.alloc.id)

    run_kernel(kernel, [np.zeros((2, 2), np.float32)])
    first, second, b_id = box["v"]
    assert first.name == "first" and second.name == "second"
    assert second.alloc == b_id != first.alloc
    assert (second.addr_lo, second.addr_hi, second.pattern) == (first.addr_lo, first.addr_hi, ((1, 8),))
    assert second.dtype == "bfloat16" and second.nbytes == 32 * 8 * 2


class _Buf:
    kind = "sbuf"
    on_chip = True


class _D:
    name = "uint8"
    itemsize = 1


def _model_first_fit(live: dict[int, tuple[int, int]], size: int) -> int:
    pos = 0
    for start, end in sorted(live.values()):
        if start - pos >= size:
            return pos
        pos = max(pos, end)
    return pos


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(1, 40), st.integers(0, 30)), min_size=1, max_size=60))
def test_first_fit_addresses_equal_a_plain_first_fit_over_the_live_blocks(ops):
    alloc = OnChipAllocator("sbuf", 1 << 20, 4, "off", partitions=4, bank_bytes=2048)
    live: dict[int, tuple[int, int]] = {}
    next_id = 0
    for is_alloc, nbytes, pick in ops:
        if is_alloc or not live:
            size = max(4, (nbytes + 3) // 4 * 4)
            expected = _model_first_fit(live, size)
            a = Allocation(id=next_id, buffer=_Buf(), name="", dtype=_D(), shape=(4, nbytes),
                           storage=np.empty((4, nbytes), np.uint8), site=None, program=0)
            alloc.allocate(a, None, "test")
            assert a.address == expected
            live[next_id] = (a.address, a.address + size)
            next_id += 1
        else:
            victim = sorted(live)[pick % len(live)]
            alloc.release(victim)
            del live[victim]
        assert set(alloc.live) == set(live)
