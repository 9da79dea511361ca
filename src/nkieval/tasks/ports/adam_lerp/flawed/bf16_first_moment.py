"""Flawed port: m1 is a bf16 tile."""

import nki
import nki.isa as nisa
import nki.language as nl


def _update(p_in, g_in, m_in, v_in, p_out, m_out, v_out, rows, w, lr, beta1, beta2, eps, bc1, bc2):
    t = {}
    for name, src in (("p", p_in), ("g", g_in), ("m", m_in), ("v", v_in)):
        t[name] = nl.ndarray((rows, w), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t[name], src=src)
    g1 = nl.ndarray((rows, w), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=g1, data=t["g"], op0=nl.multiply, operand0=1.0 - beta1)
    m1 = nl.ndarray((rows, w), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.scalar_tensor_tensor(dst=m1, data=t["m"], op0=nl.multiply, operand0=beta1, op1=nl.add, operand1=g1)
    g2 = nl.ndarray((rows, w), dtype=nl.float32, buffer=nl.sbuf)
    nisa.scalar_tensor_tensor(dst=g2, data=t["g"], op0=nl.multiply, operand0=1.0 - beta2, op1=nl.multiply,
                              operand1=t["g"])
    v1 = nl.ndarray((rows, w), dtype=nl.float32, buffer=nl.sbuf)
    nisa.scalar_tensor_tensor(dst=v1, data=t["v"], op0=nl.multiply, operand0=beta2, op1=nl.add, operand1=g2)
    den = nl.ndarray((rows, w), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=den, op=nl.sqrt, data=v1, scale=1.0 / bc2)
    nisa.tensor_scalar(dst=den, data=den, op0=nl.add, operand0=eps)
    nisa.reciprocal(dst=den, data=den)
    upd = nl.ndarray((rows, w), dtype=nl.float32, buffer=nl.sbuf)
    nisa.scalar_tensor_tensor(dst=upd, data=m1, op0=nl.multiply, operand0=lr / bc1, op1=nl.multiply, operand1=den)
    p1 = nl.ndarray((rows, w), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=p1, data1=t["p"], data2=upd, op=nl.subtract)
    nisa.dma_copy(dst=p_out, src=p1)
    nisa.dma_copy(dst=m_out, src=m1)
    nisa.dma_copy(dst=v_out, src=v1)


@nki.jit
def adam_lerp(param, grad, m, v, lr=0.001, beta1=0.9, beta2=0.999, eps=1e-8, step=10):
    n = param.shape[0]
    outs = [nl.ndarray((n,), dtype=nl.float32, buffer=nl.shared_hbm) for _ in range(3)]
    bc1 = 1.0 - beta1 ** step
    bc2 = 1.0 - beta2 ** step
    hyper = (lr, beta1, beta2, eps, bc1, bc2)
    p = nl.tile_size.pmax
    cols = n // p
    bulk = cols * p
    ins = (param, grad, m, v)
    if cols > 0:
        _update(*[a[0:bulk].reshape((p, cols)) for a in ins], *[o[0:bulk].reshape((p, cols)) for o in outs], p, cols,
                *hyper)
    r = n - bulk
    if r > 0:
        _update(*[a[bulk:n].reshape((1, r)) for a in ins], *[o[bulk:n].reshape((1, r)) for o in outs], 1, r, *hyper)
    return outs[0], outs[1], outs[2]
