"""Stage 5 for the host backend (arch cpu): compile a generated folder's <name>.cpp with the host C++ compiler.

Outputs go to <dir>/build/cpu/: <name>.o, lib<name>.a and lib<name>.so; the flags are plan.json's `cxx_flags`
(the folder's Makefile compiles the same way). verify and bench load lib<name>.so into the host harness
(host_harness.py), so a host build has no harness binary. As for nvcc builds, a stamp (build/cpu/build-stamp.json)
keyed by the sources, the compiler and the commands lets an unchanged folder skip its compile.

With g++, the standard and intrinsics headers the folder includes are parsed once per machine: a precompiled header
of them (`-include`, in the user cache dir under deepgemm/host-pch, keyed by the headers, the compiler and the
flags) takes a third off each compile (immintrin.h's parse is most of it) and leaves the object code as it is.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from dgemm_cli.build import (
    COMPILE_TIMEOUT_S,
    STAMP,
    BuildResult,
    build_dir_for,
    find_ar,
    product_fingerprints,
    read_plan,
    user_cache,
)
from dgemm_cli.errors import BuildError, NotBuiltError

HOST_ARCH = "cpu"
HOST_STAMP_FORMAT = 1


@dataclass(frozen=True)
class HostCompiler:
    path: Path
    version: str  # the first line of `--version`
    source: str  # how it was found


def find_cxx(explicit: str | None = None) -> HostCompiler:
    """The host C++ compiler: `explicit`, else $CXX, else g++, else clang++ on PATH."""
    for source, name in (("--cxx", explicit), ("$CXX", os.environ.get("CXX")), ("PATH", "g++"), ("PATH", "clang++")):
        if not name:
            continue
        path = shutil.which(name)
        if path is None:
            if source != "PATH":
                raise BuildError(f"{source} names '{name}', which is not an executable on PATH. Fix: point it at "
                                 "g++ or clang++, or leave it unset")
            continue
        run = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60, check=False)
        first = (run.stdout.strip().splitlines() or ["unknown version"])[0]
        return HostCompiler(Path(path), first, source)
    raise BuildError("no host C++ compiler (g++ or clang++) on PATH: the cpu target compiles with one. Fix: install "
                     "g++ (Debian/Ubuntu: apt-get install g++) or set $CXX")


PCH_ENV = "DEEPGEMM_HOST_PCH"  # a folder for the precompiled headers; "off": none
SYSTEM_INCLUDE = re.compile(r"^\s*#\s*include\s*<([^>]+)>", re.MULTILINE)


def pch_root() -> Path | None:
    """Where precompiled headers live: $DEEPGEMM_HOST_PCH, else <user cache dir>/deepgemm/host-pch; None when the
    variable says `off`."""
    value = os.environ.get(PCH_ENV)
    if value == "off":
        return None
    return Path(value) if value else user_cache("host-pch")


def system_headers(directory: Path, name: str) -> list[str]:
    """The <...> headers the folder's sources include, in order of first inclusion, each once."""
    seen: dict[str, None] = {}
    for path in (directory / f"{name}.cpp", directory / f"{name}.h", *sorted((directory / "dg").glob("*.hpp"))):
        if path.is_file():
            seen.update(dict.fromkeys(SYSTEM_INCLUDE.findall(path.read_text())))
    return list(seen)


def precompiled_header(headers: list[str], flags: list[str], cxx: HostCompiler) -> Path | None:
    """The header that includes `headers`, with its g++ precompiled image beside it (made on first use, atomically,
    so that concurrent builds share it): what `-include` takes. None for another compiler, without a cache folder,
    or where g++ cannot precompile them (the compile then parses them itself)."""
    root = pch_root()
    if root is None or not headers or "g++" not in cxx.version and "GCC" not in cxx.version:
        return None
    text = "".join(f"#include <{h}>\n" for h in headers)
    key = hashlib.sha256(json.dumps([text, str(cxx.path), cxx.version, flags]).encode()).hexdigest()[:24]
    folder = root / key
    header = folder / "dg_host_std.hpp"
    if (folder / "dg_host_std.hpp.gch").is_file():
        return header
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=folder) as tmp:
            draft = Path(tmp) / "dg_host_std.hpp"
            draft.write_text(text)
            run = subprocess.run([str(cxx.path), *flags, "-x", "c++-header", str(draft), "-o", f"{draft}.gch"],
                                 capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S, check=False)
            if run.returncode != 0:
                return None
            draft.replace(header)  # the same text whoever writes it
            Path(f"{draft}.gch").replace(folder / "dg_host_std.hpp.gch")
    except OSError:
        return None  # a read-only or full cache folder: compile without
    return header


