"""Reference for decoder_decode_step: float64 RMSNorm, QKV, RoPE, attention over cache + new token, out-proj."""

import math

import numpy as np


def _decode(x, gamma, wq, wk, wv, cos, sin, k_cache, v_cache, wo, eps, rope_on_k=True, subtract_max=True):
    f = lambda a: np.asarray(a, dtype=np.float64)  # noqa: E731
    xd = f(x)
    b, _ = xd.shape
    h, dh = k_cache.shape[2], k_cache.shape[3]
    hn = xd / np.sqrt((xd * xd).mean(axis=1, keepdims=True) + eps) * f(gamma)
    q, k, v = ((hn @ f(w)).reshape(b, h, dh) for w in (wq, wk, wv))
    half = dh // 2

    def rope(z):
        sw = np.concatenate([z[..., half:], z[..., :half]], axis=-1)
        return z * f(cos)[:, None, :] + sw * f(sin)[:, None, :]

    q = rope(q)
    if rope_on_k:
        k = rope(k)
    kk = np.concatenate([f(k_cache), k[:, None]], axis=1)   # [B, S+1, H, Dh]
    vv = np.concatenate([f(v_cache), v[:, None]], axis=1)
    sc = np.einsum("bhd,bshd->bhs", q, kk) / math.sqrt(dh)
    if subtract_max:
        p = np.exp(sc - sc.max(axis=2, keepdims=True))
    else:  # as an fp32 kernel would compute it: exp overflows past ~88.7
        with np.errstate(over="ignore", invalid="ignore"):
            p = np.exp(sc.astype(np.float32)).astype(np.float64)
    with np.errstate(invalid="ignore"):
        p /= p.sum(axis=2, keepdims=True)
    attn = np.einsum("bhs,bshd->bhd", p, vv).reshape(b, h * dh)
    return xd + attn @ f(wo)


def oracle(x, gamma, wq, wk, wv, cos, sin, k_cache, v_cache, wo, eps=1e-6):
    return _decode(x, gamma, wq, wk, wv, cos, sin, k_cache, v_cache, wo, eps)


def no_rope_on_k_oracle(x, gamma, wq, wk, wv, cos, sin, k_cache, v_cache, wo, eps=1e-6):
    """The decode step with the rotary embedding applied to q only: the new key is scored unrotated."""
    return _decode(x, gamma, wq, wk, wv, cos, sin, k_cache, v_cache, wo, eps, rope_on_k=False)


def no_max_subtraction_oracle(x, gamma, wq, wk, wv, cos, sin, k_cache, v_cache, wo, eps=1e-6):
    """The decode step with exp(scores) in fp32 without subtracting the row maximum: scores of the normal family
    reach several hundred (the new key's q . k), so exp overflows and the softmax is inf / inf."""
    return _decode(x, gamma, wq, wk, wv, cos, sin, k_cache, v_cache, wo, eps, subtract_max=False)


# Known wrong formulas: the review's numerics diagnosis names one when it reproduces the output.
VARIANTS = {
    "no_rope_on_k": {
        "cause": "applies the rotary embedding to q only: the new key is cached and scored unrotated",
        "action": "rotate the new key with the same cos/sin as the query before scoring and caching it",
        "fn": no_rope_on_k_oracle,
    },
    "no_max_subtraction": {
        "cause": "computes the softmax without subtracting the row maximum: exp overflows to inf on scores above ~88",
        "action": "subtract each (sequence, head) row's maximum score before exp (a max reduction over S + 1 keys)",
        "fn": no_max_subtraction_oracle,
    },
}


def reference(x, gamma, wq, wk, wv, cos, sin, k_cache, v_cache, wo, eps=1e-6):
    return oracle(x, gamma, wq, wk, wv, cos, sin, k_cache, v_cache, wo, eps).astype(np.float32)
