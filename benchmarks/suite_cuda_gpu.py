"""Run every built-in task's CUDA kernel on a GPU and report its agreement with the task reference.

Why: the ``kernel.cu`` files are the sources a porting task starts from, so they must be real,
working CUDA, not pseudo-code. ``tests/suite/test_cuda_sources.py`` compiles them everywhere
nvcc exists; this script goes further where a CUDA GPU exists: it builds each file into a shared
library together with a small generated shim, calls the file's own host launcher (with its
bounds checks and launch configuration) on the task's inputs for a few of its shapes, and
compares the outputs with ``reference.py`` under the task's correctness tolerance.

No CuPy or PyTorch is needed: device memory is managed through the CUDA runtime (``libcudart``)
with ctypes, and the shim calls the C++ launcher through a variadic template that unpacks an
array of argument pointers, so one mechanism serves every launcher signature. Each launcher's
parameter types are read from ``kernel.cu``; ``LAUNCH`` below says, per task, where each
parameter's value comes from (an input or output tensor, a scratch workspace, a dimension or
parameter expression, or the stream).

Usage::

    python benchmarks/suite_cuda_gpu.py [--tasks PATTERN] [--shapes public|all|small] [--arch sm_90]

Each case also runs on ``nkieval.cuda`` (the CPU executor) with the same inputs and reports, per
output, how much of it is bitwise equal to the GPU's and the largest difference in ulp.

Exit status: 0 every kernel agrees, 1 some kernel disagrees or fails, 2 no GPU / no nvcc (with a
message saying which), so a CPU-only machine reports cleanly instead of crashing.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import fnmatch
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

# Per task: the host launcher's arguments in order. "in:NAME" / "out:NAME" are task tensors,
# "ws:EXPR" a zeroed scratch buffer of EXPR bytes, "stream" the CUDA stream, and anything else a
# Python expression over the task's dimensions and params (passed as the C parameter's type).
LAUNCH: dict[str, list[str]] = {
    "vector_add": ["in:a", "in:b", "out:out", "N", "stream"],
    "relu": ["in:x", "out:out", "N", "D", "stream"],
    "gelu": ["in:x", "out:out", "N", "D", "stream"],
    "gelu_tanh": ["in:x", "out:out", "N", "D", "stream"],
    "silu": ["in:x", "out:out", "N", "D", "stream"],
    "row_softmax": ["in:x", "out:out", "N", "D", "stream"],
    "log_softmax": ["in:x", "out:out", "N", "D", "stream"],
    "rmsnorm": ["in:x", "in:w", "out:out", "N", "D", "eps", "stream"],
    "layernorm": ["in:x", "in:gamma", "in:beta", "out:y", "N", "D", "eps", "stream"],
    "row_sum": ["in:x", "out:out", "N", "D", "stream"],
    "row_argmax": ["in:x", "out:values", "out:indices", "N", "D", "stream"],
    "cumsum": ["in:x", "out:out", "N", "D", "stream"],
    "transpose_2d": ["in:x", "out:out", "M", "N", "stream"],
    "gemm_bf16": ["in:a_t", "in:b", "out:c", "M", "N", "K", "stream"],
    "gemm_fp32": ["in:a", "in:b", "out:c", "M", "N", "K", "stream"],
    "matvec": ["in:a", "in:x", "out:y", "M", "K", "stream"],
    "embedding_gather": ["in:table", "in:ids", "out:out", "V", "D", "N", "stream"],
    "topk": ["in:x", "out:values", "out:indices", "N", "D", "k", "stream"],
    "fp8_quantize": ["in:x", "out:q", "out:scale", "N", "D", "stream"],
    "fp8_dequantize": ["in:q", "in:scale", "out:y", "N", "D", "stream"],
    "scale_bias_broadcast": ["in:x", "in:row_scale", "in:col_bias", "out:out", "N", "D", "stream"],
    "gemm_bias_gelu": ["in:x_t", "in:w", "in:bias", "out:out", "M", "N", "K", "stream"],
    "rmsnorm_gemm": ["in:x", "in:gamma", "in:w", "out:out", "ws:4*N", "N", "D", "F", "eps", "stream"],
    "swiglu_mlp": ["in:x_t", "in:w_gate", "in:w_up", "in:w_down", "out:out", "ws:4*N*H", "N", "D", "H", "stream"],
    "rope": ["in:x", "in:cos", "in:sin", "out:out", "T", "H", "D", "stream"],
    "adamw_step": ["in:param", "in:grad", "in:m", "in:v", "out:param_new", "out:m_new", "out:v_new", "N", "lr",
                   "beta1", "beta2", "eps", "weight_decay", "step", "stream"],
    "attention_head": ["in:q", "in:k", "in:v", "out:out", "Sq", "Skv", "D", "stream"],
    "gqa_decode_attention": ["in:q", "in:k_cache", "in:v_cache", "out:out", "B", "Hq", "Hkv", "S", "D", "stream"],
    "residual_layernorm": ["in:x", "in:residual", "in:gamma", "in:beta", "out:y", "out:h", "N", "D", "eps",
                           "stream"],
    "depthwise_conv1d": ["in:x", "in:w", "in:bias", "out:out", "C", "L", "K", "stream"],
    "avgpool2d": ["in:x", "out:out", "C", "H", "W", "stream"],
    "batched_gemm": ["in:a_t", "in:b", "out:c", "B", "M", "N", "K", "stream"],
    "lora_gemm": ["in:x_t", "in:w", "in:lora_a", "in:lora_b", "out:out", "ws:4*N*R", "N", "D", "F", "R", "scaling",
                  "stream"],
    "cross_entropy": ["in:logits", "in:labels", "out:loss", "N", "V", "stream"],
    "router_topk": ["in:logits", "out:weights", "out:experts", "T", "E", "stream"],
    "fp8_gemm_scaled": ["in:a_t", "in:b", "in:scale_a", "in:scale_b", "out:c", "M", "N", "K", "stream"],
    "scaled_masked_softmax": ["in:x", "out:out", "N", "S", "scale", "stream"],
    "causal_attention": ["in:q_t", "in:k_t", "in:v", "out:out", "S", "D", "stream"],
    "flash_attention_fwd": ["in:q_t", "in:k_t", "in:v", "out:out", "out:lse", "D", "S", "stream"],
    "flash_attention_bwd": ["in:q", "in:k", "in:v", "in:o", "in:do", "in:lse", "out:dq", "out:dk", "out:dv", "ws:4*S",
                            "S", "D", "stream"],
    "mamba_selective_scan": ["in:x", "in:delta", "in:a", "in:b", "in:c", "in:d_skip", "out:y", "D", "L", "N",
                             "stream"],
    "chunked_linear_attention": ["in:q", "in:k", "in:v", "out:o", "ws:4*((T+63)//64)*Dk*Dv", "T", "Dk", "Dv",
                                 "stream"],
    "llama_mlp_fp8": ["in:x_t", "in:w_gate", "in:s_gate", "in:w_up", "in:s_up", "in:w_down", "in:s_down", "out:out",
                      "ws:4*N*H", "N", "D", "H", "stream"],
    "moe_expert_block": ["in:x_t", "in:router_w", "in:w1", "in:w2", "out:out", "ws:8*T", "ws:8*T", "T", "D", "H", "E",
                         "stream"],
    "paged_attention_decode": ["in:q", "in:k_pages", "in:v_pages", "in:block_table", "out:out", "B", "H", "D", "NP",
                               "PG", "MP", "stream"],
    "decoder_decode_step": ["in:x", "in:gamma", "in:wq", "in:wk", "in:wv", "in:cos", "in:sin", "in:k_cache",
                            "in:v_cache", "in:wo", "out:out", "ws:4*(B*Dm+4*B*HD)", "B", "Dm", "HD", "H", "Dh", "S",
                            "eps", "stream"],
}

_SHIM = r"""
#include "kernel.cu"
#include <utility>
#include <type_traits>

