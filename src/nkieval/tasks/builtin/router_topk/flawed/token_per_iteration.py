"""Flawed: one token per iteration on a single partition (the CUDA warp-per-token mapping)."""

import nki
import nki.isa as nisa
import nki.language as nl

K = 8


@nki.jit
def router_topk(logits):
    t, e = logits.shape
    weights = nl.ndarray((t, K), dtype=nl.float32, buffer=nl.shared_hbm)
    experts = nl.ndarray((t, K), dtype=nl.int32, buffer=nl.shared_hbm)
    p = 1
    for i in range((t + p - 1) // p):
        rows = min(p, t - i * p)
        x = nl.ndarray((p, e), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=x[0:rows], src=logits[i * p:i * p + rows])
        top = nl.ndarray((p, K), dtype=nl.float32, buffer=nl.sbuf)
        nisa.max8(dst=top[0:rows], src=x[0:rows])
        pos = nl.ndarray((p, K), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.nc_find_index8(dst=pos[0:rows], data=x[0:rows], vals=top[0:rows])
        neg = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=neg[0:rows], data=top[0:rows, 0:1], op0=nl.multiply, operand0=-1.0)
        ex = nl.ndarray((p, K), dtype=nl.float32, buffer=nl.sbuf)
        tot = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation_reduce(dst=ex[0:rows], op=nl.exp, data=top[0:rows], bias=neg[0:rows], reduce_op=nl.add,
                               reduce_res=tot[0:rows])
        inv = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv[0:rows], data=tot[0:rows])
        nisa.tensor_scalar(dst=ex[0:rows], data=ex[0:rows], op0=nl.multiply, operand0=inv[0:rows])
        ids = nl.ndarray((p, K), dtype=nl.int32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=ids[0:rows], src=pos[0:rows])
        nisa.dma_copy(dst=weights[i * p:i * p + rows], src=ex[0:rows])
        nisa.dma_copy(dst=experts[i * p:i * p + rows], src=ids[0:rows])
    return weights, experts
