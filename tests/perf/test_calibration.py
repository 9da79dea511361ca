"""Calibration data and the performance guide's micro-results (fast: small kernels only).

The full ladders at the published shapes run in benchmarks/perf_validate.py.
"""

from __future__ import annotations

import nki
import numpy as np
import pytest

from nkieval.perf import estimate
from nkieval.perf.calibration import kernels as K
from nkieval.perf.calibration import published
from nkieval.perf.calibration.validate import micro_results


def test_published_data_has_sources_and_ordered_steps() -> None:
    data = published()
    for name, lad in data["ladders"].items():
        assert lad["source"] and lad["target"] in ("trn1", "trn2"), name
        for step in lad["steps"]:
            assert step["bound"] in ("memory", "compute")
            assert "kernel" not in step or hasattr(K, step["kernel"])
    for m in data["micro"].values():
        assert m["source"] and m["tolerance"] > 0


@pytest.fixture(scope="module")
def micro():
    return {m.name: m for m in micro_results()}


@pytest.mark.parametrize("name", ["fused_activation", "partition_vectorization", "dependent_scalar_chain",
                                  "matvec_short_moving", "dma_32k_one_engine"])
def test_micro_result_reproduced(micro, name: str) -> None:
    m = micro[name]
    assert m.ok, f"{name}: predicted {m.predicted:.3f}, published {m.published}"


def test_blocking_turns_a_small_matmul_from_memory_to_compute_bound() -> None:
    import ml_dtypes

    rng = np.random.default_rng(0)
    a = rng.standard_normal((1024, 1024), dtype=np.float32).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((1024, 1024), dtype=np.float32).astype(ml_dtypes.bfloat16)
    ests = []
    for kern, kw in ((K.mm_tiled, {}), (K.mm_fully_blocked, {"bm_tiles": 8, "bn_tiles": 2, "bk_tiles": 4})):
        out = nki.simulate(kern, target="trn1")(a, b, **kw)
        np.testing.assert_allclose(out, a.astype(np.float32).T @ b.astype(np.float32), rtol=2e-2, atol=2e-2)
        ests.append(estimate(nki.last_result().trace))
    tiled, blocked = ests
    assert tiled.bottleneck.bound == "memory" and tiled.bottleneck.resource == "dma"
    assert blocked.total_time_ns * 2 < tiled.total_time_ns
    assert blocked.summary["hfu_estimated_percent"] > 2 * tiled.summary["hfu_estimated_percent"]