template <typename R, typename... A, std::size_t... I>
static int nkieval_call(R (*f)(A...), void** argv, std::index_sequence<I...>) {
    if constexpr (std::is_void_v<R>) {
        f(*reinterpret_cast<std::remove_reference_t<A>*>(argv[I])...);
        return (int)cudaGetLastError();
    } else {
        return (int)f(*reinterpret_cast<std::remove_reference_t<A>*>(argv[I])...);
    }
}

extern "C" int nkieval_launch(void** argv) {
    return nkieval_call(&NKIEVAL_LAUNCHER, argv, std::index_sequence_for_launcher{});
}
"""


def launcher_params(cuda_source: str, name: str) -> list[tuple[str, str]]:
    """[(C type, parameter name)] of the host launcher ``name`` (returning cudaError_t or void)."""
    m = re.search(r"(?:cudaError_t|void)\s+" + re.escape(name) + r"\s*\(([^)]*)\)\s*\{", cuda_source)
    if m is None:
        raise ValueError(f"no host launcher `{name}(...)` returning cudaError_t or void in kernel.cu")
    out = []
    for part in (p.strip() for p in m.group(1).split(",")):
        pm = re.match(r"(.*?)([A-Za-z_]\w*)$", " ".join(part.split()))
        if pm is None:
            raise ValueError(f"cannot parse launcher parameter {part!r}")
        out.append((pm.group(1).strip(), pm.group(2)))
    return out


def ctype_of(c_type: str) -> Any:
    """The ctypes type a launcher parameter is passed as (device pointers as void*)."""
    t = c_type.replace("const", "").replace("__restrict__", "").strip()
    if t.endswith("*"):
        return ctypes.c_void_p
    return {"int": ctypes.c_int, "long long": ctypes.c_longlong, "long": ctypes.c_long, "float": ctypes.c_float,
            "double": ctypes.c_double, "unsigned": ctypes.c_uint, "unsigned int": ctypes.c_uint, "size_t": ctypes.c_size_t,
            "cudaStream_t": ctypes.c_void_p}[t]


def check_spec(task: Any) -> list[str]:
    """Problems with a task's LAUNCH entry (usable without a GPU): arity, names, types."""
    problems: list[str] = []
    spec = LAUNCH.get(task.id)
    if spec is None:
        return [f"{task.id}: no LAUNCH entry"]
    params = launcher_params(task.cuda_file.read_text(), task.kernel)
    if len(params) != len(spec):
        problems.append(f"{task.id}: launcher takes {len(params)} arguments, LAUNCH lists {len(spec)}")
    ins = {t.name for t in task.inputs}
    outs = {t.name for t in task.outputs}
    env = {**dict(task.shapes[0].dims), **dict(task.params)}
    for (ctyp, pname), src in zip(params, spec):
        try:
            ct = ctype_of(ctyp)
        except KeyError:
            problems.append(f"{task.id}: parameter {pname} has an unsupported type {ctyp!r}")
            continue
        if src.startswith(("in:", "out:", "ws:")) or src == "stream":
            if ct is not ctypes.c_void_p:
                problems.append(f"{task.id}: {src} is passed to non-pointer parameter {ctyp} {pname}")
            if src.startswith("in:") and src[3:] not in ins:
                problems.append(f"{task.id}: {src} is not an input ({sorted(ins)})")
            if src.startswith("out:") and src[4:] not in outs:
                problems.append(f"{task.id}: {src} is not an output ({sorted(outs)})")
        else:
            if ct is ctypes.c_void_p:
                problems.append(f"{task.id}: expression {src!r} is passed to pointer parameter {ctyp} {pname}")
            try:
                eval(src, {"__builtins__": {}}, env)
            except Exception as e:
                problems.append(f"{task.id}: cannot evaluate {src!r}: {e}")
    used_out = {s[4:] for s in spec if s.startswith("out:")}
    if used_out != outs:
        problems.append(f"{task.id}: outputs {sorted(outs - used_out)} are not passed to the launcher")
    return problems


