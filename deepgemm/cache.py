"""The kernel cache on disk: `get_kernel(spec)` builds a spec once per machine and loads it from then on.

Where: $DEEPGEMM_CACHE, else the user cache dir (platformdirs: ~/.cache/deepgemm/kernels on Linux). An entry is
`<root>/<key[:2]>/<key>/`: the generated folder, its build/<arch>/ and `done.json`, the marker that says the entry
is whole. The key is a sha256 over what decides the library's bytes (`key_payload`): the spec's content (not the
file it came from), the arch, the generator's version and files, and the compiler's version and flags.

Invariants:
- An entry appears whole or not at all: it is generated and built in a temporary folder beside it, the marker is
  written last, and one os.replace moves the folder into place. A folder at the entry's path without a readable
  marker of its key is not an entry (it is rebuilt).
- One build per key at a time on the machine: a file lock (`<root>/<key[:2]>/<key>.lock`) held while building;
  whoever takes it second finds the entry and loads it. Within a process, a lock per key makes threads wait for
  the one that builds rather than all queue on the file lock.
- A cache hit reads only the marker and opens the library: no planning, no compiler run beyond the version probe
  the key needs.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import shutil
import sys
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import filelock

import dgemm_cli
from deepgemm import stages
from deepgemm.kernel import Kernel, load_library
from dgemm_cli.arch import get_arch
from dgemm_cli.build import NVCC_ENV_FLAGS, user_cache
from dgemm_cli.build_host import HOST_ARCH, HostCompiler, find_cxx
from dgemm_cli.errors import CacheError
from dgemm_cli.render import NVCC_FLAGS, template_dir
from dgemm_cli.renderers.host import HOST_CXX_FLAGS, HOST_MARCH
from dgemm_cli.spec import Spec
from dgemm_cli.toolchain import Nvcc, find_nvcc

CACHE_ENV = "DEEPGEMM_CACHE"
MARKER = "done.json"
KEY_FORMAT = 1  # bump when what the key covers changes: every older entry then misses
# The variables that decide which nvcc find_nvcc takes.
_NVCC_SEARCH_ENV = ("DEEPGEMM_NVCC", "CUDA_HOME", "CUDA_PATH", "PATH")


def cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """The cache's root: $DEEPGEMM_CACHE, else <user cache dir>/deepgemm/kernels."""
    env = os.environ if env is None else env
    if env.get(CACHE_ENV):
        return Path(env[CACHE_ENV]).expanduser()
    return user_cache("kernels")


# ------------------------------------------------------------------------------------------- the key's sources


