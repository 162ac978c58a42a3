"""`deepgemm bisect`: generate, build and verify a spec as planned, then with each `--disable` option in turn, and
say which options make a verify failure disappear."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from dgemm_cli.arch import get_arch
from dgemm_cli.bisect import StepResult, Variant, variants, verdict
from dgemm_cli.build import build, harness_path
from dgemm_cli.build_host import HOST_ARCH, build_host, find_cxx, host_library
from dgemm_cli.cli.common import ARCH_CHOICE, DEFAULT_OUT, fail, require_gpu
from dgemm_cli.disable import OPTIONS
from dgemm_cli.errors import EXIT_FAILED, EXIT_OK, BuildError, DeepGemmError
from dgemm_cli.pipeline import emit, plan_spec
from dgemm_cli.records import VerifyReport
from dgemm_cli.run import harness_env, host_harness, run_harness
from dgemm_cli.spec import load_spec
from dgemm_cli.toolchain import find_nvcc
from dgemm_cli.views import analyse


@click.command()
@click.argument("spec_path", type=click.Path(path_type=Path))
@click.option("--arch", type=ARCH_CHOICE, help="Target arch; overrides the spec's `arch:`.")
@click.option("-o", "--out", type=click.Path(path_type=Path), default=DEFAULT_OUT / "bisect", show_default=True,
              help="Each variant goes to OUT/<name>/<option or baseline>/.")
@click.option("--nvcc", "nvcc_path",
              help="nvcc to use (else $DEEPGEMM_NVCC, $CUDA_HOME, $CUDA_PATH, the CUDA wheels, PATH).")
@click.option("--seeds", default="1,2,3", show_default=True, help="verify's seeds for every variant.")
@click.option("--json", "as_json", is_flag=True, help="Print the steps and the verdict as JSON.")
def bisect(spec_path: Path, arch: str | None, out: Path, nvcc_path: str | None, seeds: str, as_json: bool) -> None:
    """Find the optimization behind a verify failure: generate, build and verify SPEC as planned; if that fails,
    again with each --disable option in turn (one at a time), and report the options whose variant passes.

    Options that change no plan here are not built (they cannot change the result), nor are those the spec's
    `plan:` pins rule out. Progress goes to stderr. Exit codes: 0 when the baseline passes (nothing to bisect),
    1 when it fails (the suspects printed), 2 bad spec, 3 no GPU, 4 no nvcc."""
    try:
        spec = load_spec(spec_path)
        target = get_arch(arch or spec.arch)
        if target.name != HOST_ARCH:
            require_gpu()  # before any compile: verify's own error
        views = analyse(spec)
        steps = variants(views, target)
        compiler = find_cxx(None) if target.name == HOST_ARCH else find_nvcc(nvcc_path)
    except DeepGemmError as err:
        fail(err)
    results: list[StepResult] = []
    for step in steps:
        if step.option is not None and results[0].passed:
            break  # the baseline passes: nothing to bisect
        results.append(_run(step, spec, views, target, out / spec.name, compiler, seeds))
        _progress(results[-1], len(results), len(steps))
    found = verdict(results)
    if as_json:
        click.echo(json.dumps({"name": spec.name, "arch": target.name, "options": list(OPTIONS),
                               "steps": [r.to_dict() for r in results], **found.to_dict()}, indent=2))
    else:
        click.echo(f"{spec.name}: {found.summary()}")
        if not found.baseline_passed and found.not_run:
            click.echo(f"  not run: {', '.join(found.not_run)} (see the steps above)")
    sys.exit(EXIT_OK if found.baseline_passed else EXIT_FAILED)


def _run(step: Variant, spec, views, target, root: Path, compiler, seeds: str) -> StepResult:
    """Emit, build and verify one variant (one not worth running: its reason)."""
    if step.plan is None or not step.changed:
        return StepResult(step, None)
    directory = root / step.label
    try:
        emit(plan_spec(spec, target, plan=step.plan, views=views), directory)
        if target.name == HOST_ARCH:
            built = build_host(directory, compiler)
            harness = host_harness(directory, host_library(directory))
        else:
            built = build(directory, target.name, compiler)
            harness = harness_path(directory, target.name)
        if not built.ok:
            raise BuildError(f"{directory}: the build failed:\n{built.error.strip()}")
        run = run_harness(directory, harness, target.name, ["verify", "--seeds", seeds], harness_env())
    except DeepGemmError as err:
        if step.option is None:
            fail(err)  # the baseline must run: its error is the command's
        return StepResult(step, None, str(err))
    report = run.report
    assert isinstance(report, VerifyReport)
    passed = run.exit_code == 0 and report.passed
    why = "" if passed else (report.error or f"max abs err {report.max_abs_err}, rel err {report.rel_err}")
    return StepResult(step, passed, why)


def _progress(r: StepResult, i: int, total: int) -> None:
    state = {True: "passes", False: "FAILS", None: "not run"}[r.passed]
    what = f"--disable {r.variant.option}" if r.variant.option else "as planned"
    family = f" ({r.variant.plan.family})" if r.variant.plan is not None else ""
    why = r.why or r.variant.why
    click.echo(f"[{i}/{total}] {what}{family}: {state}" + (f": {why}" if why else ""), err=True)
