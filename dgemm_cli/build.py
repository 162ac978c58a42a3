"""Stage 5: compile a generated directory with nvcc and read ptxas's resource report.

Outputs go to <dir>/build/<arch>/: <name>.o, lib<name>.a, lib<name>.so and <name>_harness.
The flags come from the directory's plan.json (the same ones its Makefile and CMakeLists use).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from dgemm_cli.arch import get_arch
from dgemm_cli.errors import BuildError, NotBuiltError
from dgemm_cli.toolchain import Nvcc

COMPILE_TIMEOUT_S = 600


@dataclass(frozen=True)
class KernelResources:
    """ptxas's report for one kernel entry."""

    kernel: str
    arch: str
    registers: int
    stack_bytes: int
    spill_store_bytes: int
    spill_load_bytes: int
    smem_bytes: int  # static shared memory (the kernels use dynamic; usually 0)

    @property
    def spills(self) -> bool:
        return self.spill_store_bytes > 0 or self.spill_load_bytes > 0


@dataclass
class BuildResult:
    directory: Path
    name: str
    arch: str
    ok: bool
    seconds: float
    kernels: list[KernelResources] = field(default_factory=list)
    outputs: list[Path] = field(default_factory=list)
    error: str = ""  # compiler output when not ok

    def to_dict(self) -> dict:
        return {"name": self.name, "directory": str(self.directory), "arch": self.arch, "ok": self.ok,
                "seconds": round(self.seconds, 2), "outputs": [str(p) for p in self.outputs],
                "kernels": [vars(k) for k in self.kernels], "error": self.error}


_ENTRY = re.compile(r"Compiling entry function '(\S+)' for '(\w+)'")
_PROPS = re.compile(r"Function properties for (\S+)")
_STACK = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers(?:.*?(\d+) bytes smem)?")


def parse_ptxas(text: str) -> list[KernelResources]:
    """Parse `-Xptxas -v` output into one record per kernel entry (device functions are skipped)."""
    found: dict[str, dict] = {}
    current = None
    props_for = None
    for line in text.splitlines():
        if m := _ENTRY.search(line):
            current = m.group(1)
            found.setdefault(current, {"kernel": current, "arch": m.group(2), "registers": 0, "stack_bytes": 0,
                                       "spill_store_bytes": 0, "spill_load_bytes": 0, "smem_bytes": 0})
            props_for = None
        elif m := _PROPS.search(line):
            props_for = m.group(1)
        elif (m := _STACK.search(line)) and props_for in found:
            found[props_for].update(stack_bytes=int(m.group(1)), spill_store_bytes=int(m.group(2)),
                                    spill_load_bytes=int(m.group(3)))
        elif (m := _USED.search(line)) and current in found:
            found[current]["registers"] = int(m.group(1))
            if m.group(2):
                found[current]["smem_bytes"] = int(m.group(2))
    return [KernelResources(**v) for v in found.values()]


def demangle(names: list[str]) -> dict[str, str]:
    """Readable kernel names through c++filt when it is installed; mangled names otherwise."""
    cxxfilt = shutil.which("c++filt")
    if not cxxfilt or not names:
        return {n: n for n in names}
    out = subprocess.run([cxxfilt], input="\n".join(names), capture_output=True, text=True, check=False)
    lines = out.stdout.splitlines()
    if out.returncode != 0 or len(lines) != len(names):
        return {n: n for n in names}
    return dict(zip(names, lines))


def read_plan(directory: Path) -> dict:
    plan = directory / "plan.json"
    if not plan.is_file():
        raise NotBuiltError(f"{directory}: no plan.json here; run `deepgemm gen SPEC -o {directory.parent}` first")
    return json.loads(plan.read_text())


def build_dir_for(directory: Path, arch: str) -> Path:
    return directory / "build" / arch