# ----------------------------------------------------------------------------------- CUDA runtime
class Cuda:
    """The few CUDA runtime calls this script needs, through ctypes."""

    def __init__(self) -> None:
        name = ctypes.util.find_library("cudart")
        candidates = [name] if name else []
        candidates += [str(p) for d in ("/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib")
                       for p in sorted(Path(d).glob("libcudart.so*"))]
        last: Exception | None = None
        for c in candidates:
            try:
                self.rt = ctypes.CDLL(c)
                break
            except OSError as e:
                last = e
        else:
            raise RuntimeError(f"libcudart not found ({last})")
        self.rt.cudaGetErrorString.restype = ctypes.c_char_p

    def check(self, code: int, what: str) -> None:
        if code != 0:
            raise RuntimeError(f"{what}: {self.rt.cudaGetErrorString(code).decode()} (error {code})")

    def device_count(self) -> int:
        n = ctypes.c_int(0)
        code = self.rt.cudaGetDeviceCount(ctypes.byref(n))
        return n.value if code == 0 else 0

    def arch(self) -> str:
        major, minor = ctypes.c_int(), ctypes.c_int()
        self.check(self.rt.cudaDeviceGetAttribute(ctypes.byref(major), 75, 0), "compute capability major")
        self.check(self.rt.cudaDeviceGetAttribute(ctypes.byref(minor), 76, 0), "compute capability minor")
        return f"sm_{major.value}{minor.value}"

    def malloc(self, nbytes: int) -> ctypes.c_void_p:
        ptr = ctypes.c_void_p()
        self.check(self.rt.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(max(1, nbytes))), "cudaMalloc")
        self.check(self.rt.cudaMemset(ptr, 0, ctypes.c_size_t(max(1, nbytes))), "cudaMemset")
        return ptr

    def upload(self, arr: np.ndarray) -> ctypes.c_void_p:
        a = np.ascontiguousarray(arr)
        ptr = self.malloc(a.nbytes)
        self.check(self.rt.cudaMemcpy(ptr, a.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(a.nbytes), 1), "H2D")
        return ptr

    def download(self, ptr: ctypes.c_void_p, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        out = np.empty(shape, dtype=dtype)
        self.check(self.rt.cudaMemcpy(out.ctypes.data_as(ctypes.c_void_p), ptr, ctypes.c_size_t(out.nbytes), 2),
                   "D2H")
        return out

    def free(self, ptr: ctypes.c_void_p) -> None:
        self.rt.cudaFree(ptr)

    def sync(self) -> None:
        self.check(self.rt.cudaDeviceSynchronize(), "cudaDeviceSynchronize")


# ----------------------------------------------------------------------------------- build and run
def build(task: Any, nvcc: str, arch: str, workdir: Path) -> Path:
    """kernel.cu + the launcher shim -> lib<task>.so (compiled with the file's own headers)."""
    d = workdir / task.id
    d.mkdir(parents=True, exist_ok=True)
    shutil.copy(task.cuda_file, d / "kernel.cu")
    n = len(launcher_params(task.cuda_file.read_text(), task.kernel))
    shim = _SHIM.replace("NKIEVAL_LAUNCHER", task.kernel).replace("std::index_sequence_for_launcher{}",
                                                                   f"std::make_index_sequence<{n}>{{}}")
    (d / "shim.cu").write_text(shim)
    lib = d / f"lib{task.id}.so"
    cmd = [nvcc, "-O2", "-std=c++17", f"-arch={arch}", "-shared", "-Xcompiler", "-fPIC", "-o", str(lib),
           str(d / "shim.cu")]
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=d, timeout=600)
    if p.returncode != 0:
        raise RuntimeError(f"nvcc failed:\n{(p.stdout + p.stderr)[-3000:]}")
    return lib


