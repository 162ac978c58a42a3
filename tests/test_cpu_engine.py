"""The CPU engine (templates/dg/cpu_gemm.hpp, cpu_types.hpp): tests/cpu/test_cpu_gemm.cpp built with g++ for each of
the engine's code paths (AVX-512 where the host has it via -march=native, AVX2 via -march=haswell, and the portable
kernel via -march=x86-64 without OpenMP), warning-free, then run: random strided problems against a naive reference."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TEMPLATES = REPO / "templates"
TEST_SOURCE = REPO / "tests" / "cpu" / "test_cpu_gemm.cpp"
HEADERS = [TEMPLATES / "dg" / "cpu_types.hpp", TEMPLATES / "dg" / "cpu_gemm.hpp"]
BUILDS = {
    "native": ["-march=native", "-fopenmp"],
    "avx2": ["-march=haswell", "-fopenmp"],
    "portable": ["-march=x86-64"],
}
ISA = {"avx2": "avx2", "portable": "portable"}  # what kIsa reads in each build (native: whatever the host has)

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")


def _gxx(args: list[str], timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run(["g++", "-std=c++17", "-Wall", "-Wextra", "-Werror", *args], capture_output=True, text=True,
                          timeout=timeout, check=False)


@pytest.mark.slow
@needs_gxx
@pytest.mark.parametrize("header", HEADERS, ids=lambda h: h.name)
@pytest.mark.parametrize("build", sorted(BUILDS))
def test_header_compiles_alone(header: Path, build: str, tmp_path: Path):
    source = tmp_path / "alone.cpp"
    source.write_text(f'#include "dg/{header.name}"\n')
    done = _gxx(["-O2", *BUILDS[build], "-I", str(TEMPLATES), "-fsyntax-only", str(source)])
    assert done.returncode == 0, done.stderr


@pytest.mark.slow
@needs_gxx
@pytest.mark.parametrize("build", sorted(BUILDS))
def test_engine_against_reference(build: str, tmp_path: Path):
    binary = tmp_path / f"test_cpu_gemm_{build}"
    done = _gxx(["-O2", *BUILDS[build], "-I", str(TEMPLATES), str(TEST_SOURCE), "-o", str(binary)])
    assert done.returncode == 0, done.stderr
    ran = subprocess.run([str(binary)], capture_output=True, text=True, timeout=120, check=False)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "ok:" in ran.stdout, ran.stdout
    if build in ISA:
        assert ran.stdout.startswith(f"isa {ISA[build]},"), ran.stdout
