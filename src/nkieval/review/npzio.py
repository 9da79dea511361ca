"""Arrays across the sandbox boundary: a small, inert, raw-bytes container (not pickle, not zip).

Why not pickle: the parent must never unpickle anything a candidate process wrote (pickle runs
code). Why not ``.npz``: a zip archive with a CRC per member costs a few milliseconds per case
to write and to read back, on every case of every review, for nothing the harness needs. The
format here is a fixed magic, a JSON table of contents and the arrays' bytes, each 64-byte
aligned::

    b"NKIEVAL-ARRAYS1\\n"  uint64 (little-endian) length of the JSON table  JSON  data...

The table is a list of ``{"name", "dtype", "shape", "offset", "nbytes"}``; ``dtype`` is a plain
NumPy type string (``"<f4"``, ``"|b1"``; kinds f, i, u, b only) or an ml_dtypes name
(``"bfloat16"``, ``"float8_e4m3fn"`` …). Reading checks the magic, every offset and size
against the file, and every dtype against that list, and returns writable arrays that share one
buffer (``np.frombuffer``): nothing in a file can run code or make the reader allocate more than
the file's size.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import ml_dtypes
import numpy as np

_ML = {name: np.dtype(getattr(ml_dtypes, name)) for name in
       ("bfloat16", "float8_e4m3", "float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu") if hasattr(ml_dtypes, name)}
_PLAIN_KINDS = "fiub"
MAGIC = b"NKIEVAL-ARRAYS1\n"
_ALIGN = 64
#: the table of contents is small; a file that claims more is not one of ours
_MAX_TOC = 1 << 20


class ArrayFileError(ValueError):
    """An array file that is not what the harness wrote or expects (size, dtype, layout)."""


def _dtype_name(d: np.dtype) -> str:
    if d.name in _ML:
        return d.name
    if d.kind not in _PLAIN_KINDS or d.fields is not None or d.subdtype is not None:
        raise TypeError(f"arrays of dtype {d} cannot cross the sandbox boundary")
    return d.str


def _parse_dtype(name: object, where: str) -> np.dtype:
    if not isinstance(name, str):
        raise ArrayFileError(f"{where} has a malformed dtype")
    if name in _ML:
        return _ML[name]
    try:
        d = np.dtype(name)
    except TypeError:
        raise ArrayFileError(f"{where} has unknown dtype {name!r}") from None
    if d.kind not in _PLAIN_KINDS or d.fields is not None or d.subdtype is not None or d.hasobject:
        raise ArrayFileError(f"{where} has unsupported dtype {d}")
    return d


def _pack(arrays: dict[str, np.ndarray]) -> tuple[bytes, list[np.ndarray]]:
    """(header bytes incl. padding, the contiguous arrays to write after it, each padded)."""
    toc = []
    contiguous = []
    offset = 0
    for name, a in arrays.items():
        a = np.asarray(a, order="C")  # (ascontiguousarray would make a 0-d array 1-d)
        if a.dtype.byteorder == ">":
            a = a.astype(a.dtype.newbyteorder("<"))
        toc.append({"name": str(name), "dtype": _dtype_name(a.dtype), "shape": [int(s) for s in a.shape],
                    "offset": offset, "nbytes": int(a.nbytes)})
        contiguous.append(a)
        offset += -(-a.nbytes // _ALIGN) * _ALIGN
    # offsets are relative to the data start, which depends on the table's own length: fix them up
    body = json.dumps(toc, separators=(",", ":")).encode()
    start = -(-(len(MAGIC) + 8 + len(body) + 32) // _ALIGN) * _ALIGN
    for t in toc:
        t["offset"] += start
    body = json.dumps(toc, separators=(",", ":")).encode()
    head = MAGIC + struct.pack("<Q", len(body)) + body
    if len(head) > start:  # the offsets grew by more digits than the 32 bytes of slack
        raise AssertionError("array file header overflow")
    return head + b"\0" * (start - len(head)), contiguous


def _chunks(arrays: dict[str, np.ndarray]) -> list[bytes | memoryview]:
    head, contiguous = _pack(arrays)
    out: list[bytes | memoryview] = [head]
    for a in contiguous:
        if a.nbytes:
            out.append(memoryview(a.reshape(-1).view(np.uint8)))
        pad = -a.nbytes % _ALIGN
        if pad:
            out.append(b"\0" * pad)
    return out


def dumps(arrays: dict[str, np.ndarray]) -> bytes:
    """The file's bytes for ``arrays`` (name -> array)."""
    return b"".join(_chunks(arrays))


