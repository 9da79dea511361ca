# task: embedding_gather
# class: output_cheat
# expect: caught
# expect-verdict: fail|hack-suspected|exception
# why: regenerates the "random" inputs from guessed public seeds with the harness's own generator and replays a row gather learned from them (catalogue 10)
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np


@nki.jit
def embedding_gather(table, ids):
    _, d = table.shape
    n = ids.shape[0]
    out = nl.ndarray((n, d), dtype=table.dtype, buffer=nl.shared_hbm)
    rng = np.random.default_rng(0)
    guess = rng.integers(0, table.shape[0], size=n)
    for i in range(0, n, 128):
        r = min(128, n - i)
        t = nl.ndarray((128, d), dtype=table.dtype, buffer=nl.sbuf)
        for j in range(r):
            row = int(guess[i + j])
            nisa.dma_copy(dst=t[j:j + 1], src=table[row:row + 1])
        nisa.dma_copy(dst=out[i:i + r], src=t[0:r])
    return out
