"""Errors a user can cause. Each names the file, the key and the fix; internal bugs assert instead."""

from __future__ import annotations

# Process exit codes, shared by every command (documented in `deepgemm --help`).
EXIT_OK = 0
EXIT_FAILED = 1  # a kernel failed verification, or a build failed
EXIT_USAGE = 2  # bad command line or bad spec (click uses 2 for usage errors too)
EXIT_NO_GPU = 3  # verify/bench asked for a GPU and none is present
EXIT_TOOLCHAIN = 4  # no usable nvcc, or the built files are missing
EXIT_UNPROVED = 5  # verify --formal: nothing failed, but some kernel's family has no index model to prove


class DeepGemmError(Exception):
    """Base of every error a user can cause; `exit_code` is what the CLI exits with."""

    exit_code = EXIT_USAGE


class SpecError(DeepGemmError):
    """A spec file is invalid. The message names the file, the key and the fix."""

    def __init__(self, path: str, key: str, problem: str, fix: str):
        self.path, self.key, self.problem, self.fix = path, key, problem, fix
        super().__init__(f"{path}: {key}: {problem}. Fix: {fix}")


class PackError(DeepGemmError):
    """`deepgemm pack` (or `deepgemm.pack`) was given weights that do not fit what was declared: a shape that is not
    the layout's for the declared k and n, values out of range, an unknown layout. The message names the argument
    and the fix."""

    def __init__(self, argument: str, problem: str, fix: str):
        self.argument, self.problem, self.fix = argument, problem, fix
        super().__init__(f"{argument}: {problem}. Fix: {fix}")


class PlanError(DeepGemmError):
    """No plan satisfies the constraints (e.g. the problem is too large for one launch)."""


class ToolchainError(DeepGemmError):
    """nvcc (or the host compiler) is missing or unusable."""

    exit_code = EXIT_TOOLCHAIN


class BuildError(DeepGemmError):
    """nvcc rejected generated code, or a build output is missing."""

    exit_code = EXIT_FAILED


class NotBuiltError(DeepGemmError):
    """verify/bench was asked to run a directory that has not been built for that arch."""

    exit_code = EXIT_TOOLCHAIN


class NoGpuError(DeepGemmError):
    """verify/bench need a CUDA GPU and none is visible."""

    exit_code = EXIT_NO_GPU


class CacheError(DeepGemmError):
    """The kernel cache (the Python API's, deepgemm/cache.py) cannot be used: its folder is not writable."""

    exit_code = EXIT_TOOLCHAIN


class KernelLoadError(DeepGemmError):
    """A built lib<name>.so cannot be loaded, or lacks its entry point."""

    exit_code = EXIT_TOOLCHAIN


class KernelCallError(DeepGemmError):
    """A kernel's entry point returned an error status (`status`: the cudaError_t, or the host's errno)."""

    exit_code = EXIT_FAILED

    def __init__(self, message: str, status: int):
        self.status = status
        super().__init__(message)
