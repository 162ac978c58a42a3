"""Stage 5: compile a generated directory with nvcc and read ptxas's resource report.

Outputs go to <dir>/build/<arch>/: <name>.o, lib<name>.a, lib<name>.so and <name>_harness.
The flags come from the directory's plan.json (the same ones its Makefile and CMakeLists use).

A successful build leaves a stamp beside its outputs (build/<arch>/build-stamp.json): a hash of the files
the build reads, the nvcc (path, version, the NVCC_* flag variables), every command line and the arch, plus
ptxas's report. The next build with the same hash and all outputs present is skipped (`cached`) and reports the
stamp's registers and spills; `force` rebuilds anyway. A library-only build (`lib_only`: the kernel object,
lib<name>.a and lib<name>.so) has its own hash, which a full build's stamp also records: a full build serves a
later library-only request, a library-only build never a full one.

The harness links dg_harness.cuh's definitions from one object shared by every build on this machine
(<user cache dir>/deepgemm/harness/harness-<hash>/, or $DEEPGEMM_HARNESS_CACHE/harness-<hash>/), compiled once per
content of dg_harness.cuh, nvcc, flags and arch; each <name>_harness.cu then compiles against its declarations
only (DG_HARNESS_DECLARATIONS_ONLY). Where the cache folder cannot be made, the object goes beside the generated
folders (<dir>/../.deepgemm-cache/).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields
from pathlib import Path

import platformdirs

from dgemm_cli.arch import CPU, Arch, get_arch, unbuildable
from dgemm_cli.errors import BuildError, NotBuiltError
from dgemm_cli.records import PlanRecord
from dgemm_cli.toolchain import Nvcc

COMPILE_TIMEOUT_S = 600
STAMP = "build-stamp.json"  # in build/<arch>/, written only after a successful build
STAMP_FORMAT = 2  # bump when what the key covers changes: older stamps then never match
# Environment variables nvcc reads flags or the host compiler from: flags as much as the command line's.
NVCC_ENV_FLAGS = ("NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS", "NVCC_CCBIN")
HARNESS_SOURCE = "dg_harness.cuh"
HARNESS_CACHE_ENV = "DEEPGEMM_HARNESS_CACHE"  # a folder for the shared dg_harness objects
HARNESS_CACHE = ".deepgemm-cache"  # beside the generated folders, where the cache folder cannot be made
HARNESS_DECLARATIONS_ONLY = "-DDG_HARNESS_DECLARATIONS_ONLY"


@dataclass(frozen=True)
class KernelResources:
    """ptxas's report for one kernel entry."""

    kernel: str
    arch: str
    registers: int
    stack_bytes: int
    spill_store_bytes: int
    spill_load_bytes: int
    smem_bytes: int  # STATIC shared memory, ptxas's report (the kernels' tiles are dynamic: usually 0)
    # Dynamic shared memory the launch asks for: the plan's smem_bytes for the kernel's namespace (plan.json).
    dynamic_smem_bytes: int = 0

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
    cached: bool = False  # nothing compiled: the stamp matched; `kernels` are the stamp's ptxas report

    def to_dict(self) -> dict:
        return {"name": self.name, "directory": str(self.directory), "arch": self.arch, "ok": self.ok,
                "cached": self.cached, "seconds": round(self.seconds, 2), "outputs": [str(p) for p in self.outputs],
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


def read_plan(directory: Path) -> PlanRecord:
    plan = directory / "plan.json"
    if not plan.is_file():
        raise NotBuiltError(f"{directory}: no plan.json here; run `deepgemm gen SPEC -o {directory.parent}` first")
    return PlanRecord.load(plan)


def unbuildable_reason(plan: PlanRecord, target: Arch) -> str | None:
    """Why a generated directory (its plan.json) cannot be built for `target`, or None."""
    if (plan.arch == CPU.name) != (target.name == CPU.name):
        return (f"its code is {'C++ for the host' if plan.arch == CPU.name else 'CUDA'}, not "
                f"{'CUDA' if plan.arch == CPU.name else 'C++ for the host'}")
    why = unbuildable(list(plan.arch_features), target)
    need = plan.smem_bytes
    if why is None and need > target.smem_per_block:
        why = f"it needs {need} B of shared memory a block, more than {target.name}'s {target.smem_per_block} B"
    return why


def build_dir_for(directory: Path, arch: str) -> Path:
    return directory / "build" / arch


def _run(cmd: list[str], cwd: Path, nvcc: Nvcc) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=nvcc.run_env(os.environ), capture_output=True, text=True,
                          timeout=COMPILE_TIMEOUT_S, check=False)


