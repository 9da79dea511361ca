"""Static analysis of NKI kernels and of CUDA sources they port (never executes the analysed code).

Public API:

- :func:`analyze_nki` — NKI0xx findings on a kernel file (code quality, idiom, hardware, integrity).
- :func:`parse_cuda` — a :class:`CudaSummary` fact sheet of a ``kernel.cu``.
- :func:`migration_fidelity` — MIG0xx findings comparing a CUDA summary with its NKI port.
- :func:`analyze_port` — both at once from one model of the kernel (what a review runs).
- :data:`RULES` — the rule catalogue (id → :class:`Rule`), the source of ``docs/analysis.md``.
"""

from nkieval.analysis.cuda.parser import CudaParseError, extract_cuda_from_python, parse_cuda
from nkieval.analysis.cuda.summary import CudaSummary, KernelInfo, Launch
from nkieval.analysis.finding import CATEGORIES, SEVERITIES, Category, Finding, Severity
from nkieval.analysis.migration.fidelity import analyze_port, migration_fidelity
from nkieval.analysis.nki.analyzer import UnknownRuleError, analyze_nki
from nkieval.analysis.registry import MIG_RULES, NKI_RULES, RULES
from nkieval.analysis.rule import Rule

__all__ = [
    "CATEGORIES",
    "MIG_RULES",
    "NKI_RULES",
    "RULES",
    "SEVERITIES",
    "Category",
    "CudaParseError",
    "CudaSummary",
    "Finding",
    "KernelInfo",
    "Launch",
    "Rule",
    "Severity",
    "UnknownRuleError",
    "analyze_nki",
    "analyze_port",
    "extract_cuda_from_python",
    "migration_fidelity",
    "parse_cuda",
]
