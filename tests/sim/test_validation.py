"""One test per validation rule: the exact error (or warning) text, instruction, operand and rule id.

Every rule id in ``nkieval.sim.errors.RULES`` must appear in ``CASES`` (checked below), so a new
rule cannot land without a test that shows its message.
"""

import pathlib
import re

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from isa_testlib import psum, sbuf

from nkieval.sim.errors import EXAMPLES, RULES, NkiSimulatorWarning, NkiValidationError, rules_markdown
from nkieval.sim.options import SimOptions

F32 = np.zeros((128, 64), np.float32)


def _load(x, dtype=None):
    t = nl.ndarray(x.shape, dtype=dtype or x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    return t


# -- kernels that break one rule each ---------------------------------------------------------
def k_partition_limit(a):  # an HBM tensor with 256 rows used as a compute operand
    d = sbuf((128, 64))
    nisa.tensor_tensor(dst=d, data1=a, data2=d, op=nl.add)


def k_partition_mismatch(a):
    x = _load(a)
    d = sbuf((128, 64))
    nisa.tensor_tensor(dst=d, data1=x, data2=x[0:64], op=nl.add)


def k_shape_mismatch(a):
    x = _load(a)
    d = sbuf((128, 64))
    nisa.tensor_tensor(dst=d, data1=x, data2=x[:, 0:32], op=nl.add)


def k_buffer_matmul_reads_sbuf(a):
    x = _load(a)
    p = psum((128, 64))
    nisa.tensor_copy(dst=p, src=x)
    nisa.nc_matmul(dst=psum((64, 64)), stationary=x, moving=p)


def k_buffer_dma_from_psum(a):
    p = psum((128, 64))
    nisa.memset(dst=p, value=0.0)
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=p)


def k_buffer_gpsimd_psum(a):
    nisa.iota(dst=psum((128, 64), nl.int32), pattern=[[1, 64]])


def k_buffer_both_psum(a):
    p, q = psum((128, 64)), psum((128, 64))
    nisa.memset(dst=p, value=0.0)
    nisa.memset(dst=q, value=0.0)
    nisa.tensor_tensor(dst=sbuf((128, 64)), data1=p, data2=q, op=nl.add)


def k_dtype(a):
    x = _load(a, nl.int8)
    nisa.nc_matmul(dst=psum((64, 64)), stationary=x, moving=x)


def k_matmul_limit(a):
    x = sbuf((128, 128), nl.bfloat16)
    nisa.memset(dst=x, value=0.0)
    y = sbuf((128, 1024), nl.bfloat16)
    nisa.memset(dst=y, value=0.0)
    nisa.nc_matmul(dst=psum((128, 1024)), stationary=x, moving=y)


def k_psum_bank(a):
    x = _load(a, nl.bfloat16)
    y = sbuf((128, 512), nl.bfloat16)
    nisa.memset(dst=y, value=0.0)
    acc = psum((64, 1024))
    nisa.nc_matmul(dst=acc[:, 256:768], stationary=x, moving=y)


def k_psum_alignment(a):
    nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.psum, address=(0, 1024))


def k_generation(a):
    nisa.dma_transpose(dst=sbuf((64, 128), nl.bfloat16), src=a)


def k_out_of_bounds(a):
    nisa.dma_copy(dst=sbuf((128, 64)), src=a[0:300])


def k_out_of_bounds_indirect(a):
    idx = sbuf((2, 1), nl.int32)
    nisa.iota(dst=idx, pattern=[[0, 1]], offset=255, channel_multiplier=1)
    nisa.dma_copy(dst=sbuf((2, 64)), src=a.ap(pattern=[[64, 2], [1, 64]], vector_offset=idx, indirect_dim=0))


def k_sbuf_capacity(a):
    # Both tiles are live at once (written, then both read): capacity is judged by live range.
    big1 = nl.ndarray((128, 32768), dtype=nl.float32, buffer=nl.sbuf, name="big1")
    big2 = nl.ndarray((128, 32768), dtype=nl.float32, buffer=nl.sbuf, name="big2")
    nisa.memset(dst=big1, value=0.0)
    nisa.memset(dst=big2, value=0.0)
    nisa.tensor_tensor(dst=big1, data1=big1, data2=big2, op=nl.add)


