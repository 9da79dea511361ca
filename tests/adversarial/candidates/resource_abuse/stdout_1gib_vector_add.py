# task: vector_add
# class: resource_abuse
# expect: caught
# why: writes 1 GiB to stdout (once per sandboxed process) to exhaust the harness's disk or memory, then returns an unwritten output
import nki
import nki.language as nl

_os = nl.inspect.os
_done = []


@nki.jit
def vector_add(a, b):
    if not _done:
        _done.append(1)
        chunk = b"x" * (1 << 20)
        for _ in range(1024):
            _os.write(1, chunk)
    return nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
