"""SBUF/PSUM peaks with tiles at an explicit ``address=`` (issue #25), and where a PSUM read of an unwritten tile
counts. The NKI docs place an SBUF/PSUM tensor at "a rectangle in the underlying memory" (partitions x bytes per
partition), so tiles whose rectangles overlap share those bytes: the peak counts each byte of a partition once,
whatever the tiles' partition counts. The figures are worked by hand from the tile shapes (fp32: 4 bytes an
element; a PSUM tile takes whole 2 KiB banks per partition)."""

from __future__ import annotations

import nki
import nki.isa as nisa
import nki.language as nl
import pytest
from isa_testlib import last_trace, rand, simulate

from nkieval.sim.errors import NkiSimulatorWarning

BASE = 65536  # a free SBUF byte offset, past the input tile the test kernel's DMA places automatically


def _at(rows: int, cols: int, partition: int, address: int, buffer=nl.sbuf):
    return nl.ndarray((rows, cols), dtype=nl.float32, buffer=buffer, address=(partition, address))


def test_psum_tiles_at_one_address_with_different_partition_counts_share_their_bank():
    """[64, 256] and [128, 256] fp32 at PSUM (0, 0), both live: each takes one 2 KiB bank on its partitions,
    the same bank, so partitions 0-63 hold 2048 bytes, not 4096. (``a`` is written again after ``b``: a PSUM
    read is judged as soon as its input is written, a write where the program puts it.)"""
    def body(x):
        a, b = _at(64, 256, 0, 0, nl.psum), _at(128, 256, 0, 0, nl.psum)
        nisa.memset(dst=a, value=1.0)
        nisa.memset(dst=b, value=2.0)
        nisa.memset(dst=a, value=3.0)
        nisa.tensor_copy(dst=x[0:64], src=a)
        nisa.tensor_copy(dst=x, src=b)
        return x

    simulate(body, rand((128, 256), 1))
    assert last_trace().peak_psum_bytes == 2048


def test_overlapping_byte_ranges_count_their_union():
    """Two [128, 256] fp32 tiles (1024 B a partition) at SBUF bytes [B, B+1024) and [B+512, B+1536): their
    union is 1536 bytes; with the input tile's 1024 bytes the peak is 2560."""
    def body(x):
        a, b = _at(128, 256, 0, BASE), _at(128, 256, 0, BASE + 512)
        nisa.memset(dst=a, value=1.0)
        nisa.memset(dst=b, value=2.0)
        nisa.tensor_tensor(dst=x, data1=a, data2=b, op=nl.add)
        return x

    simulate(body, rand((128, 256), 2))
    assert last_trace().peak_sbuf_bytes == 1024 + 1536


def test_disjoint_fixed_tiles_add_up():
    """Control: the same two tiles 1024 bytes apart do not overlap: 1024 + 1024 + 1024."""
    def body(x):
        a, b = _at(128, 256, 0, BASE), _at(128, 256, 0, BASE + 1024)
        nisa.memset(dst=a, value=1.0)
        nisa.memset(dst=b, value=2.0)
        nisa.tensor_tensor(dst=x, data1=a, data2=b, op=nl.add)
        return x

    simulate(body, rand((128, 256), 3))
    assert last_trace().peak_sbuf_bytes == 3072


def test_a_wider_tile_at_a_reused_address_keeps_its_own_partitions():
    """A [64, 256] tile at (0, B) is used and dropped; a [128, 256] tile at (0, B) and a [64, 512] tile at
    (64, B+1024) are then live together. Partitions 64-127 hold the input (1024 B), the wide tile (1024 B) and
    the [64, 512] tile (2048 B): 4096. (Taking the wide tile for the narrow one, as one block at partitions
    0-63, would give 3072.)"""
    def body(x):
        a = _at(64, 256, 0, BASE)
        nisa.memset(dst=a, value=1.0)
        nisa.tensor_copy(dst=x[0:64], src=a)
        b, c = _at(128, 256, 0, BASE), _at(64, 512, 64, BASE + 1024)
        nisa.memset(dst=b, value=2.0)
        nisa.memset(dst=c, value=3.0)
        nisa.tensor_tensor(dst=x[64:128], data1=b[64:128], data2=c[:, 0:256], op=nl.add)
        return x

    simulate(body, rand((128, 256), 4))
    assert last_trace().peak_sbuf_bytes == 4096


def test_a_psum_read_of_a_never_written_tile_is_ready_from_the_start():
    """An evacuation counts where its inputs are ready (docs/simulator.md); a PSUM tile nothing wrote is ready
    before the first instruction, so reading it late does not make it live together with the tile written and
    evacuated first: one 2 KiB bank, not two. (The read is garbage on hardware; the simulator warns.)"""
    def kernel():
        x = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
        unwritten = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
        s = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=x, value=1.0)  # the kernel's first instruction
        nisa.tensor_copy(dst=s, src=x)
        nisa.tensor_copy(dst=s, src=unwritten)
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=s)
        return out

    with pytest.warns(NkiSimulatorWarning, match="before anything wrote it"):
        nki.simulate(kernel, target="trn2")()
    assert last_trace().peak_psum_bytes == 2048