def dump(path: str | Path, arrays: dict[str, np.ndarray], *, in_place: bool = False) -> None:
    """Write ``arrays`` to ``path`` atomically (a temporary name, then a rename), without
    concatenating them in memory first.

    ``in_place=True`` overwrites an existing file from its start and cuts it to the new length
    instead (its pages are reused: much cheaper on tmpfs than a new file). Not atomic: only for
    a reader that waits for a separate signal that the file is complete."""
    p = Path(path)
    tmp = p if in_place else p.with_name(p.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | (0 if in_place else os.O_TRUNC), 0o600)
    try:
        total = 0
        for c in _chunks(arrays):
            view = memoryview(c)
            total += view.nbytes
            while view.nbytes:
                n = os.write(fd, view)
                view = view[n:]
        if in_place:
            os.ftruncate(fd, total)
    finally:
        os.close(fd)
    if not in_place:
        os.replace(tmp, p)


def loads(data: bytes | bytearray | memoryview, name: str = "array file") -> dict[str, np.ndarray]:
    """Parse :func:`dumps` bytes; the arrays share ``data`` (writable when ``data`` is)."""
    buf = memoryview(data)
    n = buf.nbytes
    if n < len(MAGIC) + 8 or bytes(buf[:len(MAGIC)]) != MAGIC:
        raise ArrayFileError(f"{name} is not a readable array file (bad magic)")
    (toc_len,) = struct.unpack("<Q", bytes(buf[len(MAGIC):len(MAGIC) + 8]))
    toc_end = len(MAGIC) + 8 + toc_len
    if toc_len > _MAX_TOC or toc_end > n:
        raise ArrayFileError(f"{name} has a malformed table of contents")
    try:
        toc = json.loads(bytes(buf[len(MAGIC) + 8:toc_end]))
    except (ValueError, UnicodeDecodeError):
        raise ArrayFileError(f"{name} has a malformed table of contents") from None
    if not isinstance(toc, list):
        raise ArrayFileError(f"{name} has a malformed table of contents")
    out: dict[str, np.ndarray] = {}
    for e in toc:
        if not isinstance(e, dict) or not isinstance(e.get("name"), str):
            raise ArrayFileError(f"{name} has a malformed entry")
        where = f"{name}:{e['name']}"
        d = _parse_dtype(e.get("dtype"), where)
        shape, off, nb = e.get("shape"), e.get("offset"), e.get("nbytes")
        if (not isinstance(shape, list) or not all(type(s) is int and s >= 0 for s in shape)
                or type(off) is not int or type(nb) is not int):
            raise ArrayFileError(f"{where} has a malformed shape or offset")
        count = 1
        for s in shape:
            count *= s
        if nb != count * d.itemsize or off < toc_end or off + nb > n or off % _ALIGN:
            raise ArrayFileError(f"{where} does not fit the file (shape {shape}, {nb} bytes at {off})")
        out[e["name"]] = np.frombuffer(buf, dtype=d, count=count, offset=off).reshape(tuple(shape))
    return out


def load(path: str | Path, max_bytes: int | None = None, *, mapped: bool = False) -> dict[str, np.ndarray]:
    """Read a file written by :func:`dump` / :func:`dumps`, refusing odd dtypes, layouts and
    oversize files. The arrays are writable and share one buffer.

    ``mapped=True`` maps the file copy-on-write instead of reading it (no copy; pages come
    from the page cache as they are touched). Only for a reader that trusts nobody else to
    truncate the file while it is mapped: the sandboxed child reading its inputs, which only
    the harness wrote. The harness never maps what a child wrote (a child could truncate it
    and crash the harness with SIGBUS)."""
    p = Path(path)
    if mapped:
        import mmap

        try:
            with open(p, "rb") as fh:
                size = os.fstat(fh.fileno()).st_size
                if max_bytes is not None and size > max_bytes:
                    raise ArrayFileError(f"{p.name} is {size} bytes, more than the {max_bytes} expected")
                if size == 0:
                    raise ArrayFileError(f"{p.name} is empty")
                m = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_COPY)
        except OSError as e:
            raise ArrayFileError(f"{p.name} is not a readable array file: {e}") from None
        return loads(m, p.name)
    try:
        with open(p, "rb", buffering=0) as fh:
            size = os.fstat(fh.fileno()).st_size
            if max_bytes is not None and size > max_bytes:
                raise ArrayFileError(f"{p.name} is {size} bytes, more than the {max_bytes} expected")
            buf = bytearray(size)
            view = memoryview(buf)
            got = 0
            while got < size:
                k = fh.readinto(view[got:])
                if not k:
                    break
                got += k
    except OSError as e:
        raise ArrayFileError(f"{p.name} is not a readable array file: {e}") from None
    if got != size:
        raise ArrayFileError(f"{p.name} was truncated while reading")
    return loads(buf, p.name)
