"""Baseline: evaluates the formula step by step on 128-row tiles of 512 columns.

x^3, the polynomial, tanh and the final product are separate Vector/Scalar instructions (six per
tile) where one gelu_apprx_tanh activation would do; correct for every shape.
"""

import math

import nki
import nki.isa as nisa
import nki.language as nl

F = 512
K0 = math.sqrt(2.0 / math.pi)


@nki.jit
def gelu_tanh(x):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    for i in range((n + p - 1) // p):
        rows = min(p, n - i * p)
        for j in range((d + F - 1) // F):
            w = min(F, d - j * F)
            t = nl.ndarray((p, F), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=t[0:rows, 0:w], src=x[i * p:i * p + rows, j * F:j * F + w])
            sq = nl.ndarray((p, F), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=sq[0:rows, 0:w], data1=t[0:rows, 0:w], data2=t[0:rows, 0:w], op=nl.multiply)
            # inner = x * (1 + 0.044715 x^2) * sqrt(2/pi)
            nisa.tensor_scalar(dst=sq[0:rows, 0:w], data=sq[0:rows, 0:w], op0=nl.multiply, operand0=0.044715 * K0,
                               op1=nl.add, operand1=K0)
            nisa.tensor_tensor(dst=sq[0:rows, 0:w], data1=sq[0:rows, 0:w], data2=t[0:rows, 0:w], op=nl.multiply)
            th = nl.ndarray((p, F), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=th[0:rows, 0:w], op=nl.tanh, data=sq[0:rows, 0:w])
            # 0.5 * x * (1 + tanh)
            nisa.tensor_scalar(dst=th[0:rows, 0:w], data=th[0:rows, 0:w], op0=nl.add, operand0=1.0,
                               op1=nl.multiply, operand1=0.5)
            y = nl.ndarray((p, F), dtype=x.dtype, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=y[0:rows, 0:w], data1=th[0:rows, 0:w], data2=t[0:rows, 0:w], op=nl.multiply)
            nisa.dma_copy(dst=out[i * p:i * p + rows, j * F:j * F + w], src=y[0:rows, 0:w])
    return out
