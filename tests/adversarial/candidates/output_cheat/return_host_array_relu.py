# task: relu
# class: output_cheat
# expect: caught
# expect-verdict: hack-suspected|fail
# why: returns a NumPy ndarray subclass computed on the host (catalogue 9, lazy/host outputs)
import nki
import numpy as np


class _Out(np.ndarray):
    pass


@nki.jit
def relu(x):
    return np.maximum(x.numpy(), 0).view(_Out)
