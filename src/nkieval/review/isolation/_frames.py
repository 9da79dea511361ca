"""Length-prefixed frames over pipes: an 8-byte big-endian length, then that many bytes."""

from __future__ import annotations

import os
import select
import time

_HEADER = 8


class FrameError(Exception):
    """The other end closed the pipe, sent an over-size frame, or did not answer in time."""


def write_frame(fd: int, data: bytes) -> None:
    view = memoryview(len(data).to_bytes(_HEADER, "big") + data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes:
    chunks: list[bytes] = []
    left = n
    while left:
        if deadline is not None:
            wait = deadline - time.monotonic()
            if wait <= 0 or not select.select([fd], [], [], wait)[0]:
                raise FrameError("no answer in time")
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise FrameError("pipe closed")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_frame(fd: int, cap: int, deadline: float | None = None) -> bytes:
    size = int.from_bytes(_read_exact(fd, _HEADER, deadline), "big")
    if size > cap:
        raise FrameError(f"frame of {size} bytes exceeds the cap of {cap}")
    return _read_exact(fd, size, deadline)
