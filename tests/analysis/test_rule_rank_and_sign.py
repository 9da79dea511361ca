"""NKI014's rank evidence and NKI016's partition-count range, where mutation testing found them unchecked
(issue #25, item 5). The expectations are the rules' documented behaviour on kernels written for the case."""

from __future__ import annotations

from nkieval.analysis import analyze_nki

HEAD = "import nki\nimport nki.isa as nisa\nimport nki.language as nl\nimport numpy as np\n\n\n@nki.jit\n"


def _messages(src: str, rule: str) -> list[str]:
    return [f.message for f in analyze_nki(src, "k.py", target="trn2") if f.rule == rule]


def _row_loop(unpack: str) -> str:
    """A loop that DMAs ``a[i, j]`` (two unit indices) after ``unpack``: only ``n, f = a.shape`` states
    that ``a`` is 2-D, so that each transfer is one element."""
    return HEAD + ("def k(a):\n"
                   f"    {unpack}\n"
                   "    out = nl.ndarray((8, 1), dtype=a.dtype, buffer=nl.shared_hbm)\n"
                   "    for i in range(8):\n"
                   "        t = nl.ndarray((1, 1), dtype=a.dtype, buffer=nl.sbuf)\n"
                   "        nisa.dma_copy(dst=t, src=a[i, 0])\n"
                   "        nisa.dma_copy(dst=out[i:i + 1, 0:1], src=t)\n"
                   "    return out\n")


def test_nki014_takes_the_rank_from_the_shape_only():
    stated = _messages(_row_loop("n, f = a.shape"), "NKI014")
    assert any("one element of `a`" in m for m in stated), stated
    # ``a.T`` of a 2-D a unpacks its rows (the columns of a): a count of rows, not the rank of a
    other = [m for m in _messages(_row_loop("c0, c1 = a.T"), "NKI014") if "`a" in m]
    assert len(other) == 1 and "moves `a[i, 0]` per iteration" in other[0], other  # rank unknown: the slice


def _tiled(step: str) -> str:
    return HEAD + ("def k(x):\n"
                   "    n, f = x.shape\n"
                   "    out = nl.ndarray((n, f), dtype=x.dtype, buffer=nl.shared_hbm)\n"
                   f"    for i in range(n // {step}):\n"
                   f"        t = nl.ndarray(({step}, f), dtype=x.dtype, buffer=nl.sbuf)\n"
                   "    return out\n")


def test_nki016_flags_a_positive_partition_count_below_the_target():
    msgs = _messages(_tiled("32"), "NKI016")
    assert msgs == [m for m in msgs if "uses 32 of 128 partitions" in m and "96 lanes" in m] and msgs, msgs


def test_nki016_says_nothing_of_a_negative_partition_count():
    """A negative partition count is no tile at all (the simulator refuses the allocation): "uses -32 of 128
    partitions, 160 lanes idle" would be nonsense. (Written ``32 - 64``: the analysis evaluates arithmetic on
    constants, not a unary minus.)"""
    assert _messages(_tiled("(32 - 64)"), "NKI016") == []


def _tiles_by_128(assertion: str) -> str:
    return HEAD + ("def k(x):\n"
                   "    n, f = x.shape\n"
                   f"{assertion}"
                   "    out = nl.ndarray((n, f), dtype=x.dtype, buffer=nl.shared_hbm)\n"
                   "    for i in range(n // 128):\n"
                   "        t = nl.ndarray((128, f), dtype=x.dtype, buffer=nl.sbuf)\n"
                   "        nisa.dma_copy(dst=t, src=x[i * 128:(i + 1) * 128, 0:f])\n"
                   "        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, 0:f], src=t)\n"
                   "    return out\n")


def test_nki003_an_asserted_multiple_has_no_ragged_tail():
    """NKI003 flags ``range(n // 128)`` (the last n % 128 rows are dropped) unless the kernel asserts
    ``n % 128 == 0``."""
    assert _messages(_tiles_by_128(""), "NKI003")
    assert _messages(_tiles_by_128("    assert n % 128 == 0\n"), "NKI003") == []