def run_case(cuda: Cuda, lib: Path, task: Any, case: Any) -> dict[str, Any]:
    from nkieval.review.compare import compare_outputs
    from nkieval.sim.dtypes import to_dtype
    from nkieval.tasks import load_reference, reference_outputs
    from nkieval.tasks.inputs import generate_inputs

    specs = [(t.name, t.concrete(case.dims), t.dtype, t.family) for t in task.inputs]
    ins = generate_inputs(specs, task.families[0], 11, case.label)
    want = reference_outputs(task, load_reference(task), ins)
    env = {**dict(case.dims), **dict(task.params)}
    params = launcher_params(task.cuda_file.read_text(), task.kernel)
    so = ctypes.CDLL(str(lib))
    so.nkieval_launch.restype = ctypes.c_int
    keep: list[Any] = []
    ptrs: list[ctypes.c_void_p] = []
    outs: dict[str, ctypes.c_void_p] = {}
    argv = (ctypes.c_void_p * len(params))()
    for i, ((ctyp, _), src) in enumerate(zip(params, LAUNCH[task.id])):
        if src.startswith("in:"):
            val: Any = cuda.upload(ins[src[3:]])
            ptrs.append(val)
        elif src.startswith("out:"):
            spec = next(t for t in task.outputs if t.name == src[4:])
            nbytes = int(np.prod(spec.concrete(case.dims))) * to_dtype(spec.dtype).itemsize
            val = cuda.malloc(nbytes)
            ptrs.append(val)
            outs[spec.name] = val
        elif src.startswith("ws:"):
            val = cuda.malloc(int(eval(src[3:], {"__builtins__": {}}, env)))
            ptrs.append(val)
        elif src == "stream":
            val = ctypes.c_void_p(None)
        else:
            val = ctype_of(ctyp)(eval(src, {"__builtins__": {}}, env))
        keep.append(val)
        argv[i] = ctypes.cast(ctypes.pointer(val), ctypes.c_void_p)
    t0 = time.perf_counter()
    try:
        code = so.nkieval_launch(argv)
        cuda.check(code, "launcher")
        cuda.sync()
        elapsed = time.perf_counter() - t0
        got = [cuda.download(outs[t.name], t.concrete(case.dims), to_dtype(t.dtype).storage) for t in task.outputs]
    finally:
        for p in ptrs:
            cuda.free(p)
    mismatch = compare_outputs(got, want, task.outputs, task.rtol, task.atol)
    err = max(float(np.nanmax(np.abs(np.asarray(g, np.float64) - np.asarray(w, np.float64)))) if g.size else 0.0
              for g, w in zip(got, want))
    return {"case": case.label, "dims": dict(case.dims), "ok": mismatch is None, "mismatch": mismatch,
            "max_abs_err": err, "gpu_s": round(elapsed, 4), "executor": executor_agreement(task, ins, case.dims, got)}


