"""Static analysis of NKI kernels written in Python (stdlib ``ast``; the code is never executed)."""