@dataclass(frozen=True)
class BuildCommands:
    """Every command one build runs, with paths relative to the generated directory (they run there)."""

    compile_kernel: list[str]  # with -Xptxas -v: its stderr is the resource report
    compile_harness: list[str] | None  # None in a library-only build
    link: list[list[str]]  # after the compiles, in order: static library, shared library[, harness]
    outputs: list[Path]  # what a build delivers: lib<name>.a, lib<name>.so[, <name>_harness]
    products: list[Path]  # every file it writes (outputs and the objects `explain --dump-sass` reads)

    def all(self) -> list[list[str]]:
        return [self.compile_kernel, *([self.compile_harness] if self.compile_harness else []), *self.link]

    def library_only(self) -> BuildCommands:
        """The kernel object and the two libraries alone: the first two links, their outputs."""
        return BuildCommands(self.compile_kernel, None, self.link[:2], self.outputs[:2],
                             [self.products[0], *self.outputs[:2]])


def build_commands(name: str, arch: str, flags: list[str], nvcc: Nvcc, ar: str,
                   harness_object: Path | None = None) -> BuildCommands:
    """`harness_object`: dg_harness.cuh's definitions compiled once (shared_harness); the harness then compiles
    against the declarations only and links it. None: the harness compiles dg_harness.cuh whole."""
    gencode = get_arch(arch).gencode
    rel = Path("build") / arch
    prefix = nvcc.compile_prefix()
    obj, harness_obj = rel / f"{name}.o", rel / f"{name}_harness.o"
    lib_a, lib_so, harness = rel / f"lib{name}.a", rel / f"lib{name}.so", rel / f"{name}_harness"
    declarations = [HARNESS_DECLARATIONS_ONLY] if harness_object is not None else []
    shared = [str(harness_object)] if harness_object is not None else []
    return BuildCommands(
        compile_kernel=[*prefix, *flags, *gencode, "-Xcompiler", "-fPIC", "-Xptxas", "-v", "-c", f"{name}.cu",
                        "-o", str(obj)],
        compile_harness=[*prefix, *flags, *gencode, *declarations, "-c", f"{name}_harness.cu", "-o",
                         str(harness_obj)],
        link=[
            [ar, "rcs", str(lib_a), str(obj)],
            [*prefix, *gencode, "-shared", str(obj), "-o", str(lib_so)],
            [*prefix, *gencode, str(harness_obj), *shared, str(lib_a), "-o", str(harness), "-ldl"],
        ],
        outputs=[lib_a, lib_so, harness],
        products=[obj, harness_obj, lib_a, lib_so, harness],
    )


@dataclass(frozen=True)
class SharedHarness:
    """dg_harness.cuh's definitions as one object, in a folder named by the hash of what decides its bytes."""

    folder: Path
    source: bytes  # dg_harness.cuh
    compile: list[str]  # runs in `folder`; writes OBJECT_PARTIAL, renamed to `object` once whole
    OBJECT_PARTIAL = "dg_harness.o.partial"

    @property
    def object(self) -> Path:
        return self.folder / "dg_harness.o"


def shared_harness(directory: Path, source: bytes | None, flags: list[str], arch: str, nvcc: Nvcc,
                   env: Mapping[str, str]) -> SharedHarness | None:
    """The shared harness object for this folder's dg_harness.cuh (None when the file is missing: the harness
    compile then reports it, and when the file has no declarations-only guard: a folder generated by an older
    deepgemm compiles its harness whole), in harness_cache(directory)/harness-<hash>/."""
    if source is None or HARNESS_DECLARATIONS_ONLY.removeprefix("-D").encode() not in source:
        return None
    cmd = [*nvcc.compile_prefix(), *flags, *get_arch(arch).gencode, "-c", "dg_harness.cu",
           "-o", SharedHarness.OBJECT_PARTIAL]
    digest = build_key({HARNESS_SOURCE: source}, [cmd], nvcc, arch, env)
    return SharedHarness(harness_cache(directory) / f"harness-{digest[:16]}", source, cmd)


def user_cache(part: str) -> Path:
    """<user cache dir>/deepgemm/<part> (platformdirs: ~/.cache/deepgemm/<part> on Linux)."""
    return Path(platformdirs.user_cache_dir("deepgemm", appauthor=False)) / part


