"""Reference for cross_entropy: float64 log-sum-exp minus the label logit."""

import numpy as np


def oracle(logits, labels):
    x = np.asarray(logits, dtype=np.float64)
    m = x.max(axis=1)
    lse = m + np.log(np.exp(x - m[:, None]).sum(axis=1))
    idx = np.asarray(labels).astype(np.int64)
    return lse - x[np.arange(x.shape[0]), idx]


def reference(logits, labels):
    return oracle(logits, labels).astype(np.float32)
