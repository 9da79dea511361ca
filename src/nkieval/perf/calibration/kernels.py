"""Our own NKI kernels (current ``nki`` API) for each published optimisation step and micro-result.

Written from the published *descriptions* (research notes perf-model.md §3.1, §3.5 and
corpus.md §4.1, §4.3), not from the published code. Importing this module needs the ``nki``
shim (``nkieval.frontends.install()``). Shapes are parameters so that tests can run small
versions; the validation script uses the published shapes.

Matmul convention throughout: ``out[M, N] = lhsT[K, M].T @ rhs[K, N]`` in bf16 with fp32 PSUM
accumulation and a result in the *input* dtype (bf16), as in both published kernels: the tutorial's
``result = nl.ndarray((M, N), dtype=lhsT.dtype)`` and its SBUF ``result_tiles`` of ``lhsT.dtype``, and
the trn2 example's minimum I/O of 100,663,296 B = 3 × 4096² × 2 B (corpus.md 4.3). Tiles are 128 (K) ×
128 (M) stationary and 128 × 512 (N) moving.
"""

from __future__ import annotations

import nki
import nki.isa as nisa
import nki.language as nl

TK, TM, TN = 128, 128, 512


# -- matmul tutorial ladder (trn1, perf-model.md 3.1) ------------------------------------------------
@nki.jit
def mm_tiled(lhsT, rhs):
    """Step 0: loops over (m, n, k) tiles, both operand tiles loaded inside the k loop."""
    k_, m_ = lhsT.shape
    _, n_ = rhs.shape
    out = nl.ndarray((m_, n_), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(m_ // TM):
        for n in nl.affine_range(n_ // TN):
            acc = nl.ndarray((TM, TN), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(k_ // TK):
                a = nl.ndarray((TK, TM), dtype=lhsT.dtype, buffer=nl.sbuf)
                b = nl.ndarray((TK, TN), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=a, src=lhsT[k * TK:(k + 1) * TK, m * TM:(m + 1) * TM])
                nisa.dma_copy(dst=b, src=rhs[k * TK:(k + 1) * TK, n * TN:(n + 1) * TN])
                nisa.nc_matmul(dst=acc, stationary=a, moving=b)
            res = nl.ndarray((TM, TN), dtype=lhsT.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res, src=acc)
            nisa.dma_copy(dst=out[m * TM:(m + 1) * TM, n * TN:(n + 1) * TN], src=res)
    return out


@nki.jit
def mm_hoisted(lhsT, rhs):
    """Step 1: the lhsT column strip is loaded once per m; rhs tiles once per (m, n), before the matmuls."""
    k_, m_ = lhsT.shape
    _, n_ = rhs.shape
    kt = k_ // TK
    out = nl.ndarray((m_, n_), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(m_ // TM):
        a = nl.ndarray((TK, kt, TM), dtype=lhsT.dtype, buffer=nl.sbuf)
        for k in nl.affine_range(kt):
            nisa.dma_copy(dst=a[:, k, :], src=lhsT[k * TK:(k + 1) * TK, m * TM:(m + 1) * TM])
        for n in nl.affine_range(n_ // TN):
            b = nl.ndarray((TK, kt, TN), dtype=rhs.dtype, buffer=nl.sbuf)
            for k in nl.affine_range(kt):
                nisa.dma_copy(dst=b[:, k, :], src=rhs[k * TK:(k + 1) * TK, n * TN:(n + 1) * TN])
            acc = nl.ndarray((TM, TN), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(kt):
                nisa.nc_matmul(dst=acc, stationary=a[:, k, :], moving=b[:, k, :])
            res = nl.ndarray((TM, TN), dtype=lhsT.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res, src=acc)
            nisa.dma_copy(dst=out[m * TM:(m + 1) * TM, n * TN:(n + 1) * TN], src=res)
            del b
        del a
    return out


@nki.jit
def mm_block_free(lhsT, rhs, bm_tiles=2, bn_tiles=2):
    """Step 2: blocks of ``bm_tiles`` × ``bn_tiles`` output tiles reuse each loaded operand tile."""
    k_, m_ = lhsT.shape
    _, n_ = rhs.shape
    kt = k_ // TK
    out = nl.ndarray((m_, n_), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for mb in nl.affine_range(m_ // (TM * bm_tiles)):
        a = nl.ndarray((TK, bm_tiles, kt, TM), dtype=lhsT.dtype, buffer=nl.sbuf)
        for i in nl.affine_range(bm_tiles):
            m0 = (mb * bm_tiles + i) * TM
            for k in nl.affine_range(kt):
                nisa.dma_copy(dst=a[:, i, k, :], src=lhsT[k * TK:(k + 1) * TK, m0:m0 + TM])
        for nb in nl.affine_range(n_ // (TN * bn_tiles)):
            b = nl.ndarray((TK, bn_tiles, kt, TN), dtype=rhs.dtype, buffer=nl.sbuf)
            for j in nl.affine_range(bn_tiles):
                n0 = (nb * bn_tiles + j) * TN
                for k in nl.affine_range(kt):
                    nisa.dma_copy(dst=b[:, j, k, :], src=rhs[k * TK:(k + 1) * TK, n0:n0 + TN])
            for i in nl.affine_range(bm_tiles):
                for j in nl.affine_range(bn_tiles):
                    acc = nl.ndarray((TM, TN), dtype=nl.float32, buffer=nl.psum)
                    for k in nl.affine_range(kt):
                        nisa.nc_matmul(dst=acc, stationary=a[:, i, k, :], moving=b[:, j, k, :])
                    res = nl.ndarray((TM, TN), dtype=lhsT.dtype, buffer=nl.sbuf)
                    nisa.tensor_copy(dst=res, src=acc)
                    m0 = (mb * bm_tiles + i) * TM
                    n0 = (nb * bn_tiles + j) * TN
                    nisa.dma_copy(dst=out[m0:m0 + TM, n0:n0 + TN], src=res)
            del b
        del a
    return out


@nki.jit
def mm_fully_blocked(lhsT, rhs, bm_tiles=16, bn_tiles=2, bk_tiles=8):
    """Step 3: blocks in M, N and K; K blocks in a sequential loop accumulate into SBUF result tiles
    (PSUM partial sums added by the Vector engine); operands loaded as wide rows (one DMA per K tile); the
    result rows of each M tile gathered into one packed tile (a Vector copy per N tile), stored by one DMA."""
    k_, m_ = lhsT.shape
    _, n_ = rhs.shape
    bm, bn, bk = TM * bm_tiles, TN * bn_tiles, TK * bk_tiles
    nmb = m_ // bm
    out = nl.ndarray((m_, n_), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for nb in nl.affine_range(n_ // bn):
        result = nl.zeros((TM, nmb, bm_tiles, bn_tiles, TN), dtype=lhsT.dtype, buffer=nl.sbuf)
        for kb in nl.sequential_range(k_ // bk):
            b = nl.ndarray((TK, bk_tiles, bn), dtype=rhs.dtype, buffer=nl.sbuf)
            for t in nl.affine_range(bk_tiles):
                k0 = (kb * bk_tiles + t) * TK
                nisa.dma_copy(dst=b[:, t, :], src=rhs[k0:k0 + TK, nb * bn:(nb + 1) * bn])
            for mb in nl.affine_range(nmb):
                a = nl.ndarray((TK, bk_tiles, bm), dtype=lhsT.dtype, buffer=nl.sbuf)
                for t in nl.affine_range(bk_tiles):
                    k0 = (kb * bk_tiles + t) * TK
                    nisa.dma_copy(dst=a[:, t, :], src=lhsT[k0:k0 + TK, mb * bm:(mb + 1) * bm])
                for j in nl.affine_range(bn_tiles):
                    for i in nl.affine_range(bm_tiles):
                        acc = nl.ndarray((TM, TN), dtype=nl.float32, buffer=nl.psum)
                        for t in nl.affine_range(bk_tiles):
                            nisa.nc_matmul(dst=acc, stationary=a[:, t, i * TM:(i + 1) * TM],
                                           moving=b[:, t, j * TN:(j + 1) * TN])
                        nisa.tensor_tensor(dst=result[:, mb, i, j, :], data1=result[:, mb, i, j, :], data2=acc,
                                           op=nl.add)
                del a
            del b
        for mb in nl.affine_range(nmb):
            for i in nl.affine_range(bm_tiles):
                packed = nl.ndarray((TM, bn), dtype=lhsT.dtype, buffer=nl.sbuf)
                for j in nl.affine_range(bn_tiles):
                    nisa.tensor_copy(dst=packed[:, j * TN:(j + 1) * TN], src=result[:, mb, i, j, :])
                m0 = mb * bm + i * TM
                nisa.dma_copy(dst=out[m0:m0 + TM, nb * bn:(nb + 1) * bn], src=packed)
                del packed
        del result
    return out


# -- trn2 4096^3 bf16 worked example (corpus.md 4.3) --------------------------------------------------
@nki.jit
def mm_v1_block_m(lhsT, rhs, bm_tiles=8, bn_tiles=2, rows=False):
    """V1: output blocks of ``bm_tiles`` × ``bn_tiles`` tiles, each tile loaded by its own DMA ("V1 loads individual
    tiles per DMA call (128x128 for lhsT, 128x512 for rhs)"): per K tile, ``bm_tiles`` [128, 128] lhsT DMAs and
    ``bn_tiles`` [128, 512] rhs DMAs. V2 (``rows``): one [128, bm] lhsT and one [128, bn] rhs row DMA per K tile."""
    k_, m_ = lhsT.shape
    _, n_ = rhs.shape
    kt = k_ // TK
    bm, bn = TM * bm_tiles, TN * bn_tiles
    out = nl.ndarray((m_, n_), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    # (the lhsT and rhs loads are written out separately, not through one helper: the model gives each DMA source
    # line its own queue, as the compiler gives each DMA instruction)
    for mb in nl.affine_range(m_ // bm):
        a = nl.ndarray((TK, kt, bm), dtype=lhsT.dtype, buffer=nl.sbuf)
        for k in nl.affine_range(kt):
            if rows:
                nisa.dma_copy(dst=a[:, k, :], src=lhsT[k * TK:(k + 1) * TK, mb * bm:(mb + 1) * bm])
            else:
                for i in nl.affine_range(bm_tiles):
                    m0 = mb * bm + i * TM
                    nisa.dma_copy(dst=a[:, k, i * TM:(i + 1) * TM], src=lhsT[k * TK:(k + 1) * TK, m0:m0 + TM])
        for nb in nl.affine_range(n_ // bn):
            b = nl.ndarray((TK, kt, bn), dtype=rhs.dtype, buffer=nl.sbuf)
            for k in nl.affine_range(kt):
                if rows:
                    nisa.dma_copy(dst=b[:, k, :], src=rhs[k * TK:(k + 1) * TK, nb * bn:(nb + 1) * bn])
                else:
                    for j in nl.affine_range(bn_tiles):
                        n0 = nb * bn + j * TN
                        nisa.dma_copy(dst=b[:, k, j * TN:(j + 1) * TN], src=rhs[k * TK:(k + 1) * TK, n0:n0 + TN])
            for i in nl.affine_range(bm_tiles):
                res = nl.ndarray((TM, bn), dtype=lhsT.dtype, buffer=nl.sbuf)
                for j in nl.affine_range(bn_tiles):
                    acc = nl.ndarray((TM, TN), dtype=nl.float32, buffer=nl.psum)
                    for k in nl.affine_range(kt):
                        nisa.nc_matmul(dst=acc, stationary=a[:, k, i * TM:(i + 1) * TM],
                                       moving=b[:, k, j * TN:(j + 1) * TN])
                    nisa.tensor_copy(dst=res[:, j * TN:(j + 1) * TN], src=acc)
                m0 = mb * bm + i * TM
                nisa.dma_copy(dst=out[m0:m0 + TM, nb * bn:(nb + 1) * bn], src=res)
            del b
        del a
    return out


@nki.jit
def mm_v2_row_loads(lhsT, rhs, bm_tiles=8, bn_tiles=2):
    """V2: as V1, with each K tile of lhsT and of rhs loaded as one [128, bm] / [128, bn] row DMA."""
    return mm_v1_block_m.fn(lhsT, rhs, bm_tiles=bm_tiles, bn_tiles=bn_tiles, rows=True)


# -- micro-results of the performance guide (perf-model.md 3.5) -------------------------------------
@nki.jit
def act_three_ops(x, reps=8):
    """multiply, add and exp as three ScalarE instructions per tile (``reps`` independent tiles)."""
    p, f = x.shape
    out = nl.ndarray((p, f), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((p, f), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    bias = nl.full((p, 1), 0.5, dtype=nl.float32, buffer=nl.sbuf)
    for _ in nl.affine_range(reps):
        u = nl.ndarray((p, f), dtype=x.dtype, buffer=nl.sbuf)
        nisa.activation(dst=u, op=nl.copy, data=t, scale=2.0)
        v = nl.ndarray((p, f), dtype=x.dtype, buffer=nl.sbuf)
        nisa.activation(dst=v, op=nl.copy, data=u, bias=bias)
        y = nl.ndarray((p, f), dtype=x.dtype, buffer=nl.sbuf)
        nisa.activation(dst=y, op=nl.exp, data=v)
    nisa.dma_copy(dst=out, src=y)
    return out


@nki.jit
def act_fused(x, reps=8):
    """exp(2x + 0.5) as one ScalarE activation (scale and bias fused) per tile."""
    p, f = x.shape
    out = nl.ndarray((p, f), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((p, f), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    bias = nl.full((p, 1), 0.5, dtype=nl.float32, buffer=nl.sbuf)
    for _ in nl.affine_range(reps):
        y = nl.ndarray((p, f), dtype=x.dtype, buffer=nl.sbuf)
        nisa.activation(dst=y, op=nl.exp, data=t, bias=bias, scale=2.0)
    nisa.dma_copy(dst=out, src=y)
    return out


@nki.jit
def reduce_two_halves(x, reps=8):
    """Row sums of a [128, F] tile as two 64-partition tensor_reduce instructions."""
    p, f = x.shape
    out = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((p, f), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    for _ in nl.affine_range(reps):
        s = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=s[0:p // 2], op=nl.add, data=t[0:p // 2], axis=1)
        nisa.tensor_reduce(dst=s[p // 2:p], op=nl.add, data=t[p // 2:p], axis=1)
    nisa.dma_copy(dst=out, src=s)
    return out


@nki.jit
def reduce_full(x, reps=8):
    """Row sums of a [128, F] tile as one 128-partition tensor_reduce."""
    p, f = x.shape
    out = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((p, f), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    for _ in nl.affine_range(reps):
        s = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=s, op=nl.add, data=t, axis=1)
    nisa.dma_copy(dst=out, src=s)
    return out


@nki.jit
def scalar_chain(x, length=16):
    """A chain of dependent one-element ScalarE activations."""
    out = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    for _ in range(length):
        u = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=u, op=nl.copy, data=t, scale=1.0)
        t = u
    nisa.dma_copy(dst=out, src=t)
    return out


@nki.jit
def matvec(mat, vec, short_moving=True, reps=16):
    """[1,128]×[128,128] matrix-vector products: the vector as the moving (short-moving) or the
    stationary (short-stationary) operand, ``reps`` independent products."""
    k_, n_ = mat.shape
    shape = (n_, 1) if short_moving else (1, n_)
    out = nl.ndarray(shape, dtype=nl.float32, buffer=nl.shared_hbm)
    a = nl.ndarray((k_, n_), dtype=mat.dtype, buffer=nl.sbuf)
    v = nl.ndarray((k_, 1), dtype=vec.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=a, src=mat)
    nisa.dma_copy(dst=v, src=vec)
    for _ in nl.affine_range(reps):
        acc = nl.ndarray(shape, dtype=nl.float32, buffer=nl.psum)
        if short_moving:
            nisa.nc_matmul(dst=acc, stationary=a, moving=v)
        else:
            nisa.nc_matmul(dst=acc, stationary=v, moving=a)
    res = nl.ndarray(shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=acc)
    nisa.dma_copy(dst=out, src=res)
    return out


@nki.jit
def dma_row(x):
    """One single-partition HBM→SBUF transfer (32 KiB for a [1, 16384] bf16 row) and its store."""
    p, f = x.shape
    out = nl.ndarray((p, f), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((p, f), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.dma_copy(dst=out, src=t)
    return out


# -- LayerNorm tutorial (trn1, fp32, perf-model.md 3.4): held-out direction check ------------------------
def _ln_affine(normed, gamma_sb, beta_sb, rows):
    """``normed * gamma + beta`` (identical in both versions): two Vector tensor_tensor ops."""
    nisa.tensor_tensor(dst=normed[0:rows], data1=normed[0:rows], data2=gamma_sb[0:rows], op=nl.multiply)
    nisa.tensor_tensor(dst=normed[0:rows], data1=normed[0:rows], data2=beta_sb[0:rows], op=nl.add)


@nki.jit
def layernorm_v1(x, gamma, beta, eps=1e-5):
    """v1 (nki.language style): mean by a Vector reduce, shift, square on ScalarE, variance by a
    second reduce, rsqrt, then scale by rstd: per row tile, as the tutorial describes."""
    n_rows, n = x.shape
    pm = 128
    out = nl.ndarray((n_rows, n), dtype=x.dtype, buffer=nl.shared_hbm)
    gamma_sb = nl.ndarray((pm, n), dtype=gamma.dtype, buffer=nl.sbuf)
    beta_sb = nl.ndarray((pm, n), dtype=beta.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=gamma_sb, src=gamma)
    nisa.dma_copy(dst=beta_sb, src=beta)
    for i in nl.affine_range((n_rows + pm - 1) // pm):
        r0 = i * pm
        rows = min(pm, n_rows - r0)
        t = nl.ndarray((pm, n), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t[0:rows], src=x[r0:r0 + rows, :])
        s = nl.ndarray((pm, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=s[0:rows], op=nl.add, data=t[0:rows], axis=1)
        mean = nl.ndarray((pm, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=mean[0:rows], data=s[0:rows], op0=nl.multiply, operand0=1.0 / n)
        shifted = nl.ndarray((pm, n), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=shifted[0:rows], data=t[0:rows], op0=nl.subtract, operand0=mean[0:rows])
        sq = nl.ndarray((pm, n), dtype=x.dtype, buffer=nl.sbuf)
        nisa.activation(dst=sq[0:rows], op=nl.square, data=shifted[0:rows])
        v = nl.ndarray((pm, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=v[0:rows], op=nl.add, data=sq[0:rows], axis=1)
        var = nl.ndarray((pm, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=var[0:rows], data=v[0:rows], op0=nl.multiply, operand0=1.0 / n, op1=nl.add,
                           operand1=eps)
        rstd = nl.ndarray((pm, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=rstd[0:rows], op=nl.rsqrt, data=var[0:rows])
        normed = nl.ndarray((pm, n), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=normed[0:rows], data=shifted[0:rows], op0=nl.multiply, operand0=rstd[0:rows])
        _ln_affine(normed, gamma_sb, beta_sb, rows)
        nisa.dma_copy(dst=out[r0:r0 + rows, :], src=normed[0:rows])
    return out


@nki.jit
def layernorm_v2(x, gamma, beta, eps=1e-5):
    """v2: bn_stats over 512-element chunks + bn_aggr give mean and variance; one tensor_scalar
    applies (x - mean) * rstd."""
    n_rows, n = x.shape
    pm = 128
    fmax = 512
    nch = (n + fmax - 1) // fmax
    out = nl.ndarray((n_rows, n), dtype=x.dtype, buffer=nl.shared_hbm)
    gamma_sb = nl.ndarray((pm, n), dtype=gamma.dtype, buffer=nl.sbuf)
    beta_sb = nl.ndarray((pm, n), dtype=beta.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=gamma_sb, src=gamma)
    nisa.dma_copy(dst=beta_sb, src=beta)
    for i in nl.affine_range((n_rows + pm - 1) // pm):
        r0 = i * pm
        rows = min(pm, n_rows - r0)
        t = nl.ndarray((pm, n), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t[0:rows], src=x[r0:r0 + rows, :])
        stats = nl.ndarray((pm, nch, 6), dtype=nl.float32, buffer=nl.sbuf)
        for c in nl.affine_range(nch):
            c0 = c * fmax
            cw = min(fmax, n - c0)
            nisa.bn_stats(dst=stats[0:rows, c, :], data=t[0:rows, c0:c0 + cw])
        mv = nl.ndarray((pm, 2), dtype=nl.float32, buffer=nl.sbuf)
        nisa.bn_aggr(dst=mv[0:rows], data=stats[0:rows])
        var = nl.ndarray((pm, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=var[0:rows], data=mv[0:rows, 1:2], op0=nl.add, operand0=eps)
        rstd = nl.ndarray((pm, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=rstd[0:rows], op=nl.rsqrt, data=var[0:rows])
        normed = nl.ndarray((pm, n), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=normed[0:rows], data=t[0:rows], op0=nl.subtract, operand0=mv[0:rows, 0:1],
                           op1=nl.multiply, operand1=rstd[0:rows])
        _ln_affine(normed, gamma_sb, beta_sb, rows)
        nisa.dma_copy(dst=out[r0:r0 + rows, :], src=normed[0:rows])
    return out