def k_psum_capacity(a):
    accs = [nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum, name=f"acc{i}") for i in range(9)]
    for t in accs:
        nisa.memset(dst=t, value=0.0)
    x = _load(a)  # every evacuation below also needs x, loaded after the nine memsets: all nine are live at once
    s = sbuf((128, 64))
    for t in accs:
        nisa.tensor_tensor(dst=s, data1=t[:, 0:64], data2=x, op=nl.add)


def k_indexing(a):
    _load(a).reshape((64, 128))


def k_argument(a):
    x = _load(a)
    nisa.tensor_reduce(dst=sbuf((1, 64)), op=nl.add, data=x, axis=0)


def k_instruction_limit(a):
    x = sbuf((128, 1024))
    nisa.memset(dst=x, value=1.0)
    nisa.bn_stats(dst=sbuf((128, 6)), data=x)


def k_simulator_only(a):
    x = _load(a)
    nisa.tensor_tensor(dst=sbuf((128, 64)), data1=x, data2=x, op=nl.divide)


def k_psum_accumulate(a):
    x = _load(a, nl.bfloat16)
    nisa.nc_matmul(dst=psum((64, 64)), stationary=x, moving=x, accumulate=True)


def k_psum_accumulate_after_memset(a):
    x = _load(a, nl.bfloat16)
    acc = psum((64, 64))
    nisa.memset(dst=acc, value=0.0)
    nisa.nc_matmul(dst=acc, stationary=x, moving=x, accumulate=True)


def k_onezero_hint(a):  # an fp32 operand of 0.5s passed as one of zeros and ones
    ones = sbuf((128, 128))
    nisa.memset(dst=ones, value=1.0)
    nisa.nc_matmul(dst=psum((128, 512)), stationary=ones, moving=_load(a), is_moving_onezero=True)


def k_kernel(a):
    return _load(a)


def k_uninitialized(a):
    x = sbuf((128, 64), nl.float32)
    nisa.tensor_copy(dst=sbuf((128, 64)), src=x)


def k_unsupported(a):
    nl.alloc_tiles(tile_shape=(128, 64), element_shape=(256, 64), buffer=nl.sbuf, dtype=nl.float32)


