"""Stage 6: drive a built harness on the GPU (verify / bench) and parse what it reports.

The harness prints one JSON object on stdout; its exit code says pass (0), fail (1), bad usage
(2), no GPU (3) or a CUDA error (4).

A kernel whose spec sizes a row letter at run time (`{min, max}`) takes that size as an argument; its
harness runs a list of sizes (`--m`, or its own default list) and reports each (templates/dg_harness.cuh
says how).
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from dgemm_cli.errors import DeepGemmError, NoGpuError
from dgemm_cli.records import BenchReport, PlanRecord, RunTimeRange, VerifyReport, harness_report

HARNESS_TIMEOUT_S = 900
HARNESS_NO_GPU = 3


@dataclass(frozen=True)
class HarnessRun:
    directory: Path
    arch: str
    exit_code: int
    report: VerifyReport | BenchReport  # parsed from the harness's JSON; `error` set when it could not run
    stderr: str


def find_cublas(env: dict[str, str] | None = None) -> str | None:
    """Where libcublas lives, for the bench baseline: $DEEPGEMM_CUBLAS, the CUDA toolkit, or the
    nvidia-cublas wheel in this Python (PyTorch brings one). None: the harness tries the loader's path."""
    env = dict(os.environ if env is None else env)
    if env.get("DEEPGEMM_CUBLAS"):
        return env["DEEPGEMM_CUBLAS"]
    roots = [env.get("CUDA_HOME"), env.get("CUDA_PATH"), "/usr/local/cuda"]
    patterns = [f"{r}/lib64/libcublas.so*" for r in roots if r] + [f"{r}/lib/libcublas.so*" for r in roots if r]
    patterns += [f"{p}/nvidia/*/lib/libcublas.so*" for p in sys.path if p]
    for pattern in patterns:
        hits = sorted(h for h in glob.glob(pattern) if "Lt" not in Path(h).name)
        if hits:
            return hits[-1]
    return None


def harness_env() -> dict[str, str]:
    """The environment harnesses run in: ours plus where cuBLAS is. Built once per command (the
    search globs sys.path)."""
    env = dict(os.environ)
    cublas = find_cublas(env)
    if cublas:
        env["DEEPGEMM_CUBLAS"] = cublas
    return env


def parse_sizes(text: str) -> tuple[int, ...]:
    """`--m 1,8,64` -> (1, 8, 64)."""
    sizes = []
    for item in text.split(","):
        try:
            sizes.append(int(item.strip()))
        except ValueError:
            raise DeepGemmError(f"--m {text}: '{item}' is not a whole number. Fix: give comma-separated sizes, "
                                "e.g. --m 1,8,64") from None
    return tuple(sizes)


def size_args(plans: dict[Path, PlanRecord],
              sizes: tuple[int, ...]) -> tuple[dict[Path, list[str]], dict[Path, list[int]]]:
    """For each kernel (its directory -> its plan.json), the harness arguments that run `sizes` of its run-time
    letter, and the sizes left out for it. A fixed-size kernel takes none; with no sizes asked for, every kernel runs
    the harness's default list. A kernel runs the sizes inside its range and leaves the others out, so that one list
    serves kernels of different ranges; a size inside no kernel's range, or a kernel with none of the sizes, is an
    error (DeepGemmError: a typo more likely than a wish)."""
    args: dict[Path, list[str]] = {}
    left_out: dict[Path, list[int]] = {}
    ranges: dict[Path, RunTimeRange] = {d: plan.run_time for d, plan in plans.items() if plan.run_time is not None}
    listed = ",".join(map(str, sizes))
    for m in sizes:
        if ranges and not any(m in r for r in ranges.values()):
            if len(ranges) == 1:
                ((d, r),) = ranges.items()
                raise DeepGemmError(f"--m {listed}: {m} is outside {d.name}'s run-time range {r.lo}..{r.hi} of "
                                    f"'{r.letter}'. Fix: give sizes in {r.lo}..{r.hi}")
            every = ", ".join(f"{d.name} {r.lo}..{r.hi} of '{r.letter}'" for d, r in ranges.items())
            raise DeepGemmError(f"--m {listed}: {m} is outside the run-time range of every kernel given ({every}). "
                                "Fix: give sizes inside at least one of them")
    for d in plans:
        if d not in ranges or not sizes:
            args[d] = []
            continue
        r = ranges[d]
        inside = [m for m in sizes if m in r]
        if not inside:
            raise DeepGemmError(f"--m {listed}: none is inside {d.name}'s run-time range {r.lo}..{r.hi} of "
                                f"'{r.letter}'. Fix: add sizes in {r.lo}..{r.hi}, or run {d.name} apart")
        args[d] = ["--m", ",".join(map(str, inside))]
        left_out[d] = [m for m in sizes if m not in inside]
    return args, left_out


def host_harness(directory: Path, library: Path) -> tuple[list[str], list[str]]:
    """A host folder's harness (arch cpu): this Python running dgemm_cli.host_harness on its lib<name>.so, as the
    command line before and after the harness's own arguments."""
    return [sys.executable, "-m", "dgemm_cli.host_harness"], ["--dir", str(directory), "--lib", str(library)]


def run_harness(directory: Path, harness: Path | tuple[list[str], list[str]], arch: str, args: list[str],
                env: dict[str, str], timeout: float = HARNESS_TIMEOUT_S) -> HarnessRun:
    """Run the harness with `args` (the command, "verify" or "bench", first) and parse its report; a harness that
    printed none gets a report whose `error` says why. `harness`: a GPU folder's harness binary, or a host folder's
    command line around the arguments (host_harness)."""
    failed = VerifyReport.failed if args[0] == "verify" else BenchReport.failed
    before, after = ([str(harness)], []) if isinstance(harness, Path) else harness
    try:
        proc = subprocess.run([*before, *args, *after], capture_output=True, text=True, env=env,
                              timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return HarnessRun(directory, arch, 124, failed(f"harness timed out after {timeout:g} s"), "")
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip().startswith("{")]
    if not lines:
        why = proc.stderr.strip().splitlines()[-1:] or [f"exit code {proc.returncode}, no output"]
        return HarnessRun(directory, arch, proc.returncode or 4, failed(why[0]), proc.stderr)
    try:
        data = json.loads(lines[-1])
    except json.JSONDecodeError as exc:
        raise DeepGemmError(f"{harness}: printed invalid JSON ({exc}); rebuild with `deepgemm build`") from None
    report = harness_report(args[0], data, str(harness))
    if proc.returncode == HARNESS_NO_GPU:
        raise NoGpuError(f"no CUDA GPU: {report.error or 'none visible'} (build works without one)")
    return HarnessRun(directory, arch, proc.returncode, report, proc.stderr)