def executor_agreement(task: Any, ins: dict[str, np.ndarray], dims: dict[str, int], got: list[np.ndarray]
                       ) -> list[dict[str, Any]]:
    """nkieval.cuda (the CPU executor) on the same inputs, per output: the fraction of elements bitwise equal
    to the GPU's, the largest difference in fp32 ulp of the GPU's value, and whether it is within the task's
    tolerance. Expected: bitwise where the order is deterministic and no transcendental is involved (the
    executor rounds expf & co. correctly, a GPU is within 1-4 ulp); not for float atomics (order unspecified)."""
    from nkieval.cuda import CudaError, run_task_cuda

    try:
        mine, _ = run_task_cuda(task, ins, dims)
    except CudaError as e:
        return [{"error": str(e)}]
    out = []
    for spec, m, g in zip(task.outputs, mine, got):
        m64, g64 = np.asarray(m, np.float64), np.asarray(g, np.float64)
        same = (m64 == g64) | (np.isnan(m64) & np.isnan(g64))
        sp = np.spacing(np.abs(g64).astype(np.float32)).astype(np.float64)
        with np.errstate(all="ignore"):
            ulp = np.where(same, 0.0, np.abs(m64 - g64) / np.where(sp > 0, sp, 1e-45))
        out.append({"output": spec.name, "bitwise": float(same.mean()) if same.size else 1.0,
                    "max_ulp": float(np.nanmax(ulp)) if ulp.size else 0.0,
                    "within_tolerance": bool(np.allclose(m64, g64, rtol=task.rtol, atol=task.atol, equal_nan=True))})
    return out


