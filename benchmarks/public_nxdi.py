"""Public NKI kernels that have no simulator test of their own, run on nkieval against NumPy references.

The NKI kernels of neuronx-distributed-inference (NxDI: contrib models and in-tree modules) and of nki-moe are
tested by their authors on Trainium only (device tests, model-level logit checks), so there is no test command to
run them with. Each case here calls one kernel the way its model calls it (shapes, argument layout, launch) and
compares the outputs with a NumPy reference written here from the kernel's documented maths (double precision).
Nothing is downloaded and no public code is in this file: the kernels are imported from local checkouts.

    .venv/bin/python benchmarks/public_nxdi.py --nxdi NXDI [--library LIB] [--moe MOE] [--cases a,b] [--json F]

``NXDI``: a checkout of aws-neuron/neuronx-distributed-inference; ``LIB``: of aws-neuron/nki-library (its ``nkilib``
helpers, which the attention_cte fork and two in-tree kernels import; those cases are skipped without it);
``MOE``: of aws-neuron/nki-moe. Each case runs in its own process (``--one NAME`` is that process) and prints one
line: ``passed``, ``failed`` (with the largest error, or nkieval's error) or ``skipped`` (a checkout not given).
``benchmarks/public_compat.py --nxdi ...`` runs this as its ``nxdi`` suite.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

D = 128
QWEN = "contrib/models/Qwen3.5-2B/src/nki_kernels"


def _module(name: str, path: Path, *extra_paths: Path) -> Any:
    for p in extra_paths:
        sys.path.insert(0, str(p))
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _functions_only(name: str, path: Path, lib: Path | None = None) -> Any:
    """The kernels of ``path`` (its ``@nki.jit`` functions) and the plain functions they call, in a module of their
    own with the NKI imports: the files' other code (classes, module-level imports) needs torch and NxD, which a
    simulator run has no use for."""
    src = path.read_text()
    funcs = [n for n in ast.parse(src).body if isinstance(n, ast.FunctionDef)]
    kernels = [n for n in funcs if any("nki.jit" in ast.unparse(d) for d in n.decorator_list)]
    called = {c.id for k in kernels for c in ast.walk(k) if isinstance(c, ast.Name)}
    keep = [n for n in funcs if n in kernels or (not n.decorator_list and n.name in called)]
    head = "from __future__ import annotations\n\nimport nki\nimport nki.isa as nisa\nimport nki.language as nl\n"
    if lib is not None:
        head += "from nkilib.core.utils.kernel_helpers import get_verified_program_sharding_info, kernel_assert\n"
    body = ["".join(f"@{ast.get_source_segment(src, d)}\n" for d in n.decorator_list) + str(ast.get_source_segment(src, n))
            for n in keep]
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as fh:
        fh.write(head + "\n\n" + "\n\n\n".join(body) + "\n")
    return _module(name, Path(fh.name), *([lib] if lib is not None else []))


def _rel_err(got: Any, want: np.ndarray) -> float:
    g = np.asarray(got, np.float64)
    if g.shape != want.shape:
        raise AssertionError(f"output shape {g.shape}, expected {want.shape}")
    return float(np.abs(g - want).max() / (np.abs(want).max() + 1e-30))


# -- Gated DeltaNet (Qwen3.5): one recurrence, several kernels -------------------------------------------------
def _l2n(x: np.ndarray) -> np.ndarray:
    return x / np.sqrt((x * x).sum(-1, keepdims=True) + 1e-6)


def _deltanet(q: np.ndarray, k: np.ndarray, v: np.ndarray, g: np.ndarray, beta: np.ndarray,
              state: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The gated delta rule per token (q, k normalised, q scaled): S = e^g S; S += k ((v - S^T k) beta)^T; o = S^T q."""
    s = np.zeros((D, D)) if state is None else state.astype(np.float64).copy()
    out = []
    for t in range(q.shape[0]):
        s = s * np.exp(g[t])
        s = s + np.outer(k[t], (v[t] - s.T @ k[t]) * beta[t])
        out.append(s.T @ q[t])
    return np.array(out), s


