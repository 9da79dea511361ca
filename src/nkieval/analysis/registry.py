"""The single table of analysis rules: one row per rule module, ids stable forever.

Order here is the order of the documentation page (``docs/analysis.md``).
"""

from __future__ import annotations

import importlib

from nkieval.analysis.rule import Rule

NKI_RULE_MODULES: tuple[str, ...] = (
    "nki000_syntax_error",
    "nki001_no_kernel",
    "nki002_uninitialised_read",
    "nki003_missing_ragged_tail",
    "nki004_partition_dim_exceeds_limit",
    "nki005_tensor_dependent_control_flow",
    "nki006_simulator_only_op",
    "nki007_affine_loop_carried_dependency",
    "nki008_hard_coded_shape",
    "nki009_domain_narrowing_assert",
    "nki010_loop_invariant_load",
    "nki011_vector_accumulated_matmul",
    "nki012_matmul_on_vector_engine",
    "nki013_fp32_matmul_inputs",
    "nki014_per_element_dma",
    "nki015_per_element_compute",
    "nki016_underfilled_partitions",
    "nki017_unused_allocation",
    "nki018_unfused_activation",
    "nki019_psum_initialised_before_accumulate",
    "nki030_beta1_api_in_current_code",
    "nki031_current_api_in_beta1_code",
    "nki032_deprecated_loop_alias",
    "nki040_forbidden_import",
    "nki041_file_or_dynamic_code",
    "nki042_host_array_compute",
    "nki043_returns_input",
    "nki044_monkeypatch",
    "nki045_swallowed_exception",
    "nki046_hard_coded_data",
    "nki047_unused_kernel_input",
)

MIG_RULE_MODULES: tuple[str, ...] = (
    "mig001_thread_by_thread_port",
    "mig002_bounds_check_not_mirrored",
    "mig003_accumulator_downgraded",
    "mig004_stable_pattern_dropped",
    "mig005_math_function_mismatch",
    "mig006_cuda_tile_size_copied",
    "mig007_atomics_not_mapped",
    "mig008_tensor_core_not_mapped",
    "mig009_sync_emulated",
)


def _load(package: str, modules: tuple[str, ...]) -> dict[str, Rule]:
    out: dict[str, Rule] = {}
    for name in modules:
        rule: Rule = importlib.import_module(f"{package}.{name}").RULE
        if rule.id in out:
            raise ValueError(f"duplicate rule id {rule.id} in {name}")
        if not name.startswith(rule.id.lower() + "_") or name != f"{rule.id.lower()}_{rule.name.replace('-', '_')}":
            raise ValueError(f"rule module {name} must be named {rule.id.lower()}_{rule.name.replace('-', '_')}")
        out[rule.id] = rule
    return out


NKI_RULES: dict[str, Rule] = _load("nkieval.analysis.nki.rules", NKI_RULE_MODULES)
MIG_RULES: dict[str, Rule] = _load("nkieval.analysis.migration.rules", MIG_RULE_MODULES)
RULES: dict[str, Rule] = {**NKI_RULES, **MIG_RULES}
"""Every rule, keyed by id (NKI0xx for kernel source, MIG0xx for CUDA→NKI fidelity)."""