def host_commands(name: str, flags: list[str], cxx: HostCompiler, ar: str,
                  pch: Path | None = None) -> list[list[str]]:
    rel = Path("build") / HOST_ARCH
    obj = rel / f"{name}.o"
    forced = ["-include", str(pch), "-Winvalid-pch"] if pch is not None else []
    return [[str(cxx.path), *flags, *forced, "-c", f"{name}.cpp", "-o", str(obj)],
            [ar, "rcs", str(rel / f"lib{name}.a"), str(obj)],
            [str(cxx.path), "-shared", "-fopenmp", str(obj), "-o", str(rel / f"lib{name}.so")]]


def _inputs(directory: Path, name: str) -> dict[str, str | None]:
    files = [f"{name}.cpp", f"{name}.h", *(p.relative_to(directory).as_posix()
                                           for p in sorted((directory / "dg").glob("*.hpp")))]
    return {f: hashlib.sha256((directory / f).read_bytes()).hexdigest() if (directory / f).is_file() else None
            for f in files}


def build_host(directory: Path, cxx: HostCompiler, force: bool = False) -> BuildResult:
    """Compile one host folder, unless its stamp says nothing changed (`cached`). Compiler errors land in
    `error`; nothing is raised for them."""
    start = time.monotonic()
    plan = read_plan(directory)
    name = plan.name
    flags = list(plan.cxx_flags)
    ar = find_ar()
    # The stamp is keyed by the commands without the precompiled headers, which leave the object code as it is: a
    # folder built either way is cached, and a cached one does not look for the image.
    commands = host_commands(name, flags, cxx, ar)
    out = build_dir_for(directory, HOST_ARCH)
    products = [Path("build") / HOST_ARCH / f for f in (f"{name}.o", f"lib{name}.a", f"lib{name}.so")]
    outputs = [directory / p for p in products[1:]]
    key = hashlib.sha256(json.dumps({"format": HOST_STAMP_FORMAT, "cxx": [str(cxx.path), cxx.version],
                                     "commands": commands, "inputs": _inputs(directory, name)},
                                    sort_keys=True).encode()).hexdigest()
    stamp = out / STAMP
    fingerprints = product_fingerprints(directory, products)
    if not force and fingerprints is not None and stamp.is_file():
        data = json.loads(stamp.read_text())
        if data.get("key") == key and data.get("products") == fingerprints:
            return BuildResult(directory, name, HOST_ARCH, ok=True, seconds=time.monotonic() - start,
                               outputs=outputs, cached=True)
    stamp.unlink(missing_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    pch = precompiled_header(system_headers(directory, name), flags, cxx)
    for cmd in commands if pch is None else host_commands(name, flags, cxx, ar, pch):
        run = subprocess.run(cmd, cwd=directory, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S,
                             check=False)
        if run.returncode != 0:
            text = (run.stderr + run.stdout).strip()
            return BuildResult(directory, name, HOST_ARCH, ok=False, seconds=time.monotonic() - start,
                               error=f"$ (cd {directory} && {' '.join(cmd)})\n{text}")
    fingerprints = product_fingerprints(directory, products)
    if fingerprints is not None:
        partial = stamp.with_name(stamp.name + ".partial")
        partial.write_text(json.dumps({"format": HOST_STAMP_FORMAT, "key": key, "cxx": str(cxx.path),
                                       "cxx_version": cxx.version, "products": fingerprints}, indent=2) + "\n")
        partial.replace(stamp)
    return BuildResult(directory, name, HOST_ARCH, ok=True, seconds=time.monotonic() - start, outputs=outputs)


def host_library(directory: Path) -> Path:
    """The built lib<name>.so a host folder's verify and bench load."""
    plan = read_plan(directory)
    path = build_dir_for(directory, HOST_ARCH) / f"lib{plan.name}.so"
    if not path.is_file():
        raise NotBuiltError(f"{directory}: not built; run `deepgemm build {directory}`")
    return path
