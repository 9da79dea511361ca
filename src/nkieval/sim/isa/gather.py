"""Gathers, shuffles and searches: local_gather, nc_n_gather, nc_stream_shuffle, nc_match_replace8,
sequence_bounds, nonzero_with_count, topk.

Where the hardware's behaviour is undefined (out-of-range gather indices) the simulator
raises an ``out-of-bounds`` validation error instead of returning garbage, so a kernel that
relies on it is caught. GpSimd instructions never touch PSUM.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nkieval.sim import dtypes as dt
from nkieval.sim.errors import NkiValidationError
from nkieval.sim.isa.core import (
    check_buffer,
    check_dtype,
    check_engine_operands,
    check_partitions,
    check_same_free,
    free_size,
    instruction,
    mark_written,
    read,
    record,
    tensor_arg,
    write,
)
from nkieval.sim.tensor import NkiTensor


def _flat(t: NkiTensor) -> np.ndarray:
    return np.asarray(t.data).reshape(t.shape[0], -1)


def _store_exact(dst: NkiTensor, vals: np.ndarray) -> None:
    """Bit-exact store of values already in ``dst``'s storage dtype (gathers never cast)."""
    dst.data[...] = vals.reshape(dst.shape)
    mark_written(dst, matmul=False)


def _int_arg(x: Any, role: str) -> int:
    if isinstance(x, bool) or not isinstance(x, int | np.integer):
        raise NkiValidationError(f"{role} must be an int, got {x!r}", operand=role, rule="argument")
    return int(x)


