"""Tests for dgemm_cli.toolchain: nvcc discovery, version / nvidia-smi parsing, doctor, and (slow) a real
build with the CUDA wheels while the system CUDA is hidden. No GPU needed."""

from __future__ import annotations

import importlib.metadata
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from dgemm_cli import toolchain
from dgemm_cli.errors import EXIT_TOOLCHAIN, ToolchainError
from dgemm_cli.toolchain import (
    GpuInfo,
    Nvcc,
    doctor_report,
    driver_cuda_version,
    find_gpus,
    find_nvcc,
    format_doctor,
    host_compiler,
    parse_driver_cuda_version,
    parse_gpu_csv,
    parse_nvcc_version,
    select_visible,
)

NVCC_13_0 = """\
nvcc: NVIDIA (R) Cuda compiler driver
Copyright (c) 2005-2025 NVIDIA Corporation
Built on Wed_Aug_20_01:58:59_PM_PDT_2025
Cuda compilation tools, release 13.0, V13.0.88
Build cuda_13.0.r13.0/compiler.36424714_0
"""

SMI_BANNER = """\
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 580.159.03             Driver Version: 580.159.03     CUDA Version: 13.0     |
+-----------------------------------------+------------------------+----------------------+
"""


def echo(text: str) -> str:
    """Shell lines printing `text` with the `echo` builtin: the fakes run with PATHs that lack `cat`."""
    return "".join(f"echo '{line}'\n" for line in text.splitlines())


def write_script(path: Path, body: str, executable: bool = True) -> Path:
    """A /bin/sh script at `path` (parents created)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body)
    mode = path.stat().st_mode
    path.chmod(mode | stat.S_IXUSR if executable else mode & ~(stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH))
    return path


def fake_nvcc(path: Path, release: str = "13.0", build: str = "13.0.88") -> Path:
    """A fake nvcc printing a real-looking `--version` whatever it is asked."""
    text = NVCC_13_0.replace("release 13.0, V13.0.88", f"release {release}, V{build}")
    return write_script(path, echo(text))


@pytest.fixture
def no_wheel(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hide the CUDA wheels of the running Python from discovery."""
    monkeypatch.setattr(toolchain, "_wheel_nvcc", lambda: None)


# ------------------------------------------------------------------------------------------- parsing


def test_parse_nvcc_version() -> None:
    assert parse_nvcc_version(NVCC_13_0) == "13.0.88"
    assert parse_nvcc_version("Cuda compilation tools, release 12.4, V12.4.131") == "12.4.131"
    assert parse_nvcc_version("Cuda compilation tools, release 11.8") == "11.8"
    assert parse_nvcc_version("gcc (Debian 12.2.0-14) 12.2.0") is None
    assert parse_nvcc_version("") is None


def test_major_minor() -> None:
    n = Nvcc(path=Path("/x/bin/nvcc"), source="PATH", version="13.0.88", cuda_root=Path("/x"))
    assert n.major_minor == (13, 0)
    assert Nvcc(Path("n"), "PATH", "12.10", Path("/")).major_minor == (12, 10)


def test_compile_prefix_and_run_env() -> None:
    n = Nvcc(
        path=Path("/w/bin/nvcc"),
        source="wheel",
        version="13.0.88",
        cuda_root=Path("/w"),
        include_dirs=(Path("/w/include"),),
        library_dirs=(Path("/w/lib"), Path("/w/lib/stubs")),
        env=(("FOO", "1"), ("PATH", "/w/bin:/usr/bin")),
    )
    assert n.compile_prefix() == ["/w/bin/nvcc", "-I/w/include", "-L/w/lib", "-L/w/lib/stubs"]
    base = {"PATH": "/usr/bin", "HOME": "/h"}
    assert n.run_env(base) == {"PATH": "/w/bin:/usr/bin", "HOME": "/h", "FOO": "1"}
    assert base == {"PATH": "/usr/bin", "HOME": "/h"}  # not mutated
    plain = Nvcc(Path("/c/bin/nvcc"), "PATH", "13.0.88", Path("/c"))
    assert plain.compile_prefix() == ["/c/bin/nvcc"]
    assert plain.run_env(base) == base


