"""CUDA fact sheets from tree-sitter-cuda, on fixtures written for these tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from nkieval.analysis import CudaParseError, extract_cuda_from_python, parse_cuda

CUDA = Path(__file__).parent / "fixtures" / "cuda"


def _k(name: str):
    s = parse_cuda((CUDA / name).read_text())
    assert not s.parse_errors, s.parse_errors
    return s, s.kernels[0]


def test_vector_add_kernel_params_guard_and_launch() -> None:
    s, k = _k("vector_add.cu")
    assert k.name == "vec_add" and [p.name for p in k.params] == ["a", "b", "out", "n"]
    assert k.params[0].pointer and k.params[0].const and not k.params[2].const and not k.params[3].pointer
    assert [(b.lhs, b.op, b.rhs, b.bound_params) for b in k.bounds_checks] == [("i", "<", "n", ("n",))]
    assert {"threadIdx.x", "blockIdx.x", "blockDim.x"} <= set(k.thread_indexing)
    (launch,) = s.launches
    assert (launch.kernel, launch.grid, launch.block, launch.smem, launch.stream) == ("vec_add", "blocks", "threads",
                                                                                      "0", "stream")
    assert launch.block_values == (256,)  # const int threads = 256


def test_softmax_shared_memory_sync_warp_ops_and_stability() -> None:
    s, k = _k("row_softmax.cu")
    assert [(a.name, a.dtype, a.dims) for a in k.shared] == [("partial", "float", ("THREADS / 32",))]
    assert k.syncthreads == 5
    assert {w.name for w in k.warp_ops} == {"__shfl_xor_sync"}  # from the __device__ helpers
    assert set(k.device_calls) == {"warp_max", "warp_sum"}
    assert "max_subtraction" in k.patterns and "online_softmax" not in k.patterns
    assert {a.name for a in k.accumulators if a.dtype == "float"} >= {"row_max", "total"}
    assert s.launches[0].block_values == (256,)  # from #define THREADS 256


def test_tiled_gemm_shared_tiles_inner_product_and_dim3_block() -> None:
    s, k = _k("gemm_tiled.cu")
    assert [(a.name, a.dims) for a in k.shared] == [("As", ("TILE", "TILE")), ("Bs", ("TILE", "TILE"))]
    assert "inner_product_loop" in k.patterns
    assert ("acc", "float") in {(a.name, a.dtype) for a in k.accumulators}
    assert s.launches[0].block_values == (16, 16)
    assert {b.lhs for b in k.bounds_checks if b.context == "if"} == {"row", "col"}
    assert s.defines["TILE"] == "16"


def test_tensor_cores_and_half_types() -> None:
    _, k = _k("gemm_wmma.cu")
    assert any("mma_sync" in c.name for c in k.tensor_core)
    assert {"half", "float"} <= set(k.float_types)


def test_math_patterns_gelu_variance_atomics_templates() -> None:
    assert "erf_gelu" in _k("bias_gelu_erf.cu")[1].patterns
    _, g = _k("bias_gelu_erf.cu")
    assert g.loops[0].grid_stride and "grid_stride_loop" in g.patterns
    assert "tanh_gelu" in _k("gelu_tanh.cu")[1].patterns
    assert "welford" in _k("layernorm_welford.cu")[1].patterns
    _, sk = _k("splitk_atomic.cu")
    assert [a.name for a in sk.atomics] == ["atomicAdd"]
    s, rms = _k("rmsnorm_half.cu")
    assert rms.templated and rms.template_params == ("int BLOCK",)
    assert "rsqrtf" in rms.math_names() and ("ss", "float") in {(a.name, a.dtype) for a in rms.accumulators}
    assert s.launches[0].template_args == ("128",)


def test_dynamic_shared_memory_and_syntax_errors_are_reported() -> None:
    src = ("__global__ void k(float* x, int n) { extern __shared__ float buf[]; int i = threadIdx.x;\n"
           "  if (i < n) buf[i] = x[i]; }\n"
           "void host(float* x, int n) { k<<<1, 128, n * sizeof(float)>>>(x, n); int = ; }\n")
    s = parse_cuda(src)
    assert s.kernels[0].shared[0].dynamic
    assert s.launches[0].smem == "n * sizeof(float)"
    assert s.parse_errors and s.parse_errors[0].line == 3
    with pytest.raises(CudaParseError, match=r"strict.*line 3"):
        parse_cuda(src, strict=True)


@pytest.mark.parametrize(("source", "match"), [
    ("", "empty"), ("   \n", "empty"), (b"\x00\x01", "NUL byte"), (42, "must be str or bytes"),
    ("int add(int a, int b) { return a + b; }", r"no __global__ kernel found \(functions defined: add\)"),
])
def test_bad_input_gets_a_specific_error(source: object, match: str) -> None:
    with pytest.raises(CudaParseError, match=match):
        parse_cuda(source)  # type: ignore[arg-type]


def test_broken_file_names_its_first_error() -> None:
    with pytest.raises(CudaParseError, match="syntax error"):
        parse_cuda((CUDA / "broken.cu").read_text())


def test_summary_is_json_ready_and_kernel_lookup() -> None:
    import json

    s, _ = _k("row_softmax.cu")
    json.dumps(s.to_dict())
    assert s.kernel("softmax_rows").name == "softmax_rows"
    with pytest.raises(KeyError, match="no __global__ kernel named 'nope'"):
        s.kernel("nope")


def test_extract_cuda_from_python_string() -> None:
    py = 'cuda_src = """\n__global__ void f(float* x) { x[threadIdx.x] = 0.0f; }\n"""\nother = "x"\n'
    assert parse_cuda(extract_cuda_from_python(py)).kernels[0].name == "f"
    with pytest.raises(CudaParseError, match="no string literal"):
        extract_cuda_from_python("x = 1")
