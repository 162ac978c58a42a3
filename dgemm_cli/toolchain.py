"""Find the CUDA toolchain (nvcc, host compiler) and the GPUs; `deepgemm doctor` reports on both.

nvcc is searched in a fixed order, first hit wins:

    --nvcc PATH, $DEEPGEMM_NVCC, $CUDA_HOME/bin/nvcc, $CUDA_PATH/bin/nvcc,
    the CUDA wheels installed in this Python (nvidia/cu13/bin/nvcc), nvcc on PATH.

A path the user named (--nvcc or one of the variables) that does not hold an executable nvcc is an error,
never a silent fall-through: building with a different compiler than the one asked for is worse than
stopping.

The CUDA 13 wheels (nvidia-cuda-nvcc, -nvvm, -cuda-runtime, -cuda-crt, -cuda-cccl) unpack into one
folder, site-packages/nvidia/cu13/{bin,nvvm,include,lib}, and their nvcc.profile finds cicc, ptxas and the
headers by itself. The one gap: with no targets/<arch> folder, nvcc.profile links from lib64/ while the
wheels ship lib/, so linking (libcudart_static.a, libcudadevrt.a) needs an extra -L <root>/lib.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from .arch import ARCHES
from .errors import ToolchainError

# What `pip install deepgemm` brings (keep in step with pyproject.toml); quoted in error messages.
WHEEL_REQUIREMENTS = (
    "nvidia-cuda-nvcc==13.0.*",
    "nvidia-nvvm==13.0.*",
    "nvidia-cuda-runtime==13.0.*",
    "nvidia-cuda-crt==13.0.*",
    "nvidia-cuda-cccl==13.0.*",
)
_PIP_WHEELS = "pip install " + " ".join(f"'{r}'" for r in WHEEL_REQUIREMENTS)

# Compute capability ("9.0") -> the --arch deepgemm builds for it ("sm_90a"), from the arch table.
ARCH_FOR_COMPUTE_CAPABILITY: dict[str, str] = {f"{a.cc[0]}.{a.cc[1]}": a.name for a in ARCHES.values()}

# Headers every generated kernel includes; nv/target comes from nvidia-cuda-cccl and cuda_fp16.h needs it.
_REQUIRED_HEADERS = ("cuda_runtime.h", "cuda_fp16.h", "cuda_bf16.h", "nv/target")

_PROBE_TIMEOUT_S = 60  # nvcc --version is instant; a hung network filesystem is not
_SMI_TIMEOUT_S = 30  # nvidia-smi can hang for a long time on a wedged driver


@dataclass(frozen=True)
class Nvcc:
    """A usable nvcc and what a build must add to its command line / environment to use it."""

    path: Path  # the nvcc executable
    # Which rule found it: "--nvcc", "$DEEPGEMM_NVCC", "$CUDA_HOME", "$CUDA_PATH", "wheel" or "PATH".
    source: str
    version: str  # e.g. "13.0.88"
    cuda_root: Path  # toolkit root (include/cuda_runtime.h); for the wheels, site-packages/nvidia/cu13
    include_dirs: tuple[Path, ...] = ()  # extra -I the compile needs
    library_dirs: tuple[Path, ...] = ()  # extra -L the link needs (the wheels: <root>/lib)
    env: tuple[tuple[str, str], ...] = ()  # extra environment variables nvcc needs

    def compile_prefix(self) -> list[str]:
        """The start of every nvcc command line: the executable, then the extra -I and -L."""
        return [
            str(self.path),
            *(f"-I{d}" for d in self.include_dirs),
            *(f"-L{d}" for d in self.library_dirs),
        ]

    def run_env(self, base: Mapping[str, str]) -> dict[str, str]:
        """`base` plus the variables this nvcc needs (they win over base)."""
        return {**base, **dict(self.env)}

    @property
    def major_minor(self) -> tuple[int, int]:
        major, minor = self.version.split(".")[:2]
        return int(major), int(minor)


@dataclass(frozen=True)
class GpuInfo:
    index: int
    name: str
    compute_capability: str  # "9.0"
    driver_version: str  # "580.159.03"


# --------------------------------------------------------------------------------------------- parsing


_NVCC_RELEASE = re.compile(r"release (\d+)\.(\d+), V(\d+(?:\.\d+)+)")
_NVCC_RELEASE_SHORT = re.compile(r"release (\d+)\.(\d+)")


def parse_nvcc_version(text: str) -> str | None:
    """The full version from `nvcc --version` ("release 13.0, V13.0.88" -> "13.0.88"), else None."""
    m = _NVCC_RELEASE.search(text)
    if m:
        return m.group(3)
    m = _NVCC_RELEASE_SHORT.search(text)  # no V-number (never seen, but cheap to accept)
    return f"{m.group(1)}.{m.group(2)}" if m else None


def parse_gpu_csv(text: str) -> list[GpuInfo]:
    """Parse `nvidia-smi --query-gpu=index,name,compute_cap,driver_version --format=csv,noheader`.

    Lines that do not parse (warnings, "[N/A]" fields) are skipped.
    """
    gpus: list[GpuInfo] = []
    for line in text.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) < 4:
            continue
        # Only the name could hold a comma: take the index from the front, the rest from the back.
        index, name, cc, driver = fields[0], ", ".join(fields[1:-2]), fields[-2], fields[-1]
        if not index.isdigit() or not re.fullmatch(r"\d+\.\d+", cc):
            continue
        gpus.append(GpuInfo(index=int(index), name=name, compute_capability=cc, driver_version=driver))
    return gpus


def parse_driver_cuda_version(text: str) -> str | None:
    """The CUDA version the driver supports, from the `nvidia-smi` banner ("CUDA Version: 13.0")."""
    m = re.search(r"CUDA Version:\s*(\d+\.\d+)", text)
    return m.group(1) if m else None


def _parse_nvcc_here(text: str) -> Path | None:
    """nvcc's own bin folder from `nvcc --dryrun` output ("#$ _HERE_=/usr/local/cuda-13.0/bin")."""
    m = re.search(r"^#\$ _HERE_=(.+)$", text, re.MULTILINE)
    return Path(m.group(1).strip()) if m else None


