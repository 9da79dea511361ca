"""CUDA source analysis with tree-sitter-cuda: a ``kernel.cu`` becomes a :class:`CudaSummary` fact sheet."""