def _cases(task: Any, which: str) -> list[Any]:
    if which == "all":
        return list(task.shapes)
    if which == "public":
        return list(task.public_shapes)
    # "small": the public shape and the cheapest ragged hidden one
    def cost(s: Any) -> int:
        return sum(int(np.prod(t.concrete(s.dims))) for t in task.inputs)
    ragged = [s for s in task.hidden_shapes if any(v > 1 and v % 128 for v in s.dims.values())]
    return list(task.public_shapes[:1]) + ([min(ragged, key=cost)] if ragged else [])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", default=None, help="comma-separated fnmatch patterns over task ids")
    ap.add_argument("--shapes", choices=("small", "public", "all"), default="small")
    ap.add_argument("--arch", default=None, help="nvcc -arch (default: the GPU's compute capability)")
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) // 2), help="parallel nvcc builds")
    ap.add_argument("--build-only", action="store_true",
                    help="only build every kernel with its launcher shim (no GPU needed; default arch sm_80)")
    args = ap.parse_args(argv)

    from nkieval.tasks import builtin_ids, load_task

    pats = [p.strip() for p in (args.tasks or "").split(",") if p.strip()]
    tasks = [load_task(t) for t in builtin_ids() if not pats or any(fnmatch.fnmatch(t, p) for p in pats)]
    tasks = [t for t in tasks if t.cuda_file is not None]
    problems = [p for t in tasks for p in check_spec(t)]
    if problems:
        print("launch specification problems:\n  " + "\n  ".join(problems))
        return 1
    nvcc = os.environ.get("NVCC") or shutil.which("nvcc") or ("/usr/local/bin/nvcc" if Path("/usr/local/bin/nvcc").exists()
                                                              else None)
    if nvcc is None:
        print("nvcc not found: cannot build the CUDA kernels (install the CUDA toolkit or set NVCC)")
        return 2
    if args.build_only:
        work = Path(tempfile.mkdtemp(prefix="nkieval-cuda-"))
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            res = list(pool.map(lambda t: _try(build, t, nvcc, args.arch or "sm_80", work), tasks))
        shutil.rmtree(work, ignore_errors=True)
        bad = [(t.id, r) for t, r in zip(tasks, res) if isinstance(r, Exception)]
        for tid, e in bad:
            print(f"BUILD-FAIL {tid}: {e}")
        print(f"built {len(tasks) - len(bad)} of {len(tasks)} kernels with their launcher shims")
        return 1 if bad else 0
    try:
        cuda = Cuda()
        ndev = cuda.device_count()
    except RuntimeError as e:
        print(f"no CUDA runtime available ({e}): nothing to run on a GPU")
        return 2
    if ndev == 0:
        print("no CUDA GPU available (cudaGetDeviceCount returned 0 devices): nothing to run; "
              "the kernels' compilation is covered by tests/suite/test_cuda_sources.py")
        return 2
    arch = args.arch or cuda.arch()
    print(f"{len(tasks)} CUDA kernels, {ndev} GPU(s), building for {arch} with {nvcc}")
    work = Path(tempfile.mkdtemp(prefix="nkieval-cuda-"))
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        built = dict(zip([t.id for t in tasks], pool.map(lambda t: _try(build, t, nvcc, arch, work), tasks)))
    failures = 0
    for t in tasks:
        lib = built[t.id]
        if isinstance(lib, Exception):
            print(f"BUILD-FAIL {t.id}: {lib}")
            failures += 1
            continue
        for case in _cases(t, args.shapes):
            try:
                r = run_case(cuda, lib, t, case)
            except Exception as e:
                print(f"RUN-FAIL   {t.id} {case.label} ({case.describe()}): {type(e).__name__}: {e}")
                failures += 1
                continue
            failures += not r["ok"]
            status = "OK        " if r["ok"] else "MISMATCH  "
            print(f"{status}{t.id} {case.label} ({case.describe()}): max |gpu - reference| = {r['max_abs_err']:.3g}"
                  f" (rtol {t.rtol}, atol {t.atol}); {r['gpu_s'] * 1e3:.2f} ms"
                  + ("" if r["ok"] else f"; first problem: {r['mismatch']}"))
            for x in r["executor"]:
                print("          executor vs GPU: " + (x["error"] if "error" in x else
                      f"{x['output']}: {x['bitwise']:.1%} bitwise, max {x['max_ulp']:.3g} ulp, "
                      f"{'within' if x['within_tolerance'] else 'OUTSIDE'} tolerance"))
    shutil.rmtree(work, ignore_errors=True)
    print(f"{'all kernels agree' if not failures else f'{failures} failure(s)'}")
    return 0 if not failures else 1


def _try(fn: Any, *a: Any) -> Any:
    try:
        return fn(*a)
    except Exception as e:  # reported per task
        return e


if __name__ == "__main__":
    sys.exit(main())
