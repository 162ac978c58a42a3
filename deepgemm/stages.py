"""The CLI's stages as functions with typed results: `generate` is `deepgemm gen` (dgemm_cli.pipeline), `build` is
`deepgemm build` (dgemm_cli.build / build_host), `load` opens the built library (kernel.py). No stage of its own:
each calls the one dgemm_cli has.

The API plans by the cost model alone: unlike `deepgemm gen`, it does not consult the tuning database."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from deepgemm.kernel import Kernel, load_library
from dgemm_cli.arch import get_arch
from dgemm_cli.build import KernelResources, build_dir_for, read_plan, unbuildable_reason
from dgemm_cli.build import build as build_cuda
from dgemm_cli.build_host import HOST_ARCH, build_host, find_cxx
from dgemm_cli.disable import parse_disable
from dgemm_cli.errors import BuildError, NotBuiltError
from dgemm_cli.pipeline import Artifact
from dgemm_cli.pipeline import generate as pipeline_generate
from dgemm_cli.records import PlanRecord
from dgemm_cli.render import c_prototype
from dgemm_cli.spec import Spec, parse_spec
from dgemm_cli.toolchain import Nvcc, find_nvcc
from dgemm_cli.views import analyse


@dataclass(frozen=True)
class Generated:
    """A generated folder, as `deepgemm gen` writes it."""

    directory: Path
    files: tuple[Path, ...]
    prototype: str  # the C entry point <name>.h declares
    content_hash: str  # sha256 of every rendered file (plan.json's)
    name: str
    arch: str

    @property
    def header(self) -> Path:
        return self.directory / f"{self.name}.h"


@dataclass(frozen=True)
class Built:
    """A built folder: its libraries for one arch and ptxas's report of each kernel (empty for arch cpu)."""

    directory: Path
    library: Path  # build/<arch>/lib<name>.so
    static_library: Path  # build/<arch>/lib<name>.a
    name: str
    arch: str
    prototype: str
    cached: bool  # nothing compiled: the folder's build stamp matched
    seconds: float
    kernels: tuple[KernelResources, ...]


def generate(spec: Spec, out_dir: str | Path, *, arch: str | None = None, family: str | None = None,
             disable: str | Iterable[str] | None = None) -> Generated:
    """Plan `spec` for `arch` (default: the spec's) and write its folder to `out_dir/<name>/`, as
    `deepgemm gen SPEC -o out_dir --untuned [--arch A] [--family F] [--disable OPT,...]` does. `disable`: the
    optimizations to force off, "tma,multicast" or a list of names (dgemm_cli.disable.OPTIONS); DisableError for
    one that is not an option."""
    return generate_into(spec, arch or spec.arch, Path(out_dir) / spec.name, family, disable)


def generate_into(spec: Spec, arch: str, directory: Path, family: str | None = None,
                  disable: str | Iterable[str] | None = None) -> Generated:
    """generate, into `directory` itself."""
    disabled = parse_disable(disable, "disable=")
    return _generated(pipeline_generate(spec, get_arch(arch), directory.parent, family, directory=directory,
                                        disabled=disabled))


def _generated(artifact: Artifact) -> Generated:
    return Generated(artifact.directory, tuple(artifact.files), artifact.prototype, artifact.content_hash,
                     artifact.name, artifact.arch)


def build(generated: Generated | str | Path, *, arch: str | None = None, nvcc: Nvcc | str | None = None,
          cxx: str | None = None, harness: bool = False, force: bool = False) -> Built:
    """Compile a generated folder for `arch` (default: the one it was generated for), as `deepgemm build --lib-only`
    does: lib<name>.a and lib<name>.so in build/<arch>/ (`harness`: also the verify/bench harness, as a plain
    `deepgemm build`). `nvcc`: the compiler (an Nvcc, or a path; default: found as the CLI finds it); `cxx`: the
    host compiler for arch cpu. An unchanged folder is not compiled again (`cached`). Raises BuildError with the
    compiler's output when a compile fails."""
    directory = generated.directory if isinstance(generated, Generated) else Path(generated)
    plan = read_plan(directory)
    target = arch or plan.arch
    why = unbuildable_reason(plan, get_arch(target))
    if why:
        raise BuildError(f"{directory}: planned for {plan.arch}, and {why}. Fix: generate it for that arch: "
                         f"deepgemm.generate(spec, out_dir, arch={target!r})")
    if target == HOST_ARCH:
        result = build_host(directory, find_cxx(cxx), force)
    else:
        compiler = nvcc if isinstance(nvcc, Nvcc) else find_nvcc(nvcc)
        result = build_cuda(directory, target, compiler, force, lib_only=not harness)
    if not result.ok:
        raise BuildError(f"{directory}: the build for {target} failed:\n{result.error}")
    out = build_dir_for(directory, target)
    return Built(directory, out / f"lib{plan.name}.so", out / f"lib{plan.name}.a", plan.name, target,
                 prototype_of(plan, target), result.cached, result.seconds, tuple(result.kernels))


def load(built: Built | str | Path, *, arch: str | None = None) -> Kernel:
    """Open a built library: a Built, or a generated folder (its build for `arch`, default the one it was
    generated for). Loading needs no GPU; calling a CUDA kernel does."""
    if isinstance(built, Built):
        return load_library(built.library, built.name, built.arch, built.prototype)
    directory = Path(built)
    plan = read_plan(directory)
    target = arch or plan.arch
    library = build_dir_for(directory, target) / f"lib{plan.name}.so"
    if not library.is_file():
        raise NotBuiltError(f"{directory}: not built for {target}; run deepgemm.build({str(directory)!r}, "
                            f"arch={target!r}) (or `deepgemm build {directory} --arch {target}`)")
    return load_library(library, plan.name, target, prototype_of(plan, target))


def prototype_of(plan: PlanRecord, arch: str) -> str:
    """The entry point of a generated folder for `arch`, from the spec its plan.json records (parse_spec reads
    Spec.to_dict back to an equal Spec)."""
    spec = parse_spec(dict(plan.spec), plan.source)
    return c_prototype(spec, analyse(spec), get_arch(arch))
