"""NKI development tasks: the task format, its loader and checks, input generation, built-in tasks.

A task is a directory (see :mod:`nkieval.tasks.schema` and docs/tasks.md). The built-in suite
lives in ``nkieval/tasks/builtin/<task_id>/``.
"""

from nkieval.tasks.loader import (
    BUILTIN_ROOT,
    CheckReport,
    ReferenceVariant,
    builtin_ids,
    builtin_tasks,
    candidate_files,
    check_task,
    load_reference,
    load_reference_variants,
    load_task,
    reference_outputs,
    resolve_task_dir,
)
from nkieval.tasks.schema import (
    CRITERIA,
    SCHEMA_VERSION,
    FlawedCandidate,
    Limits,
    NumericsSpec,
    PerfSpec,
    ShapeCase,
    Task,
    TaskError,
    TensorSpec,
)

__all__ = [
    "BUILTIN_ROOT",
    "CRITERIA",
    "SCHEMA_VERSION",
    "CheckReport",
    "FlawedCandidate",
    "Limits",
    "NumericsSpec",
    "PerfSpec",
    "ReferenceVariant",
    "ShapeCase",
    "Task",
    "TaskError",
    "TensorSpec",
    "builtin_ids",
    "builtin_tasks",
    "candidate_files",
    "check_task",
    "load_reference",
    "load_reference_variants",
    "load_task",
    "reference_outputs",
    "resolve_task_dir",
]