@instruction("local_gather", "gpsimd")
def local_gather(ctx: Any, dst: Any, src_buffer: Any, index: Any, num_elem_per_idx: int = 1,
                 num_valid_indices: int | None = None, name: str | None = None) -> None:
    """Per GpSimd core (16 partitions): each partition gathers ``num_elem_per_idx`` contiguous elements at each
    of the core's element offsets (its index slice flattened partition-first)."""
    dst = tensor_arg(dst, "dst")
    src = tensor_arg(src_buffer, "src_buffer")
    index = tensor_arg(index, "index")
    check_engine_operands(ctx, [("dst", dst), ("src_buffer", src), ("index", index)], allow_psum=False,
                          engine="gpsimd")
    check_dtype(index, "index", (dt.uint16,))
    if dst.dtype != src.dtype:
        raise NkiValidationError(f"local_gather does not cast: dst dtype {dst.dtype} must equal src_buffer dtype "
                                 f"{src.dtype}", operand="dst", rule="dtype")
    T = ctx.target
    g = T.gpsimd_partitions_per_core
    p = src.shape[0]
    if p % g:
        raise NkiValidationError(f"partition size {p} must be a multiple of {g} (one GpSimd core per {g} "
                                 "partitions)", operand="src_buffer", rule="shape-mismatch")
    ne = _int_arg(num_elem_per_idx, "num_elem_per_idx")
    if ne not in T.local_gather_elems_per_index:
        raise NkiValidationError(f"num_elem_per_idx {ne} must be one of {T.local_gather_elems_per_index}",
                                 operand="num_elem_per_idx", rule="argument")
    per_core = g * free_size(index)
    nv = per_core if num_valid_indices is None else _int_arg(num_valid_indices, "num_valid_indices")
    if not 1 <= nv <= per_core:
        raise NkiValidationError(f"num_valid_indices {nv} must be in [1, {per_core}] (indices per core)",
                                 operand="num_valid_indices", rule="argument")
    if nv > T.local_gather_max_indices_per_core:
        raise NkiValidationError(f"{nv} indices per core exceed the limit of {T.local_gather_max_indices_per_core}",
                                 operand="index", rule="instruction-limit")
    if free_size(dst) != nv * ne:
        raise NkiValidationError(f"dst must hold num_valid_indices * num_elem_per_idx = {nv * ne} elements per "
                                 f"partition, got {free_size(dst)}", operand="dst", rule="shape-mismatch")
    sf = _flat(src)
    idx = _flat(index).astype(np.int64)
    out = np.empty((p, nv * ne), dtype=sf.dtype)
    cols = np.arange(ne, dtype=np.int64)
    for c in range(p // g):
        offs = idx[c * g:(c + 1) * g].reshape(-1, order="F")[:nv]
        pos = (offs[:, None] + cols[None, :]).reshape(-1)
        if pos.size and (pos.max() >= sf.shape[1]):
            bad = int(offs[np.nonzero(offs + ne > sf.shape[1])[0][0]])
            raise NkiValidationError(f"index {bad} (+{ne} elements) is out of bounds for {sf.shape[1]} elements per "
                                     f"partition on GpSimd core {c}; hardware behaviour is undefined",
                                     operand="index", rule="out-of-bounds")
        out[c * g:(c + 1) * g] = sf[c * g:(c + 1) * g][:, pos]
    _store_exact(dst, out)
    record(ctx, "local_gather", "gpsimd", [(dst, "dst", "w"), (src, "src_buffer", "r"),
                                           (index, "index", "r")], num_elem_per_idx=ne, num_valid_indices=nv)


@instruction("nc_n_gather", "gpsimd")
def nc_n_gather(ctx: Any, dst: Any, data: Any, indices: Any, name: str | None = None) -> None:
    """``dst[p, j] = data_flat[p, indices_flat[p, j]]`` within each partition (uint32 indices)."""
    dst = tensor_arg(dst, "dst")
    data = tensor_arg(data, "data")
    indices = tensor_arg(indices, "indices")
    check_engine_operands(ctx, [("dst", dst), ("data", data), ("indices", indices)], allow_psum=False,
                          engine="gpsimd")
    check_dtype(indices, "indices", (dt.uint32,))
    if dst.dtype != data.dtype:
        raise NkiValidationError(f"dst dtype {dst.dtype} must equal data dtype {data.dtype}", operand="dst",
                                 rule="dtype")
    check_same_free([("dst", dst), ("indices", indices)])
    df = _flat(data)
    idx = _flat(indices).astype(np.int64)
    if idx.size and idx.max() >= df.shape[1]:
        raise NkiValidationError(f"index {int(idx.max())} is outside [0, {df.shape[1]}) (data elements per "
                                 "partition)", operand="indices", rule="out-of-bounds")
    _store_exact(dst, np.take_along_axis(df, idx, axis=1))
    record(ctx, "nc_n_gather", "gpsimd", [(dst, "dst", "w"), (data, "data", "r"),
                                          (indices, "indices", "r")])


def _check_shuffle_start(ctx: Any, t: NkiTensor, role: str, active: int) -> None:
    start = t.access(role, "r").partition_start
    allowed = {128: (0,), 96: (0,), 64: (0, 64), 32: (0, 32, 64, 96)}[active]
    if start not in allowed:
        raise NkiValidationError(f"{role} starts at partition {start}; with {active} active partitions it must start "
                                 f"at {' or '.join(map(str, allowed))}", operand=role, rule="argument")


@instruction("nc_stream_shuffle", "vector")
def nc_stream_shuffle(ctx: Any, dst: Any, src: Any, shuffle_mask: Any, name: str | None = None) -> None:
    """Within each 32-partition quadrant ``dst[i] = src[mask[i]]``; mask value 255 leaves ``dst[i]`` unchanged."""
    dst = tensor_arg(dst, "dst")
    src = tensor_arg(src, "src")
    q = ctx.target.stream_shuffle_quadrant
    for role, t in (("dst", dst), ("src", src)):
        check_buffer(t, role, ("sbuf", "psum"))
        check_partitions(ctx, t, role)
    if dst.dtype != src.dtype:
        raise NkiValidationError(f"dst dtype {dst.dtype} must equal src dtype {src.dtype}", operand="dst",
                                 rule="dtype")
    check_same_free([("dst", dst), ("src", src)])
    try:
        mask = [int(m) for m in shuffle_mask]
    except (TypeError, ValueError):
        raise NkiValidationError(f"shuffle_mask must be a list of {q} ints, got {shuffle_mask!r}",
                                 operand="shuffle_mask", rule="argument") from None
    if len(mask) != q:
        raise NkiValidationError(f"shuffle_mask must have {q} entries, got {len(mask)}", operand="shuffle_mask",
                                 rule="argument")
    ps, pd = src.shape[0], dst.shape[0]
    active = -(-max(ps, pd) // q) * q
    _check_shuffle_start(ctx, src, "src", active)
    _check_shuffle_start(ctx, dst, "dst", active)
    sv = _flat(src).copy()
    out = _flat(dst).copy()
    for i in range(pd):
        m = mask[i % q]
        if m == 255:
            continue
        j = (i // q) * q + m
        if not 0 <= m < q or j >= ps:
            raise NkiValidationError(f"shuffle_mask[{i % q}] = {m} selects src partition {j}, outside src's {ps} "
                                     f"partitions (use 0..{q - 1} or 255)", operand="shuffle_mask", rule="argument")
        out[i] = sv[j]
    _store_exact(dst, out)
    record(ctx, "nc_stream_shuffle", "vector", [(dst, "dst", "w"), (src, "src", "r")])


def _check_find8(ctx: Any, data: NkiTensor, vals: NkiTensor) -> None:
    T = ctx.target
    n = free_size(data)
    if not T.max8_min_elems <= n <= T.max8_max_elems:
        raise NkiValidationError(f"data has {n} elements per partition; must be {T.max8_min_elems}.."
                                 f"{T.max8_max_elems}", operand="data", rule="instruction-limit")
    if free_size(vals) != T.find8_count:
        raise NkiValidationError(f"vals must hold {T.find8_count} values per partition, got {free_size(vals)}",
                                 operand="vals", rule="shape-mismatch")


@instruction("nc_match_replace8", "vector")
def nc_match_replace8(ctx: Any, dst: Any, data: Any, vals: Any, imm: float, dst_idx: Any = None,
                      name: str | None = None) -> None:
    """Replace the first match of each of 8 ``vals`` with ``imm`` (vals processed 7..0, each match distinct);
    optional ``dst_idx`` gets the matched positions (all-ones when a value is not found)."""
    dst = tensor_arg(dst, "dst")
    data = tensor_arg(data, "data")
    vals = tensor_arg(vals, "vals")
    pairs = [("dst", dst), ("data", data), ("vals", vals)]
    if dst_idx is not None:
        dst_idx = tensor_arg(dst_idx, "dst_idx")
        pairs.append(("dst_idx", dst_idx))
    check_engine_operands(ctx, pairs)
    check_same_free([("dst", dst), ("data", data)])
    _check_find8(ctx, data, vals)
    if not isinstance(imm, int | float | np.number) or isinstance(imm, bool):
        raise NkiValidationError(f"imm must be a number, got {type(imm).__name__}", operand="imm", rule="argument")
    p = data.shape[0]
    x = read(data).reshape(p, -1).astype(np.float32)
    v = read(vals).reshape(p, -1).astype(np.float32)
    out = x.copy()
    idx = np.full((p, 8), -1, dtype=np.int64)
    taken = np.zeros_like(x, dtype=bool)
    for i in range(7, -1, -1):
        hit = (x == v[:, i:i + 1]) & ~taken
        found = hit.any(axis=1)
        first = np.argmax(hit, axis=1)
        rows = np.nonzero(found)[0]
        taken[rows, first[rows]] = True
        out[rows, first[rows]] = np.float32(imm)
        idx[rows, i] = first[rows]
    write(ctx, dst, out.reshape(dst.shape))
    operands = [(dst, "dst", "w"), (data, "data", "r"), (vals, "vals", "r")]
    if dst_idx is not None:
        check_dtype(dst_idx, "dst_idx", (dt.uint32, dt.uint16))
        if free_size(dst_idx) != 8:
            raise NkiValidationError(f"dst_idx must be [P, 8], got {list(dst_idx.shape)}", operand="dst_idx",
                                     rule="shape-mismatch")
        ones = np.iinfo(dst_idx.dtype.storage).max
        _store_exact(dst_idx, np.where(idx < 0, ones, idx).astype(dst_idx.dtype.storage))
        operands.append((dst_idx, "dst_idx", "w"))
    record(ctx, "nc_match_replace8", "vector", operands)


@instruction("sequence_bounds", "gpsimd")
def sequence_bounds(ctx: Any, dst: Any, segment_ids: Any, name: str | None = None) -> None:
    """For each element, [start, end) of its run of equal segment ids; id 0 (padding) gets (n, -1). P must be 1."""
    dst = tensor_arg(dst, "dst")
    seg = tensor_arg(segment_ids, "segment_ids")
    check_engine_operands(ctx, [("dst", dst), ("segment_ids", seg)], allow_psum=False, engine="gpsimd")
    for role, t in (("dst", dst), ("segment_ids", seg)):
        check_dtype(t, role, (dt.float32, dt.int32))
    if seg.shape[0] != 1:
        raise NkiValidationError(f"segment_ids partition dimension must be 1, got {seg.shape[0]}",
                                 operand="segment_ids", rule="shape-mismatch")
    s = read(seg).reshape(-1)
    n = s.size
    if free_size(dst) != 2 * n:
        raise NkiValidationError(f"dst must be [1, 2, {n}] (start and end per element), got {list(dst.shape)}",
                                 operand="dst", rule="shape-mismatch")
    if (s < 0).any():
        raise NkiValidationError("segment ids must be non-negative", operand="segment_ids", rule="argument")
    pos = np.arange(n)
    new_run = np.ones(n, dtype=bool)
    new_run[1:] = s[1:] != s[:-1]
    start = np.maximum.accumulate(np.where(new_run, pos, 0))
    end_run = np.ones(n, dtype=bool)
    end_run[:-1] = s[:-1] != s[1:]
    end = np.minimum.accumulate(np.where(end_run, pos + 1, n)[::-1])[::-1]
    start = np.where(s == 0, n, start)
    end = np.where(s == 0, -1, end)
    write(ctx, dst, np.stack([start, end]).astype(np.float64).reshape(dst.shape))
    record(ctx, "sequence_bounds", "gpsimd", [(dst, "dst", "w"), (seg, "segment_ids", "r")])


@instruction("nonzero_with_count", "gpsimd", min_generation=3)
def nonzero_with_count(ctx: Any, dst: Any, src: Any, index_offset: int = 0, padding_val: int = -1,
                       name: str | None = None) -> None:
    """On partitions 0, 16, …, 112 only: indices of nonzeros (+offset), then padding, then the count."""
    dst = tensor_arg(dst, "dst")
    src = tensor_arg(src, "src")
    check_engine_operands(ctx, [("dst", dst), ("src", src)], allow_psum=False, engine="gpsimd")
    check_dtype(src, "src", (dt.float32, dt.int32))
    check_dtype(dst, "dst", (dt.int32,))
    off = _int_arg(index_offset, "index_offset")
    pad = _int_arg(padding_val, "padding_val")
    t = free_size(src)
    if free_size(dst) != t + 1:
        raise NkiValidationError(f"dst must have one more element per partition than src ({t + 1}), got "
                                 f"{free_size(dst)}", operand="dst", rule="shape-mismatch")
    step = ctx.target.gpsimd_partitions_per_core
    x = read(src).reshape(src.shape[0], -1)
    out = _flat(dst).astype(np.int64)
    for p in range(0, src.shape[0], step):
        nz = np.nonzero(x[p])[0]
        row = np.full(t + 1, pad, dtype=np.int64)
        row[:nz.size] = nz + off
        row[t] = nz.size
        out[p] = row
    write(ctx, dst, out.reshape(dst.shape))
    record(ctx, "nonzero_with_count", "gpsimd", [(dst, "dst", "w"), (src, "src", "r")])


@instruction("topk", "gpsimd")
def topk(ctx: Any, val_dst: Any, idx_dst: Any, src: Any, n: int, name: str | None = None) -> None:
    """Top-K (K = val_dst free size) of the ``n``-element bf16 snake held by each 16-partition group
    (element e at partition e % 16, column e // 16), ascending, with uint32 snake indices.

    Assumption (docs do not say): every partition of a group receives the group's result;
    ties rank the lower snake index as larger."""
    val_dst = tensor_arg(val_dst, "val_dst")
    idx_dst = tensor_arg(idx_dst, "idx_dst")
    src = tensor_arg(src, "src")
    check_engine_operands(ctx, [("val_dst", val_dst), ("idx_dst", idx_dst), ("src", src)], allow_psum=False,
                          engine="gpsimd")
    check_dtype(src, "src", (dt.bfloat16,))
    check_dtype(val_dst, "val_dst", (dt.bfloat16,))
    check_dtype(idx_dst, "idx_dst", (dt.uint32,))
    T = ctx.target
    n = _int_arg(n, "n")
    g = T.topk_group_partitions
    k = free_size(val_dst)
    if not T.topk_n_min <= n <= T.topk_n_max:
        raise NkiValidationError(f"n = {n} must be in [{T.topk_n_min}, {T.topk_n_max}]", operand="n",
                                 rule="instruction-limit")
    if not 1 <= k <= n or free_size(idx_dst) != k:
        raise NkiValidationError(f"K = {k} (val_dst free size) must be in [1, n={n}] and equal idx_dst's free size "
                                 f"{free_size(idx_dst)}", operand="val_dst", rule="shape-mismatch")
    p = src.shape[0]
    if p % g:
        raise NkiValidationError(f"partition size {p} must be a multiple of {g}", operand="src",
                                 rule="shape-mismatch")
    cols = free_size(src)
    if cols * g < n:
        raise NkiValidationError(f"src free size {cols} is smaller than ceil(n / {g}) = {-(-n // g)}", operand="src",
                                 rule="shape-mismatch")
    x = read(src).reshape(p, -1).astype(np.float32)
    vals = np.empty((p, k), dtype=np.float32)
    idxs = np.empty((p, k), dtype=np.uint32)
    for grp in range(p // g):
        snake = x[grp * g:(grp + 1) * g].reshape(g, -1).T.reshape(-1)[:n]
        order = np.lexsort((-np.arange(n), snake))[-k:]  # ascending value; lower index ranks larger on ties
        vals[grp * g:(grp + 1) * g] = snake[order]
        idxs[grp * g:(grp + 1) * g] = order.astype(np.uint32)
    write(ctx, val_dst, vals.reshape(val_dst.shape))
    _store_exact(idx_dst, idxs)
    record(ctx, "topk", "gpsimd", [(val_dst, "val_dst", "w"), (idx_dst, "idx_dst", "w"),
                                   (src, "src", "r")], n=n, k=k)