# ------------------------------------------------------------------------------------------ nvcc search


def _wheel_nvcc() -> Path | None:
    """nvcc from the NVIDIA CUDA wheels installed in the running Python, or None.

    The wheels put it at <site-packages>/nvidia/cu<major>/bin/nvcc, inside the `nvidia` namespace package;
    its search locations follow sys.path order, and within one location the highest CUDA major wins.
    """
    spec = importlib.util.find_spec("nvidia")
    if spec is None or spec.submodule_search_locations is None:
        return None
    for location in spec.submodule_search_locations:
        found = [p for p in Path(location).glob("cu*/bin/nvcc") if p.parent.parent.name[2:].isdigit()]
        found.sort(key=lambda p: int(p.parent.parent.name[2:]), reverse=True)
        for nvcc in found:
            if _is_executable(nvcc):
                return nvcc
    return None


def _is_executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _check_named(path: Path, what: str, fix: str) -> Path:
    """`path`, named by the user through `what`, must be an executable file: else a ToolchainError."""
    if not path.exists():
        raise ToolchainError(f"{what}: {path} does not exist. Fix: {fix}")
    if path.is_dir():
        raise ToolchainError(f"{what}: {path} is a folder, not the nvcc executable. Fix: {fix}")
    if not os.access(path, os.X_OK):
        raise ToolchainError(f"{what}: {path} is not executable. Fix: chmod +x {path}, or {fix}")
    return path