def test_parse_gpu_csv() -> None:
    text = (
        "0, NVIDIA H200, 9.0, 580.159.03\n"
        "1, NVIDIA A100-SXM4-80GB, 8.0, 580.159.03\n"
        "\n"
        "2, Weird, Name, With Commas, 8.6, 580.159.03\n"
        "No devices were found\n"
        "3, Broken GPU, [N/A], 580.159.03\n"
    )
    assert parse_gpu_csv(text) == [
        GpuInfo(0, "NVIDIA H200", "9.0", "580.159.03"),
        GpuInfo(1, "NVIDIA A100-SXM4-80GB", "8.0", "580.159.03"),
        GpuInfo(2, "Weird, Name, With Commas", "8.6", "580.159.03"),
    ]
    assert parse_gpu_csv("") == []


def test_parse_driver_cuda_version() -> None:
    assert parse_driver_cuda_version(SMI_BANNER) == "13.0"
    assert parse_driver_cuda_version("CUDA Version: 12.8") == "12.8"
    assert parse_driver_cuda_version("NVIDIA-SMI has failed") is None


# ----------------------------------------------------------------------------------- nvcc discovery


def test_search_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    explicit = fake_nvcc(tmp_path / "explicit" / "nvcc")
    deepgemm = fake_nvcc(tmp_path / "deepgemm" / "nvcc")
    cuda_home = fake_nvcc(tmp_path / "home" / "bin" / "nvcc")
    cuda_path = fake_nvcc(tmp_path / "cpath" / "bin" / "nvcc")
    wheel = fake_nvcc(tmp_path / "site" / "nvidia" / "cu13" / "bin" / "nvcc")
    on_path = fake_nvcc(tmp_path / "onpath" / "nvcc")
    monkeypatch.setattr(toolchain, "_wheel_nvcc", lambda: wheel)
    env = {
        "DEEPGEMM_NVCC": str(deepgemm),
        "CUDA_HOME": str(tmp_path / "home"),
        "CUDA_PATH": str(tmp_path / "cpath"),
        "PATH": str(on_path.parent),
    }

    def found(explicit_arg: str | None = None) -> tuple[str, Path]:
        n = find_nvcc(explicit_arg, env=env)
        return n.source, n.path

    assert found(str(explicit)) == ("--nvcc", explicit)
    assert found() == ("$DEEPGEMM_NVCC", deepgemm)
    del env["DEEPGEMM_NVCC"]
    assert found() == ("$CUDA_HOME", cuda_home)
    env["CUDA_HOME"] = ""  # set but empty counts as unset
    assert found() == ("$CUDA_PATH", cuda_path)
    del env["CUDA_PATH"]
    assert found() == ("wheel", wheel)
    monkeypatch.setattr(toolchain, "_wheel_nvcc", lambda: None)
    assert found() == ("PATH", on_path)
    n = find_nvcc(env=env)
    assert n.version == "13.0.88" and n.major_minor == (13, 0)


def test_explicit_bare_name_is_looked_up_on_path(tmp_path: Path, no_wheel: None) -> None:
    nvcc = fake_nvcc(tmp_path / "bin" / "nvcc-13.0")
    n = find_nvcc("nvcc-13.0", env={"PATH": str(nvcc.parent)})
    assert (n.source, n.path) == ("--nvcc", nvcc)


@pytest.mark.parametrize(
    "how",
    ["explicit", "DEEPGEMM_NVCC", "CUDA_HOME", "CUDA_PATH"],
)
def test_named_path_missing_is_an_error(tmp_path: Path, how: str, no_wheel: None) -> None:
    # A working nvcc on PATH must not be used instead of the one the user named.
    fake_nvcc(tmp_path / "onpath" / "nvcc")
    env = {"PATH": str(tmp_path / "onpath")}
    missing = tmp_path / "nope"
    explicit = None
    if how == "explicit":
        explicit = str(missing / "nvcc")
    elif how == "DEEPGEMM_NVCC":
        env[how] = str(missing / "nvcc")
    else:
        env[how] = str(missing)
    with pytest.raises(ToolchainError) as e:
        find_nvcc(explicit, env=env)
    assert str(missing / ("nvcc" if how in ("explicit", "DEEPGEMM_NVCC") else "bin/nvcc")) in str(e.value)
    assert "does not exist" in str(e.value) and "Fix:" in str(e.value)
    assert e.value.exit_code == EXIT_TOOLCHAIN


def test_named_path_not_executable_or_folder(tmp_path: Path, no_wheel: None) -> None:
    plain = write_script(tmp_path / "nvcc", "exit 0\n", executable=False)
    with pytest.raises(ToolchainError, match="not executable"):
        find_nvcc(str(plain), env={"PATH": ""})
    with pytest.raises(ToolchainError, match="is a folder"):
        find_nvcc(env={"DEEPGEMM_NVCC": str(tmp_path), "PATH": ""})


