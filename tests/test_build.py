"""nvcc builds: every example spec compiles for sm_80, sm_86, sm_89 and sm_90a with no spills; the generated
directory builds on its own with Make and with CMake (no Python); ptxas parsing; the build cache (its hit and
miss rules run on a fake compile step, no nvcc needed)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from dgemm_cli import build as build_module
from dgemm_cli.arch import get_arch
from dgemm_cli.baseline import plan_baseline
from dgemm_cli.build import (
    STAMP,
    build,
    build_commands,
    build_dir_for,
    build_key,
    dynamic_smem,
    kernel_namespaces,
    parse_ptxas,
)
from dgemm_cli.errors import ToolchainError
from dgemm_cli.pipeline import generate
from dgemm_cli.plan import make_plan
from dgemm_cli.records import PlanRecord, RecordError
from dgemm_cli.render import render_sources
from dgemm_cli.spec import Spec, load_spec, parse_spec
from dgemm_cli.toolchain import Nvcc, find_nvcc
from dgemm_cli.views import analyse

from .conftest import REPO, SPECS, pinned_elsewhere


def nvcc_or_skip():
    try:
        return find_nvcc()
    except ToolchainError as err:  # CI installs the wheels, so this only skips on a bare machine
        pytest.skip(str(err))


PTXAS = """\
ptxas info    : Compiling entry function '_Z6kernelPf' for 'sm_90a'
ptxas info    : Function properties for _Z6kernelPf
    16 bytes stack frame, 12 bytes spill stores, 8 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 16 bytes cumulative stack size, 384 bytes smem