def harness_cache(directory: Path) -> Path:
    """Where the shared harness objects live: $DEEPGEMM_HARNESS_CACHE, else <user cache dir>/deepgemm/harness (every
    build on this machine shares them), else, where that folder cannot be made, beside the generated folders."""
    value = os.environ.get(HARNESS_CACHE_ENV)
    root = Path(value) if value else user_cache("harness")
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError:
        return directory.resolve().parent / HARNESS_CACHE
    return root


_SHARED_LOCKS: dict[Path, threading.Lock] = {}
_SHARED_LOCKS_GUARD = threading.Lock()


def ensure_shared_harness(shared: SharedHarness, nvcc: Nvcc) -> subprocess.CompletedProcess[str] | None:
    """Compile the shared object unless it is there; None when it was, else the compile's result. Builds in
    this process wait for one another on the same object; the object appears whole or not at all."""
    with _SHARED_LOCKS_GUARD:
        lock = _SHARED_LOCKS.setdefault(shared.object, threading.Lock())
    with lock:
        if shared.object.is_file():
            return None
        shared.folder.mkdir(parents=True, exist_ok=True)
        # Other processes may build the same object at the same time: each compiles in a private folder inside
        # this one and renames what it made into place (the same bytes whoever writes them).
        with tempfile.TemporaryDirectory(dir=shared.folder) as tmp:
            private = Path(tmp)
            (private / HARNESS_SOURCE).write_bytes(shared.source)
            (private / "dg_harness.cu").write_text(f'#include "{HARNESS_SOURCE}"\n')
            run = _run(shared.compile, private, nvcc)
            partial = private / SharedHarness.OBJECT_PARTIAL
            if run.returncode == 0 and partial.is_file():
                for source in (HARNESS_SOURCE, "dg_harness.cu"):
                    (private / source).replace(shared.folder / source)
                partial.replace(shared.object)
        return run


def kernel_namespaces(plan: PlanRecord) -> dict[str, int]:
    """Each kernel namespace of the generated .cu -> the dynamic shared memory its launch asks for, as render
    recorded it in plan.json."""
    return dict(plan.kernel_smem)


# A kernel of the shipped headers, instantiated with a namespace's traits: dg::<family>::<function><ns::Traits, ...>
# (a fold of one-size buckets: <ns>::Bucket<m>::Traits).
_TEMPLATE = re.compile(r"dg::\w+::(\w+)<\(anonymous namespace\)::(\w+)::(?:Bucket<\d+>::)?Traits\b")
# A kernel written in the namespace itself: (anonymous namespace)::<ns>::<function>.
_NAMESPACE = re.compile(r"\(anonymous namespace\)::(\w+)::(\w+)")
_MANGLED_NAMESPACE = re.compile(r"_GLOBAL__N_1(\d+)")


def _source_names(text: str, start: int, count: int) -> list[str]:
    """`count` Itanium-ABI source names (<length><identifier>) of mangled `text` from `start`."""
    names = []
    for _ in range(count):
        m = re.match(r"\d+", text[start:])
        if not m:
            break
        begin = start + len(m.group(0))
        names.append(text[begin:begin + int(m.group(0))])
        start = begin + int(m.group(0))
    return names


def _kernel_site(kernel: str) -> tuple[str, str] | None:
    """(namespace, function) of a generated kernel, demangled or mangled; None for another kernel."""
    if m := _TEMPLATE.search(kernel):
        return m.group(2), m.group(1)
    if m := _NAMESPACE.search(kernel):
        return m.group(1), m.group(2)
    if not (ns := _MANGLED_NAMESPACE.search(kernel)):
        return None
    namespace = _source_names(kernel, ns.start(1), 1)
    if kernel.startswith("_ZN2dg"):  # dg::<family>::<function><(anonymous)::<ns>::Traits, ...>
        function = _source_names(kernel, len("_ZN2dg"), 2)[1:]
    else:  # (anonymous)::<ns>::<function>
        function = _source_names(kernel, ns.start(1), 2)[1:]
    return (namespace[0], function[0]) if namespace and function else None


def dynamic_smem(kernel: str, namespaces: Mapping[str, int]) -> int:
    """The dynamic shared memory of ptxas's kernel `kernel` (demangled or not): its namespace's plan's for the
    namespace's main kernel (`kernel` or `<variant>_kernel`); 0 for the others (a K split's `finish` launches
    with none)."""
    site = _kernel_site(kernel)
    if site is None:
        return 0
    namespace, function = site
    return namespaces.get(namespace, 0) if function == "kernel" or function.endswith("_kernel") else 0


