"""Stage 1: YAML spec -> typed, validated `Spec`.

Every error a user can make is a `SpecError` naming the file, the key and the fix. Nothing here
knows about tiles or CUDA: it only turns text into a checked description of the problem
C = alpha * contract(A, B) + beta * C over three strided views.

model (Spec and its views) <- parse (the document; with einsum, operand, epilogue, dynamic, spans, each a part of
it, reading values through reader and suggest) <- yaml_file (the file).
"""

from dgemm_cli.spec.epilogue import ACTIVATION_ALIASES, EPILOGUE_VIEW_KEYS
from dgemm_cli.spec.model import (
    ACCUM_TYPES,
    ACTIVATIONS,
    ARCHS,
    DTYPE_ALIASES,
    DTYPE_BYTES,
    EPILOGUE_STEPS,
    EXTRA_OPERANDS,
    OPERANDS,
    OUTPUT_VIEW,
    EpilogueStep,
    OperandView,
    Spec,
)
from dgemm_cli.spec.operand import OPERAND_KEYS
from dgemm_cli.spec.parse import GEMM_KEYS, NESTED_KEYS, TOP_KEYS, parse_spec
from dgemm_cli.spec.spans import INT64_MAX, LARGEST_GPU_BYTES, MEMORY_WARNING_FACTOR
from dgemm_cli.spec.suggest import AMBIGUOUS_NAMES, MEANINGS
from dgemm_cli.spec.yaml_file import load_spec

__all__ = [
    "ACCUM_TYPES", "ACTIVATIONS", "ACTIVATION_ALIASES", "AMBIGUOUS_NAMES", "ARCHS", "DTYPE_ALIASES", "DTYPE_BYTES",
    "EPILOGUE_STEPS", "EPILOGUE_VIEW_KEYS", "EXTRA_OPERANDS", "GEMM_KEYS", "INT64_MAX", "LARGEST_GPU_BYTES",
    "MEANINGS", "MEMORY_WARNING_FACTOR", "NESTED_KEYS", "OPERANDS", "OPERAND_KEYS", "OUTPUT_VIEW", "TOP_KEYS",
    "EpilogueStep", "OperandView", "Spec", "load_spec", "parse_spec",
]
