"""CUDA → NKI migration-fidelity analysis (MIG0xx rules)."""
