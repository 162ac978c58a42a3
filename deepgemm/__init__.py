"""deepgemm's Python API: specs, the CLI's stages as functions, and a kernel cache on disk. No torch needed.

    import deepgemm
    spec = deepgemm.gemm(256, 512, 128, name="my_gemm")        # or deepgemm.spec_from_dict({...}), contraction(...)
    generated = deepgemm.generate(spec, "generated")           # deepgemm gen
    built = deepgemm.build(generated)                          # deepgemm build --lib-only
    kernel = deepgemm.load(built)                              # ctypes; calling it needs a GPU
    kernel = deepgemm.compile(spec)                            # all three, cached in $DEEPGEMM_CACHE
    words = deepgemm.pack(qweight, source="gptq", target="dg", k=4096, n=11008)   # deepgemm pack: numpy in, out

Every error a user can cause is a DeepGemmError naming what and the fix; a bad spec is the SpecError `deepgemm gen`
reports for the same YAML.
"""

from deepgemm.api import View, contraction, gemm, spec_from_dict, spec_from_yaml, view
from deepgemm.cache import cache_dir, cache_key, get_kernel
from deepgemm.kernel import Kernel, Parameter
from deepgemm.stages import Built, Generated, build, generate, load
from dgemm_cli import __version__
from dgemm_cli.errors import (
    BuildError,
    CacheError,
    DeepGemmError,
    KernelCallError,
    KernelLoadError,
    NotBuiltError,
    PackError,
    PlanError,
    SpecError,
    ToolchainError,
)
from dgemm_cli.quant import repack
from dgemm_cli.spec import Spec

compile = get_kernel  # deepgemm.compile(spec), the name; builtins.compile is untouched
pack = repack  # deepgemm.pack(qweight, source="gptq", target="dg", k=K, n=N): `deepgemm pack` on numpy arrays

__all__ = [
    "BuildError", "Built", "CacheError", "DeepGemmError", "Generated", "Kernel", "KernelCallError", "KernelLoadError",
    "NotBuiltError", "PackError", "Parameter", "PlanError", "Spec", "SpecError", "ToolchainError", "View",
    "__version__", "build", "cache_dir", "cache_key", "compile", "contraction", "gemm", "generate", "get_kernel",
    "load", "pack", "spec_from_dict", "spec_from_yaml", "view",
]