def test_nothing_found_lists_every_place(tmp_path: Path, no_wheel: None) -> None:
    with pytest.raises(ToolchainError) as e:
        find_nvcc(env={"PATH": str(tmp_path)})
    msg = str(e.value)
    for place in ("--nvcc", "$DEEPGEMM_NVCC", "$CUDA_HOME", "$CUDA_PATH", "CUDA wheels", str(tmp_path)):
        assert place in msg, place
    assert "pip install deepgemm" in msg
    assert "DEEPGEMM_NVCC or CUDA_HOME" in msg


def test_nvcc_that_is_not_nvcc(tmp_path: Path, no_wheel: None) -> None:
    liar = write_script(tmp_path / "nvcc", "echo hello; exit 0\n")
    with pytest.raises(ToolchainError, match=r"release X\.Y") as e:
        find_nvcc(str(liar), env={"PATH": ""})
    assert "hello" in str(e.value)
    failing = write_script(tmp_path / "bad" / "nvcc", "exit 3\n")
    with pytest.raises(ToolchainError, match="exited 3"):
        find_nvcc(str(failing), env={"PATH": ""})


def test_cuda_root_of_a_toolkit(tmp_path: Path, no_wheel: None) -> None:
    root = tmp_path / "cuda-13.0"
    fake_nvcc(root / "bin" / "nvcc")
    (root / "include").mkdir()
    (root / "include" / "cuda_runtime.h").touch()
    (root / "lib64").mkdir()
    n = find_nvcc(env={"CUDA_HOME": str(root), "PATH": ""})
    assert n.cuda_root == root.resolve()
    assert n.include_dirs == () and n.library_dirs == ()


def test_cuda_root_through_a_wrapper_script(tmp_path: Path, no_wheel: None) -> None:
    """/usr/local/bin/nvcc style wrapper: the root comes from `nvcc --dryrun`'s _HERE_ line."""
    root = tmp_path / "cuda"
    (root / "include").mkdir(parents=True)
    (root / "include" / "cuda_runtime.h").touch()
    wrapper = write_script(
        tmp_path / "local" / "bin" / "nvcc",
        'case "$*" in *--dryrun*) echo "#\\$ _HERE_=' + str(root / "bin") + '" >&2 ;; '
        f"*) {echo(NVCC_13_0)};; esac\n",
    )
    n = find_nvcc(env={"PATH": str(wrapper.parent)})
    assert n.source == "PATH" and n.cuda_root == root.resolve()


def test_wheel_layout_needs_lib_dir(tmp_path: Path, no_wheel: None) -> None:
    root = tmp_path / "nvidia" / "cu13"
    fake_nvcc(root / "bin" / "nvcc")
    (root / "include").mkdir()
    (root / "include" / "cuda_runtime.h").touch()
    (root / "lib").mkdir()
    (root / "lib" / "libcudart_static.a").touch()
    n = find_nvcc(str(root / "bin" / "nvcc"), env={"PATH": ""})
    assert n.library_dirs == (root.resolve() / "lib",)
    assert n.compile_prefix() == [str(root / "bin" / "nvcc"), f"-L{root.resolve() / 'lib'}"]


