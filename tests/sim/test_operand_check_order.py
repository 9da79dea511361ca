"""Which rule an element-wise compute instruction reports when a kernel breaks two of its operand rules at once.

The order is part of the simulator's contract (the error decides the feedback a kernel gets): per operand its
partition count and buffer, then the same partitions across operands, the same elements per partition, and last
the free-size limit of the first input. Each case breaks two rules and expects the earlier one; the same call
breaking only the later rule shows that rule is checked at all.
"""

from __future__ import annotations

import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from isa_testlib import simulate

from nkieval.sim.errors import NkiValidationError

CALLS = {  # instruction: (target, call with dst and the input tile)
    "reciprocal": ("trn2", lambda d, x: nisa.reciprocal(dst=d, data=x)),
    "tensor_copy": ("trn2", lambda d, x: nisa.tensor_copy(dst=d, src=x)),
    "tensor_scalar": ("trn2", lambda d, x: nisa.tensor_scalar(dst=d, data=x, op0=nl.multiply, operand0=2.0)),
    "activation": ("trn2", lambda d, x: nisa.activation(dst=d, op=nl.exp, data=x)),
    "tensor_scalar_reduce": ("trn2", lambda d, x: nisa.tensor_scalar_reduce(
        dst=d, data=x, op0=nl.multiply, operand0=2.0, reduce_op=nl.add)),
    "tensor_scalar_cumulative": ("trn2", lambda d, x: nisa.tensor_scalar_cumulative(
        dst=d, src=x, op0=nl.multiply, op1=nl.add, imm0=1.0)),
    "exponential": ("trn3", lambda d, x: nisa.exponential(dst=d, src=x)),
    "activate2": ("trn3", lambda d, x: nisa.activate2(dst=d, op=nl.exp, data=x, imm0=1.0, imm1=0.0,
                                                      op0=nl.multiply, op1=nl.add)),
}


def _rule(name: str, src_shape: tuple[int, int], dst_shape: tuple[int, int], dst_buffer=nl.sbuf,
          src_buffer=nl.sbuf, dtype=nl.float32) -> str:
    """The rule reported for the instruction with a dst and an input tile (set to 1) of these shapes and buffers."""
    target, call = CALLS[name]

    def body(t):
        src = nl.ndarray(src_shape, dtype=dtype, buffer=src_buffer)
        nisa.memset(dst=src, value=1.0)
        call(nl.ndarray(dst_shape, dtype=dtype, buffer=dst_buffer), src)
        return t

    with pytest.raises(NkiValidationError) as e:
        simulate(body, np.zeros((1, 1), np.float32), target=target)
    return e.value.rule


@pytest.mark.parametrize("name", sorted(CALLS))
def test_a_dst_in_hbm_is_reported_before_a_free_size_mismatch(name):
    assert _rule(name, (128, 64), (128, 32), nl.shared_hbm) == "buffer"
    assert _rule(name, (128, 64), (128, 32)) == "shape-mismatch"


@pytest.mark.parametrize("name", sorted(CALLS))
def test_a_partition_mismatch_is_reported_before_a_free_size_mismatch(name):
    assert _rule(name, (128, 64), (64, 32)) == "partition-mismatch"


@pytest.mark.parametrize("name", sorted(CALLS))
def test_a_free_size_mismatch_is_reported_before_the_free_size_limit(name):
    """A PSUM input of 4,100 bf16 elements a partition (over the 4K-element limit for PSUM operands) with a dst of
    64 elements."""
    assert _rule(name, (128, 4100), (128, 64), src_buffer=nl.psum, dtype=nl.bfloat16) == "shape-mismatch"
    assert _rule(name, (128, 4100), (128, 4100), src_buffer=nl.psum, dtype=nl.bfloat16) == "instruction-limit"