ptxas info    : Compiling entry function '_Z5otherv' for 'sm_90a'
ptxas info    : Function properties for _Z5otherv
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 40 registers, used 0 barriers
"""


def test_parse_ptxas():
    first, second = parse_ptxas(PTXAS)
    assert (first.kernel, first.registers, first.stack_bytes, first.spill_store_bytes, first.spill_load_bytes,
            first.smem_bytes) == ("_Z6kernelPf", 255, 16, 12, 8, 384)
    assert first.spills and not second.spills and second.registers == 40


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["sm_80", "sm_86", "sm_89", "sm_90a"])
@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
def test_every_spec_compiles_without_spills(path, arch, tmp_path):
    """Each spec's kernels at each arch without spills or stack, and its whole folder (the harness too) at sm_80 and
    sm_90a, the two ends of the range; sm_86 and sm_89 build the libraries alone."""
    nvcc = nvcc_or_skip()
    spec = load_spec(path)
    if pinned_elsewhere(spec, arch):
        return
    g = generate(spec, get_arch(arch), tmp_path)
    res = build(g.directory, arch, nvcc, lib_only=arch not in ("sm_80", "sm_90a"))
    assert res.ok, res.error
    assert res.kernels, "ptxas reported no kernel"
    for k in res.kernels:
        assert k.arch == arch
        assert not k.spills, f"{k.kernel} spills {k.spill_store_bytes}/{k.spill_load_bytes} B"
        assert k.stack_bytes == 0, f"{k.kernel} uses {k.stack_bytes} B of stack (local memory)"
    for out in res.outputs:
        assert out.is_file()


@pytest.mark.slow
def test_compile_error_names_generated_file(tmp_path):
    nvcc = nvcc_or_skip()
    g = generate(load_spec(SPECS[0]), get_arch("sm_90a"), tmp_path)
    cu = g.directory / f"{g.name}.cu"
    text = cu.read_text()
    assert "struct Traits {" in text
    cu.write_text(text.replace("struct Traits {", "struct Traits { this is not C++;", 1))
    res = build(g.directory, "sm_90a", nvcc)
    assert not res.ok
    assert f"{cu}:" in res.error and "error" in res.error


@pytest.mark.slow
def test_real_build_is_cached_until_a_source_changes(tmp_path):
    nvcc = nvcc_or_skip()
    g = generate(load_spec(next(p for p in SPECS if p.stem == "decode_qk")), get_arch("sm_80"), tmp_path)
    first = build(g.directory, "sm_80", nvcc)
    assert first.ok and not first.cached, first.error
    harness_bytes = first.outputs[-1].read_bytes()
    second = build(g.directory, "sm_80", nvcc)
    assert second.ok and second.cached and second.seconds < 5
    assert second.kernels == first.kernels and first.kernels  # ptxas's report, from the stamp
    assert first.outputs[-1].read_bytes() == harness_bytes  # nothing was rewritten
    cu = g.directory / f"{g.name}.cu"
    cu.write_text(cu.read_text() + "// touched\n")
    third = build(g.directory, "sm_80", nvcc)
    assert third.ok and not third.cached and third.kernels == first.kernels


def _vendored_project(tmp_path: Path, gen_dir: Path, name: str, pointers: int = 3) -> Path:
    """A user's C++ project with the generated folder copied in, no Python anywhere. `pointers`: how many
    the entry point takes (A, B, C, then D and the epilogue's views)."""
    nulls = ", ".join(["nullptr"] * pointers)
    project = tmp_path / "user_project"
    shutil.copytree(gen_dir, project / name, ignore=shutil.ignore_patterns("build"))
    (project / "main.cu").write_text(f"""
#include "{name}.h"
#include <cstdio>
int main() {{
  // Without a GPU this reports an error code rather than crashing; linking is what we test.
  cudaError_t err = {name}({nulls}, 1.0f, 0.0f, 0);
  std::printf("%d\\n", int(err));
  return err == cudaErrorInvalidValue ? 0 : 1;
}}
""")
    (project / "CMakeLists.txt").write_text(f"""
cmake_minimum_required(VERSION 3.24)
project(user_project LANGUAGES CXX CUDA)
add_subdirectory({name})
add_executable(app main.cu)
target_link_libraries(app PRIVATE {name})
""")
    return project


@pytest.mark.slow
@pytest.mark.parametrize("spec_path", [next(p for p in SPECS if p.stem == "odd_tails"),
                                       REPO / "specs" / "epilogue" / "residual_scale_clamp_d.yaml"],
                         ids=["plain", "epilogue"])
def test_vendored_directory_builds_with_cmake(tmp_path, spec_path):
    nvcc = nvcc_or_skip()
    if shutil.which("cmake") is None:
        pytest.skip("cmake not installed")
    spec = load_spec(spec_path)
    g = generate(spec, get_arch("sm_90a"), tmp_path / "gen")
    project = _vendored_project(tmp_path, g.directory, g.name, 3 + len(spec.extra_operands))
    env = nvcc.run_env(os.environ)
    env["CUDACXX"] = str(nvcc.path)
    # The pip wheels keep their libraries in lib/, where nvcc's own profile does not look.
    libs = " ".join(f"-L{d}" for d in nvcc.library_dirs)
    cfg = subprocess.run(["cmake", "-S", str(project), "-B", str(project / "build"),
                          f"-DCMAKE_CUDA_FLAGS={libs}", f"-DCMAKE_EXE_LINKER_FLAGS={libs}",
                          f"-DCMAKE_SHARED_LINKER_FLAGS={libs}", f"-D{g.name.upper()}_HARNESS=ON"],
                         capture_output=True, text=True, env=env, check=False)
    assert cfg.returncode == 0, cfg.stdout + cfg.stderr
    bld = subprocess.run(["cmake", "--build", str(project / "build"), "-j", "2"],
                         capture_output=True, text=True, env=env, check=False)
    assert bld.returncode == 0, bld.stdout + bld.stderr
    built = {p.name for p in (project / "build").rglob("*") if p.is_file()}
    assert {"app", f"lib{g.name}.a", f"lib{g.name}.so", f"{g.name}_harness"} <= built
    # The null-pointer contract holds without a GPU: the launcher returns before touching the device.
    run = subprocess.run([str(project / "build" / "app")], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stdout + run.stderr


@pytest.mark.slow
def test_vendored_directory_builds_with_make(tmp_path):
    nvcc = nvcc_or_skip()
    spec = load_spec(next(p for p in SPECS if p.stem == "decode_qk"))
    g = generate(spec, get_arch("sm_90a"), tmp_path / "gen")
    project = _vendored_project(tmp_path, g.directory, g.name)
    env = nvcc.run_env(os.environ)
    # No LDFLAGS: the Makefile finds the CUDA runtime's folder from nvcc, the pip wheels' too.
    run = subprocess.run(["make", "-C", str(project / g.name), f"NVCC={nvcc.path}", "harness"],
                         capture_output=True, text=True, env=env, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    out = project / g.name / "build" / "sm_90a"
    assert {f"lib{g.name}.a", f"lib{g.name}.so", f"{g.name}_harness"} <= {p.name for p in out.iterdir()}


@pytest.mark.slow
def test_deepgemm_builds_with_the_wheels_when_system_cuda_is_hidden(tmp_path):
    """The fresh-machine path: no CUDA_HOME, no nvcc on PATH; `deepgemm build` uses the pip wheels."""
    import json
    import sys

    from dgemm_cli.toolchain import _wheel_nvcc

    if _wheel_nvcc() is None:
        pytest.skip("the CUDA wheels are not installed in this Python (pip install . brings them)")
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", str(tmp_path)), "TMPDIR": str(tmp_path),
           "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    spec = next(p for p in SPECS if p.stem == "batched_broadcast")
    gen = subprocess.run([sys.executable, "-m", "dgemm_cli", "gen", str(spec), "-o", str(tmp_path)], env=env,
                         capture_output=True, text=True, check=False)
    assert gen.returncode == 0, gen.stderr
    out = subprocess.run([sys.executable, "-m", "dgemm_cli", "build", str(tmp_path / spec.stem), "--json"],
                         env=env, capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    (row,) = json.loads(out.stdout)
    assert row["ok"] and all(k["spill_store_bytes"] == 0 for k in row["kernels"])
    text = subprocess.run([sys.executable, "-m", "dgemm_cli", "doctor"], env=env, capture_output=True,
                          text=True, check=False).stdout
    assert "wheel" in text


@pytest.mark.slow
@pytest.mark.parametrize("case,defines,exit_code,error", [
    ("1", [], 3, "no CUDA GPU"),
    ("10", [], 3, "no CUDA GPU"),  # the multi-batch baseline: a copy call and a pointer-array call
    ("10", ["-DSELFTEST_BAD_BASELINE"], 4, "'pointer-array batched over b[2],h[3]: C^T=B^TA' reaches element"),
], ids=["case1", "case10", "case10_bad_pointers"])
def test_harness_selftest_compiles_warning_free(tmp_path, case, defines, exit_code, error):
    """dg_harness.cuh on its own (hand-written kernel, no generator): -Wall clean; the problem and baseline checks
    run before the GPU is looked for, so with no GPU visible a valid case says so in JSON and exits 3, and a
    pointer-array call reaching past its buffer exits 4. tests/harness_selftest/run_on_gpu.sh runs its cases on a
    GPU."""
    nvcc = nvcc_or_skip()
    repo = Path(__file__).resolve().parent.parent
    exe = tmp_path / "selftest"
    cmd = [*nvcc.compile_prefix(), "-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", "-Xcompiler", "-Wall",
           f"-DSELFTEST_CASE={case}", *defines, "-I", str(repo / "templates"),
           str(repo / "tests" / "harness_selftest" / "selftest_harness.cu"), "-o", str(exe), "-ldl"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=nvcc.run_env(os.environ), check=False)
    assert proc.returncode == 0, proc.stderr
    assert "warning" not in proc.stderr.lower(), proc.stderr
    run = subprocess.run([str(exe), "bench"], capture_output=True, text=True, check=False,
                         env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert run.returncode == exit_code, run.stdout + run.stderr
    assert error in json.loads(run.stdout)["error"], run.stdout


# ------------------------------------------------------------------------------------------ build cache

FAKE_NVCC = Nvcc(path=Path("/opt/cuda/bin/nvcc"), source="--nvcc", version="13.0.88", cuda_root=Path("/opt/cuda"))


class FakeCompile:
    """Stands in for build._run: writes each command's output file and answers the kernel compile with
    PTXAS; `fail_on` makes the command containing that word fail. `calls` counts the commands run."""

    def __init__(self):
        self.calls: list[list[str]] = []
        self.fail_on: str | None = None
        self.ptxas = PTXAS  # the kernel compile's report

    def __call__(self, cmd, cwd, nvcc):
        self.calls.append(cmd)
        if self.fail_on is not None and self.fail_on in cmd:
            return subprocess.CompletedProcess(cmd, 2, stdout="", stderr=f"{self.fail_on}(1): error: broken")
        target = cmd[cmd.index("-o") + 1] if "-o" in cmd else cmd[2]  # `ar rcs LIB OBJ`
        (cwd / target).write_text(f"built by {' '.join(cmd)}\n")
        return subprocess.CompletedProcess(cmd, 0, stdout="", stderr=self.ptxas if "-Xptxas" in cmd else "")


@pytest.fixture
def fake_compile(monkeypatch):
    fake = FakeCompile()
    monkeypatch.setattr(build_module, "_run", fake)
    return fake


@pytest.fixture
def generated(tmp_path):
    return generate(load_spec(next(p for p in SPECS if p.stem == "odd_tails")), get_arch("sm_90a"), tmp_path).directory


def test_build_key_covers_sources_commands_nvcc_and_arch():
    inputs = {"plan.json": b"{}", "k.cu": b"kernel", "k.h": b"header"}
    commands = build_commands("k", "sm_90a", ["-std=c++17", "-O3"], FAKE_NVCC, "/usr/bin/ar").all()
    env = {"PATH": "/usr/bin", "HOME": "/root"}

    def key(inputs=inputs, commands=commands, nvcc=FAKE_NVCC, arch="sm_90a", env=env):
        return build_key(inputs, commands, nvcc, arch, env)

    assert key() == key(inputs=dict(reversed(inputs.items())))  # order-free
    assert key() == key(env={**env, "HOME": "/elsewhere", "TERM": "xterm"})  # only nvcc's flag variables count
    other_flags = build_commands("k", "sm_90a", ["-std=c++17", "-O2"], FAKE_NVCC, "/usr/bin/ar").all()
    changed = [
        key(inputs={**inputs, "k.cu": b"kernel // edited"}),
        key(inputs={**inputs, "k.h": None}),  # a missing file
        key(commands=other_flags),
        key(nvcc=replace(FAKE_NVCC, version="13.0.99")),
        key(nvcc=replace(FAKE_NVCC, path=Path("/usr/local/cuda-13.0/bin/nvcc"))),
        key(nvcc=replace(FAKE_NVCC, env=(("NVCC_PREPEND_FLAGS", "-G"),))),
        key(env={**env, "NVCC_APPEND_FLAGS": "-DNDEBUG"}),
        key(env={**env, "NVCC_CCBIN": "clang++"}),
        key(arch="sm_80"),
    ]
    assert len({key(), *changed}) == len(changed) + 1


def test_build_commands_name_every_product():
    cmds = build_commands("k", "sm_80", ["-O3"], FAKE_NVCC, "/usr/bin/ar")
    assert cmds.compile_kernel[0] == "/opt/cuda/bin/nvcc" and "-O3" in cmds.compile_kernel
    written = {c[c.index("-o") + 1] if "-o" in c else c[2] for c in cmds.all()}
    assert written == {p.as_posix() for p in cmds.products}
    assert set(cmds.outputs) < set(cmds.products)


def test_second_build_is_cached_with_the_same_report(generated, fake_compile):
    first = build(generated, "sm_90a", FAKE_NVCC)
    assert first.ok and not first.cached and fake_compile.calls
    assert (build_dir_for(generated, "sm_90a") / STAMP).is_file()
    fake_compile.calls.clear()
    second = build(generated, "sm_90a", FAKE_NVCC)
    assert second.ok and second.cached and fake_compile.calls == []
    assert second.kernels == first.kernels and second.kernels[0].spills  # the report survives the cache
    assert second.outputs == first.outputs
    assert second.to_dict()["cached"] is True and first.to_dict()["cached"] is False


def test_changed_source_rebuilds(generated, fake_compile):
    assert not build(generated, "sm_90a", FAKE_NVCC).cached
    for file in ("odd_tails.cu", "odd_tails.h", "odd_tails_harness.cu", "dg_harness.cuh"):
        path = generated / file
        path.write_text(path.read_text() + "// edited\n")
        again = build(generated, "sm_90a", FAKE_NVCC)
        assert again.ok and not again.cached, file
        assert build(generated, "sm_90a", FAKE_NVCC).cached, file


def test_changed_flags_rebuild(generated, fake_compile):
    build(generated, "sm_90a", FAKE_NVCC)
    plan_file = generated / "plan.json"
    plan = json.loads(plan_file.read_text())
    plan["build"]["nvcc_flags"].append("-DDG_EXTRA")
    plan_file.write_text(json.dumps(plan))
    fake_compile.calls.clear()
    again = build(generated, "sm_90a", FAKE_NVCC)
    assert not again.cached and "-DDG_EXTRA" in fake_compile.calls[0]


def test_changed_nvcc_rebuilds(generated, fake_compile):
    build(generated, "sm_90a", FAKE_NVCC)
    assert not build(generated, "sm_90a", replace(FAKE_NVCC, version="13.0.99")).cached
    assert not build(generated, "sm_90a", replace(FAKE_NVCC, path=Path("/other/bin/nvcc"))).cached


def test_nvcc_flags_from_the_environment_rebuild(generated, fake_compile, monkeypatch):
    build(generated, "sm_90a", FAKE_NVCC)
    monkeypatch.setenv("NVCC_APPEND_FLAGS", "-G")
    assert not build(generated, "sm_90a", FAKE_NVCC).cached
    assert build(generated, "sm_90a", FAKE_NVCC).cached


def test_each_arch_has_its_own_stamp(generated, fake_compile):
    assert not build(generated, "sm_90a", FAKE_NVCC).cached
    assert not build(generated, "sm_80", FAKE_NVCC).cached
    assert build(generated, "sm_90a", FAKE_NVCC).cached and build(generated, "sm_80", FAKE_NVCC).cached


@pytest.mark.parametrize("product", ["libodd_tails.so", "odd_tails_harness", "odd_tails.o"])
def test_missing_product_rebuilds(generated, fake_compile, product):
    build(generated, "sm_90a", FAKE_NVCC)
    (build_dir_for(generated, "sm_90a") / product).unlink()
    again = build(generated, "sm_90a", FAKE_NVCC)
    assert again.ok and not again.cached
    assert (build_dir_for(generated, "sm_90a") / product).is_file()


def test_product_rewritten_by_something_else_rebuilds(generated, fake_compile):
    """`make` in the generated folder writes the same build/<arch>/ paths; the stamp must not vouch for them."""
    build(generated, "sm_90a", FAKE_NVCC)
    lib = build_dir_for(generated, "sm_90a") / "libodd_tails.a"
    lib.write_text("written by make with other flags\n")
    assert not build(generated, "sm_90a", FAKE_NVCC).cached


def test_force_rebuilds(generated, fake_compile):
    build(generated, "sm_90a", FAKE_NVCC)
    fake_compile.calls.clear()
    forced = build(generated, "sm_90a", FAKE_NVCC, force=True)
    assert forced.ok and not forced.cached and len(fake_compile.calls) == 5
    assert build(generated, "sm_90a", FAKE_NVCC).cached  # the forced build left a fresh stamp


@pytest.mark.parametrize("failing", ["odd_tails.cu", "odd_tails_harness.cu", "-shared"])
def test_failed_build_leaves_no_stamp(generated, fake_compile, failing):
    stamp = build_dir_for(generated, "sm_90a") / STAMP
    assert build(generated, "sm_90a", FAKE_NVCC).ok and stamp.is_file()
    fake_compile.fail_on = failing
    failed = build(generated, "sm_90a", FAKE_NVCC, force=True)
    assert not failed.ok and not failed.cached and "broken" in failed.error
    assert not stamp.exists()
    fake_compile.fail_on = None
    again = build(generated, "sm_90a", FAKE_NVCC)
    assert again.ok and not again.cached


@pytest.mark.parametrize("content", ["", "not json", "[]", '{"key": "0"}', "\udcff"])
def test_unreadable_stamp_rebuilds(generated, fake_compile, content):
    build(generated, "sm_90a", FAKE_NVCC)
    stamp = build_dir_for(generated, "sm_90a") / STAMP
    stamp.write_text(content, errors="surrogateescape")
    again = build(generated, "sm_90a", FAKE_NVCC)
    assert again.ok and not again.cached
    assert json.loads(stamp.read_text())["kernels"]  # rewritten whole


def test_stamp_with_other_kernel_fields_rebuilds(generated, fake_compile):
    build(generated, "sm_90a", FAKE_NVCC)
    stamp = build_dir_for(generated, "sm_90a") / STAMP
    data = json.loads(stamp.read_text())
    del data["kernels"][0]["registers"]
    stamp.write_text(json.dumps(data))
    assert not build(generated, "sm_90a", FAKE_NVCC).cached


def _fake_nvcc_script(path: Path) -> Path:
    """An nvcc for the CLI (a subprocess, so no monkeypatching): `--version` like 13.0, and any other
    command writes its -o file, with a ptxas report for -Xptxas. `ar` then archives the fake objects."""
    ptxas = "".join(f"echo \"{line}\" >&2\n" for line in PTXAS.splitlines())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"""#!/bin/sh
case "$*" in *--version*) echo 'Cuda compilation tools, release 13.0, V13.0.88'; exit 0;; esac
out=""; prev=""
for arg in "$@"; do [ "$prev" = "-o" ] && out="$arg"; prev="$arg"; done
[ -n "$out" ] && echo "fake $*" > "$out"
case "$*" in *-Xptxas*) {ptxas};; esac
exit 0
""")
    path.chmod(0o755)
    return path


def _deepgemm(*args, cwd):
    return subprocess.run([sys.executable, "-m", "dgemm_cli", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
                          check=False)


def test_cli_build_says_cached_and_force_rebuilds(generated, tmp_path):
    if shutil.which("ar") is None:
        pytest.skip("ar (binutils) not installed")
    nvcc = _fake_nvcc_script(tmp_path / "bin" / "nvcc")
    first = _deepgemm("build", generated, "--nvcc", nvcc, cwd=tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "odd_tails (sm_90a) ok in" in first.stdout and ") cached ->" not in first.stdout
    second = _deepgemm("build", generated, "--nvcc", nvcc, cwd=tmp_path)
    assert second.returncode == 0 and "[1/1] odd_tails (sm_90a) cached -> " in second.stdout
    assert "!! SPILL: 12 B stored, 8 B loaded !!" in second.stdout  # the stamp's ptxas report
    (row,) = json.loads(_deepgemm("build", generated, "--nvcc", nvcc, "--json", cwd=tmp_path).stdout)
    assert row["ok"] and row["cached"] is True and row["kernels"][0]["registers"] == 255
    forced = _deepgemm("build", generated, "--nvcc", nvcc, "--force", "--json", cwd=tmp_path)
    (row,) = json.loads(forced.stdout)
    assert row["ok"] and row["cached"] is False


# ------------------------------------------------------------------------------------------ the vendored folder

def _tiny(name: str, arch: str, dtype: str = "bf16", **extra) -> Spec:
    """A small spec of `dtype`: sm_90a plans hopper with a cta fallback for it, sm_80 cta."""
    doc = {"name": name, "arch": arch, "dtype": dtype, "gemm": {"m": 64, "n": 64, "k": 64},
           "operands": {"A": {"layout": "row"}, "B": {"layout": "row"}, "C": {"layout": "row"}}, **extra}
    return parse_spec(doc, f"{name}.yaml")


def _sources(spec: Spec, arch: str) -> dict[str, str]:
    views = analyse(spec)
    return render_sources(spec, views, make_plan(views, get_arch(arch)), plan_baseline(views), get_arch(arch))


@pytest.mark.parametrize("arch,cmake_arch", [("sm_90a", "90a"), ("sm_80", "80")])
def test_cmakelists_sets_the_planned_arch_on_every_target(arch, cmake_arch):
    text = _sources(_tiny("t", arch), arch)["CMakeLists.txt"]
    assert "CMAKE_CUDA_ARCHITECTURES)" not in text and "if(NOT DEFINED" not in text  # project() always defines it
    assert f"PROPERTIES CUDA_ARCHITECTURES {cmake_arch} " in text  # the library targets' loop
    assert f"t_harness PROPERTIES CUDA_ARCHITECTURES {cmake_arch})" in text
    # One compile of the .cu, position-independent, for both libraries.
    assert "add_library(t_objects OBJECT t.cu)" in text and "POSITION_INDEPENDENT_CODE ON" in text
    assert "add_library(t STATIC $<TARGET_OBJECTS:t_objects>)" in text
    assert "add_library(t_shared SHARED $<TARGET_OBJECTS:t_objects>)" in text
    assert 'option(T_HARNESS "' in text and text.split('option(T_HARNESS "')[1].split("\n")[0].endswith(" OFF)")


def _fake_nvcc_for_make(root: Path) -> Path:
    """An nvcc whose --dryrun reports its folder as the pip wheels' layout does (lib/ beside bin/)."""
    (root / "lib").mkdir(parents=True)
    (root / "lib" / "libcudart_static.a").write_bytes(b"!<arch>\n")
    nvcc = root / "bin" / "nvcc"
    nvcc.parent.mkdir()
    nvcc.write_text(f"#!/bin/sh\necho '#$ _HERE_={root / 'bin'}' >&2\n")
    nvcc.chmod(0o755)
    return nvcc


def test_makefile_finds_the_cuda_runtime_from_nvcc_and_builds_the_library_by_default(tmp_path):
    if shutil.which("make") is None:
        pytest.skip("make not installed")
    folder = tmp_path / "t"
    folder.mkdir()
    for name, text in _sources(_tiny("t", "sm_80"), "sm_80").items():  # the whole folder, its dg/ headers too
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    nvcc = _fake_nvcc_for_make(tmp_path / "wheel")
    link = subprocess.run(["make", "-s", "-C", str(folder), f"NVCC={nvcc}", "print-link"], capture_output=True,
                          text=True, check=True).stdout
    assert f"-L{tmp_path / 'wheel' / 'bin'}/../lib/" in link and "-lcudart_static" in link
    plan = subprocess.run(["make", "-n", "-C", str(folder), f"NVCC={nvcc}"], capture_output=True, text=True,
                          check=True).stdout
    assert "libt.a" in plan and "libt.so" in plan and "t_harness" not in plan  # `make`: the library alone
    with_harness = subprocess.run(["make", "-n", "-C", str(folder), f"NVCC={nvcc}", "harness"],
                                  capture_output=True, text=True, check=True).stdout
    assert "-o build/sm_80/t_harness -ldl" in with_harness
    assert f"-L{tmp_path / 'wheel' / 'bin'}/../lib/" in with_harness


def test_header_describes_views_fast_path_and_safety():
    hopper = _sources(_tiny("t", "sm_90a", operands={"A": {"layout": "row", "offset": 8},
                                                     "B": {"layout": "col"}, "C": {"layout": "row"}}), "sm_90a")
    header = hopper["t.h"]
    assert ("//   A        bf16, read: [mk] sizes m=64, k=64; strides 64, 1; offset 8; buffer 4104; aligned to 2 B"
            in header)
    assert "//   B        bf16, read: [kn] sizes k=64, n=64; strides 1, 64; offset 0;" in header
    assert "//   C        bf16, written: [mn]" in header
    plan = json.loads(hopper["plan.json"])["plan"]
    assert plan["family"] == "hopper" and plan["fallback"]["family"] == "cta"
    assert "Fast path: hopper when A, B, C point at 16/16/16-byte aligned views" in header
    assert "The cta kernel is the generic one, typically slower." in header
    assert "Views that start 16-byte aligned always take the fast path." in header
    flat = " ".join(line.removeprefix("//").strip() for line in header.splitlines())
    assert "safe to call from several host threads at once" in flat
    assert "a cache of TMA tensor maps for the last 8 pointer sets, guarded by a mutex" in flat
    assert "cuTensorMapEncodeTiled" in flat and "make the first call outside capture" in flat
    assert "cudaError_t t(const dg_bf16* A, const dg_bf16* B, dg_bf16* C, float alpha, float beta" in header
    # A cta kernel with the promised alignment its plan wants: no run-time choice, no tensor maps.
    cta = _sources(_tiny("u", "sm_80", dtype="f32", operands={x: {"layout": "row", "align": 16} for x in "ABC"}),
                   "sm_80")["u.h"]
    assert "Fast path" not in cta and "TMA" not in cta
    assert "Every call takes the same path" in cta and "it keeps no state between calls" in cta


def _cuda_include() -> Path:
    nvcc = nvcc_or_skip()
    include = nvcc.cuda_root / "include"
    if not (include / "cuda_runtime.h").is_file():
        pytest.skip(f"no cuda_runtime.h under {include}")
    return include


@pytest.mark.parametrize("compiler,lang,std", [("gcc", "c", "-std=c11"), ("g++", "c++", "-std=c++17")])
def test_header_compiles_from_c_and_cxx_for_every_dtype(tmp_path, compiler, lang, std):
    """Every dtype's header (and two of the same 16-bit type in one file) through the host compiler alone."""
    if shutil.which(compiler) is None:
        pytest.skip(f"{compiler} not installed")
    include = _cuda_include()
    specs = [_tiny("k_f32", "sm_80", "f32"), _tiny("k_f16", "sm_80", "f16"), _tiny("k_bf16", "sm_80", "bf16"),
             _tiny("k_bf16_again", "sm_80", "bf16"),
             _tiny("k_bias", "sm_80", "f16", epilogue=[{"bias": {"letters": "n", "dtype": "f32"}}])]
    for spec in specs:
        (tmp_path / f"{spec.name}.h").write_text(_sources(spec, "sm_80")[f"{spec.name}.h"])
    calls = "\n".join(f"  (void){s.name};" for s in specs)
    source = tmp_path / f"use.{'c' if lang == 'c' else 'cpp'}"
    typed = ("  const __nv_bfloat16* x = 0; __half* y = 0;\n"  # C++ callers keep cuda_bf16.h's / cuda_fp16.h's types
             "  (void)k_bf16(x, x, 0, 1.0f, 0.0f, 0); (void)k_f16(y, y, y, 1.0f, 0.0f, 0);\n" if lang == "c++" else "")
    source.write_text("".join(f'#include "{s.name}.h"\n' for s in specs)
                      + f"int main(void) {{\n{calls}\n{typed}  return 0;\n}}\n")
    run = subprocess.run([compiler, "-x", lang, std, "-Wall", "-Wextra", "-Wpedantic", "-Werror", "-fsyntax-only",
                          f"-I{include}", f"-I{tmp_path}", str(source)], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr


def test_generated_readme_states_the_license_and_the_link_line():
    readme = _sources(_tiny("t", "sm_90a"), "sm_90a")["README.md"]
    assert "## License" in readme and "MIT license" in readme
    assert "-lcudart_static -ldl -lpthread -lrt" in readme and "make print-link" in readme
    assert "-DT_HARNESS=ON" in readme
    assert (REPO / "LICENSE").read_text().startswith("MIT License")


def test_lib_only_build_serves_lib_only_requests_not_full_ones(generated, fake_compile):
    lib = build(generated, "sm_90a", FAKE_NVCC, lib_only=True)
    assert lib.ok and not lib.cached and [p.name for p in lib.outputs] == ["libodd_tails.a", "libodd_tails.so"]
    assert not any("odd_tails_harness.cu" in c or "dg_harness.cu" in c for c in fake_compile.calls)
    assert not (build_dir_for(generated, "sm_90a") / "odd_tails_harness").exists()
    assert build(generated, "sm_90a", FAKE_NVCC, lib_only=True).cached
    full = build(generated, "sm_90a", FAKE_NVCC)
    assert full.ok and not full.cached and (build_dir_for(generated, "sm_90a") / "odd_tails_harness").is_file()
    assert build(generated, "sm_90a", FAKE_NVCC, lib_only=True).cached  # a full build holds the library
    assert build(generated, "sm_90a", FAKE_NVCC).cached
    (generated / "odd_tails.cu").write_text((generated / "odd_tails.cu").read_text() + "// edited\n")
    assert not build(generated, "sm_90a", FAKE_NVCC, lib_only=True).cached
    assert not build(generated, "sm_90a", FAKE_NVCC).cached  # the library-only build's stamp holds no harness


def test_harness_object_is_compiled_once_for_every_folder(tmp_path, fake_compile, monkeypatch):
    monkeypatch.setenv("DEEPGEMM_HARNESS_CACHE", str(tmp_path / "harness-cache"))
    folders = [generate(load_spec(next(p for p in SPECS if p.stem == stem)), get_arch("sm_90a"), tmp_path).directory
               for stem in ("odd_tails", "decode_qk")]
    for folder in folders:
        assert build(folder, "sm_90a", FAKE_NVCC).ok
    shared = [c for c in fake_compile.calls if "dg_harness.cu" in c]
    assert len(shared) == 1  # the second folder links the first one's object
    (obj,) = (tmp_path / "harness-cache").glob("harness-*/dg_harness.o")
    for folder in folders:
        name = folder.name
        compile_harness = next(c for c in fake_compile.calls if f"{name}_harness.cu" in c)
        assert "-DDG_HARNESS_DECLARATIONS_ONLY" in compile_harness
        link = next(c for c in fake_compile.calls if f"build/sm_90a/{name}_harness" in c and "-ldl" in c)
        assert str(obj) in link
    obj.unlink()
    assert not build(folders[0], "sm_90a", FAKE_NVCC).cached  # the stamp vouches for the shared object too



def test_harness_objects_live_in_the_user_cache_unless_told_or_unwritable(tmp_path, monkeypatch):
    """$DEEPGEMM_HARNESS_CACHE, else the user cache dir (every build on the machine shares the object), else, where
    that folder cannot be made, beside the generated folders."""
    folder = tmp_path / "out" / "k"
    monkeypatch.delenv("DEEPGEMM_HARNESS_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert build_module.harness_cache(folder) == tmp_path / "xdg" / "deepgemm" / "harness"
    monkeypatch.setenv("DEEPGEMM_HARNESS_CACHE", str(tmp_path / "told"))
    assert build_module.harness_cache(folder) == tmp_path / "told" and (tmp_path / "told").is_dir()
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("DEEPGEMM_HARNESS_CACHE", str(tmp_path / "file" / "below"))  # a file is in the way
    assert build_module.harness_cache(folder) == tmp_path / "out" / ".deepgemm-cache"


def test_a_shared_harness_compiles_into_a_partial_object_of_its_own(generated, fake_compile, tmp_path, monkeypatch):
    """Builds in other processes may make the same object at once: each compiles in a private folder inside the
    shared one and renames the object (and its sources) into place once whole."""
    monkeypatch.setenv("DEEPGEMM_HARNESS_CACHE", str(tmp_path / "harness-cache"))
    folders = []
    monkeypatch.setattr(build_module, "_run",
                        lambda cmd, cwd, nvcc: folders.append(cwd) or fake_compile(cmd, cwd, nvcc))
    assert build(generated, "sm_90a", FAKE_NVCC).ok
    (shared,) = [c for c in fake_compile.calls if "dg_harness.cu" in c]
    (folder,) = (tmp_path / "harness-cache").glob("harness-*")
    private = folders[fake_compile.calls.index(shared)]
    assert private.parent == folder and not private.exists()  # its own folder inside, gone after
    assert sorted(p.name for p in folder.iterdir()) == ["dg_harness.cu", "dg_harness.cuh", "dg_harness.o"]


def test_dynamic_shared_memory_comes_from_the_plan(tmp_path):
    plan_json = json.loads(_sources(_tiny("t", "sm_90a"), "sm_90a")["plan.json"])
    plan = plan_json["plan"]
    namespaces = kernel_namespaces(PlanRecord.from_dict(plan_json))
    assert namespaces == {"hopper": plan["primary"]["smem_bytes"], "cta": plan["fallback"]["smem_bytes"]}
    assert namespaces["hopper"] > 48 * 1024
    demangled = "(anonymous namespace)::hopper::t_kernel(CUtensorMap_st, CUtensorMap_st, __nv_bfloat16*, float, float)"
    assert dynamic_smem(demangled, namespaces) == namespaces["hopper"]
    assert dynamic_smem("void (anonymous namespace)::cta::t_kernel<A, B>(float)", namespaces) == namespaces["cta"]
    # Mangled (no c++filt), and a K split's second kernel, which launches without dynamic shared memory.
    assert dynamic_smem("_ZN12_GLOBAL__N_16hopper8t_kernelE14CUtensorMap_stS1_Pff", namespaces) == namespaces["hopper"]
    assert dynamic_smem("_ZN12_GLOBAL__N_16hopper8t_finishEPKf", namespaces) == 0
    # The shipped headers' kernels, instantiated with a namespace's traits (dg::<family>::<function><Traits, ...>).
    persistent = "void dg::hopper::persistent_kernel<(anonymous namespace)::hopper::Traits>(CUtensorMap_st, float)"
    assert dynamic_smem(persistent, namespaces) == namespaces["hopper"]
    assert dynamic_smem("void dg::cta::kernel<(anonymous namespace)::cta::Traits, dg::cta::LoadA<1>>(float)",
                        namespaces) == namespaces["cta"]
    assert dynamic_smem("void dg::splitk::finish<(anonymous namespace)::cta::Traits>(float const*)", namespaces) == 0
    assert dynamic_smem("_ZN2dg3cta6kernelIN12_GLOBAL__N_13cta6TraitsENS0_5LoadAILi1EEEEEvPKf",
                        namespaces) == namespaces["cta"]
    assert dynamic_smem("_ZN2dg6hopper17persistent_kernelIN12_GLOBAL__N_16hopper6TraitsEEEv14CUtensorMap_st",
                        namespaces) == namespaces["hopper"]
    assert dynamic_smem("_ZN2dg6splitk6finishIN12_GLOBAL__N_13cta6TraitsEEEvPKf", namespaces) == 0
    assert dynamic_smem("_Z6kernelPf", namespaces) == 0  # not a generated kernel
    dyn = generate(load_spec(REPO / "specs" / "decode_dynamic.yaml"), get_arch("sm_90a"), tmp_path)
    buckets = json.loads((dyn.directory / "plan.json").read_text())["plan"]["buckets"]
    namespaces = kernel_namespaces(PlanRecord.load(dyn.directory))
    cu = (dyn.directory / "decode_dynamic.cu").read_text()
    assert all(f"namespace {ns} {{" in cu for ns in namespaces)  # the .cu's namespaces, by render.py's rule
    for b in buckets:
        # A bucket's own namespace, or the fold of one-size buckets that holds it (m2_4_tcgemv::Bucket<3>).
        label = f"m{b['min']}" if b["min"] == b["max"] else f"m{b['min']}_{b['max']}"
        own = f"{label}_{b['primary']['family']}"
        folds = [ns for ns in namespaces if (m := re.fullmatch(rf"m(\d+)_(\d+)_{b['primary']['family']}", ns))
                 and b["min"] == b["max"] and int(m.group(1)) <= b["min"] <= int(m.group(2))
                 and f"{ns}::Bucket<{b['min']}>::launch(" in cu]
        assert (own in namespaces) != bool(folds)
        assert namespaces[own if own in namespaces else folds[0]] == b["primary"]["smem_bytes"]
    fold = "void dg::tcgemv::kernel<(anonymous namespace)::m2_4_tcgemv::Bucket<3>::Traits>(float)"
    assert dynamic_smem(fold, namespaces) == namespaces["m2_4_tcgemv"]
    assert dynamic_smem("_ZN2dg6tcgemv6kernelIN12_GLOBAL__N_111m2_4_tcgemv6BucketILi3EE6TraitsEEEvPKf",
                        namespaces) == namespaces["m2_4_tcgemv"]


def test_build_reports_dynamic_shared_memory(generated, fake_compile):
    plan = json.loads((generated / "plan.json").read_text())["plan"]
    mangled = f"_ZN12_GLOBAL__N_1{len(plan['family'])}{plan['family']}16odd_tails_kernelEPf"
    fake_compile.ptxas = PTXAS.replace("_Z6kernelPf", mangled)
    res = build(generated, "sm_90a", FAKE_NVCC)
    row = res.to_dict()["kernels"][0]
    assert row["dynamic_smem_bytes"] == plan["primary"]["smem_bytes"] > 0 and row["smem_bytes"] == 384


def _cmake(nvcc: Nvcc, project: Path, *configure: str, target: str | None = None) -> str:
    """Configure and build `project` the way a user does (CUDACXX names the nvcc); the compile commands' text."""
    env = {**nvcc.run_env(os.environ), "CUDACXX": str(nvcc.path)}
    # The pip wheels keep their libraries in lib/, where nvcc's own profile does not look.
    libs = " ".join(f"-L{d}" for d in nvcc.library_dirs)
    build_dir = project / "build"
    cfg = subprocess.run(["cmake", "-S", str(project), "-B", str(build_dir), f"-DCMAKE_CUDA_FLAGS={libs}",
                          f"-DCMAKE_EXE_LINKER_FLAGS={libs}", f"-DCMAKE_SHARED_LINKER_FLAGS={libs}",
                          "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON", *configure],
                         capture_output=True, text=True, env=env, check=False)
    assert cfg.returncode == 0, cfg.stdout + cfg.stderr
    bld = subprocess.run(["cmake", "--build", str(build_dir), "-j", "2", *(["--target", target] if target else [])],
                         capture_output=True, text=True, env=env, check=False)
    assert bld.returncode == 0, bld.stdout + bld.stderr
    return (build_dir / "compile_commands.json").read_text()


@pytest.mark.slow
def test_cmake_parent_builds_each_folder_for_its_planned_arch(tmp_path):
    """Folders for sm_90a and sm_80 under a parent that sets no arch (project() then picks one of its own),
    linked from C++ and from a C file through the bf16 header; then under a parent that sets other arches."""
    nvcc = nvcc_or_skip()
    if shutil.which("cmake") is None:
        pytest.skip("cmake not installed")
    project = tmp_path / "user_project"
    for name, arch in (("h90", "sm_90a"), ("a80", "sm_80")):
        generate(_tiny(name, arch), get_arch(arch), project)
    (project / "main.cpp").write_text("""
#include "a80.h"
#include "h90.h"
int main() {  // no GPU needed: the null-pointer check returns before touching the device
  const bool ok = a80(nullptr, nullptr, nullptr, 1.0f, 0.0f, 0) == cudaErrorInvalidValue &&
                  h90(nullptr, nullptr, nullptr, 1.0f, 0.0f, 0) == cudaErrorInvalidValue;
  return ok ? 0 : 1;
}
""")
    (project / "main.c").write_text("""
#include "h90.h"
#include <stddef.h>
int main(void) {
  const dg_bf16* a = NULL;
  return h90(a, NULL, NULL, 1.0f, 0.0f, 0) == cudaErrorInvalidValue ? 0 : 1;
}
""")
    (project / "CMakeLists.txt").write_text("""
cmake_minimum_required(VERSION 3.24)
project(user_project LANGUAGES C CXX CUDA)
add_subdirectory(h90)
add_subdirectory(a80)
add_executable(app main.cpp)
target_link_libraries(app PRIVATE a80 h90_shared)
add_executable(app_c main.c)
target_link_libraries(app_c PRIVATE h90)
""")
    command_of = {Path(e["file"]).name: e["command"] for e in json.loads(_cmake(nvcc, project))}
    assert "compute_90a,code=[compute_90a,sm_90a]" in command_of["h90.cu"]
    assert "compute_80,code=[compute_80,sm_80]" in command_of["a80.cu"]
    assert "nvcc" not in command_of["main.c"]  # the host's C compiler reads the bf16 header
    built = {p.name for p in (project / "build").rglob("*") if p.is_file()}
    assert {"liba80.a", "liba80.so", "libh90.a", "libh90.so"} <= built and "h90_harness" not in built
    for app in ("app", "app_c"):
        run = subprocess.run([str(project / "build" / app)], capture_output=True, text=True, check=False)
        assert run.returncode == 0, app + run.stdout + run.stderr

    # A parent that compiles its own code for other arches: bf16 and cp.async would fail on sm_75.
    (project / "own.cu").write_text("__global__ void own_kernel() {}\n")
    cmake_lists = (project / "CMakeLists.txt").read_text()
    (project / "CMakeLists.txt").write_text(cmake_lists.replace(
        "project(user_project LANGUAGES C CXX CUDA)\n",
        "project(user_project LANGUAGES C CXX CUDA)\nset(CMAKE_CUDA_ARCHITECTURES 75 86)\n"
        "add_library(own STATIC own.cu)\n"))
    shutil.rmtree(project / "build")
    arch_of = {Path(e["file"]).name: e["command"] for e in json.loads(_cmake(nvcc, project, target="a80"))}
    assert "compute_80,code=[compute_80,sm_80]" in arch_of["a80.cu"] and "compute_75" not in arch_of["a80.cu"]
    assert "compute_90a,code=[compute_90a,sm_90a]" in arch_of["h90.cu"] and "compute_86" not in arch_of["h90.cu"]
    assert "compute_75" in arch_of["own.cu"] and "compute_86" in arch_of["own.cu"]


def test_a_folder_from_an_older_deepgemm_compiles_its_harness_whole(generated, fake_compile):
    """Its dg_harness.cuh has no declarations-only guard: compiled against the shared object it would define
    everything twice, so it links nothing shared."""
    harness = generated / "dg_harness.cuh"
    harness.write_text(harness.read_text().replace("DG_HARNESS_DECLARATIONS_ONLY", "DG_OLD_GUARD"))
    assert build(generated, "sm_90a", FAKE_NVCC).ok
    assert not any("dg_harness.cu" in c for c in fake_compile.calls)
    compile_harness = next(c for c in fake_compile.calls if "odd_tails_harness.cu" in c)
    assert "-DDG_HARNESS_DECLARATIONS_ONLY" not in compile_harness


def test_a_folder_from_an_older_deepgemm_is_refused_with_the_fix(generated, fake_compile):
    plan_file = generated / "plan.json"
    plan = json.loads(plan_file.read_text())
    del plan["schema_version"]
    plan_file.write_text(json.dumps(plan))
    with pytest.raises(RecordError, match=r"plan.json: schema_version: missing.*Fix: regenerate it with `deepgemm gen"):
        build(generated, "sm_90a", FAKE_NVCC)
    assert fake_compile.calls == []
