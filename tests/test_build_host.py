"""The host build (build_host.py): the standard headers a folder includes, precompiled once and forced in with
`-include`, leave the object code as it is; another compiler, or `DEEPGEMM_HOST_PCH=off`, compiles without."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from dgemm_cli import build_host
from dgemm_cli.arch import get_arch
from dgemm_cli.build import read_plan
from dgemm_cli.build_host import HostCompiler, find_cxx, precompiled_header, system_headers
from dgemm_cli.build_host import build_host as build_folder
from dgemm_cli.pipeline import generate
from dgemm_cli.spec import load_spec

from .conftest import REPO

SPEC = REPO / "specs" / "cpu" / "permuted_f32.yaml"


def _folder(tmp_path: Path) -> Path:
    return generate(load_spec(SPEC), get_arch("cpu"), tmp_path / "gen").directory


def test_the_system_headers_are_the_folders_includes_each_once(tmp_path):
    folder = _folder(tmp_path)
    headers = system_headers(folder, load_spec(SPEC).name)
    assert len(headers) == len(set(headers)) and {"immintrin.h", "omp.h", "cstdint"} <= set(headers)
    # The folder's own headers ("...") change with the spec: they stay out of the shared image.
    assert not {"cpu_types.hpp", "dg/cpu_gemm.hpp", f"{load_spec(SPEC).name}.h"} & set(headers), headers


def test_no_precompiled_header_for_another_compiler_or_when_off(tmp_path, monkeypatch):
    monkeypatch.setenv(build_host.PCH_ENV, str(tmp_path / "pch"))
    clang = HostCompiler(Path("/usr/bin/clang++"), "Debian clang version 14.0.6", "PATH")
    assert precompiled_header(["cstdint"], ["-O3"], clang) is None and not (tmp_path / "pch").exists()
    monkeypatch.setenv(build_host.PCH_ENV, "off")
    gxx = HostCompiler(Path("/usr/bin/g++"), "g++ (Debian 12.2.0-14) 12.2.0", "PATH")
    assert precompiled_header(["cstdint"], ["-O3"], gxx) is None


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None or shutil.which("objdump") is None, reason="needs g++ and objdump")
def test_the_precompiled_header_leaves_the_object_code_as_it_is(tmp_path, monkeypatch):
    cxx = find_cxx("g++")
    folder = _folder(tmp_path)
    name = load_spec(SPEC).name
    obj = folder / "build" / "cpu" / f"{name}.o"

    def disassembly() -> str:
        return subprocess.run(["objdump", "-d", str(obj)], capture_output=True, text=True, check=True).stdout.split(
            "\n", 2)[2]  # past the file name line

    monkeypatch.setenv(build_host.PCH_ENV, "off")
    plain = build_folder(folder, cxx, force=True)
    assert plain.ok, plain.error
    without = disassembly()

    monkeypatch.setenv(build_host.PCH_ENV, str(tmp_path / "pch"))
    made = build_folder(folder, cxx, force=True)
    assert made.ok, made.error
    gch = list((tmp_path / "pch").glob("*/dg_host_std.hpp.gch"))
    assert len(gch) == 1
    # g++ -H marks a precompiled header it used with "!": the compile took it, not the headers' text.
    used = subprocess.run([str(cxx.path), *read_plan(folder).cxx_flags, "-include", str(gch[0].with_suffix("")), "-H",
                           "-fsyntax-only", f"{name}.cpp"], cwd=folder,
                          capture_output=True, text=True, check=True)
    assert used.stderr.startswith(f"! {gch[0]}"), used.stderr[:400]
    assert disassembly() == without
    again = build_folder(folder, cxx, force=True)  # the second build reuses the image
    assert again.ok and list((tmp_path / "pch").glob("*/dg_host_std.hpp.gch")) == gch
    # The image leaves the object code as it is, so the stamp is the same either way: an unforced build is cached.
    monkeypatch.setenv(build_host.PCH_ENV, "off")
    assert build_folder(folder, cxx).cached
