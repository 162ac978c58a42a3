"""deepgemm: standalone CUDA GEMM / contraction kernels over strided views.

The pipeline, one module a stage:
    spec -> views -> plan (constraints + arch) -> render -> build (toolchain) -> verify / bench
"""

__version__ = "0.1.0"
