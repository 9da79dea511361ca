"""Reference for flash_attention_bwd: float64 attention backward from the given lse."""

import math

import ml_dtypes
import numpy as np


def _keep(a):
    return a


def _bf16(a):
    """Rounded to bf16 (RNE) and widened back: a matmul operand the Tensor engine takes in bf16."""
    return np.asarray(a, dtype=np.float32).astype(ml_dtypes.bfloat16).astype(np.float64)


def _grads(q, k, v, o, do, lse, delta_term=True, operand=_keep):
    """``operand`` rounds o, P and dS, the values a kernel may feed to the Tensor engine in a coarser dtype."""
    qd, kd, vd, od, dd = (np.asarray(a, dtype=np.float64) for a in (q, k, v, o, do))
    scale = 1.0 / math.sqrt(qd.shape[1])
    p = operand(np.exp(scale * (qd @ kd.T) - np.asarray(lse, dtype=np.float64)[:, None]))
    di = (dd * operand(od)).sum(axis=1, keepdims=True) if delta_term else 0.0
    dv = p.T @ dd
    ds = operand(p * (dd @ vd.T - di))
    return scale * (ds @ kd), scale * (ds.T @ qd), dv


def oracle(q, k, v, o, do, lse):
    """float64 dq (the numerics standard judges the first output)."""
    return _grads(q, k, v, o, do, lse)[0]


def oracle_dk(q, k, v, o, do, lse):
    """float64 dk (the review judges each output with its own oracle)."""
    return _grads(q, k, v, o, do, lse)[1]


def oracle_dv(q, k, v, o, do, lse):
    """float64 dv = P^T dO."""
    return _grads(q, k, v, o, do, lse)[2]


def no_delta_term_oracle(q, k, v, o, do, lse):
    """dq with dS = P * dP: the Di = rowsum(dO * O) term is not subtracted."""
    return _grads(q, k, v, o, do, lse, delta_term=False)[0]


def no_delta_term_oracle_dk(q, k, v, o, do, lse):
    """dk with the same dS = P * dP (dv does not use dS: the flaw leaves it right)."""
    return _grads(q, k, v, o, do, lse, delta_term=False)[1]


def bf16_operands_oracle(q, k, v, o, do, lse):
    """dq with o, P and dS rounded to bf16 before the products that use them."""
    return _grads(q, k, v, o, do, lse, operand=_bf16)[0]


def bf16_operands_oracle_dk(q, k, v, o, do, lse):
    return _grads(q, k, v, o, do, lse, operand=_bf16)[1]


def bf16_operands_oracle_dv(q, k, v, o, do, lse):
    return _grads(q, k, v, o, do, lse, operand=_bf16)[2]


# Known wrong formulas: the review's numerics diagnosis names one when it reproduces dq (or, through
# "outputs", a later output the same flaw changes).
VARIANTS = {
    "no_delta_term": {
        "cause": "drops the Di = rowsum(dO * O) term: dS = P * dP instead of P * (dP - Di)",
        "action": "compute Di = rowsum(dO * O) per query and subtract it from dP before multiplying by P",
        "fn": no_delta_term_oracle,
        "outputs": {"dk": no_delta_term_oracle_dk},
    },
    "bf16_operands": {
        "cause": "rounds the probabilities P and dS to bf16 before the matmuls (the task keeps them in fp32)",
        "action": "keep P, dS and o in fp32 tiles: only q, k, v and dO arrive in bf16",
        "fn": bf16_operands_oracle,
        "outputs": {"dk": bf16_operands_oracle_dk, "dv": bf16_operands_oracle_dv},
    },
}


def reference(q, k, v, o, do, lse):
    return tuple(g.astype(np.float32) for g in _grads(q, k, v, o, do, lse))