def _run(cmd: list[str], cwd: Path, nvcc: Nvcc) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=nvcc.run_env(os.environ), capture_output=True, text=True,
                          timeout=COMPILE_TIMEOUT_S, check=False)


def build(directory: Path, arch: str, nvcc: Nvcc) -> BuildResult:
    """Compile one generated directory. Never raises for compiler errors: they land in `error`."""
    start = time.monotonic()
    plan = read_plan(directory)
    name = plan["spec"]["name"]
    gencode = get_arch(arch).gencode
    flags = plan["build"]["nvcc_flags"]
    out = build_dir_for(directory, arch)
    out.mkdir(parents=True, exist_ok=True)
    rel = Path("build") / arch
    prefix = nvcc.compile_prefix()
    obj, harness_obj = rel / f"{name}.o", rel / f"{name}_harness.o"
    lib_a, lib_so, harness = rel / f"lib{name}.a", rel / f"lib{name}.so", rel / f"{name}_harness"

    kernel_cmd = [*prefix, *flags, *gencode, "-Xcompiler", "-fPIC", "-Xptxas", "-v", "-c", f"{name}.cu", "-o", str(obj)]
    harness_cmd = [*prefix, *flags, *gencode, "-c", f"{name}_harness.cu", "-o", str(harness_obj)]
    # The kernel and the harness compile independently; run both at once.
    with ThreadPoolExecutor(max_workers=2) as pool:
        kernel_job = pool.submit(_run, kernel_cmd, directory, nvcc)
        harness_job = pool.submit(_run, harness_cmd, directory, nvcc)
        kernel_run, harness_run = kernel_job.result(), harness_job.result()
    result = BuildResult(directory, name, arch, ok=False, seconds=0.0)
    for run, cmd in ((kernel_run, kernel_cmd), (harness_run, harness_cmd)):
        if run.returncode != 0:
            result.error = _compile_error(directory, cmd, run)
            result.seconds = time.monotonic() - start
            return result
    kernels = parse_ptxas(kernel_run.stderr)
    readable = demangle([k.kernel for k in kernels])
    result.kernels = [KernelResources(**{**vars(k), "kernel": readable[k.kernel]}) for k in kernels]

    ar = shutil.which("ar")
    if ar is None:
        raise BuildError("`ar` (binutils) is not installed: it is needed for the static library")
    steps = [
        [ar, "rcs", str(lib_a), str(obj)],
        [*prefix, *gencode, "-shared", str(obj), "-o", str(lib_so)],
        [*prefix, *gencode, str(harness_obj), str(lib_a), "-o", str(harness), "-ldl"],
    ]
    for cmd in steps:
        run = _run(cmd, directory, nvcc)
        if run.returncode != 0:
            result.error = _compile_error(directory, cmd, run)
            result.seconds = time.monotonic() - start
            return result
    result.ok = True
    result.outputs = [directory / p for p in (lib_a, lib_so, harness)]
    result.seconds = time.monotonic() - start
    return result


def _compile_error(directory: Path, cmd: list[str], run: subprocess.CompletedProcess[str]) -> str:
    # nvcc prints "file.cu(123): error: ..."; prefix the directory so the path is usable as is.
    text = (run.stderr + run.stdout).strip()
    text = re.sub(r"^(\w[\w.]*\.(?:cu|h|cuh))\((\d+)\)", lambda m: f"{directory / m.group(1)}:{m.group(2)}",
                  text, flags=re.MULTILINE)
    return f"$ (cd {directory} && {' '.join(cmd)})\n{text}"


def harness_path(directory: Path, arch: str) -> Path:
    plan = read_plan(directory)
    path = build_dir_for(directory, arch) / f"{plan['spec']['name']}_harness"
    if not path.is_file():
        raise NotBuiltError(f"{directory}: not built for {arch}; run `deepgemm build {directory} --arch {arch}`")
    return path


def built_arches(directory: Path) -> list[str]:
    root = directory / "build"
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if p.is_dir() and any(p.glob("*_harness")))