class _Seq:
    """Random DeltaNet inputs for one (batch, head) pair: raw q/k (the fused kernels normalise in-kernel), v, the
    per-token log-decay g < 0 and write gate beta in (0, 1), and the reference outputs."""

    def __init__(self, n: int, seed: int) -> None:
        rng = np.random.default_rng(seed)
        self.qr, self.kr, self.v = (rng.standard_normal((n, D)).astype(np.float32) for _ in range(3))
        self.g = (-0.5 * np.log1p(np.exp(rng.standard_normal(n)))).astype(np.float32)
        self.b = (1 / (1 + np.exp(-rng.standard_normal(n)))).astype(np.float32)
        self.q = (_l2n(self.qr.astype(np.float64)) / np.sqrt(D)).astype(np.float32)
        self.k = _l2n(self.kr.astype(np.float64)).astype(np.float32)
        self.out, self.state = _deltanet(self.q.astype(np.float64), self.k.astype(np.float64),
                                         self.v.astype(np.float64), self.g.astype(np.float64),
                                         self.b.astype(np.float64))

    def wide(self, x: np.ndarray) -> np.ndarray:
        return np.repeat(x[:, None], D, 1)


def _masks(fu: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return fu._make_lower_mask(), fu._make_identity(), fu._make_lower_mask_diag()


def case_deltanet_recurrent(root: Path, lib: Path | None) -> list[float]:
    m = _module("nki_deltanet", root / QWEN / "nki_deltanet.py")
    s = _Seq(256, 0)
    o, st = m.deltanet_recurrent_fwd_state(s.q, s.k, s.v, s.wide(s.g), s.wide(s.b))
    return [_rel_err(o, s.out), _rel_err(st, s.state), _rel_err(m.deltanet_recurrent_fwd(s.q, s.k, s.v, s.wide(s.g),
                                                                                       s.wide(s.b)), s.out)]


def case_deltanet_step(root: Path, lib: Path | None) -> list[float]:
    m = _module("nki_deltanet", root / QWEN / "nki_deltanet.py")
    s = _Seq(1, 1)
    s0 = (0.1 * np.random.default_rng(2).standard_normal((D, D))).astype(np.float32)
    want_o, want_s = _deltanet(s.q.astype(np.float64), s.k.astype(np.float64), s.v.astype(np.float64),
                               s.g.astype(np.float64), s.b.astype(np.float64), s0)
    o, st = m.deltanet_recurrent_step(s.q, s.k, s.v, s.wide(s.g), s.wide(s.b), s0)
    ob, sb = m.deltanet_recurrent_step_batched(s.q, s.k, s.v, s.g[:, None], s.b[:, None], s0)
    return [_rel_err(o, want_o), _rel_err(st, want_s), _rel_err(ob, want_o), _rel_err(sb, want_s)]


def case_deltanet_chunked(root: Path, lib: Path | None) -> list[float]:
    m = _module("nki_deltanet_chunked", root / QWEN / "nki_deltanet_chunked.py")
    s, c = _Seq(384, 3), 128
    lower, eye, lower_diag = (np.tril(np.ones((c, c), np.float32), -1), np.eye(c, dtype=np.float32),
                              np.tril(np.ones((c, c), np.float32)))
    state, outs = np.zeros((D, D), np.float32), []
    for i in range(0, 384, c):
        sl = slice(i, i + c)
        gc = np.cumsum(s.g[sl]).astype(np.float32)
        o, state = m.deltanet_chunk_step(s.q[sl], s.k[sl], s.v[sl], s.wide(s.b[sl]), s.wide(gc),
                                         s.wide(np.full(c, gc[-1], np.float32)), state, lower, eye, lower_diag)
        outs.append(np.asarray(o))
        state = np.asarray(state)
    return [_rel_err(np.concatenate(outs), s.out), _rel_err(state, s.state)]


def case_deltanet_fused(root: Path, lib: Path | None) -> list[float]:
    fu = _module("nki_deltanet_fused", root / QWEN / "nki_deltanet_fused.py")
    fl = _module("nki_deltanet_fused_legacy", root / QWEN / "nki_deltanet_fused_legacy.py")
    s, zero = _Seq(256, 4), np.zeros((D, D), np.float32)
    o, st = fu.deltanet_fused_chunked_fwd(s.qr, s.kr, s.v, s.g[:, None], s.b[:, None], zero, *_masks(fu))
    ol, sl = fl.deltanet_fused_chunked_fwd(s.q, s.k, s.v, s.g[:, None], s.b[:, None], zero, *_masks(fl))
    t = _Seq(256, 5)  # (a second head, launched with the first as LNC 2)
    om, sm = fu.deltanet_fused_chunked_fwd_multihead[2](
        np.stack([s.qr, t.qr]), np.stack([s.kr, t.kr]), np.stack([s.v, t.v]), np.stack([s.g, t.g])[..., None],
        np.stack([s.b, t.b])[..., None], np.zeros((2, D, D), np.float32), *_masks(fu))
    om, sm = np.asarray(om), np.asarray(sm)
    return [_rel_err(o, s.out), _rel_err(st, s.state), _rel_err(ol, s.out), _rel_err(sl, s.state),
            _rel_err(om[0], s.out), _rel_err(om[1], t.out), _rel_err(sm[1], t.state)]


def case_deltanet_autocp(root: Path, lib: Path | None) -> list[float]:
    """The AutoCP prefill paths, launched as the model launches them where nki.language has no spmd_dim."""
    fu = _module("nki_deltanet_fused", root / QWEN / "nki_deltanet_fused.py")
    s, zero = _Seq(1024, 6), np.zeros((D, D), np.float32)
    g, b = s.g[:, None], s.b[:, None]
    base, ostate, smat, sbias = fu.deltanet_autocp_affine_sequence[2](s.qr, s.kr, s.v, g, b, *_masks(fu))
    o, st = fu.deltanet_autocp_prefix_apply_output(base, ostate, smat, sbias, zero)
    states, st2 = fu.deltanet_autocp_state_prefix(smat, sbias, zero)
    o2 = fu.deltanet_autocp_apply_output(base, ostate, states)
    seg_m, seg_b = fu.deltanet_autocp_state_summary_sequence[2](s.kr, s.v, g, b, *_masks(fu)[:2])
    segs, st3 = fu.deltanet_autocp_state_prefix(seg_m, seg_b, zero)
    n = fu.AUTOCP_CP_CHUNKS * 128
    outs = [np.asarray(fu.deltanet_fused_chunked_fwd_multihead[1](
        s.qr[None, i:i + n], s.kr[None, i:i + n], s.v[None, i:i + n], g[None, i:i + n], b[None, i:i + n],
        np.asarray(segs)[i // n:i // n + 1], *_masks(fu))[0])[0] for i in range(0, 1024, n)]
    return [_rel_err(np.asarray(o).reshape(1024, D), s.out), _rel_err(st, s.state),
            _rel_err(np.asarray(o2).reshape(1024, D), s.out), _rel_err(st2, s.state),
            _rel_err(np.concatenate(outs), s.out), _rel_err(st3, s.state)]


def case_qwen_qk_norm_rope(root: Path, lib: Path | None) -> list[float]:
    import ml_dtypes

    m = _module("qwen_qk_norm_rope", root / QWEN / "qwen_qk_norm_rope.py")
    rng, errs = np.random.default_rng(7), []

    def ref(p: np.ndarray, gamma: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
        b, n, w = p.shape
        x = p.astype(np.float64).reshape(b, n, w // 256, 256).transpose(0, 2, 1, 3)
        x = x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * gamma.astype(np.float64)
        out, c, s = x.copy(), cos.astype(np.float64)[:, None], sin.astype(np.float64)[:, None]
        out[..., :32] = x[..., :32] * c[..., :32] - x[..., 32:64] * s[..., :32]  # (partial RoPE, rotate-half)
        out[..., 32:64] = x[..., 32:64] * c[..., 32:64] + x[..., :32] * s[..., 32:64]
        return out

    for b, n, qh, kh, dt in ((2, 200, 4, 2, np.float32), (1, 300, 2, 1, ml_dtypes.bfloat16)):
        q, k = (rng.standard_normal((b, n, h * 256)).astype(dt) for h in (qh, kh))
        qg, kg = ((1 + 0.1 * rng.standard_normal(256)).astype(dt) for _ in range(2))
        ang = rng.uniform(0, 2 * np.pi, (b, n, 64))
        cos, sin = np.cos(ang).astype(dt), np.sin(ang).astype(dt)
        qo, ko = m.qwen_qk_norm_partial_rope_kernel(q, k, qg, kg, cos, sin, 1e-6)
        tol = 1.0 if dt is np.float32 else 1 / 64  # (a bf16 output is rounded to 8 significant bits)
        errs += [_rel_err(qo, ref(q, qg, cos, sin)) * tol, _rel_err(ko, ref(k, kg, cos, sin)) * tol]
    return errs


def case_glm_mla_decode(root: Path, lib: Path | None) -> list[float]:
    import ml_dtypes

    m = _module("mla_attention_nki_kernel", root / "contrib/models/GLM-5.2/src/mla_attention_nki_kernel.py")
    rng, errs, d_rope, d_c, d_v = np.random.default_rng(8), [], 64, 512, 256
    for b, h, n in ((1, 2, 512), (4, 2, 256), (1, 2, 2048)):
        bf = ml_dtypes.bfloat16
        q_pe, q_nope = ((0.1 * rng.standard_normal((b * h, d))).astype(bf) for d in (d_rope, d_c))
        kv = (0.1 * rng.standard_normal((b, n, d_rope + d_c))).astype(bf)
        v_absorb = (0.1 * rng.standard_normal((h, d_v, d_c))).astype(bf)
        mask = rng.random((b * h, n)) < 0.9
        scale = d_v ** -0.5
        out = m.mla_attention_tkg(q_pe=q_pe, q_nope=q_nope, kv_cache=kv, v_absorb=v_absorb, attn_mask=mask,
                                  softmax_scale=scale, n_heads=h, d_rope=d_rope, d_c=d_c, d_v=d_v, seq_len=n)
        want = np.zeros((b * h, d_v))
        for bh in range(b * h):
            cache = kv[bh // h].astype(np.float64)
            s = (cache[:, :d_rope] @ q_pe[bh].astype(np.float64) + cache[:, d_rope:] @ q_nope[bh].astype(np.float64))
            s = np.where(mask[bh], s * scale, -np.inf)
            w = np.exp(s - s.max())
            want[bh] = (w / w.sum()) @ cache[:, d_rope:] @ v_absorb[bh % h].astype(np.float64).T
        errs.append(_rel_err(out, want) / 64)  # (bf16 output)
    return errs


def _attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, bias: np.ndarray, scale: float) -> np.ndarray:
    s = scale * np.einsum("bqd,bkd->bqk", q.astype(np.float64), k.astype(np.float64)) + bias[:, None, :]
    p = np.exp(s - s.max(-1, keepdims=True))
    return np.einsum("bqk,bkd->bqd", p / p.sum(-1, keepdims=True), v.astype(np.float64))


def case_ltx2_cross_attention(root: Path, lib: Path | None) -> list[float]:
    """Written for NKI 0.2 (an nl.hbm output, an error since NKI 0.3): the case expects that error."""
    import ml_dtypes

    from nkieval.sim.errors import NkiValidationError

    m = _module("nki_cross_attention_kernel", root / "contrib/models/ltx2-video-audio/src/nki_cross_attention_kernel.py")
    rng = np.random.default_rng(9)
    q = (rng.standard_normal((2, 256, D)) / np.sqrt(D)).astype(ml_dtypes.bfloat16)
    k, v = (rng.standard_normal((2, 1024, D)).astype(ml_dtypes.bfloat16) for _ in range(2))
    bias = np.where(rng.random((2, 1024)) < 0.3, -10000.0, 0.0).astype(ml_dtypes.bfloat16)
    try:
        m.cross_attn_kernel(q, k, v, bias)
    except NkiValidationError as e:
        if "since NKI 0.3" in str(e):
            raise _Kept("returns an nl.hbm tensor: an NKI 0.2 kernel (outputs must be nl.shared_hbm since NKI 0.3, "
                        "NKI's migration guide); with the output in nl.shared_hbm it computes the reference") from e
        raise
    raise AssertionError("an nl.hbm output was accepted")


def case_ltx2_attention_cte_bias(root: Path, lib: Path | None) -> list[float]:
    import ml_dtypes
    import nki

    if lib is None:
        raise _Skip("needs --library (nkilib)")
    m = _module("attention_cte_bias", root / "contrib/models/ltx2-video-audio/src/attention_cte_bias.py",
                lib / "src/nkilib_src")
    kernel = nki.jit(m.attention_cte_with_bias.fn, mode="torchxla", platform_target="trn2")
    rng, errs = np.random.default_rng(10), []
    for lnc, (bh, nq, nk) in ((2, (2, 512, 1024)), (1, (1, 1024, 512))):
        q, k, v = (rng.standard_normal((bh, n, D)).astype(ml_dtypes.bfloat16) for n in (nq, nk, nk))
        bias = np.where(rng.random((bh, nk)) < 0.3, -10000.0, 0.0)
        scale = 1 / np.sqrt(D)
        out = kernel[(lnc,)](q=q, k=k, v=v, scale=scale, causal_mask=False, tp_q=True, tp_k=True, tp_out=False,
                             bias=(bias / scale).astype(np.float32))
        errs.append(_rel_err(out, _attention(q, k, v, bias, scale)) / 64)
    return errs


def case_nxdi_cache_kernels(root: Path, lib: Path | None) -> list[float]:
    """The in-tree kernels: EAGLE's rolling hidden-state buffer, the KV-cache write at a batch index, the
    rank's slice along dimension 0 (in-place updates through .ap(scalar_offset=...) views)."""
    if lib is None:
        raise _Skip("needs --library (nkilib)")
    src = root / "src/neuronx_distributed_inference"
    lib_src = lib / "src/nkilib_src"
    hs = _functions_only("hidden_state", src / "modules/eagle/hidden_state.py", lib_src)
    kvu = _functions_only("kvcache_utils", src / "modules/kvcache/utils.py", lib_src)
    dist = _functions_only("distributed", src / "utils/distributed.py", lib_src)
    rng, errs = np.random.default_rng(11), []
    for b, pad, h in ((8, 1, 1024), (8, 0, 512)):
        buf = rng.standard_normal((b + pad, 10, h)).astype(np.float32)
        hid = rng.standard_normal((b, h)).astype(np.float32)
        ids, pos = rng.permutation(b).astype(np.int32), rng.integers(0, 10, b).astype(np.int32)
        want = buf.astype(np.float64)
        want[ids, pos] = hid
        errs.append(_rel_err(hs.rolling_buffer_set_state(buf.copy(), hid, ids, pos), want))
    for lnc in (1, 2):
        kk, vv = (rng.standard_normal((1, 2, 16, 64)).astype(np.float32) for _ in range(2))
        kp, vp = (rng.standard_normal((4, 2, 32, 64)).astype(np.float32) for _ in range(2))
        wk, wv = kp.astype(np.float64), vp.astype(np.float64)
        wk[2, :, :16], wv[2, :, :16] = kk[0], vv[0]
        ok, ov = kvu.write_kv_cache_at_batch_kernel[lnc](kk, vv, kp, vp, np.array([2], np.int32))
        t = rng.standard_normal((8, 6, 5)).astype(np.float32)
        errs += [_rel_err(ok, wk), _rel_err(ov, wv),
                 _rel_err(dist.split_along_dim0_kernel[lnc](t, np.array([3], np.int32), 4), t[6:8].astype(np.float64))]
    return errs


def case_nxdi_topk(root: Path, lib: Path | None) -> list[float]:
    """The NKI Library's rotational top-k at the shapes NxDI's own top-k test uses (Llama 3 and 4 vocabularies, up
    to 256 of them, sorted and not; one program for a single row, else two), against NumPy's sort."""
    if lib is None:
        raise _Skip("needs --library (nkilib)")
    sys.path.insert(0, str(lib / "src/nkilib_src"))
    from nkilib.core.topk import topk

    rng, errs = np.random.default_rng(13), []
    for b, s, v, k, is_sorted in ((1, 1, 2004, 8, True), (1, 3, 3157, 256, True), (4, 1, 2004, 256, True),
                                  (1, 5, 2004, 256, False), (4, None, 3168, 256, True)):
        logits = rng.standard_normal((b, s, v) if s else (b, v)).astype(np.float32)
        values, idx = topk[1 if b * (s or 1) == 1 else 2](logits, k=k, sorted_flag=is_sorted)
        want_idx = np.argsort(-logits, axis=-1, kind="stable")[..., :k]
        want = np.take_along_axis(logits, want_idx, -1).astype(np.float64)
        got, got_idx = np.asarray(values, np.float64), np.asarray(idx).astype(np.int64)
        if not is_sorted:  # (the same k values, in any order)
            got, want = np.sort(got, -1), np.sort(want, -1)
            got_idx, want_idx = np.sort(got_idx, -1), np.sort(want_idx, -1)
        errs += [_rel_err(got, want), 0.0 if np.array_equal(got_idx, want_idx) else 1.0]
    return errs


def case_moe_rmsnorm(root: Path, lib: Path | None) -> list[float]:
    import ml_dtypes

    m = _functions_only("nki_custom_rmsnorm", root / "nki_custom_rmsnorm.py")
    rng, errs = np.random.default_rng(12), []
    for rows, hidden, dt in ((128, 2048, np.float32), (200, 2048, np.float32), (37, 4096, ml_dtypes.bfloat16)):
        x = rng.standard_normal((rows, hidden)).astype(dt)
        w = (1 + 0.1 * rng.standard_normal(hidden)).astype(dt)
        xf = x.astype(np.float64)
        want = xf / np.sqrt((xf * xf).mean(-1, keepdims=True) + 1e-6) * w.astype(np.float64)
        errs.append(_rel_err(m.nki_rmsnorm_kernel(x, w, 1e-6), want) * (1.0 if dt is np.float32 else 1 / 64))
    return errs


class _Skip(Exception):
    pass


class _Kept(Exception):
    """nkieval refuses the kernel by a documented rule of the NKI version it follows (the message says which)."""


#: name -> (checkout it needs: "nxdi" or "moe", the case)
CASES: dict[str, tuple[str, Callable[[Path, Path | None], list[float]]]] = {
    "deltanet-recurrent": ("nxdi", case_deltanet_recurrent), "deltanet-step": ("nxdi", case_deltanet_step),
    "deltanet-chunked": ("nxdi", case_deltanet_chunked), "deltanet-fused": ("nxdi", case_deltanet_fused),
    "deltanet-autocp": ("nxdi", case_deltanet_autocp), "qwen-qk-norm-rope": ("nxdi", case_qwen_qk_norm_rope),
    "glm-mla-decode": ("nxdi", case_glm_mla_decode), "ltx2-cross-attention": ("nxdi", case_ltx2_cross_attention),
    "ltx2-attention-cte-bias": ("nxdi", case_ltx2_attention_cte_bias),
    "nxdi-cache-kernels": ("nxdi", case_nxdi_cache_kernels), "nxdi-topk": ("nxdi", case_nxdi_topk),
    "moe-rmsnorm": ("moe", case_moe_rmsnorm),
}
#: the largest error a case may have, relative to the reference's largest magnitude (bf16 outputs are scaled
#: by 1/64 in the cases above, so an error of one bf16 rounding counts like an fp32 result's 2e-3)
TOLERANCE = 2e-3


def _one(name: str, roots: dict[str, Path | None], lib: Path | None) -> dict[str, Any]:
    import nkieval.frontends

    nkieval.frontends.install()
    need, fn = CASES[name]
    root = roots.get(need)
    if root is None:
        return {"case": name, "outcome": "skipped", "why": f"no --{need} checkout"}
    t0 = time.perf_counter()
    try:
        errs = fn(root, lib)
    except _Skip as e:
        return {"case": name, "outcome": "skipped", "why": str(e)}
    except _Kept as e:
        return {"case": name, "outcome": "failed", "blame": "kept", "why": str(e)}
    except (FileNotFoundError, ModuleNotFoundError) as e:
        if str(getattr(e, "name", "") or "").split(".")[0] not in ("nki", "neuronxcc"):  # (not a module NKI has)
            return {"case": name, "outcome": "failed", "blame": "out of scope",
                    "why": f"the checkout lacks what the case loads: {type(e).__name__}: {e}"}
        return {"case": name, "outcome": "failed", "why": f"{type(e).__name__}: {e}"}
    except Exception as e:  # (nkieval's refusal or a wrong shape: the case's failure, reported)
        return {"case": name, "outcome": "failed", "why": f"{type(e).__name__}: {str(e)[:400]}"}
    worst = max(errs)
    ok = worst <= TOLERANCE
    return {"case": name, "outcome": "passed" if ok else "failed", "max_rel_err": worst,
            "why": None if ok else f"largest error {worst:.2e} of the reference's scale", "s": time.perf_counter() - t0}


def run_cases(names: list[str], nxdi: Path | None, moe: Path | None, lib: Path | None,
              timeout: float = 900.0) -> list[dict[str, Any]]:
    """Each case in a child process of its own (a kernel module per case, nothing shared between them)."""
    out = []
    for name in names:
        cmd = [sys.executable, __file__, "--one", name]
        for flag, p in (("--nxdi", nxdi), ("--moe", moe), ("--library", lib)):
            if p is not None:
                cmd += [flag, str(p)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
            last = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
            out.append(json.loads(last) if last.startswith("{") else
                       {"case": name, "outcome": "failed", "why": f"crashed: {proc.stderr.strip()[-300:]}"})
        except subprocess.TimeoutExpired:
            out.append({"case": name, "outcome": "failed", "why": f"timed out after {timeout:g} s"})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nxdi", type=Path, help="checkout of aws-neuron/neuronx-distributed-inference")
    ap.add_argument("--moe", type=Path, help="checkout of aws-neuron/nki-moe")
    ap.add_argument("--library", type=Path, help="checkout of aws-neuron/nki-library (nkilib helpers)")
    ap.add_argument("--cases", default="", help="comma-separated case names (default: all)")
    ap.add_argument("--json", type=Path, help="write the results here")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(_one(args.one, {"nxdi": args.nxdi, "moe": args.moe}, args.library), default=str))
        return 0
    names = [c for c in args.cases.split(",") if c] or list(CASES)
    results = run_cases(names, args.nxdi, args.moe, args.library)
    for r in results:
        err = f"  (max rel err {r['max_rel_err']:.1e})" if "max_rel_err" in r else ""
        kept = f" ({r['blame']})" if r.get("blame") else ""
        print(f"{r['case']:<26} {r['outcome'] + kept:<15}{err}  {r.get('why') or ''}")
    ran = [r for r in results if r["outcome"] != "skipped"]
    print(f"{sum(r['outcome'] == 'passed' for r in ran)} passed of {len(ran)} run ({len(results) - len(ran)} skipped)")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str))
    return 0 if all(r["outcome"] == "passed" or r.get("blame") in ("kept", "out of scope") for r in ran) else 1


if __name__ == "__main__":
    sys.exit(main())
