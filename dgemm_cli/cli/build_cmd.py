"""`deepgemm build`: compile generated folders, refusing those the target arch cannot run."""

from __future__ import annotations

import json
import sys
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import click

from dgemm_cli.arch import get_arch
from dgemm_cli.build import BuildResult, build, build_dir_for, read_plan, unbuildable_reason
from dgemm_cli.build_host import HOST_ARCH, build_host, find_cxx
from dgemm_cli.cli.common import ARCH_CHOICE, fail, generated_dirs
from dgemm_cli.errors import EXIT_FAILED, EXIT_OK, DeepGemmError
from dgemm_cli.records import RecordError
from dgemm_cli.toolchain import find_nvcc


@click.command(name="build")
@click.argument("dirs", nargs=-1, type=click.Path(path_type=Path))
@click.option("--arch", type=ARCH_CHOICE, help="Target arch (default: the one each directory was generated for).")
@click.option("--nvcc", "nvcc_path",
              help="nvcc to use (else $DEEPGEMM_NVCC, $CUDA_HOME, $CUDA_PATH, the CUDA wheels, PATH).")
@click.option("-j", "--jobs", type=click.IntRange(1, 64), default=2, show_default=True, help="Parallel builds.")
@click.option("--cxx", "cxx_path", help="Host C++ compiler for cpu folders (else $CXX, g++, clang++).")
@click.option("--lib-only", is_flag=True,
              help="Build only lib<name>.a and lib<name>.so (what you vendor), not the verify/bench harness.")
@click.option("--force", is_flag=True, help="Rebuild even when sources, nvcc and flags are unchanged.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of build results.")
def build_cmd(dirs: tuple[Path, ...], arch: str | None, nvcc_path: str | None, cxx_path: str | None, jobs: int,
              lib_only: bool, force: bool, as_json: bool) -> None:
    """Compile generated directories (default: all under ./generated) with nvcc, or for the host (arch cpu) with
    the host C++ compiler.

    Writes <dir>/build/<arch>/lib<name>.a, lib<name>.so and <name>_harness (--lib-only: the two
    libraries), and prints ptxas's registers / stack / spill bytes for every kernel. Spills are
    reported loudly.

    A directory planned with instructions the target arch lacks (a dependent launch, clusters, TMA,
    wgmma) or more shared memory than it has is refused with one line saying so and how to
    regenerate; the others still build.

    A directory whose sources, nvcc and flags are unchanged since its last successful build for
    that arch (build/<arch>/build-stamp.json) is not compiled again: it says `cached` and reports
    the registers and spills of that build. --force rebuilds."""
    try:
        directories = generated_dirs(dirs)
    except DeepGemmError as err:
        fail(err)
    work, refused = [], []
    for d in directories:
        try:
            plan = read_plan(d)
        except RecordError as err:  # a folder from another deepgemm: refused, the others still build
            refused.append({"name": d.name, "directory": str(d), "arch": arch, "ok": False, "refused": str(err)})
            continue
        target = arch or plan.arch
        why = unbuildable_reason(plan, get_arch(target))
        if why:
            refused.append({"name": plan.name, "directory": str(d), "arch": target, "ok": False,
                            "refused": f"{d}: planned for {plan.arch}, and {why}. Fix: regenerate it for that "
                                       f"arch: `deepgemm gen SPEC --arch {target}`"})
        else:
            work.append((d, target))
    # Each compiler is looked for only when a folder needs it: host folders build without nvcc.
    try:
        nvcc = find_nvcc(nvcc_path) if any(t != HOST_ARCH for _, t in work) else None
        cxx = find_cxx(cxx_path) if any(t == HOST_ARCH for _, t in work) else None
    except DeepGemmError as err:
        fail(err)
    if not as_json:
        compilers = ([f"nvcc {nvcc.version} ({nvcc.source}: {nvcc.path})"] if nvcc else []) + (
            [f"{cxx.version} ({cxx.source}: {cxx.path})"] if cxx else [])
        click.echo(f"{'; '.join(compilers) or 'nothing to build'}; {len(work)} director"
                   f"{'y' if len(work) == 1 else 'ies'}, -j {jobs}")
        for r in refused:
            click.echo(f"refused: {r['refused']}", err=True)

    def build_one(d: Path, target: str) -> BuildResult:
        if target == HOST_ARCH:
            assert cxx is not None
            return build_host(d, cxx, force)  # the libraries are all a host build makes
        assert nvcc is not None
        return build(d, target, nvcc, force, lib_only)

    results: list[BuildResult] = []
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(build_one, d, target): (d, target) for d, target in work}
        for i, fut in enumerate(as_completed(futures), 1):
            res = fut.result()
            results.append(res)
            if not as_json:
                click.echo(_build_line(i, len(work), res))
    if as_json:
        click.echo(json.dumps([r.to_dict() for r in results] + refused, indent=2))
    else:
        click.echo(_build_footer(results, refused))
    sys.exit(EXIT_OK if all(r.ok for r in results) and not refused else EXIT_FAILED)


def _build_footer(results: list[BuildResult], refused: list[dict]) -> str:
    built = sum(r.ok and not r.cached for r in results)
    cached = sum(r.ok and r.cached for r in results)
    failed = sum(not r.ok for r in results)
    spills = sum(k.spills for r in results for k in r.kernels)
    parts = [f"{built} built", f"{cached} cached", f"{failed} failed"]
    if refused:
        parts.append(f"{len(refused)} refused")
    if results and all(r.arch == HOST_ARCH for r in results):  # host builds: no register report to speak of
        return ", ".join(parts)
    return ", ".join(parts) + (f"; {spills} kernel(s) spill" if spills else "; no spills")


def _build_line(i: int, total: int, res: BuildResult) -> str:
    head = f"[{i}/{total}] {res.name} ({res.arch}) "
    if not res.ok:
        return head + "FAILED\n" + res.error
    done = "cached" if res.cached else f"ok in {res.seconds:.1f} s"
    lines = [head + f"{done} -> {build_dir_for(res.directory, res.arch)}/"]
    for k in res.kernels:
        spill = (f"  !! SPILL: {k.spill_store_bytes} B stored, {k.spill_load_bytes} B loaded !!" if k.spills else "")
        smem = k.dynamic_smem_bytes + k.smem_bytes
        lines.append(f"    {k.registers:3d} regs, {smem:6d} B smem, {k.stack_bytes} B stack, "
                     f"spill {k.spill_store_bytes}/{k.spill_load_bytes} B  {k.kernel}{spill}")
    return "\n".join(lines)
