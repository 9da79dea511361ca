"""A CPU executor for CUDA kernels (docs/cuda.md).

The CUDA source is parsed with tree-sitter, compiled once into Python closures, and run with NumPy over
the threads of a group of blocks at a time, statement by statement under a mask of active threads, so
that fp32 arithmetic happens in the order the source writes it, rounded per operation, with FMA
contraction as nvcc does by default. The host function (the launch code) is interpreted too: its
``<<<grid, block, smem>>>`` launches run the kernels.

Stands alone: nothing here imports the review, the simulator or the analysis packages.
"""

from nkieval.cuda.program import BuildOptions, parse_program
from nkieval.cuda.runner import CudaRun, bind_task, host_params, run_host, run_task_cuda
from nkieval.cuda.values import (
    CudaError,
    ExecutorSafetyNet,
    ExecutorTimeout,
    KernelFault,
    Unsupported,
    executor_seconds,
    executor_work,
    work_units,
)

__all__ = [
    "BuildOptions",
    "CudaError",
    "CudaRun",
    "ExecutorSafetyNet",
    "ExecutorTimeout",
    "KernelFault",
    "Unsupported",
    "bind_task",
    "executor_seconds",
    "executor_work",
    "host_params",
    "parse_program",
    "run_host",
    "run_task_cuda",
    "work_units",
]