# (rule, case id, kernel, input, target, options, "error"|"warning", exact message before " [rule …]")
CASES = [
    ("partition-limit", "hbm_256_rows", k_partition_limit, np.zeros((256, 64), np.float32), "trn2", None, "error",
     "tensor_tensor: data1 partition dimension 256 exceeds maximum 128"),
    ("partition-mismatch", "data2_64", k_partition_mismatch, F32, "trn2", None, "error",
     "tensor_tensor: number of partitions mismatch: dst[128, 64] has 128, data2[64, 64] has 64"),
    ("shape-mismatch", "free_32", k_shape_mismatch, F32, "trn2", None, "error",
     "tensor_tensor: elements per partition mismatch: dst[128, 64] has 64, data2[128, 32] has 32"),
    ("buffer", "matmul_reads_sbuf", k_buffer_matmul_reads_sbuf, F32, "trn2", None, "error",
     "nc_matmul: expected operand 'moving' to be in address space 'sbuf', but got a tensor in 'psum' instead "
     "(the Tensor engine reads SBUF)"),
    ("buffer", "no_dma_from_psum", k_buffer_dma_from_psum, F32, "trn2", None, "error",
     "dma_copy: expected operand 'src' to be in address space 'hbm|sbuf', but got a tensor in 'psum' instead "
     "(DMA cannot access PSUM; copy PSUM to SBUF with tensor_copy first)"),
    ("buffer", "gpsimd_never_psum", k_buffer_gpsimd_psum, F32, "trn2", None, "error",
     "iota: expected operand 'dst' to be in address space 'sbuf', but got a tensor in 'psum' instead "
     "(the gpsimd engine cannot access PSUM)"),
    ("buffer", "not_both_inputs_psum", k_buffer_both_psum, F32, "trn2", None, "error",
     "tensor_tensor: data1 and data2 cannot both be in PSUM"),
    ("dtype", "matmul_int8", k_dtype, F32, "trn2", None, "error",
     "nc_matmul: stationary dtype int8 is not a Tensor-engine input type (float8_e4m3, float8_e5m2, bfloat16, "
     "float16, tfloat32, float32)"),
    ("matmul-limit", "moving_1024_trn2", k_matmul_limit, F32, "trn2", None, "error",
     "nc_matmul: moving free size 1024 exceeds maximum 512 on trn2"),
    ("psum-bank", "crosses_bank_trn2", k_psum_bank, F32, "trn2", None, "error",
     "nc_matmul: dst bytes [1024, 3072) per partition cross a 2048-byte PSUM bank boundary; one matmul output "
     "must stay in one bank (512 fp32 elements)"),
    ("psum-alignment", "address_1024", k_psum_alignment, F32, "trn2", None, "error",
     "ndarray: PSUM address 1024 is not aligned to a 2048-byte bank"),
    ("generation", "dma_transpose_trn1", k_generation, np.zeros((128, 64), np.float16), "trn1", None, "error",
     "dma_transpose: not available on trn1 (NeuronCore-v2); needs trn2 (NeuronCore-v3) or later"),
    ("out-of-bounds", "slice", k_out_of_bounds, np.zeros((256, 64), np.float32), "trn2", None, "error",
     "Out-of-bound access for tensor `a` on dimension 0: index range [0, 299] exceed dimension size of 256"),
    ("out-of-bounds", "indirect_index", k_out_of_bounds_indirect, np.zeros((256, 64), np.float32), "trn2", None,
     "error", "dma_copy: index 16384 is out of bounds for axis 0 with size 16384 (indirect src index 256 at row 1, of 256 rows)"),
    ("sbuf-capacity", "two_128k_tiles_trn2", k_sbuf_capacity, F32, "trn2", None, "error",
     "kernel: tiles live at once need 262144 bytes per partition of SBUF, exceeding the 229376-byte SBUF partition "
     "(live ranges, first to last access, at instruction 1); 2 live: big1[128, 32768] float32 131072 B "
     "@ test_validation.py:"),
    ("psum-capacity", "nine_banks", k_psum_capacity, F32, "trn2", None, "error",
     "kernel: tiles live at once need 18432 bytes per partition of PSUM, exceeding the 16384-byte PSUM partition "
     "(live ranges, first to last access, at instruction 8); 9 live: acc0[128, 512] float32 2048 B "
     "@ test_validation.py:"),
    ("indexing", "reshape_partition", k_indexing, F32, "trn2", None, "error",
     "reshape of an on-chip tensor cannot change the partition dimension (128 -> 64)"),
    ("argument", "reduce_axis0", k_argument, F32, "trn2", None, "error",
     "tensor_reduce: cannot reduce along the partition dimension (axis 0); use nc_transpose, a ones matmul or "
     "tensor_partition_reduce"),
    ("instruction-limit", "bn_stats_1024", k_instruction_limit, F32, "trn2", None, "error",
     "bn_stats: data has 1024 elements per partition, exceeding bn_stats_fmax 512; split it into 512-element "
     "chunks and combine with bn_aggr"),
    ("simulator-only", "divide_warns", k_simulator_only, F32, "trn2", None, "warning",
     "tensor_tensor: nl.divide is not a hardware instruction: it runs in simulation but fails on device"),
    ("simulator-only", "divide_error_mode", k_simulator_only, F32, "trn2", SimOptions(simulator_only="error"),
     "error", "tensor_tensor: nl.divide is not a hardware instruction: it runs in simulation but fails on device"),
    ("psum-accumulate", "never_written", k_psum_accumulate, F32, "trn2", None, "warning",
     "nc_matmul: accumulate=True onto PSUM that no matmul has written (uninitialised accumulator)"),
    ("psum-accumulate", "after_memset_v2", k_psum_accumulate_after_memset, F32, "trn1", None, "warning",
     "nc_matmul: accumulate=True onto PSUM written by a non-matmul instruction (memset/copy) is undefined on "
     "NeuronCore-v2/v3"),
    ("onezero-hint", "fp32_halves", k_onezero_hint, np.full((128, 512), 0.5, np.float32), "trn2", None, "error",
     "nc_matmul: is_moving_onezero=True but moving[128, 512] holds values other than 0 and 1 (0.5 at [0, 0]): the "
     "hint lets the PE skip the fp32 passes such values need, so the result would be undefined on hardware; drop "
     "the hint or pass an operand of zeros and ones"),
    ("kernel", "returns_sbuf", k_kernel, F32, "trn2", None, "error",
     "kernel: kernel returned NkiTensor(t"),
    ("uninitialized", "read_before_write", k_uninitialized, F32, "trn2", None, "warning",
     "tensor_copy: reads SBUF tensor 't"),
    ("unsupported", "nki07_layouts", k_unsupported, F32, "trn3", None, "error",
     "alloc_tiles: element_shape (256, 64) spans 2 tiles of 128 along the partition dimension; the documented "
     "'dense rank-two capacity layout' that stacks them in SBUF/PSUM is not specified precisely enough to "
     "simulate"),
]