def build_inputs(name: str) -> tuple[str, ...]:
    """The files a build reads, relative to the generated directory, besides the dg/ device headers
    (device_headers): plan.json (the name and the flags), the two sources nvcc compiles and the local headers
    they include (<name>.cu and <name>_harness.cu include <name>.h; the harness also includes dg_harness.cuh)."""
    return ("plan.json", f"{name}.cu", f"{name}.h", f"{name}_harness.cu", "dg_harness.cuh")


def library_inputs(name: str) -> tuple[str, ...]:
    """The files a library-only build reads besides the dg/ headers: plan.json, <name>.cu and its <name>.h."""
    return ("plan.json", f"{name}.cu", f"{name}.h")


def device_headers(directory: Path) -> tuple[str, ...]:
    """The shipped device headers the .cu includes (dg/*.cuh), relative to the generated directory."""
    return tuple(p.relative_to(directory).as_posix() for p in sorted((directory / "dg").glob("*.cuh")))


def read_inputs(directory: Path, name: str) -> dict[str, bytes | None]:
    """File name -> contents, None for a missing file (nvcc then reports it; the key never matches)."""
    contents: dict[str, bytes | None] = {}
    for file in build_inputs(name) + device_headers(directory):
        path = directory / file
        contents[file] = path.read_bytes() if path.is_file() else None
    return contents