def _candidates(explicit: str | None, env: Mapping[str, str]) -> Iterator[tuple[str, Path | None, str]]:
    """(source, nvcc path or None, what was looked at) for each rule, in search order.

    Raises ToolchainError as soon as a rule the user set up points at nothing usable.
    """
    if explicit:
        path = Path(explicit).expanduser()
        if os.sep not in explicit and not path.exists():  # a bare command name: look it up on PATH
            hit = shutil.which(explicit, path=env.get("PATH", ""))
            path = Path(hit) if hit else path
        fix = (
            "pass the path of an nvcc executable (e.g. /usr/local/cuda/bin/nvcc), or drop --nvcc to search "
            "$DEEPGEMM_NVCC, $CUDA_HOME, $CUDA_PATH, the CUDA wheels and PATH"
        )
        yield "--nvcc", _check_named(path, f"--nvcc {explicit}", fix), f"--nvcc {explicit}"
    else:
        yield "--nvcc", None, "--nvcc: not given"

    value = env.get("DEEPGEMM_NVCC", "")
    if value:
        fix = (
            "set DEEPGEMM_NVCC to an nvcc executable, or unset it to search "
            "$CUDA_HOME, $CUDA_PATH, the CUDA wheels and PATH"
        )
        yield "$DEEPGEMM_NVCC", _check_named(Path(value).expanduser(), "$DEEPGEMM_NVCC", fix), value
    else:
        yield "$DEEPGEMM_NVCC", None, "$DEEPGEMM_NVCC: not set"

    for var in ("CUDA_HOME", "CUDA_PATH"):
        value = env.get(var, "")
        if value:
            fix = (
                f"point {var} at a CUDA toolkit (the folder holding bin/nvcc), "
                "or unset it to use the CUDA wheels or the nvcc on PATH"
            )
            path = Path(value).expanduser() / "bin" / "nvcc"
            yield f"${var}", _check_named(path, f"${var}={value}", fix), f"${var}/bin/nvcc"
        else:
            yield f"${var}", None, f"${var}: not set"

    wheel = _wheel_nvcc()
    where = f"CUDA wheels in this Python ({sys.executable})"
    yield "wheel", wheel, where if wheel else f"{where}: nvidia-cuda-nvcc is not installed"

    search_path = env.get("PATH", "")
    hit = shutil.which("nvcc", path=search_path)
    yield "PATH", Path(hit) if hit else None, f"nvcc on PATH ({search_path or 'PATH is empty'}): not found"


def find_nvcc(explicit: str | None = None, env: Mapping[str, str] = os.environ) -> Nvcc:
    """Find nvcc (see the module docstring for the order), run it once for its version, and return it."""
    tried: list[str] = []
    for source, path, looked_at in _candidates(explicit, env):
        if path is not None:
            return _probe(path, source, env)
        tried.append(looked_at)
    places = "\n".join(f"  {t}" for t in tried)
    raise ToolchainError(
        f"no nvcc found. Tried, in order:\n{places}\n"
        "Fix: `pip install deepgemm` brings the CUDA 13.0 compiler wheels (into an existing environment: "
        f"{_PIP_WHEELS}); or pass --nvcc PATH, or set DEEPGEMM_NVCC or CUDA_HOME to a CUDA toolkit."
    )