@functools.cache
def generator_version() -> str:
    """dgemm_cli's version and a hash of the generator's files: the templates and the package itself (its planner,
    renderers and cost data), so that an edited template or planner misses every entry it made."""
    digest = hashlib.sha256()
    for root in (template_dir(), Path(dgemm_cli.__file__).resolve().parent):
        for path in sorted(root.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return f"{dgemm_cli.__version__}+{digest.hexdigest()[:16]}"


@functools.lru_cache(maxsize=8)
def _nvcc(search: tuple[str | None, ...]) -> Nvcc:
    """`search`: the values of _NVCC_SEARCH_ENV, only the memo's key (find_nvcc reads them itself)."""
    return find_nvcc()


def nvcc() -> Nvcc:
    """The nvcc the CLI would find, probed once a process for each setting of the variables that choose it."""
    return _nvcc(tuple(os.environ.get(k) for k in _NVCC_SEARCH_ENV))


def nvcc_version() -> str:
    return nvcc().version


def nvcc_flags(arch: str) -> list[str]:
    """What a library build passes nvcc besides the sources (build.build_commands) and the flag variables nvcc
    reads from the environment."""
    env = [f"{name}={os.environ.get(name, '')}" for name in NVCC_ENV_FLAGS]
    return [*NVCC_FLAGS, *get_arch(arch).gencode, "-Xcompiler", "-fPIC", *env]


@functools.cache
def host_compiler() -> HostCompiler:
    return find_cxx()


def host_compiler_version() -> str:
    """The host compiler's `--version` line and the machine it builds for: the flags hold -march=native."""
    return f"{host_compiler().version}; {platform.machine()}; {_cpu_model()}"


def host_flags() -> list[str]:
    return [*HOST_CXX_FLAGS, HOST_MARCH, "-fopenmp", "-fPIC"]


def _cpu_model() -> str:
    """The CPU's model and feature flags (what -march=native reads), where /proc/cpuinfo has them."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor()
    lines = [line for line in text.splitlines() if line.startswith(("model name", "flags"))]
    return hashlib.sha256("\n".join(sorted(set(lines))).encode()).hexdigest()[:16]


def key_payload(spec: Spec, arch: str) -> dict[str, Any]:
    """What the key hashes. The spec as Spec.to_dict writes it (its name included: it names the C function; its
    source file, notes and warnings not), with the target arch in place of the spec's own."""
    get_arch(arch)  # an unknown arch is the user's error, named before any compiler is looked for
    host = arch == HOST_ARCH
    return {"format": KEY_FORMAT, "spec": {**spec.to_dict(), "arch": arch}, "arch": arch,
            "generator": generator_version(),
            "compiler": host_compiler_version() if host else nvcc_version(),
            "flags": host_flags() if host else nvcc_flags(arch)}


def cache_key(spec: Spec, arch: str | None = None) -> str:
    """The entry's key: sha256 of key_payload, the same in every process of this machine."""
    payload = json.dumps(key_payload(spec, arch or spec.arch), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()


# ------------------------------------------------------------------------------------------------ the entries


@dataclass(frozen=True)
class Entry:
    """What done.json records of a built entry: enough to load it without planning."""

    key: str
    name: str
    arch: str
    library: str  # relative to the entry: build/<arch>/lib<name>.so
    prototype: str
    content_hash: str


def build_entry(spec: Spec, arch: str, directory: Path) -> Entry:
    """Generate and build `spec` into `directory` (a fresh folder) with the CLI's stages; the entry's marker is the
    caller's to write. The one step of the cache that compiles (tests replace it)."""
    generated = stages.generate_into(spec, arch, directory)
    compiler = None if arch == HOST_ARCH else nvcc()
    built = stages.build(generated, arch=arch, nvcc=compiler,
                         cxx=str(host_compiler().path) if arch == HOST_ARCH else None)
    return Entry("", built.name, arch, built.library.relative_to(directory).as_posix(), built.prototype,
                 generated.content_hash)


def _read_entry(folder: Path, key: str) -> Entry | None:
    """The entry in `folder` when its marker is whole, of `key`, and its library is there; else None."""
    try:
        data = json.loads((folder / MARKER).read_text())
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None  # a marker this code did not write whole: not an entry
    if not isinstance(data, dict) or set(data) != set(Entry.__dataclass_fields__) or data["key"] != key:
        return None
    entry = Entry(**data)
    return entry if (folder / entry.library).is_file() else None


_LOADED: dict[Path, Kernel] = {}  # library -> its Kernel: a library is opened and typed once a process
_KEY_LOCKS: dict[Path, threading.Lock] = {}  # entry folder -> the lock its builders in this process take
_GUARD = threading.Lock()  # over both dicts


def _load(folder: Path, entry: Entry) -> Kernel:
    library = folder / entry.library
    with _GUARD:
        kernel = _LOADED.get(library)
    if kernel is None:
        kernel = load_library(library, entry.name, entry.arch, entry.prototype)
        with _GUARD:
            kernel = _LOADED.setdefault(library, kernel)
    return kernel


def _writable_root(root: Path) -> Path:
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise CacheError(f"the kernel cache {root} cannot be created ({err.strerror or err}). Fix: set "
                         f"{CACHE_ENV} to a folder you can write") from None
    if not os.access(root, os.W_OK | os.X_OK):
        raise CacheError(f"the kernel cache {root} is not writable. Fix: set {CACHE_ENV} to a folder you can write, "
                         f"or make {root} writable")
    return root


def get_kernel(spec: Spec, arch: str | None = None, *, cache: str | Path | None = None) -> Kernel:
    """The kernel of `spec` for `arch` (default: the spec's), loaded from the cache, built into it first when it
    is not there (one line on stderr says so). `cache`: the root (default: cache_dir())."""
    target = arch or spec.arch
    root = Path(cache) if cache is not None else cache_dir()
    key = cache_key(spec, target)
    folder = root / key[:2] / key
    if (entry := _read_entry(folder, key)) is not None:
        return _load(folder, entry)
    with _GUARD:
        thread_lock = _KEY_LOCKS.setdefault(folder, threading.Lock())
    with thread_lock:
        if (entry := _read_entry(folder, key)) is None:  # another thread of this process may have built it
            shard = _writable_root(root) / key[:2]
            shard.mkdir(exist_ok=True)
            with filelock.FileLock(shard / f"{key}.lock"):
                if (entry := _read_entry(folder, key)) is None:  # nor another process
                    entry = _build(spec, target, key, folder)
    return _load(folder, entry)


def _build(spec: Spec, arch: str, key: str, folder: Path) -> Entry:
    """Build the entry in a temporary folder beside `folder` and move it into place; the file lock is held."""
    for stale in folder.parent.glob(f".tmp-{key}-*"):  # a build of this key that died: nobody else builds it now
        shutil.rmtree(stale, ignore_errors=True)
    print(f"deepgemm: building {spec.name} for {arch} (cached in {folder})…", file=sys.stderr, flush=True)
    partial = Path(tempfile.mkdtemp(prefix=f".tmp-{key}-", dir=folder.parent))
    partial.chmod(0o755)  # mkdtemp's 0700 would become the entry's: a cache others may read stays readable
    try:
        entry = Entry(**{**asdict(build_entry(spec, arch, partial)), "key": key})
        marker = partial / MARKER
        marker.write_text(json.dumps(asdict(entry), indent=2) + "\n")
        if folder.exists():  # not an entry (_read_entry said so under the lock): its leftovers make way
            shutil.rmtree(folder)
        os.replace(partial, folder)
    finally:
        shutil.rmtree(partial, ignore_errors=True)  # only when the build failed: os.replace moved it otherwise
    return entry
