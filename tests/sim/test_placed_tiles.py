"""Tiles placed at one explicit ``address=`` share storage (nkieval.sim.placed).

What must hold: kernels that allocate many logical tiles over a few physical slots (the NKI Library's modular
allocator) keep one storage per slot, not per tile; every value a kernel reads while no other tile at its
address has written since is what it was with a storage per tile; a fresh tile still reads sentinels (also
where its first store covered only part of it); and a tile read after another tile placed over it wrote
there reads that tile's values, with a warning.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import nkieval.frontends

nkieval.frontends.install(force=True)

import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402

from nkieval.sim.runner import run_kernel  # noqa: E402

SLOT = 4096  # bytes per partition of a [128, 1024] fp32 tile


def _run(kernel, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return run_kernel(kernel, args)


def test_modular_tiles_share_one_storage_per_slot_and_give_the_values_of_private_storage():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((12, 128, 1024)).astype(np.float32)
    seen = []

    def kernel(x):
        out = nl.ndarray((12, 128, 1024), dtype=nl.float32, buffer=nl.shared_hbm)
        # twelve logical tiles over three slots, all allocated (and kept) up front, as the modular allocator does
        tiles = [nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.sbuf, address=(0, (i % 3) * SLOT))
                 for i in range(12)]
        seen.extend(tiles)
        for i in range(12):
            nisa.dma_copy(dst=tiles[i], src=x[i])
            nisa.tensor_scalar(dst=tiles[i], data=tiles[i], op0=nl.multiply, operand0=float(i + 1))
            nisa.dma_copy(dst=out[i], src=tiles[i])
        return out

    res = _run(kernel, x)
    np.testing.assert_array_equal(res.outputs, x * np.arange(1, 13, dtype=np.float32)[:, None, None])
    storages = {id(t.alloc.storage) for t in seen}
    assert len(storages) == 3  # one per slot (was twelve)
    assert not [w for w in res.trace.warnings if w["rule"] == "uninitialized"]


def test_a_fresh_tile_over_a_written_one_reads_sentinels_and_leaves_the_other_readable_until_it_writes():
    x = np.arange(128 * 1024, dtype=np.float32).reshape(128, 1024)

    def kernel(x):
        out = nl.ndarray((3, 128, 1024), dtype=nl.float32, buffer=nl.shared_hbm)
        a = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.sbuf, address=(0, 0))
        nisa.dma_copy(dst=a, src=x)
        b = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.sbuf, address=(0, 0))
        nisa.dma_copy(dst=out[0], src=a)  # b has not written: a's values
        nisa.tensor_copy(dst=b[:, 0:512], src=a[:, 0:512])  # b's first store covers half of it
        nisa.dma_copy(dst=out[1], src=b)  # the other half reads as sentinels, as a fresh tile does
        c = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.sbuf, address=(0, 0))
        nisa.dma_copy(dst=out[2], src=c)  # never written: sentinels, with the uninitialized warning
        return out

    res = _run(kernel, x)
    np.testing.assert_array_equal(res.outputs[0], x)
    np.testing.assert_array_equal(res.outputs[1][:, :512], x[:, :512])
    assert np.isnan(res.outputs[1][:, 512:]).all()
    assert np.isnan(res.outputs[2]).all()
    msgs = [w["message"] for w in res.trace.warnings if w["rule"] == "uninitialized"]
    assert len(msgs) == 1 and "before anything wrote it" in msgs[0]


def test_a_tile_read_after_another_placed_over_it_wrote_reads_those_values_with_a_warning():
    x = np.ones((128, 1024), np.float32)

    def kernel(x):
        out = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.shared_hbm)
        a = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.sbuf, address=(0, 0))
        b = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.sbuf, address=(0, 0))
        nisa.dma_copy(dst=a, src=x)
        nisa.memset(b, 7.0)
        nisa.dma_copy(dst=out, src=a)  # on hardware: b's values
        return out

    res = _run(kernel, x)
    np.testing.assert_array_equal(res.outputs, np.full((128, 1024), 7.0, np.float32))
    msgs = [w["message"] for w in res.trace.warnings if w["rule"] == "uninitialized"]
    assert len(msgs) == 1 and "after another tensor placed at the same address" in msgs[0]


@pytest.mark.parametrize("accumulate", [None, True])
def test_psum_accumulation_state_is_the_tiles_own_over_a_shared_bank(accumulate):
    rng = np.random.default_rng(2)
    s = rng.standard_normal((128, 128)).astype(np.float32)
    m = rng.standard_normal((128, 512)).astype(np.float32)

    def kernel(s, m):
        out = nl.ndarray((2, 128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        st = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
        mv = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=st, src=s)
        nisa.dma_copy(dst=mv, src=m)
        banks = [nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum, address=(0, 2048)) for _ in range(2)]
        for i, p in enumerate(banks):
            nisa.nc_matmul(dst=p, stationary=st, moving=mv)  # a new accumulation group in each tile
            if accumulate:
                nisa.nc_matmul(dst=p, stationary=st, moving=mv, accumulate=True)
            r = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=r, src=p)
            nisa.dma_copy(dst=out[i], src=r)
        return out

    res = _run(kernel, s, m)
    want = (s.T @ m) * (2 if accumulate else 1)
    np.testing.assert_allclose(res.outputs[0], want, rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(res.outputs[1], res.outputs[0])
    assert not [w for w in res.trace.warnings if w["rule"] in ("uninitialized", "psum-accumulate")]


def test_live_bytes_with_many_tiles_on_few_slots_equal_a_per_partition_union():
    from nkieval.sim.memory import Allocation, OnChipAllocator

    class _Buf:
        kind = "sbuf"

    class _D:
        itemsize = 1
        name = "uint8"

    parts = 4
    alloc = OnChipAllocator("sbuf", 1 << 20, 4, "off", partitions=parts, bank_bytes=2048)
    rng = np.random.default_rng(3)
    live: dict[int, tuple[int, int, int, int, bool]] = {}
    for i in range(300):
        if live and rng.random() < 0.4:  # free one
            victim = sorted(live)[int(rng.integers(len(live)))]
            alloc.release(victim)
            del live[victim]
            continue
        placed = rng.random() < 0.8
        nparts = int(rng.integers(1, 3)) if placed else 1
        p0 = int(rng.integers(0, 2)) if placed else 0
        nbytes = 8 * int(rng.integers(1, 3))
        a = Allocation(id=i, buffer=_Buf(), name="", dtype=_D(), shape=(nparts, nbytes),
                       storage=np.empty((nparts, nbytes), np.uint8), site=None, program=0)
        alloc.allocate(a, (p0, 16 * int(rng.integers(0, 3))) if placed else None, "test")  # three slots
        live[i] = (a.address, a.address + nbytes, p0, p0 + nparts, placed)
        best = 0
        for p in range(parts):
            auto = sum(e - s for s, e, q0, q1, f in live.values() if not f and q0 <= p < q1)
            covered = set().union(*(range(s, e) for s, e, q0, q1, f in live.values() if f and q0 <= p < q1))
            best = max(best, auto + len(covered))
        assert alloc._total() == best


def test_a_record_only_run_gives_the_same_trace_and_warnings_over_shared_slots():
    from nkieval.sim.options import SimOptions

    x = np.ones((128, 1024), np.float32)

    def kernel(x):
        out = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.shared_hbm)
        a = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.sbuf, address=(0, 0))
        b = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.sbuf, address=(0, 0))
        c = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.sbuf, address=(0, 0))
        nisa.dma_copy(dst=a, src=x)
        nisa.memset(b, 7.0)
        nisa.tensor_copy(dst=b, src=c)  # c never written
        nisa.dma_copy(dst=out, src=a)  # a read after b wrote
        return out

    runs = []
    for compute in (True, False):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            runs.append(run_kernel(kernel, (x,), options=SimOptions.from_env(compute_values=compute)))
    assert [(r.opcode, [o.alloc for o in r.operands]) for r in runs[0].trace.records] == \
        [(r.opcode, [o.alloc for o in r.operands]) for r in runs[1].trace.records]
    rules = [[(w["rule"], w["message"].split(":")[0]) for w in r.trace.warnings] for r in runs]
    assert rules[0] == rules[1] and len(rules[0]) == 2