def test_wheel_nvcc_found_through_nvidia_namespace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for major in ("12", "13", "9"):
        fake_nvcc(tmp_path / "nvidia" / f"cu{major}" / "bin" / "nvcc")
    (tmp_path / "nvidia" / "cuda_nvcc" / "bin").mkdir(parents=True)  # the cu12 ptxas-only wheel's folder
    monkeypatch.delitem(sys.modules, "nvidia", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert toolchain._wheel_nvcc() == tmp_path / "nvidia" / "cu13" / "bin" / "nvcc"


# ---------------------------------------------------------------------------------- GPUs, host, doctor


def test_find_gpus_without_nvidia_smi(tmp_path: Path) -> None:
    env = {"PATH": str(tmp_path)}
    assert find_gpus(env) == []
    assert driver_cuda_version(env) is None


def test_find_gpus_when_nvidia_smi_fails(tmp_path: Path) -> None:
    write_script(tmp_path / "nvidia-smi", "echo 'NVIDIA-SMI has failed' >&2; exit 9\n")
    env = {"PATH": str(tmp_path)}
    assert find_gpus(env) == []
    assert driver_cuda_version(env) is None


def fake_smi(bin_dir: Path, csv: str, banner: str = SMI_BANNER) -> None:
    write_script(
        bin_dir / "nvidia-smi",
        f"if [ $# -gt 0 ]; then\n{echo(csv)}else\n{echo(banner)}fi\n",
    )


def test_find_gpus_with_fake_nvidia_smi(tmp_path: Path) -> None:
    fake_smi(tmp_path, "0, NVIDIA H200, 9.0, 580.159.03\n")
    env = {"PATH": str(tmp_path)}
    assert find_gpus(env) == [GpuInfo(0, "NVIDIA H200", "9.0", "580.159.03")]
    assert driver_cuda_version(env) == "13.0"


def test_find_gpus_honours_cuda_visible_devices(tmp_path: Path) -> None:
    """nvidia-smi lists every GPU; `tune` gives one worker to each GPU find_gpus returns, so a user's
    CUDA_VISIBLE_DEVICES=1 must leave it GPU 1 alone (it measured on both before)."""
    fake_smi(tmp_path, "0, NVIDIA H200, 9.0, 580.159.03\n1, NVIDIA H200, 9.0, 580.159.03\n")
    env = {"PATH": str(tmp_path)}
    assert [g.index for g in find_gpus(env)] == [0, 1]
    assert [g.index for g in find_gpus({**env, "CUDA_VISIBLE_DEVICES": "1"})] == [1]
    assert [g.index for g in find_gpus({**env, "CUDA_VISIBLE_DEVICES": "1,0"})] == [1, 0]
    assert find_gpus({**env, "CUDA_VISIBLE_DEVICES": ""}) == []
    assert [g.index for g in find_gpus({**env, "CUDA_VISIBLE_DEVICES": "0,7,1"})] == [0]  # stops at 7


def test_select_visible_takes_uuids_and_their_unique_prefixes() -> None:
    gpus = [GpuInfo(0, "H200", "9.0", "580"), GpuInfo(1, "H200", "9.0", "580")]
    uuids = {"GPU-aa11": 0, "GPU-ab22": 1}
    assert select_visible(gpus, "GPU-ab22", uuids) == [gpus[1]]
    assert select_visible(gpus, "GPU-ab,0", uuids) == [gpus[1], gpus[0]]
    assert select_visible(gpus, "GPU-a", uuids) == []  # ambiguous
    assert select_visible(gpus, "1,1", uuids) == [gpus[1]]  # a repeat ends the list, as in CUDA


def fake_host_compilers(bin_dir: Path) -> None:
    for cc in ("gcc", "g++"):
        write_script(bin_dir / cc, "echo 'gcc (Fake) 12.2.0'; echo 'Copyright'\n")


def test_host_compiler(tmp_path: Path) -> None:
    n = Nvcc(Path("/x/bin/nvcc"), "PATH", "13.0.88", Path("/x"))
    assert host_compiler(n, env={"PATH": str(tmp_path)}) is None
    write_script(tmp_path / "gcc", "echo 'gcc (Fake) 12.2.0'\n")
    assert host_compiler(n, env={"PATH": str(tmp_path)}) is None  # nvcc links with g++: missing
    fake_host_compilers(tmp_path)
    assert host_compiler(n, env={"PATH": str(tmp_path)}) == "gcc (Fake) 12.2.0"
    write_script(tmp_path / "my-cxx", "echo 'clang version 18'\n")
    env = {"PATH": str(tmp_path), "NVCC_CCBIN": "my-cxx"}
    assert host_compiler(n, env=env) == "clang version 18"


def test_doctor_all_good(tmp_path: Path, no_wheel: None) -> None:
    bin_dir = tmp_path / "bin"
    fake_nvcc(bin_dir / "nvcc")
    fake_host_compilers(bin_dir)
    fake_smi(bin_dir, "0, NVIDIA H200, 9.0, 580.159.03\n1, NVIDIA A100, 8.0, 580.159.03\n")
    report = doctor_report(env={"PATH": str(bin_dir)})
    json.dumps(report)  # JSON-able
    assert report["nvcc"]["source"] == "PATH" and report["nvcc"]["version"] == "13.0.88"
    assert report["host_compiler"] == "gcc (Fake) 12.2.0"
    assert report["driver_cuda_version"] == "13.0"
    assert [g["compute_capability"] for g in report["gpus"]] == ["9.0", "8.0"]
    failed = [c["what"] for c in report["checks"] if not c["ok"]]
    # The fake toolkit has no headers: that is the only failing check.
    assert len(failed) == 1 and failed[0].startswith("headers missing"), failed
    passed = [c["what"] for c in report["checks"] if c["ok"]]
    assert any("9.0: build with --arch sm_90a" in w for w in passed)
    assert any("8.0: build with --arch sm_80" in w for w in passed)
    assert any("driver supports up to CUDA 13.0" in w for w in passed)
    text = format_doctor(report)
    assert "13.0.88" in text and "[ok]" in text and "NVIDIA H200" in text


def test_doctor_flags_problems(tmp_path: Path, no_wheel: None) -> None:
    bin_dir = tmp_path / "bin"
    fake_nvcc(bin_dir / "nvcc", release="13.1", build="13.1.20")
    fake_smi(bin_dir, "0, Tesla T4, 7.5, 580.159.03\n1, Jetson Orin, 8.7, 580.159.03\n")
    report = doctor_report(env={"PATH": str(bin_dir)})
    failed = [c["what"] for c in report["checks"] if not c["ok"]]
    assert any("newer than the driver's CUDA 13.0" in w for w in failed)
    assert any("host compiler" in w for w in failed)
    assert any("7.5" in w and "does not target" in w for w in failed)
    assert any("8.7" in w and "try --arch sm_80" in w for w in failed)

    fake_nvcc(bin_dir / "nvcc", release="14.0", build="14.0.1")
    failed = [c["what"] for c in doctor_report(env={"PATH": str(bin_dir)})["checks"] if not c["ok"]]
    assert any("will not run" in w for w in failed)


def test_doctor_without_nvcc_or_gpu(tmp_path: Path, no_wheel: None) -> None:
    report = doctor_report(env={"PATH": str(tmp_path)})
    json.dumps(report)
    assert "no nvcc found" in report["nvcc"]["error"]
    assert report["gpus"] == [] and report["driver_cuda_version"] is None
    assert all(not c["ok"] for c in report["checks"])
    assert any("no NVIDIA GPU" in c["what"] for c in report["checks"])
    text = format_doctor(report)
    assert "nvcc:           not found" in text and "[FAIL]" in text


# ------------------------------------------------------------------- slow: real build with the wheels

KERNEL = r"""
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cstdio>

__global__ void add(const __half* a, const __nv_bfloat16* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = __half2float(a[i]) + __bfloat162float(b[i]);
}

extern "C" int probe(void) {
    int count = 0;
    return (int)cudaGetDeviceCount(&count);  // any cudaError_t: no GPU is fine, we only test the build
}

#ifndef AS_LIBRARY
int main() { std::printf("cuda status %d\n", probe()); return 0; }
#endif
"""


def _wheels_installed() -> bool:
    # Deliberately not toolchain._wheel_nvcc(): a bug there must fail the test, not skip it.
    try:
        importlib.metadata.distribution("nvidia-cuda-nvcc")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


@pytest.mark.slow
def test_wheels_build_without_system_cuda(tmp_path: Path) -> None:
    if not _wheels_installed():
        pytest.skip("the CUDA wheels (nvidia-cuda-nvcc==13.0.* ...) are not installed in this Python")
    # No CUDA variables; PATH with the system basics only (no /usr/local/bin, no /usr/local/cuda*/bin).
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", str(tmp_path)), "TMPDIR": str(tmp_path)}
    nvcc = find_nvcc(env=env)
    assert nvcc.source == "wheel"
    assert nvcc.major_minor == (13, 0)
    assert (nvcc.cuda_root / "include" / "cuda_runtime.h").is_file()

    src = tmp_path / "probe.cu"
    src.write_text(KERNEL)
    for gencode, tag in (("arch=compute_90a,code=sm_90a", "sm90a"), ("arch=compute_80,code=sm_80", "sm80")):
        exe = tmp_path / f"probe_{tag}"
        lib = tmp_path / f"libprobe_{tag}.so"
        builds = [
            [f"-gencode={gencode}", "-o", str(exe), str(src)],
            [f"-gencode={gencode}", "-DAS_LIBRARY", "-shared", "-Xcompiler", "-fPIC"]
            + ["-o", str(lib), str(src)],
        ]
        for flags in builds:
            proc = subprocess.run(
                nvcc.compile_prefix() + flags,
                env=nvcc.run_env(env),
                cwd=tmp_path,
                capture_output=True,
                text=True,
                timeout=600,
                check=False,
            )
            assert proc.returncode == 0, f"{' '.join(flags)}:\n{proc.stdout}\n{proc.stderr}"
        assert exe.is_file() and lib.is_file()
        # cudart is linked statically: the executable starts with no CUDA libraries on the loader path.
        run = subprocess.run([str(exe)], env=env, capture_output=True, text=True, timeout=60, check=False)
        assert run.returncode == 0 and run.stdout.startswith("cuda status"), run.stdout + run.stderr