@pytest.mark.parametrize("rule,case,kernel,arg,target,options,kind,message", CASES,
                         ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_rule(rule, case, kernel, arg, target, options, kind, message):
    run = nki.simulate(kernel, target=target, options=options)
    if kind == "error":
        with pytest.raises(NkiValidationError) as info:
            run(arg)
        err = info.value
        assert err.rule == rule
        assert str(err).startswith(message), str(err)
        assert f"[rule {rule}]" in str(err)
        if err.instruction not in (None, "ndarray", "kernel", "launch"):
            assert err.location is not None and err.location.startswith("test_validation.py:")
    else:
        with pytest.warns(NkiSimulatorWarning) as rec:
            run(arg)
        hits = [w.message for w in rec if isinstance(w.message, NkiSimulatorWarning) and w.message.rule == rule]
        assert hits, [str(w.message) for w in rec]
        assert str(hits[0]).startswith(message), str(hits[0])


# Rules raised outside the ISA/simulator core, with the test that shows their message.
TESTED_ELSEWHERE = {"loop-dependency": "Beta-1 front end (affine_range write conflicts): tests/frontends",
                    "instruction-budget": "SimOptions.max_instructions: tests/sim/test_max_instructions.py",
                    "time-budget": "SimOptions.time_limit_s: tests/sim/test_run_budgets.py",
                    "memory-budget": "SimOptions.max_bytes: tests/sim/test_run_budgets.py",
                    "trace-time-value": "recording a kernel as a program: tests/sim/test_program.py",
                    "trace-argument": "recording a kernel as a program: tests/sim/test_program.py",
                    "race": "LNC-2 launches (two programs): tests/sim/test_lnc2_races.py"}


def test_every_rule_has_a_case():
    assert {c[0] for c in CASES} | set(TESTED_ELSEWHERE) == set(RULES)


def test_error_carries_fields_and_is_an_assertion_error():
    with pytest.raises(AssertionError) as info:
        nki.simulate(k_partition_mismatch, target="trn2")(F32)
    d = info.value.to_dict()
    assert (d["instruction"], d["operand"], d["rule"]) == ("tensor_tensor", "data2", "partition-mismatch")
    assert re.search(r"\(at test_validation\.py:\d+\)$", d["message"])


def test_psum_bank_rule_lifted_on_trn3():
    nki.simulate(k_psum_bank, target="trn3")(F32)  # one nc_matmul may span PSUM banks on NeuronCore-v4


def test_rule_examples_are_real_messages():
    for rule, example in EXAMPLES.items():
        msgs = [c[7] for c in CASES if c[0] == rule]
        assert any(example.split(" @ ")[0].startswith(m.split(" @ ")[0]) for m in msgs), rule


def test_rules_doc_is_generated_from_the_catalogue():
    doc = pathlib.Path(__file__).resolve().parents[2] / "docs" / "rules.md"
    assert doc.read_text() == rules_markdown(), "regenerate: python -c 'from nkieval.sim.errors import " \
        "rules_markdown; open(\"docs/rules.md\", \"w\").write(rules_markdown())'"
    for rule in RULES:
        assert f"## `{rule}`" in doc.read_text()
