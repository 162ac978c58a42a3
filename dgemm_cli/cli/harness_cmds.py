"""`deepgemm verify` and `deepgemm bench`: run built folders' harnesses (on the GPU; a host folder's on the host,
host_harness.py) and print their reports."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import click

from dgemm_cli import plot
from dgemm_cli.build import built_arches, harness_path, read_plan
from dgemm_cli.build_host import HOST_ARCH, host_library
from dgemm_cli.cli.common import ARCH_CHOICE, fail, fmt, generated_dirs, require_gpu
from dgemm_cli.cli.formal_cmd import verify_formal
from dgemm_cli.errors import EXIT_FAILED, EXIT_OK, DeepGemmError, NotBuiltError
from dgemm_cli.families import FAMILIES
from dgemm_cli.records import BenchReport, BenchRow, VerifyReport, json_number
from dgemm_cli.run import HarnessRun, harness_env, host_harness, parse_sizes, run_harness, size_args
from dgemm_cli.stability import passes_text, row_stability, warning

Harness = Path | tuple[list[str], list[str]] | NotBuiltError


def _targets(dirs: tuple[Path, ...], arch: str | None) -> list[tuple[Path, str, Harness]]:
    """(directory, arch, harness) for each directory: a GPU folder's harness binary, a host folder's host_harness
    command line, or the NotBuiltError (with its fix) of a folder not built. Raises that error when no folder is
    built; otherwise an unbuilt folder is one failed kernel among the rest (a build that failed in a batch)."""
    out: list[tuple[Path, str, Harness]] = []
    for d in generated_dirs(dirs):
        plan = read_plan(d)
        if plan.arch == HOST_ARCH:
            target = HOST_ARCH
        elif arch:
            target = arch
        else:
            built = built_arches(d)
            target = plan.arch if plan.arch in built or not built else built[0]
        try:
            harness = host_harness(d, host_library(d)) if plan.arch == HOST_ARCH else harness_path(d, target)
        except NotBuiltError as err:
            harness = err
        out.append((d, target, harness))
    if out and all(isinstance(h, NotBuiltError) for _, _, h in out):
        raise out[0][2]
    return out


def _run_harnesses(dirs: tuple[Path, ...], arch: str | None, args: list[str],
                   sizes_text: str | None = None) -> tuple[int, Iterator[HarnessRun]]:
    """How many harnesses, and their runs with `args`, one at a time (they share the GPU), produced
    as each finishes so that progress can be printed. `sizes_text`: --m, the run-time sizes to run
    (kernels of a fixed size take none)."""
    try:
        sizes = parse_sizes(sizes_text) if sizes_text is not None else ()
        if any(read_plan(d).arch != HOST_ARCH for d in generated_dirs(dirs)):  # host folders run without a GPU
            require_gpu()
        targets = _targets(dirs, arch)
        extra, left_out = size_args({d: read_plan(d) for d, _, _ in targets}, sizes)
        if sizes and not any(extra.values()):
            raise DeepGemmError(f"--m {sizes_text}: none of these kernels has a run-time size (a `{{min, max}}` "
                                "size in its spec). Fix: leave --m out")
    except DeepGemmError as err:
        fail(err)
    for d, skipped in left_out.items():
        if skipped:
            ran = ",".join(str(m) for m in sizes if m not in skipped)
            click.echo(f"note: {d.name} runs --m {ran} only ({','.join(map(str, skipped))} outside its run-time range)",
                       err=True)

    def runs() -> Iterator[HarnessRun]:
        env = harness_env()
        for d, target, harness in targets:
            if isinstance(harness, NotBuiltError):
                failed = VerifyReport.failed if args[0] == "verify" else BenchReport.failed
                yield HarnessRun(d, target, harness.exit_code, failed(str(harness)), "")
                continue
            try:
                yield run_harness(d, harness, target, args + extra[d], env)
            except DeepGemmError as err:
                fail(err)

    return len(targets), runs()


@click.command()
@click.argument("dirs", nargs=-1, type=click.Path(path_type=Path))
@click.option("--arch", type=ARCH_CHOICE, help="Which build to run (default: the planned arch if built).")
@click.option("--seeds", default="1,2,3", show_default=True, help="Comma-separated seeds; fresh data for each.")
@click.option("--samples", type=click.IntRange(1), default=256, show_default=True,
              help="Outputs also recomputed on the CPU in float64 to check the GPU reference.")
@click.option("--repeat", type=click.IntRange(0), default=0, show_default=True,
              help="Launch N more times on the first seed's data: C must come out bit-identical every time "
                   "(run-to-run determinism; at every run-time size).")
@click.option("--m", "sizes", metavar="LIST",
              help="Run-time sizes to verify, e.g. 1,8,64, for kernels whose spec sizes a row letter at run time "
                   "(`m: {min: 1, max: 256}`); kernels of a fixed size ignore it, and each kernel runs the sizes "
                   "inside its range (a note names those left out; a size inside no kernel's range is refused). "
                   "Default: 1, 2, 3, 7, 8, 9, 16, 17, 63, 64, min and max, every bucket's first and last size and "
                   "their neighbours, and 3 random sizes, within the range.")
@click.option("--formal", is_flag=True,
              help="No GPU: prove each kernel's index maps with Coq instead (in bounds, each output written once, "
                   "full K, no 32-bit overflow). DIRS may also be spec files. Writes <dir>/build/verify/*.v.")
@click.option("--jobs", type=click.IntRange(1), default=os.cpu_count() or 1, show_default="the CPU count",
              help="With --formal: kernels proved at once (one coqc each).")
@click.option("--whole", is_flag=True,
              help="With --formal: run coqc on every kernel's whole script. By default a lemma proved already in the "
                   "run (the same statement and proof, another kernel's) is not run again; every script is written "
                   "whole and proves alone.")
@click.option("--family", type=click.Choice(list(FAMILIES)),
              help="With --formal and spec files: prove this family's plan of each spec instead of the model's pick.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list, one object per kernel.")
def verify(dirs: tuple[Path, ...], arch: str | None, seeds: str, samples: int, repeat: int, sizes: str | None,
           formal: bool, jobs: int, whole: bool, family: str | None, as_json: bool) -> None:
    """Check built kernels on the GPU against an independent float64 reference.

    For each seed: fresh random inputs, C poisoned with NaN (beta = 0) and its padding filled with
    a sentinel, a naive reference kernel that walks the spec's strides, plus a CPU check of sampled
    outputs. Prints max abs error, relative Frobenius error and the first failing index.

    Pass: no NaN, no element off by more than max(8 tol (|ref| + rms), float32 accumulation bound),
    relative Frobenius error <= tol (1e-5 f32, 1e-2 f16/bf16) or within the accumulation bound,
    padding untouched, null / misaligned pointers rejected, and with --repeat N, N more launches
    bit-identical to the first. docs/design/verify-and-bench.md has the details.

    A kernel whose spec sizes a row letter at run time is verified at each size of --m (one line a
    size): the rows past the size are padding then, and must stay untouched; sizes outside the range
    (-1, 0, min - 1, max + 1) must be refused with cudaErrorInvalidValue.

    A host folder (generated with --arch cpu) is verified on this machine, no GPU needed: the host harness loads
    its lib<name>.so and checks every output element against numpy.einsum in float64 over the same strided views,
    with the output poisoned with NaN and the rest of its buffer with sentinels; null pointers and sizes out of
    range must return EINVAL.

    With --formal, no GPU and no build: for every kernel of each folder (or spec), the index expressions it forms
    its addresses with are written as a Coq script (<dir>/build/verify/<kernel>.v) and proved by coqc with the
    spec's sizes concrete and the block, thread, iteration and run-time rows symbolic: every load and store inside
    its view and aligned to its width, every element a load moves the view's element at its index (and a zero only
    past the view), every output element stored exactly once, K covered once, no intermediate past its C++ type.
    A failure names the first lemma Coq could not prove, its statement, and values that break it.
    docs/design/formal.md says what is and is not proved."""
    if family and not formal:
        fail(DeepGemmError("--family: only with --formal (a built folder runs the kernels it was generated with)"))
    if whole and not formal:
        fail(DeepGemmError("--whole: only with --formal (it says how coqc runs the proof scripts)"))
    if formal:
        verify_formal(dirs, arch, family, jobs, as_json, whole)
        return
    rows, all_ok = [], True
    total, runs = _run_harnesses(dirs, arch, ["verify", "--seeds", seeds, "--samples", str(samples)]
                                 + (["--repeat", str(repeat)] if repeat else []), sizes)
    for i, run in enumerate(runs, 1):
        r = run.report
        assert isinstance(r, VerifyReport)
        ok = run.exit_code == 0 and r.passed
        all_ok &= ok
        rows.append(_verify_row(run, r, ok))
        # With --json the report goes to stdout at the end; each kernel's line goes to stderr as it finishes.
        click.echo(_verify_line(i, total, run, r, ok), err=as_json)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
    elif len(rows) > 1:
        click.echo(f"{sum(r['passed'] for r in rows)}/{len(rows)} passed")
    sys.exit(EXIT_OK if all_ok else EXIT_FAILED)


def _verify_row(run: HarnessRun, r: VerifyReport, ok: bool) -> dict:
    """A kernel's object in `verify --json`: the summary, and the harness's whole report under "report"."""
    return {"name": r.name or run.directory.name, "arch": run.arch, "passed": ok,
            "max_abs_err": json_number(r.max_abs_err), "rel_err": json_number(r.rel_err), "tol": json_number(r.tol),
            "calc_diff": json_number(r.calc_diff),
            "first_fail": r.first_fail, "error": r.error, "directory": str(run.directory), "report": dict(r.raw),
            # A run-time size: its range and each size's outcome (None for a fixed-size kernel).
            "dynamic": r.dynamic.to_dict() if r.dynamic else None,
            "m_cases": [c.to_dict() for c in r.m_cases] if r.m_cases is not None else None,
            # A fused epilogue: its steps as text, and which view is written (C, or D).
            "epilogue": list(r.epilogue) if r.epilogue is not None else None, "output": r.output}


def _verify_line(i: int, total: int, run: HarnessRun, r: VerifyReport, ok: bool) -> str:
    head = f"[{i}/{total}] {r.name or run.directory.name} ({run.arch}) "
    if r.error:
        return head + f"ERROR: {r.error}"
    status = "PASS" if ok else "FAIL"
    line = head + f"{status}  max_abs_err {fmt(r.max_abs_err)}  rel_err {fmt(r.rel_err)} (tol {fmt(r.tol)})"
    if r.calc_diff is not None:
        line += f"  calc_diff {fmt(r.calc_diff)}"
    if r.first_fail:
        line += f"\n    first failure: {dict(r.first_fail)}"
    for key, rejected in (("api_null_rejected", r.api_null_rejected),
                          ("api_misaligned_rejected", r.api_misaligned_rejected)):
        if rejected is False:
            line += f"\n    {key}: false"
    if r.repeat_differed:
        line += (f"\n    not deterministic: {r.repeat_differed} of {r.repeat} repeated launches "
                 "changed C's bits")
    elif r.repeat:
        line += f"  ({r.repeat} repeats bit-identical)"
    return line + "".join(_size_lines(r))


def _size_lines(r: VerifyReport) -> list[str]:
    """A kernel with a run-time size: which sizes outside its range it accepted, then one line a size."""
    if not r.dynamic:
        return []
    letter, lo, hi = r.dynamic.letter, r.dynamic.lo, r.dynamic.hi
    lines = []
    accepted = [p.m for p in r.api_m_probes if not p.rejected]
    if accepted:
        lines.append(f"\n    {letter} outside {lo}..{hi} accepted (must be cudaErrorInvalidValue): "
                     + ", ".join(f"{letter}={m}" for m in accepted))
    for case in r.m_cases or ():
        size = f"{letter}={case.m}"
        line = (f"\n    {size:<8} {'PASS' if case.passed else 'FAIL'}  max_abs_err {fmt(case.max_abs_err)}  "
                f"rel_err {fmt(case.rel_err)}")
        if case.calc_diff is not None:
            line += f"  calc_diff {fmt(case.calc_diff)}"
        if case.repeat_differed:
            line += f"  not deterministic: {case.repeat_differed} repeated launches changed C's bits"
        if case.first_fail:
            line += f"\n        first failure: {dict(case.first_fail)}"
        lines.append(line)
    return lines


@click.command()
@click.argument("dirs", nargs=-1, type=click.Path(path_type=Path))
@click.option("--arch", type=ARCH_CHOICE, help="Which build to run (default: the planned arch if built).")
@click.option("--reps", type=click.IntRange(5), help="Timed samples (median). Default: 50 on the GPU, 20 on the host.")
@click.option("--warmup", type=click.IntRange(0), help="Untimed launches first. Default: 10 on the GPU, 3 on the host.")
@click.option("--m", "sizes", metavar="LIST",
              help="Run-time sizes to time, e.g. 1,8,16,64, for kernels whose spec sizes a row letter at run time "
                   "(`m: {min: 1, max: 256}`); kernels of a fixed size ignore it, and each kernel runs the sizes "
                   "inside its range (a note names those left out; a size inside no kernel's range is refused). "
                   "Default: 1, 8, 16, 64, 128, 256, min and max, within the range.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Also draw a roofline of every kernel into this image (.png, .svg, .pdf): achieved TFLOP/s against "
                   "arithmetic intensity, ours and the baseline side by side, under the bandwidth roof (the copy) and "
                   "each dtype's compute roof (cuBLAS on a large square GEMM), both measured in this run. Needs "
                   "matplotlib: pip install 'deepgemm[plot]'.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list, one object per kernel.")
def bench(dirs: tuple[Path, ...], arch: str | None, reps: int | None, warmup: int | None, sizes: str | None,
          plot_path: Path | None, as_json: bool) -> None:
    """Time built kernels and cuBLAS on the same problem in the same run.

    Both sides are timed the same way, as a serving engine runs them: many launches captured into
    one CUDA graph, the graph replayed REPS times between CUDA events, the median replay divided by
    the launches (`method: graph`). Inputs rotate over enough buffer sets to exceed L2; data is random.
    Back-to-back stream launches are timed too (`us_stream`; host launch cost shows there).
    Each size runs in the order ours, cuBLAS, cuBLAS, ours, and each side reports the mean of its two
    passes (`us_passes`, `baseline_us_passes`): near the board's power cap a kernel timed right after
    a hungrier one starts below full clock, and a fixed order would hand that to one side.
    A kernel whose launcher makes a programmatic dependent launch (its README's "Requirements" says
    where) starts each launch while the previous one finishes, so both numbers are those of launches
    chained back to back; run alone, a kernel can take microseconds longer (docs/design/verify-and-bench.md, "Bench").

    The baseline is cuBLAS on the same views without copies: every formulation that exists (operand
    swap, transpose flags, which segment becomes the batch dim) is timed and the fastest is reported
    (`baseline_formulation`). Only when none exists is it copy to contiguous + cuBLAS; when only the batch
    letters keep one strided-batched call from the views (`bshd,bthd->bhst`: b and h do not chain), a
    pointer-array call (cublasGemmBatchedEx over the views in place) is timed beside the copy, and the faster
    is the baseline (`baseline`: cublas, copy+cublas or cublas-ptr-array). Each cuBLAS candidate's output is
    compared with the kernel's before it is timed (`rel_diff` in `baseline_candidates`; one past 5e-2 is
    refused). With a fused
    epilogue the baseline is the cheapest a user would run: cuBLAS then one elementwise kernel
    (`baseline_epilogue: elementwise`), or cuBLASLt with the epilogue fused where it has it
    (BIAS / RELU_BIAS / GELU_BIAS), whichever is faster.
    ratio = baseline time / kernel time (> 1: faster than cuBLAS). `copy_gbps` is a device-to-device
    copy of 3x L2 timed the same way in the same run: the bandwidth a weight stream can approach.

    Run-to-run stability: the `passes` column is the ratio of each pass (the baseline's first pass over
    ours' first, its second over ours' second; the ratio reported lies between them), and a row where
    either side's two passes differ by more than 3% gets a warning line: the clocks or power state moved
    during it (`ratio_passes`, `us_spread`, `baseline_us_spread`, `unstable` in --json).

    --plot FILE draws every kernel's point (one a run-time size) on a roofline; the harnesses then also
    time each dtype's compute roof, cuBLAS on a large square GEMM (`roof_tflops`, `roof_gemm`). A roof
    the run did not measure (e4m3's: cuBLAS has no e4m3 GEMM to time) is the arch table's nominal rate,
    drawn dashed and labelled nominal. The host's roofs are a memory copy and numpy's f32 matmul.

    A kernel whose spec sizes a row letter at run time is timed at each size of --m, one line a size
    (`m_rows` in --json; the top-level numbers are the largest size's), cuBLAS at the same size.

    A host folder (generated with --arch cpu) is timed on this machine by the host harness, in one process with
    its baseline: numpy, the faster of copying the views to dense arrays + numpy.matmul and numpy.einsum(...,
    optimize=True) on the views. Each call is timed with a wall clock, inputs rotated past the last-level cache,
    in the order ours, numpy, numpy, ours; TFLOP/s and GB/s are the same fields."""
    rows, results, any_error = [], [], False
    if plot_path is not None:
        try:
            plot.require_matplotlib(plot_path)  # before the GPU time is spent
        except DeepGemmError as err:
            fail(err)
    counts = (["--reps", str(reps)] if reps is not None else []) + (["--warmup", str(warmup)] if warmup is not None
                                                                     else [])
    roof = ["--roof", "1"] if plot_path is not None else []
    total, runs = _run_harnesses(dirs, arch, ["bench", *counts, *roof], sizes)
    if not as_json:
        click.echo(f"{'kernel':<24} {'arch':<7} {'µs':>10} {'TFLOP/s':>9} {'GB/s':>8}   {'baseline':<16} "
                   f"{'µs':>10} {'ratio':>7}  {'passes':>11}")
    for i, run in enumerate(runs, 1):
        r = run.report
        assert isinstance(r, BenchReport)
        any_error |= run.exit_code != 0 or r.error is not None
        name = r.name or run.directory.name
        # The harness's layout (NaN as "nan"): a run-time size's range, the size of the top-level numbers (the
        # largest) and every size's row; a fused epilogue's steps, the view written and what the baseline ran
        # after, or fused into, the GEMM ("elementwise": cuBLAS + one harness kernel; or cuBLASLt's epilogue).
        rows.append(_bench_json(r, name, run.arch))
        results.append(plot.BenchResult(run.arch, r))
        if as_json:  # the report goes to stdout at the end; progress to stderr as each kernel finishes
            status = f"ERROR: {r.error}" if r.error is not None or r.row is None else f"{fmt(r.row.ratio)} x cuBLAS"
            click.echo(f"[{i}/{total}] {name} ({run.arch}) {status}", err=True)
            continue
        if r.error is not None or r.row is None:
            click.echo(f"{name:<24} {run.arch:<7} ERROR: {r.error}")
            continue
        for size in r.rows:
            click.echo(_bench_line(name, run.arch, r, size))
            moved = warning(row_stability(size), size, _baseline_label(size))
            if moved:
                click.echo(f"{'':<24} {moved}")
        if r.row.baseline_formulation:
            click.echo(f"{'':<24} baseline formulation: {r.row.baseline_formulation}"
                       + (f", then {r.row.baseline_epilogue}" if r.row.baseline_epilogue else ""))
        if r.row.bf16_baseline is not None:  # an e4m3 kernel: what the user would run without FP8
            click.echo(f"{'':<24} bf16 cuBLASLt on the same shape: {fmt(r.row.bf16_baseline_us)} µs, "
                       f"{fmt(r.row.bf16_baseline_tflops)} TFLOP/s, ratio {fmt(r.row.bf16_ratio)} "
                       f"({r.row.bf16_baseline})")
    if as_json:
        click.echo(json.dumps(rows, indent=2))
    if plot_path is not None:
        _draw(results, plot_path)
    sys.exit(EXIT_FAILED if any_error else EXIT_OK)


def _bench_json(r: BenchReport, name: str, arch: str) -> dict:
    """A kernel's object in `bench --json`: the harness's report, each size's row with its stability figures."""
    out = {**r.to_dict(), "name": name, "arch": arch}
    if r.row is not None:
        out.update(row_stability(r.row).to_dict())
    if r.m_rows is not None:
        out["m_rows"] = [{**row.to_dict(), **row_stability(row).to_dict()} for row in r.m_rows]
    return out


def _draw(results: list[plot.BenchResult], path: Path) -> None:
    try:
        line = plot.roofline(results)
        plot.draw_roofline(line, path)
    except DeepGemmError as err:
        fail(err)
    for why in line.left_out:
        click.echo(f"note: --plot leaves out {why}", err=True)
    nominal = [r.label for r in line.roofs if not r.measured]
    for label in nominal:
        click.echo(f"note: --plot draws a roof this run did not measure, dashed: {label}", err=True)
    click.echo(f"drew {len(line.points)} point pair{'s' if len(line.points) != 1 else ''} into {path}", err=True)


def _baseline_label(row: BenchRow) -> str:
    return "numpy" if row.baseline == "numpy" else "cuBLAS"


def _bench_line(name: str, arch: str, r: BenchReport, size: BenchRow) -> str:
    """One size's times, as the table's columns; `passes` is the ratio of each of the two passes."""
    label = f"{name} {r.dynamic.letter}={size.m}" if r.dynamic and size.m is not None else name
    return (f"{label:<24} {arch:<7} {fmt(size.us):>10} {fmt(size.tflops):>9} {fmt(size.gbps):>8}   "
            f"{str(size.baseline)[:16]:<16} {fmt(size.baseline_us):>10} {fmt(size.ratio):>7}  "
            f"{passes_text(row_stability(size)):>11}")