def _run(cmd: list[str], env: Mapping[str, str], timeout: float) -> subprocess.CompletedProcess[str] | None:
    """Run `cmd`, capturing stdout and stderr; None if it cannot be started or times out."""
    try:
        return subprocess.run(
            cmd, env=dict(env), capture_output=True, text=True, timeout=timeout, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None


def _probe(path: Path, source: str, env: Mapping[str, str]) -> Nvcc:
    """Turn an nvcc path into an Nvcc: its version, its toolkit root and the flags that root needs."""
    proc = _run([str(path), "--version"], env, _PROBE_TIMEOUT_S)
    if proc is None:
        raise ToolchainError(
            f"{path} (found via {source}) could not be run: `{path} --version` failed to start or hung. "
            "Fix: check that it is a working nvcc for this machine, or name another with --nvcc."
        )
    output = proc.stdout + proc.stderr
    version = parse_nvcc_version(output) if proc.returncode == 0 else None
    if version is None:
        raise ToolchainError(
            f"{path} (found via {source}): `{path} --version` exited {proc.returncode} without a "
            f"'release X.Y, VX.Y.Z' line; it printed:\n{output.strip()[:2000]}\n"
            "Fix: point deepgemm at a real nvcc with --nvcc or DEEPGEMM_NVCC."
        )
    root = _cuda_root(path, env)
    include_dirs, library_dirs = _layout_dirs(root)
    return Nvcc(
        path=path,
        source=source,
        version=version,
        cuda_root=root,
        include_dirs=include_dirs,
        library_dirs=library_dirs,
    )


def _cuda_root(nvcc: Path, env: Mapping[str, str]) -> Path:
    """The toolkit root: <nvcc>/../.. after resolving symlinks, or, when that holds no headers (a wrapper
    script such as /usr/local/bin/nvcc that execs the real one), the folder nvcc reports as its own."""
    guess = nvcc.resolve().parent.parent
    if _find_header(guess, "cuda_runtime.h") is not None:
        return guess
    # --dryrun prints nvcc.profile's variables (on stderr) without running anything.
    proc = _run([str(nvcc), "--dryrun", "-E", "-x", "cu", os.devnull], env, _PROBE_TIMEOUT_S)
    here = _parse_nvcc_here(proc.stdout + proc.stderr) if proc is not None else None
    return here.resolve().parent if here is not None else guess


def _include_roots(root: Path) -> list[Path]:
    """Where a toolkit keeps headers: include/, include/cccl/ (CUDA 13), and targets/<arch>/include."""
    roots: list[Path] = []
    for inc in [root / "include", *sorted(root.glob("targets/*/include"))]:
        roots += [inc, inc / "cccl"]
    return roots


def _find_header(root: Path, name: str) -> Path | None:
    for inc in _include_roots(root):
        if (inc / name).is_file():
            return inc / name
    return None


def _layout_dirs(root: Path) -> tuple[tuple[Path, ...], tuple[Path, ...]]:
    """Extra (-I, -L) folders nvcc's own nvcc.profile misses for the toolkit at `root`.

    nvcc.profile links from <root>/targets/<arch>/lib when targets/ exists, else from <root>/lib64. The
    CUDA wheels have neither: their libraries are in <root>/lib. Headers need nothing: without targets/,
    the profile's -I <root>/include and -isystem <root>/include/cccl are exactly the wheels' layout.
    """
    lib = root / "lib"
    wheel_like = not (root / "targets").is_dir() and not (root / "lib64").is_dir()
    if wheel_like and (lib / "libcudart_static.a").is_file():
        return (), (lib,)
    return (), ()


# ------------------------------------------------------------------------------------ host compiler


def _host_compilers(env: Mapping[str, str]) -> list[str]:
    """What nvcc will call on the host: $NVCC_CCBIN if set, else gcc (compiles) and g++ (links)."""
    ccbin = env.get("NVCC_CCBIN", "")
    return [ccbin] if ccbin else ["gcc", "g++"]


def _missing_host_compilers(env: Mapping[str, str]) -> list[str]:
    return [c for c in _host_compilers(env) if shutil.which(c, path=env.get("PATH", "")) is None]


def host_compiler(nvcc: Nvcc, env: Mapping[str, str] = os.environ) -> str | None:
    """First line of the host compiler's `--version`, as nvcc would find it; None if it (or, without
    $NVCC_CCBIN, either of gcc / g++) is missing or will not run."""
    run_env = nvcc.run_env(env)
    return _host_compiler_version(run_env)


def _host_compiler_version(env: Mapping[str, str]) -> str | None:
    if _missing_host_compilers(env):
        return None
    first = shutil.which(_host_compilers(env)[0], path=env.get("PATH", ""))
    assert first is not None  # checked just above
    proc = _run([first, "--version"], env, _PROBE_TIMEOUT_S)
    if proc is None or proc.returncode != 0 or not proc.stdout.strip():
        return None
    return proc.stdout.strip().splitlines()[0]


# -------------------------------------------------------------------------------------------- GPUs


def _nvidia_smi(args: list[str], env: Mapping[str, str]) -> str | None:
    smi = shutil.which("nvidia-smi", path=env.get("PATH", ""))
    if smi is None:
        return None
    proc = _run([smi, *args], env, _SMI_TIMEOUT_S)
    if proc is None or proc.returncode != 0:
        return None
    return proc.stdout


def find_gpus(env: Mapping[str, str] = os.environ) -> list[GpuInfo]:
    """The visible NVIDIA GPUs, from nvidia-smi; [] when nvidia-smi is missing or fails. nvidia-smi lists
    every GPU of the machine: CUDA_VISIBLE_DEVICES, where set, narrows them as the CUDA runtime would."""
    out = _nvidia_smi(["--query-gpu=index,name,compute_cap,driver_version", "--format=csv,noheader"], env)
    gpus = parse_gpu_csv(out) if out is not None else []
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is None or not gpus:
        return gpus
    uuids = {}
    if any(not x.strip().isdigit() for x in visible.split(",") if x.strip()):
        listed = _nvidia_smi(["--query-gpu=index,uuid", "--format=csv,noheader"], env) or ""
        uuids = {u.strip(): int(i) for i, u in (ln.split(",", 1) for ln in listed.splitlines() if "," in ln)
                 if i.strip().isdigit()}
    return select_visible(gpus, visible, uuids)


def select_visible(gpus: list[GpuInfo], visible: str, uuids: Mapping[str, int]) -> list[GpuInfo]:
    """The GPUs CUDA_VISIBLE_DEVICES=`visible` leaves, in its order: indices, or UUIDs (a unique prefix
    will do); like the CUDA runtime, the list ends at the first entry that names no GPU."""
    by_index = {g.index: g for g in gpus}
    out: list[GpuInfo] = []
    for entry in (x.strip() for x in visible.split(",")):
        if entry.isdigit():
            gpu = by_index.get(int(entry))
        else:
            hits = [i for u, i in uuids.items() if entry and u.startswith(entry)]
            gpu = by_index.get(hits[0]) if len(hits) == 1 else None
        if gpu is None or gpu in out:
            break
        out.append(gpu)
    return out


def driver_cuda_version(env: Mapping[str, str] = os.environ) -> str | None:
    """The newest CUDA the installed driver supports ("13.0"), or None without a working driver."""
    out = _nvidia_smi([], env)
    return parse_driver_cuda_version(out) if out is not None else None


# ------------------------------------------------------------------------------------------ doctor


def _check(ok: bool, what: str) -> dict[str, object]:
    return {"ok": ok, "what": what}


def _driver_check(nvcc: Nvcc, driver: str) -> dict[str, object]:
    toolkit = nvcc.major_minor
    drv_major, drv_minor = (int(x) for x in driver.split("."))
    pin = f"use a CUDA {driver} nvcc (e.g. the wheels pinned to {driver}.*) or upgrade the driver"
    if toolkit <= (drv_major, drv_minor):
        return _check(True, f"nvcc is CUDA {nvcc.version}, the driver supports up to CUDA {driver}: ok")
    if toolkit[0] > drv_major:
        return _check(
            False,
            f"nvcc is CUDA {nvcc.version} but the driver supports only CUDA {driver}: what it builds will "
            f"not run on this machine (cudaErrorInsufficientDriver). Fix: {pin}",
        )
    return _check(
        False,
        f"nvcc is CUDA {nvcc.version}, newer than the driver's CUDA {driver}: built kernels run only "
        "through minor-version compatibility (SASS-only builds load; PTX will not JIT, newer runtime "
        f"APIs fail). Fix: {pin}",
    )


def _gpu_check(gpu: GpuInfo) -> dict[str, object]:
    label = f"GPU {gpu.index} ({gpu.name}) has compute capability {gpu.compute_capability}"
    arch = ARCH_FOR_COMPUTE_CAPABILITY.get(gpu.compute_capability)
    if arch is not None:
        return _check(True, f"{label}: build with --arch {arch}")
    targets = ", ".join(f"{cc} ({a})" for cc, a in ARCH_FOR_COMPUTE_CAPABILITY.items())
    note = ""
    if gpu.compute_capability.startswith("8."):
        # SASS for X.y runs on X.z with z >= y, so plain sm_80 code runs on any 8.x (not the 'a' variants).
        note = " sm_80 code should run on it (same major version), untested: try --arch sm_80."
    return _check(False, f"{label}, which deepgemm does not target; it targets {targets}.{note}")


def doctor_report(explicit_nvcc: str | None = None, env: Mapping[str, str] = os.environ) -> dict:
    """Everything `deepgemm doctor` shows, as a JSON-able dict (see format_doctor for the text form)."""
    checks: list[dict[str, object]] = []
    nvcc: Nvcc | None
    try:
        nvcc = find_nvcc(explicit_nvcc, env)
    except ToolchainError as e:
        nvcc = None
        nvcc_part: dict[str, object] = {"error": str(e)}
        checks.append(_check(False, f"nvcc not usable: {e}"))
    else:
        nvcc_part = {
            "path": str(nvcc.path),
            "source": nvcc.source,
            "version": nvcc.version,
            "cuda_root": str(nvcc.cuda_root),
            "include_dirs": [str(d) for d in nvcc.include_dirs],
            "library_dirs": [str(d) for d in nvcc.library_dirs],
        }
        checks.append(_check(True, f"nvcc {nvcc.version} at {nvcc.path} (found via {nvcc.source})"))
        missing = [h for h in _REQUIRED_HEADERS if _find_header(nvcc.cuda_root, h) is None]
        if missing:
            checks.append(
                _check(
                    False,
                    f"headers missing under {nvcc.cuda_root}: {', '.join(missing)} (nv/target comes from "
                    f"nvidia-cuda-cccl). Fix: {_PIP_WHEELS}, or use a complete CUDA toolkit",
                )
            )
        else:
            checks.append(_check(True, f"CUDA headers found under {nvcc.cuda_root}"))

    host_env = nvcc.run_env(env) if nvcc is not None else dict(env)
    compiler = _host_compiler_version(host_env)
    if compiler is not None:
        checks.append(_check(True, f"host compiler: {compiler}"))
    else:
        missing = _missing_host_compilers(host_env) or _host_compilers(host_env)[:1]
        checks.append(
            _check(
                False,
                f"host compiler {' / '.join(missing)} not found on PATH or not working: nvcc needs one. "
                "Fix: install g++ (e.g. apt install g++), or set NVCC_CCBIN to a supported C++ compiler",
            )
        )

    gpus = find_gpus(env)
    driver = driver_cuda_version(env)
    if nvcc is not None and driver is not None:
        checks.append(_driver_check(nvcc, driver))
    if not gpus:
        # Not a broken setup (build machines have no GPU), so shown as a note; still ok=False for scripts.
        no_gpu = _check(
            False,
            "no NVIDIA GPU visible (nvidia-smi missing or failing): `deepgemm build` works, "
            "verify and bench need a GPU",
        )
        checks.append({**no_gpu, "note": True})
    checks.extend(_gpu_check(g) for g in gpus)

    return {
        "nvcc": nvcc_part,
        "host_compiler": compiler,
        "gpus": [asdict(g) for g in gpus],
        "driver_cuda_version": driver,
        "checks": checks,
    }


def format_doctor(report: dict) -> str:
    """The report as aligned text, findings first, then one [ok]/[FAIL]/[note] line per check."""
    lines: list[str] = []
    nv = report["nvcc"]
    if "error" in nv:
        lines.append("nvcc:           not found")
    else:
        lines.append(f"nvcc:           {nv['path']} (CUDA {nv['version']}, via {nv['source']})")
        lines.append(f"CUDA root:      {nv['cuda_root']}")
        extra = [f"-I{d}" for d in nv.get("include_dirs", [])]
        extra += [f"-L{d}" for d in nv.get("library_dirs", [])]
        if extra:
            lines.append(f"extra flags:    {' '.join(extra)}")
    lines.append(f"host compiler:  {report['host_compiler'] or 'not found'}")
    driver = report["driver_cuda_version"]
    lines.append(f"driver:         {'supports CUDA ' + driver if driver else 'none (no nvidia-smi)'}")
    for g in report["gpus"]:
        label = f"GPU {g['index']}:"
        lines.append(
            f"{label:<16}{g['name']}, compute capability {g['compute_capability']}, "
            f"driver {g['driver_version']}"
        )
    lines.append("checks:")
    for c in report["checks"]:
        mark = "[ok]  " if c["ok"] else "[note]" if c.get("note") else "[FAIL]"
        # Multi-line messages (the not-found list) are indented under their mark.
        text = str(c["what"]).replace("\n", "\n         ")
        lines.append(f"  {mark} {text}")
    return "\n".join(lines)
