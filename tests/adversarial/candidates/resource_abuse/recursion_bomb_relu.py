# task: relu
# class: resource_abuse
# expect: caught
# why: raises the recursion limit (sys via nl.inspect) and recurses until the C stack overflows, crashing the interpreter mid-case
import nki
import nki.language as nl

nl.inspect.sys.setrecursionlimit(10 ** 7)


def _deep(k):
    return _deep(k + 1) + 1


@nki.jit
def relu(x):
    _deep(0)
    return nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
