"""Flawed port: g = grad - wd * p."""

import nki
import nki.isa as nisa
import nki.language as nl


def _update(p_in, g_in, b_in, p_out, b_out, rows, w, lr, momentum, weight_decay):
    t = {}
    for name, src in (("p", p_in), ("g", g_in), ("b", b_in)):
        t[name] = nl.ndarray((rows, w), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t[name], src=src)
    g = nl.ndarray((rows, w), dtype=nl.float32, buffer=nl.sbuf)
    nisa.scalar_tensor_tensor(dst=g, data=t["p"], op0=nl.multiply, operand0=-weight_decay, op1=nl.add,
                              operand1=t["g"])
    b = nl.ndarray((rows, w), dtype=nl.float32, buffer=nl.sbuf)
    nisa.scalar_tensor_tensor(dst=b, data=t["b"], op0=nl.multiply, operand0=momentum, op1=nl.add, operand1=g)
    step = nl.ndarray((rows, w), dtype=nl.float32, buffer=nl.sbuf)
    nisa.scalar_tensor_tensor(dst=step, data=b, op0=nl.multiply, operand0=momentum, op1=nl.add, operand1=g)
    p1 = nl.ndarray((rows, w), dtype=nl.float32, buffer=nl.sbuf)
    nisa.scalar_tensor_tensor(dst=p1, data=step, op0=nl.multiply, operand0=-lr, op1=nl.add, operand1=t["p"])
    nisa.dma_copy(dst=p_out, src=p1)
    nisa.dma_copy(dst=b_out, src=b)


@nki.jit
def sgd_nesterov(param, grad, buf, lr=0.05, momentum=0.9, weight_decay=0.01):
    n = param.shape[0]
    outs = [nl.ndarray((n,), dtype=nl.float32, buffer=nl.shared_hbm) for _ in range(2)]
    hyper = (lr, momentum, weight_decay)
    p = nl.tile_size.pmax
    cols = n // p
    bulk = cols * p
    ins = (param, grad, buf)
    if cols > 0:
        _update(*[a[0:bulk].reshape((p, cols)) for a in ins], *[o[0:bulk].reshape((p, cols)) for o in outs], p, cols,
                *hyper)
    r = n - bulk
    if r > 0:
        _update(*[a[bulk:n].reshape((1, r)) for a in ins], *[o[bulk:n].reshape((1, r)) for o in outs], 1, r, *hyper)
    return outs[0], outs[1]
