"""The acceptance kernel set: each kernel matches its NumPy reference and issues the
instructions it is meant to exercise."""

import numpy as np
import pytest

from nkieval.examples import acceptance as acc


@pytest.mark.parametrize("case", acc.CASES, ids=lambda c: c.name)
def test_case_matches_numpy(case):
    out, ref, result = acc.run_case(case, seed=11)
    assert out.shape == ref.shape and out.dtype == ref.dtype
    np.testing.assert_allclose(out.astype(np.float64), ref.astype(np.float64), rtol=case.rtol, atol=case.atol)
    ops = result.trace.opcode_counts()
    for op in case.instructions:
        assert ops[op] > 0, f"{case.name} should issue {op}"
    assert result.trace.num_programs == case.lnc


def test_ragged_shapes_are_really_ragged():
    """The shapes in the registry must exercise tails (not multiples of 128)."""
    rng = np.random.default_rng(0)
    for name in ("tiled_add", "softmax", "rms_norm", "layer_norm", "transpose", "causal_mask", "cumsum", "gather"):
        shape = acc.BY_NAME[name].make_inputs(rng)[0].shape
        assert shape[0] % 128, name


def test_matmul_accumulates_over_k_tiles_in_psum():
    _out, _ref, result = acc.run_case(acc.BY_NAME["matmul_bf16_resident"])
    mm = [r for r in result.trace.records if r.opcode == "nc_matmul"]
    k_tiles = 512 // 128
    assert len(mm) == (256 // 128) * (1024 // 512) * k_tiles
    flags = [r.attrs["accumulated"] for r in mm]
    assert flags == ([False] + [True] * (k_tiles - 1)) * (len(mm) // k_tiles)


def test_lnc2_programs_split_the_work():
    _out, _ref, result = acc.run_case(acc.BY_NAME["lnc2_scale_add"])
    per_prog = {}
    for r in result.trace.records:
        if r.opcode == "scalar_tensor_tensor":
            per_prog[r.program] = per_prog.get(r.program, 0) + 1
    assert per_prog == {0: 3, 1: 2}  # 5 row tiles of 600 rows, interleaved


def test_gather_out_of_bounds_index_is_an_error():
    from nkieval.sim.errors import NkiValidationError

    table = np.zeros((10, 4), np.float32)
    idx = np.array([1, 2, 10], np.int32)
    with pytest.raises(NkiValidationError, match="out of bounds"):
        __import__("nki").simulate(acc.gather_rows)(table, idx)


def test_causal_mask_masks_strictly_upper_triangle():
    out, _ref, _ = acc.run_case(acc.BY_NAME["causal_mask"])
    assert (out[0, 1:] == acc.MASK_VALUE).all() and (out[299, :] != acc.MASK_VALUE).all()
