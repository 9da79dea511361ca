"""Every task's kernel.cu is real CUDA: it compiles with nvcc (skipped, with the reason, without it).

The files are compiled in parallel (``nvcc -c -o /dev/null``, a few at a time) once per session;
each task's test then reports its own compiler output. The target architecture is sm_80
(Ampere, the oldest with bf16 tensor cores, which several sources use); NVCC_ARCH overrides it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path

import pytest

from nkieval.tasks import builtin_ids, load_task

NVCC = os.environ.get("NVCC") or shutil.which("nvcc") or ("/usr/local/bin/nvcc" if Path("/usr/local/bin/nvcc").exists()
                                                          else None)
ARCH = os.environ.get("NVCC_ARCH", "sm_80")
SOURCES = {t: load_task(t).cuda_file for t in builtin_ids()}


def _compile(path: Path) -> tuple[int, str]:
    try:
        p = subprocess.run([NVCC, "-c", "-o", os.devnull, "-std=c++17", f"-arch={ARCH}", str(path)], capture_output=True, text=True,
                           timeout=300)
    except subprocess.TimeoutExpired:
        return 124, "nvcc timed out"
    return p.returncode, (p.stdout + p.stderr)[-4000:]


@cache
def _all_results() -> dict[str, tuple[int, str]]:
    todo = {t: p for t, p in SOURCES.items() if p is not None}
    with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 2)) as pool:
        return dict(zip(todo, pool.map(_compile, todo.values())))


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed: CUDA sources cannot be compiled here")
@pytest.mark.parametrize("task_id", sorted(t for t, p in SOURCES.items() if p is not None))
def test_kernel_cu_compiles_with_nvcc(task_id: str) -> None:
    rc, out = _all_results()[task_id]
    assert rc == 0, f"nvcc failed on {SOURCES[task_id]}:\n{out}"
    assert "warning" not in out.lower() or "deprecated" in out.lower(), out


def _gpu_script():
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "suite_cuda_gpu.py"
    spec = importlib.util.spec_from_file_location("suite_cuda_gpu", path)
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("task_id", sorted(t for t, p in SOURCES.items() if p is not None))
def test_gpu_script_can_launch_every_kernel(task_id: str) -> None:
    """benchmarks/suite_cuda_gpu.py knows how to call each launcher: arity, tensor names, types."""
    mod = _gpu_script()
    assert mod.check_spec(load_task(task_id)) == []


def test_gpu_script_reports_missing_gpu_cleanly() -> None:
    """Without a GPU (or nvcc) the script exits 2 with a message instead of crashing."""
    mod = _gpu_script()
    try:
        has_gpu = mod.Cuda().device_count() > 0
    except RuntimeError:
        has_gpu = False
    if has_gpu:
        pytest.skip("a CUDA GPU is present: run benchmarks/suite_cuda_gpu.py instead")
    assert mod.main(["--tasks", "relu"]) == 2
