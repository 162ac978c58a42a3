"""`deepgemm explain` and `deepgemm doctor`: what the planner decided and why, and what the toolchain is."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import click

from dgemm_cli.arch import get_arch
from dgemm_cli.build import build_dir_for, read_plan
from dgemm_cli.cli.common import ARCH_CHOICE, DEFAULT_OUT, disable_option, fail, tuning_db
from dgemm_cli.errors import EXIT_OK, DeepGemmError, NotBuiltError
from dgemm_cli.explain import explain_text
from dgemm_cli.formal.dump import index_dump
from dgemm_cli.plan import make_plan, plan_buckets
from dgemm_cli.spec import load_spec
from dgemm_cli.toolchain import doctor_report, find_nvcc, format_doctor
from dgemm_cli.tune import lookup, tuned_buckets, tuned_plan
from dgemm_cli.views import analyse


@click.command()
@click.option("--nvcc", "nvcc_path",
              help="Check this nvcc instead of searching $DEEPGEMM_NVCC, $CUDA_HOME, $CUDA_PATH, the CUDA wheels, "
                   "PATH.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def doctor(nvcc_path: str | None, as_json: bool) -> None:
    """Which nvcc was found and from where, its version, the host compiler, the GPU and driver,
    and whether they fit together. Exits 0 when nvcc and the host compiler are usable."""
    report = doctor_report(nvcc_path)
    click.echo(json.dumps(report, indent=2) if as_json else format_doctor(report))
    sys.exit(EXIT_OK if "error" not in report.get("nvcc", {}) and report.get("host_compiler") else 4)


@click.command()
@click.argument("spec_path", type=click.Path(path_type=Path))
@click.option("--arch", type=ARCH_CHOICE, help="Plan for this arch instead of the spec's.")
@click.option("--dump-index", is_flag=True,
              help="Also print each kernel's global loads and stores as the index maps the formal proof is about "
                   "(verify --formal): the intermediates in the kernel's spelling, the guard, the address.")
@click.option("--dump-ptx", is_flag=True, help="Also print the PTX of OUT/<name>/<name>.cu (nvcc -ptx).")
@click.option("--dump-sass", is_flag=True,
              help="Also print the SASS of its build in OUT/<name>/build/<arch> (cuobjdump).")
@click.option("--nvcc", "nvcc_path", help="nvcc for --dump-ptx / --dump-sass (else $DEEPGEMM_NVCC, $CUDA_HOME, "
                                          "$CUDA_PATH, the CUDA wheels, PATH).")
@click.option("-o", "--out", type=click.Path(path_type=Path), default=DEFAULT_OUT, show_default=True,
              help="Where `gen` wrote the spec's directory (for --dump-*).")
@click.option("--db", "db_path", type=click.Path(path_type=Path),
              help="Tuning database whose measured ranking to show (default: the one gen consults).")
@disable_option
def explain(spec_path: Path, arch: str | None, dump_index: bool, dump_ptx: bool, dump_sass: bool,
            nvcc_path: str | None, out: Path, db_path: Path | None, disabled: tuple[str, ...]) -> None:
    """Show the view analysis, why this kernel family and not the others, each family's tiling
    constraint graph and the solved plan with the reason for every choice (and, if the spec was
    tuned, the measured ranking)."""
    try:
        spec = load_spec(spec_path)
        target = get_arch(arch or spec.arch)
        # With --disable, gen plans by the cost model (a measured winner was measured without the switches): so does
        # explain.
        db = tuning_db(db_path)[1]
        use_db = bool(db.entries) and not disabled
        entry = lookup(db, spec, target.name, None) if use_db and not spec.dynamic else None
        tuned = tuned_buckets(db, spec, target, None) if use_db and spec.dynamic else {}
        # explain reads the entry in the database's layout
        click.echo(explain_text(spec, target, entry.to_dict() if entry else None, tuned_buckets=tuned,
                                disabled=disabled))
        if dump_index:
            views = analyse(spec)
            plan = (tuned_plan(views, target, entry) if entry else
                    plan_buckets(views, target, tuned=tuned, disabled=disabled) if tuned
                    else make_plan(views, target, disabled=disabled))
            click.echo("\nIndex maps (verify --formal proves these):\n" + index_dump(views, plan))
        if dump_ptx:
            click.echo(_ptx(out / spec.name, spec.name, target.name, nvcc_path))
        if dump_sass:
            click.echo(_sass(out / spec.name, spec.name, target.name, nvcc_path))
    except DeepGemmError as err:
        fail(err)


def _generated_source(directory: Path, name: str) -> Path:
    source = directory / f"{name}.cu"
    if not source.is_file():
        raise NotBuiltError(f"{source} missing; run `deepgemm gen SPEC -o {directory.parent}` first")
    return source


def _ptx(directory: Path, name: str, arch: str, nvcc_path: str | None) -> str:
    """PTX straight from nvcc (no build needed; the wheels have no cuobjdump)."""
    _generated_source(directory, name)
    nvcc = find_nvcc(nvcc_path)
    plan = read_plan(directory)
    target = build_dir_for(directory, arch)
    target.mkdir(parents=True, exist_ok=True)
    ptx = target / f"{name}.ptx"
    cmd = [*nvcc.compile_prefix(), *plan.nvcc_flags, f"-arch={get_arch(arch).compute}", "-ptx",
           f"{name}.cu", "-o", str(ptx.relative_to(directory))]
    proc = subprocess.run(cmd, cwd=directory, capture_output=True, text=True, env=nvcc.run_env(os.environ),
                          check=False)
    if proc.returncode != 0:
        raise DeepGemmError(f"nvcc -ptx failed for {directory / name}.cu:\n{proc.stderr.strip()}")
    return ptx.read_text()


def _sass(directory: Path, name: str, arch: str, nvcc_path: str | None) -> str:
    obj = build_dir_for(directory, arch) / f"{name}.o"
    if not obj.is_file():
        raise NotBuiltError(f"{obj} missing; run `deepgemm build {directory} --arch {arch}` first")
    nvcc = find_nvcc(nvcc_path)
    beside = nvcc.path.parent / "cuobjdump"
    tool = str(beside) if beside.is_file() else shutil.which("cuobjdump")
    if tool is None:
        raise NotBuiltError("cuobjdump not found next to nvcc or on PATH: it ships with a CUDA toolkit "
                            "(the pip nvcc wheels do not include it); point --nvcc or CUDA_HOME at a toolkit")
    proc = subprocess.run([tool, "-sass", str(obj)], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise DeepGemmError(f"cuobjdump failed on {obj}: {proc.stderr.strip()}")
    return proc.stdout
