"""Baseline: 128-element columns of 256 ([128, 256] tiles), one operation per instruction.

Each term of the update is its own Vector instruction (about fifteen per tile) and each tile
moves only 1 KiB per partition per DMA. Correct for every length.
"""

import nki
import nki.isa as nisa
import nki.language as nl

F = 256


@nki.jit
def adamw_step(param, grad, m, v, lr=0.001, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01, step=10):
    n = param.shape[0]
    p_new = nl.ndarray((n,), dtype=nl.float32, buffer=nl.shared_hbm)
    m_new = nl.ndarray((n,), dtype=nl.float32, buffer=nl.shared_hbm)
    v_new = nl.ndarray((n,), dtype=nl.float32, buffer=nl.shared_hbm)
    bc1 = 1.0 - beta1 ** step
    bc2 = 1.0 - beta2 ** step
    blk = 128 * F
    for b in range((n + blk - 1) // blk):
        lo = b * blk
        cnt = min(blk, n - lo)
        rows = cnt // F
        rem = cnt - rows * F
        for r0, nr, w in ((0, rows, F), (rows * F, 1 if rem else 0, rem)):
            if nr == 0:
                continue
            a0 = lo + r0
            size = nr * w
            tiles = []
            for src in (param, grad, m, v):
                t = nl.ndarray((nr, w), dtype=nl.float32, buffer=nl.sbuf)
                nisa.dma_copy(dst=t, src=src[a0:a0 + size].reshape((nr, w)))
                tiles.append(t)
            tp, tg, tm, tv = tiles
            nisa.tensor_scalar(dst=tm, data=tm, op0=nl.multiply, operand0=beta1)
            g1 = nl.ndarray((nr, w), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_scalar(dst=g1, data=tg, op0=nl.multiply, operand0=1.0 - beta1)
            nisa.tensor_tensor(dst=tm, data1=tm, data2=g1, op=nl.add)
            nisa.tensor_scalar(dst=tv, data=tv, op0=nl.multiply, operand0=beta2)
            g2 = nl.ndarray((nr, w), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=g2, data1=tg, data2=tg, op=nl.multiply)
            nisa.tensor_scalar(dst=g2, data=g2, op0=nl.multiply, operand0=1.0 - beta2)
            nisa.tensor_tensor(dst=tv, data1=tv, data2=g2, op=nl.add)
            den = nl.ndarray((nr, w), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_scalar(dst=den, data=tv, op0=nl.multiply, operand0=1.0 / bc2)
            nisa.activation(dst=den, op=nl.sqrt, data=den)
            nisa.tensor_scalar(dst=den, data=den, op0=nl.add, operand0=eps)
            nisa.reciprocal(dst=den, data=den)
            upd = nl.ndarray((nr, w), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_scalar(dst=upd, data=tm, op0=nl.multiply, operand0=lr / bc1)
            nisa.tensor_tensor(dst=upd, data1=upd, data2=den, op=nl.multiply)
            nisa.tensor_scalar(dst=tp, data=tp, op0=nl.multiply, operand0=1.0 - lr * weight_decay)
            nisa.tensor_tensor(dst=tp, data1=tp, data2=upd, op=nl.subtract)
            nisa.dma_copy(dst=p_new[a0:a0 + size].reshape((nr, w)), src=tp)
            nisa.dma_copy(dst=m_new[a0:a0 + size].reshape((nr, w)), src=tm)
            nisa.dma_copy(dst=v_new[a0:a0 + size].reshape((nr, w)), src=tv)
    return p_new, m_new, v_new
