"""One record per on-chip tile: the trace's ``AllocationRecord`` is also the allocator's live block
(``OnChipAllocator.live``), and the tile's finaliser frees it (``Allocation.__del__``).

What the trace says of each tile (where it was placed, when it was made and freed), what the capacity check
counts and lists, and the budget of live bytes, must be what a separate block and record gave.
"""

import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

from nkieval.sim.errors import NkiValidationError
from nkieval.sim.memory import OnChipAllocator
from nkieval.sim.options import SimOptions
from nkieval.sim.runner import run_kernel


def _kernel(a):
    x = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)  # 256 B per partition, at 0
    nisa.memset(x, 1.0)  # record 0
    y = nl.ndarray((64, 32), nl.float32, buffer=nl.sbuf)  # 128 B, after x
    nisa.memset(y, 2.0)  # record 1
    del x  # x's block is free from here
    z = nl.ndarray((128, 16), nl.float32, buffer=nl.sbuf)  # 64 B: first fit, in x's old place
    nisa.memset(z, 3.0)  # record 2
    p = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
    nisa.memset(p, 0.0)  # record 3
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(out, z)  # record 4
    return out


def test_the_trace_records_each_tile_where_and_while_it_lived():
    res = run_kernel(_kernel, [np.zeros((128, 16), np.float32)])
    on_chip = [r for r in res.trace.allocations.values() if r.buffer != "hbm"]
    got = [(r.buffer, r.shape, r.dtype, r.address, r.partition_offset, r.bytes_per_partition, r.alloc_seq,
            r.free_seq, r.fixed_address) for r in on_chip]
    assert got[:3] == [
        ("sbuf", (128, 64), "float32", 0, 0, 256, 0, 2, False),
        ("sbuf", (64, 32), "float32", 256, 0, 128, 1, 5, False),
        ("sbuf", (128, 16), "float32", 0, 0, 64, 2, 5, False),
    ]
    assert got[3][:7] == ("psum", (128, 512), "float32", 0, 0, 2048, 3)
    assert all(r.site and r.site.startswith("test_alloc_record.py:") for r in on_chip)
    assert np.all(res.outputs == 3.0)


def test_a_tile_refused_for_capacity_has_no_record_and_its_block_is_freed():
    def kernel(a):
        keep = nl.ndarray((128, 40000), nl.float32, buffer=nl.sbuf)  # 160,000 B of the 192 KiB partition
        nisa.memset(keep, 0.0)
        nl.ndarray((128, 40000), nl.float32, buffer=nl.sbuf)  # past the partition
        return a

    opts = SimOptions.from_env(capacity_check="error", record_trace=False)
    with pytest.raises(NkiValidationError) as e:
        run_kernel(kernel, [np.zeros((4, 4), np.float32)], options=opts)
    assert e.value.rule == "sbuf-capacity"
    assert "2 live: tensor[128, 40000] float32 160000 B" in str(e.value)


def test_the_allocator_counts_live_blocks_and_bytes_and_frees_each_once():
    from nkieval.sim import dtypes as dt
    from nkieval.sim.memory import SBUF, Allocation, track_lifetime

    al = OnChipAllocator("sbuf", 1 << 12, 64, "warn", partitions=128, bank_bytes=2048)

    def tile(aid, shape, address=None):
        a = Allocation(id=aid, buffer=SBUF, name=f"t{aid}", dtype=dt.float32, shape=shape,
                       storage=np.zeros(shape, np.float32), site=None, program=0)
        al.allocate(a, address, "ndarray")
        track_lifetime(a, al)
        return a

    a = tile(1, (128, 10))  # 40 B -> one 64 B block
    b = tile(2, (16, 40), address=(32, 512))  # placed: partitions 32..48
    c = tile(3, (4, 100))  # 400 B -> 448 B
    assert (a.address, b.address, c.address) == (0, 512, 64)
    assert al.live_bytes == (128 * 10 + 16 * 40 + 4 * 100) * 4
    assert al.auto_bytes == 64 + 448
    # the most in any partition: partition 0 holds both first-fit blocks (512 B); 32..48 hold a's and b's (256 B)
    assert al.peak_bytes == 64 + 448
    assert al._auto_bytes_at(32) == 64  # c covers partitions 0..4 only
    del a
    assert sorted(al.live) == [2, 3] and al.auto_bytes == 448
    b.release()
    b.release()
    assert sorted(al.live) == [3] and al.fixed == {} and al._rects == {}
    del b, c
    assert al.live == {} and al.live_bytes == 0 and al.auto_bytes == 0 and al._spans == []