def build_key(inputs: Mapping[str, bytes | None], commands: list[list[str]], nvcc: Nvcc, arch: str,
              env: Mapping[str, str]) -> str:
    """sha256 over everything that decides what a build writes: the files it reads, the nvcc (its path,
    version and the NVCC_ENV_FLAGS of the environment `env` it runs in), every command line in order, and
    the arch."""
    run_env = nvcc.run_env(env)
    payload = {
        "format": STAMP_FORMAT,
        "arch": arch,
        "nvcc": {"path": str(nvcc.path), "version": nvcc.version,
                 "env": {name: run_env.get(name) for name in NVCC_ENV_FLAGS}},
        "commands": commands,
        "inputs": {file: None if data is None else hashlib.sha256(data).hexdigest()
                   for file, data in sorted(inputs.items())},
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def product_fingerprints(directory: Path, products: list[Path]) -> dict[str, list[int]] | None:
    """Relative path -> [size, mtime in ns] of every product, or None when one is missing. A stamp vouches
    only for the files its build wrote: `make` in the same folder writes the same paths."""
    found: dict[str, list[int]] = {}
    for product in products:
        path = directory / product
        if not path.is_file():
            return None
        info = path.stat()
        found[product.as_posix()] = [info.st_size, info.st_mtime_ns]
    return found


def write_stamp(stamp: Path, keys: Mapping[str, str | None], nvcc: Nvcc, arch: str, kernels: list[KernelResources],
                products: dict[str, list[int]]) -> None:
    """`keys`: "key" (the full build's; None after a library-only build) and "lib_key" (the library's)."""
    data = {"format": STAMP_FORMAT, **keys, "arch": arch, "nvcc": str(nvcc.path), "nvcc_version": nvcc.version,
            "kernels": [vars(k) for k in kernels], "products": products}
    partial = stamp.with_name(stamp.name + ".partial")
    partial.write_text(json.dumps(data, indent=2) + "\n")
    partial.replace(stamp)  # atomic: a stamp is whole or absent


_KERNEL_FIELDS = {f.name for f in fields(KernelResources)}


def cached_kernels(stamp: Path, key: str, products: dict[str, list[int]] | None,
                   field_name: str = "key") -> list[KernelResources] | None:
    """The stamp's ptxas report when its `field_name` ("key", or "lib_key" for a library-only request) is `key`
    and each of `products` (see product_fingerprints) is as it recorded; None otherwise: no stamp, another key,
    a product missing or rewritten since, or a stamp this version cannot read. None means rebuild."""
    if products is None or not stamp.is_file():
        return None
    try:
        data = json.loads(stamp.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(data, dict) or data.get(field_name) != key or not isinstance(data.get("products"), dict):
        return None
    if any(data["products"].get(product) != fingerprint for product, fingerprint in products.items()):
        return None
    kernels = data.get("kernels")
    if not isinstance(kernels, list) or not all(isinstance(k, dict) and set(k) == _KERNEL_FIELDS for k in kernels):
        return None
    return [KernelResources(**k) for k in kernels]


def find_ar() -> str:
    """binutils' `ar`, which makes the static library."""
    ar = shutil.which("ar")
    if ar is None:
        raise BuildError("`ar` (binutils) is not installed: it is needed for the static library")
    return ar


def build(directory: Path, arch: str, nvcc: Nvcc, force: bool = False, lib_only: bool = False) -> BuildResult:
    """Compile one generated directory, unless its stamp says nothing changed (then `cached`; `force`
    compiles anyway). `lib_only`: the kernel object and the two libraries, not the harness. Never raises for
    compiler errors: they land in `error`."""
    start = time.monotonic()
    plan = read_plan(directory)
    name = plan.name
    ar = find_ar()
    flags = list(plan.nvcc_flags)
    inputs = read_inputs(directory, name)
    shared = None if lib_only else shared_harness(directory, inputs[HARNESS_SOURCE], flags, arch, nvcc, os.environ)
    full = build_commands(name, arch, flags, nvcc, ar, shared.object if shared is not None else None)
    library = full.library_only()
    # The keys are taken before compiling: a source edited during the build makes the next one rebuild.
    keys = {"key": None if lib_only else build_key(inputs, full.all(), nvcc, arch, os.environ),
            "lib_key": build_key({f: inputs[f] for f in library_inputs(name) + device_headers(directory)},
                                 library.all(), nvcc, arch, os.environ)}
    commands = library if lib_only else full
    products = [*commands.products, *([shared.object] if shared is not None else [])]
    out = build_dir_for(directory, arch)
    stamp = out / STAMP
    outputs = [directory / p for p in commands.outputs]
    if not force:
        field_name = "lib_key" if lib_only else "key"
        kernels = cached_kernels(stamp, keys[field_name], product_fingerprints(directory, products), field_name)
        if kernels is not None:
            return BuildResult(directory, name, arch, ok=True, seconds=time.monotonic() - start, kernels=kernels,
                               outputs=outputs, cached=True)
    # Until this build succeeds, no stamp may vouch for the files it is about to overwrite.
    stamp.unlink(missing_ok=True)
    out.mkdir(parents=True, exist_ok=True)

    # The kernel, the harness and the shared harness object compile independently; run them at once.
    with ThreadPoolExecutor(max_workers=3) as pool:
        jobs = [(pool.submit(_run, commands.compile_kernel, directory, nvcc), commands.compile_kernel, directory)]
        if commands.compile_harness is not None:
            jobs.append((pool.submit(_run, commands.compile_harness, directory, nvcc), commands.compile_harness,
                         directory))
        if shared is not None:
            jobs.append((pool.submit(ensure_shared_harness, shared, nvcc), shared.compile, shared.folder))
        runs = [(job.result(), cmd, cwd) for job, cmd, cwd in jobs]
    result = BuildResult(directory, name, arch, ok=False, seconds=0.0)
    for run, cmd, cwd in runs:
        if run is not None and run.returncode != 0:
            result.error = _compile_error(cwd, cmd, run)
            result.seconds = time.monotonic() - start
            return result
    kernel_run = runs[0][0]
    assert kernel_run is not None  # the kernel compile always runs
    kernels = parse_ptxas(kernel_run.stderr)
    readable = demangle([k.kernel for k in kernels])
    namespaces = kernel_namespaces(plan)
    result.kernels = [KernelResources(**{**vars(k), "kernel": readable[k.kernel],
                                         "dynamic_smem_bytes": dynamic_smem(readable[k.kernel], namespaces)})
                      for k in kernels]

    for cmd in commands.link:
        run = _run(cmd, directory, nvcc)
        if run.returncode != 0:
            result.error = _compile_error(directory, cmd, run)
            result.seconds = time.monotonic() - start
            return result
    fingerprints = product_fingerprints(directory, products)
    if fingerprints is not None:  # nvcc exited 0 without writing a product: no stamp, the next build retries
        write_stamp(stamp, keys, nvcc, arch, result.kernels, fingerprints)
    result.ok = True
    result.outputs = outputs
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
    path = build_dir_for(directory, arch) / f"{plan.name}_harness"
    if not path.is_file():
        raise NotBuiltError(f"{directory}: not built for {arch}; run `deepgemm build {directory} --arch {arch}`")
    return path


def built_arches(directory: Path) -> list[str]:
    root = directory / "build"
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if p.is_dir() and any(p.glob("*_harness")))
