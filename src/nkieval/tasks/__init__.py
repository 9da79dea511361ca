"""NKI development tasks: the task format, its loader and checks, input generation, built-in tasks.

A task is a directory (see :mod:`nkieval.tasks.schema` and docs/tasks.md). The built-in suite
lives in ``nkieval/tasks/builtin/<task_id>/``.
"""

from nkieval.tasks.loader import (
    BUILTIN_ROOT,
    PORTS_ROOT,
    TASK_SETS,
    CheckReport,
    ReferenceVariant,
    builtin_ids,
    builtin_tasks,
    candidate_files,
    check_task,
    load_reference,
    load_reference_variants,
    load_task,
    port_tasks,
    reference_outputs,
    resolve_task_dir,
    set_ids,
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
    "PORTS_ROOT",
    "SCHEMA_VERSION",
    "TASK_SETS",
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
    "port_tasks",
    "reference_outputs",
    "resolve_task_dir",
    "set_ids",
]
