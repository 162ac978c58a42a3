"""The `deepgemm` command line: the edges (files, subprocesses, printing) around the pure stages."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import click

from dgemm_cli import __version__
from dgemm_cli.arch import ARCHES, get_arch
from dgemm_cli.build import BuildResult, build, build_dir_for, built_arches, harness_path, read_plan
from dgemm_cli.errors import EXIT_FAILED, EXIT_OK, DeepGemmError, NoGpuError, NotBuiltError, PlanError
from dgemm_cli.explain import explain_text
from dgemm_cli.families import FAMILIES
from dgemm_cli.plan import BucketPlan, Plan, plan_buckets
from dgemm_cli.randspec import (
    A_VECTORS_SHARE,
    DYNAMIC_SHARE,
    EPILOGUE_SHARE,
    ROW_BLOCKS_SHARE,
    SMALL_M_SHARE,
    TMA_SHARE,
    WIDE_BATCH_SHARE,
    WIDE_DECODE_SHARE,
    WIDE_SHORT_K_SHARE,
    WIDE_STAGED_SHARE,
)
from dgemm_cli.render import generate
from dgemm_cli.run import HarnessRun, harness_env, parse_sizes, run_harness, size_args
from dgemm_cli.spec import load_spec
from dgemm_cli.toolchain import doctor_report, find_gpus, find_nvcc, format_doctor
from dgemm_cli.tune import (
    LEVEL3_CAP,
    default_db_path,
    load_db,
    lookup,
    make_entry,
    merge,
    pick,
    save_db,
    tuned_buckets,
    tuned_plan,
    tuning_problems,
)
from dgemm_cli.tune import candidates as tune_candidates
from dgemm_cli.views import analyse

DEFAULT_OUT = Path("generated")
TUNE_RUN_TIMEOUT_S = 120  # one candidate's verify or bench; a hung candidate loses instead of stalling the tune
ARCH_CHOICE = click.Choice(list(ARCHES))

EPILOG = """\b
Exit codes: 0 ok, 1 a kernel failed (build or verify), 2 bad spec or command line,
3 no GPU (verify/bench), 4 no usable nvcc or nothing built.
\b
Typical session:
  deepgemm gen specs/*.yaml            # -> generated/<name>/ (sources, plan.json, build files)
  deepgemm build --arch sm_90a         # nvcc; prints registers / spills per kernel
  deepgemm verify                      # on a GPU: random data, poisoned output, float64 reference
  deepgemm bench --json                # µs, TFLOP/s, GB/s and the ratio to cuBLAS (graph-timed)
  deepgemm tune specs/*.yaml --level 2 # on a GPU: measure candidates, keep the fastest; gen uses it
"""


def _fail(err: DeepGemmError) -> None:
    click.echo(f"error: {err}", err=True)
    sys.exit(err.exit_code)


@click.group(epilog=EPILOG, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="deepgemm")
def main() -> None:
    """Generate standalone CUDA kernels for GEMMs and tensor contractions over strided views,
    build them with nvcc, verify them on a GPU and benchmark them against cuBLAS."""


def _dirs(dirs: tuple[Path, ...]) -> list[Path]:
    """The directories named, or every generated one under ./generated."""
    if dirs:
        found = []
        for d in dirs:
            if (d / "plan.json").is_file():
                found.append(d)
            elif d.is_dir() and any(d.glob("*/plan.json")):
                found.extend(sorted(p.parent for p in d.glob("*/plan.json")))
            else:
                raise NotBuiltError(f"{d}: not a generated directory (no plan.json); run `deepgemm gen` first")
        return found
    found = sorted(p.parent for p in DEFAULT_OUT.glob("*/plan.json"))
    if not found:
        raise NotBuiltError(f"nothing generated under {DEFAULT_OUT}/; run `deepgemm gen SPEC.yaml` first")
    return found


@main.command()
@click.argument("specs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("-o", "--out", type=click.Path(path_type=Path), default=DEFAULT_OUT, show_default=True,
              help="Each spec goes to OUT/<name>/.")
@click.option("--arch", type=ARCH_CHOICE, help="Target arch; overrides the spec's `arch:`.")
@click.option("--family", type=click.Choice(list(FAMILIES)),
              help="Take this kernel family wherever its gates allow, instead of the cheapest by the cost model.")
@click.option("--db", "db_path", type=click.Path(path_type=Path),
              help="Tuning database to consult (default: $DEEPGEMM_TUNING_DB or the user cache dir).")
@click.option("--untuned", is_flag=True, help="Ignore the tuning database: plan by the cost model alone.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list instead of the summary.")
def gen(specs: tuple[Path, ...], out: Path, arch: str | None, family: str | None, db_path: Path | None,
        untuned: bool, as_json: bool) -> None:
    """Parse SPEC files, plan the tiling and render CUDA sources into OUT/<name>/.

    The plan picks a kernel family (`deepgemm explain SPEC` shows why the others lost), then that
    family's tiling; where the chosen family needs pointer alignment the spec does not promise, the
    cta family's kernel is generated beside it and taken at run time when the check fails. A spec
    that `deepgemm tune` measured renders its measured winner instead (--untuned: the model's pick)."""
    results, failed = [], 0
    try:
        db = {"entries": {}} if untuned or family else _tuning_db(db_path)[1]
    except DeepGemmError as err:
        _fail(err)
    gpus = find_gpus() if db["entries"] else []
    for path in specs:
        try:
            spec = load_spec(path)
            for note in spec.notes:  # before planning: they say how the spec was read, whatever follows
                click.echo(f"note: {path}: {note}", err=True)
            target = get_arch(arch or spec.arch)
            gpu = gpus[0].name if gpus else None
            views = analyse(spec)
            try:
                tuned = _tuned(db, spec, views, target, gpu) if db["entries"] else None
            except PlanError as err:  # a tuned plan this generator can no longer build: the model plans it
                click.echo(f"note: {path}: {err}; planned by the cost model instead (tune it again)", err=True)
                tuned = None
            g = generate(spec, target, out, family, plan=tuned, views=views)
        except DeepGemmError as err:
            click.echo(f"error: {err}", err=True)
            failed += 1
            continue
        results.append(g)
        if not as_json:
            click.echo(_gen_summary(g))
    if as_json:
        click.echo(json.dumps([{"name": g.name, "directory": str(g.directory), "arch": g.arch,
                                "content_hash": g.content_hash, "notes": list(g.spec.notes),
                                "plan": g.plan.to_dict()} for g in results],
                              indent=2))
    if failed:
        sys.exit(2)


def _tuned(db: dict, spec, views, target, gpu: str | None) -> Plan | BucketPlan | None:
    """The measured plan of a spec from the tuning database, if `tune` measured it; for a run-time spec,
    its buckets' measured plans (the cost model plans the buckets not measured)."""
    if not spec.dynamic:
        entry = lookup(db, spec, target.name, gpu)
        return tuned_plan(views, target, entry) if entry else None
    tuned = tuned_buckets(db, spec, target, gpu)
    return plan_buckets(views, target, tuned=tuned) if tuned else None


def _gen_summary(g) -> str:
    v, p = g.views, g.plan
    lines = [f"{g.name}: {g.spec.contraction}  batch={v.batch} M={v.m} N={v.n} K={v.k}  -> {g.directory}/"]
    for r in ("batch", "m", "n", "k"):
        rv = v.roles[r]
        if rv.segments:
            segs = " ".join(s.label for s in rv.segments)
            lines.append(f"  {r:<5} {''.join(rv.letters):<6} {len(rv.segments)} segment(s): {segs}")
    if isinstance(p, BucketPlan):
        lines.append(f"  {p.why}")
        for b in p.buckets:
            lines.append(f"  {b.sizes(p.letter)}: {b.plan.family}: {b.plan.primary.summary}")
            if b.plan.tuned:
                lines.append(f"    {_tuned_line(b.plan.tuned)}")
            lines.extend(_fallback_lines(b.plan, "    "))
        return "\n".join(lines)
    lines.append(f"  {p.family_decision.summary()}")
    lines.append(f"  {p.primary.family}: {p.primary.summary}")
    if p.tuned:  # the tiling is the measured winner: the model's reasons for each value do not apply
        lines.append(f"    {_tuned_line(p.tuned)}")
    else:
        lines.extend(f"    {d.summary()}" for d in p.primary.decisions)
    lines.extend(_fallback_lines(p, "  "))
    return "\n".join(lines)


def _tuned_line(t: dict) -> str:
    """A tuned plan in one line (plan.json's `tuned`)."""
    ratio = f", {t['ratio']:.2f}x cuBLAS" if isinstance(t.get("ratio"), (int, float)) else ""
    return (f"tuned: candidate {t['candidate']}, the fastest of {t['timed']} timed of {t['measured']} by "
            f"deepgemm tune (level {t['level']}, {t['gpu']}, {t['date'][:10]}): {t['us']:.4g} µs{ratio}")


def _fallback_lines(p: Plan, indent: str) -> list[str]:
    if p.fallback is None:
        return []
    checks = ", ".join(f"{x} {n}-byte aligned" for x, n in p.primary.runtime_align.items())
    return [f"{indent}run-time fallback when a pointer is not ({checks}): {p.fallback.family}: {p.fallback.summary}"]


@main.command(name="build")
@click.argument("dirs", nargs=-1, type=click.Path(path_type=Path))
@click.option("--arch", type=ARCH_CHOICE, help="Target arch (default: the one each directory was generated for).")
@click.option("--nvcc", "nvcc_path", help="nvcc to use (else $DEEPGEMM_NVCC, $CUDA_HOME, the CUDA wheels, PATH).")
@click.option("-j", "--jobs", type=click.IntRange(1, 64), default=2, show_default=True, help="Parallel builds.")
@click.option("--force", is_flag=True, help="Rebuild even when sources, nvcc and flags are unchanged.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of build results.")
def build_cmd(dirs: tuple[Path, ...], arch: str | None, nvcc_path: str | None, jobs: int, force: bool,
              as_json: bool) -> None:
    """Compile generated directories (default: all under ./generated) with nvcc.

    Writes <dir>/build/<arch>/lib<name>.a, lib<name>.so and <name>_harness, and prints ptxas's
    registers / stack / spill bytes for every kernel. Spills are reported loudly.

    A directory whose sources, nvcc and flags are unchanged since its last successful build for
    that arch (build/<arch>/build-stamp.json) is not compiled again: it says `cached` and reports
    the registers and spills of that build. --force rebuilds."""
    try:
        directories = _dirs(dirs)
        nvcc = find_nvcc(nvcc_path)
        work = []
        for d in directories:
            plan = read_plan(d)
            target = arch or plan["arch"]
            need = plan["plan"]["smem_bytes"]
            requires = plan["build"].get("requires_arch", [])
            if requires and target not in requires:
                raise DeepGemmError(f"{d}: planned for {plan['arch']} with the {plan['plan']['family']} family, "
                                    f"which needs {', '.join(requires)}; regenerate with "
                                    f"`deepgemm gen ... --arch {target}`")
            if need > get_arch(target).smem_per_block:
                raise DeepGemmError(f"{d}: planned for {plan['arch']} with {need} B of shared memory, more than "
                                    f"{target} allows; regenerate with `deepgemm gen ... --arch {target}`")
            work.append((d, target))
    except DeepGemmError as err:
        _fail(err)
    if not as_json:
        click.echo(f"nvcc {nvcc.version} ({nvcc.source}: {nvcc.path}); building {len(work)} kernel(s), -j {jobs}")
    results: list[BuildResult] = []
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(build, d, target, nvcc, force): (d, target) for d, target in work}
        for i, fut in enumerate(as_completed(futures), 1):
            res = fut.result()
            results.append(res)
            if not as_json:
                click.echo(_build_line(i, len(work), res))
    if as_json:
        click.echo(json.dumps([r.to_dict() for r in results], indent=2))
    sys.exit(EXIT_OK if all(r.ok for r in results) else EXIT_FAILED)


def _build_line(i: int, total: int, res: BuildResult) -> str:
    head = f"[{i}/{total}] {res.name} ({res.arch}) "
    if not res.ok:
        return head + "FAILED\n" + res.error
    done = "cached" if res.cached else f"ok in {res.seconds:.1f} s"
    lines = [head + f"{done} -> {build_dir_for(res.directory, res.arch)}/"]
    for k in res.kernels:
        spill = (f"  !! SPILL: {k.spill_store_bytes} B stored, {k.spill_load_bytes} B loaded !!" if k.spills else "")
        lines.append(f"    {k.registers:3d} regs, {k.stack_bytes} B stack, spill {k.spill_store_bytes}/"
                     f"{k.spill_load_bytes} B  {k.kernel}{spill}")
    return "\n".join(lines)


def _targets(dirs: tuple[Path, ...], arch: str | None) -> list[tuple[Path, str, Path]]:
    """(directory, arch, harness) for each built directory; NotBuiltError with the fix otherwise."""
    out = []
    for d in _dirs(dirs):
        plan = read_plan(d)
        if arch:
            target = arch
        else:
            built = built_arches(d)
            target = plan["arch"] if plan["arch"] in built or not built else built[0]
        out.append((d, target, harness_path(d, target)))
    return out


def _run_harnesses(dirs: tuple[Path, ...], arch: str | None, args: list[str],
                   sizes_text: str | None = None) -> tuple[int, Iterator[HarnessRun]]:
    """How many harnesses, and their runs with `args`, one at a time (they share the GPU), produced
    as each finishes so that progress can be printed. `sizes_text`: --m, the run-time sizes to run
    (kernels of a fixed size take none)."""
    try:
        sizes = parse_sizes(sizes_text) if sizes_text is not None else ()
        _require_gpu()
        targets = _targets(dirs, arch)
        extra, left_out = size_args({d: read_plan(d) for d, _, _ in targets}, sizes)
        if sizes and not any(extra.values()):
            raise DeepGemmError(f"--m {sizes_text}: none of these kernels has a run-time size (a `{{min, max}}` "
                                "size in its spec). Fix: leave --m out")
    except DeepGemmError as err:
        _fail(err)
    for d, skipped in left_out.items():
        if skipped:
            ran = ",".join(str(m) for m in sizes if m not in skipped)
            click.echo(f"note: {d.name} runs --m {ran} only ({','.join(map(str, skipped))} outside its run-time range)",
                       err=True)

    def runs() -> Iterator[HarnessRun]:
        env = harness_env()
        for d, target, harness in targets:
            try:
                yield run_harness(d, harness, target, args + extra[d], env)
            except DeepGemmError as err:
                _fail(err)

    return len(targets), runs()


def _require_gpu() -> None:
    if not find_gpus():
        raise NoGpuError("no CUDA GPU visible (nvidia-smi lists none): verify and bench need one; "
                         "gen and build work without")


@main.command()
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
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list, one object per kernel.")
def verify(dirs: tuple[Path, ...], arch: str | None, seeds: str, samples: int, repeat: int, sizes: str | None,
           as_json: bool) -> None:
    """Check built kernels on the GPU against an independent float64 reference.

    For each seed: fresh random inputs, C poisoned with NaN (beta = 0) and its padding filled with
    a sentinel, a naive reference kernel that walks the spec's strides, plus a CPU check of sampled
    outputs. Prints max abs error, relative Frobenius error and the first failing index.

    Pass: no NaN, no element off by more than max(8 tol (|ref| + rms), float32 accumulation bound),
    relative Frobenius error <= tol (1e-5 f32, 1e-2 f16/bf16) or within the accumulation bound,
    padding untouched, null / misaligned pointers rejected, and with --repeat N, N more launches
    bit-identical to the first. docs/DESIGN.md has the details.

    A kernel whose spec sizes a row letter at run time is verified at each size of --m (one line a
    size): the rows past the size are padding then, and must stay untouched; sizes outside the range
    (-1, 0, min - 1, max + 1) must be refused with cudaErrorInvalidValue."""
    rows, all_ok = [], True
    total, runs = _run_harnesses(dirs, arch, ["verify", "--seeds", seeds, "--samples", str(samples)]
                                 + (["--repeat", str(repeat)] if repeat else []), sizes)
    for i, run in enumerate(runs, 1):
        d, target = run.directory, run.arch
        r = run.report
        ok = run.exit_code == 0 and bool(r.get("passed"))
        all_ok &= ok
        row = {"name": r.get("name", d.name), "arch": target, "passed": ok, "max_abs_err": r.get("max_abs_err"),
               "rel_err": r.get("rel_err"), "tol": r.get("tol"), "first_fail": r.get("first_fail"),
               "error": r.get("error"), "directory": str(d), "report": r,
               # A run-time size: its range and each size's outcome (None for a fixed-size kernel).
               "dynamic": r.get("dynamic"), "m_cases": r.get("m_cases"),
               # A fused epilogue: its steps as text, and which view is written (C, or D).
               "epilogue": r.get("epilogue"), "output": r.get("output")}
        rows.append(row)
        if not as_json:
            click.echo(_verify_line(i, total, row))
    if as_json:
        click.echo(json.dumps(rows, indent=2))
    elif len(rows) > 1:
        click.echo(f"{sum(r['passed'] for r in rows)}/{len(rows)} passed")
    sys.exit(EXIT_OK if all_ok else EXIT_FAILED)


def _fmt(x) -> str:
    if not isinstance(x, (int, float)):
        return str(x)
    return f"{x:.0f}" if abs(x) >= 1000 else f"{x:.3g}"  # 3580, not 3.58e+03


def _verify_line(i: int, total: int, row: dict) -> str:
    head = f"[{i}/{total}] {row['name']} ({row['arch']}) "
    if row["error"]:
        return head + f"ERROR: {row['error']}"
    status = "PASS" if row["passed"] else "FAIL"
    line = head + (f"{status}  max_abs_err {_fmt(row['max_abs_err'])}  rel_err {_fmt(row['rel_err'])} "
                   f"(tol {_fmt(row['tol'])})")
    if row["first_fail"]:
        line += f"\n    first failure: {row['first_fail']}"
    rep = row["report"]
    for key in ("api_null_rejected", "api_misaligned_rejected"):
        if rep.get(key) is False:
            line += f"\n    {key}: false"
    if rep.get("repeat_differed"):
        line += (f"\n    not deterministic: {rep['repeat_differed']} of {rep['repeat']} repeated launches "
                 "changed C's bits")
    elif rep.get("repeat"):
        line += f"  ({rep['repeat']} repeats bit-identical)"
    return line + "".join(_size_lines(rep))


def _size_lines(rep: dict) -> list[str]:
    """A kernel with a run-time size: which sizes outside its range it accepted, then one line a size."""
    if not rep.get("dynamic"):
        return []
    letter, lo, hi = (rep["dynamic"][k] for k in ("letter", "lo", "hi"))
    lines = []
    accepted = [p["m"] for p in rep.get("api_m_probes", []) if not p["rejected"]]
    if accepted:
        lines.append(f"\n    {letter} outside {lo}..{hi} accepted (must be cudaErrorInvalidValue): "
                     + ", ".join(f"{letter}={m}" for m in accepted))
    for case in rep.get("m_cases", []):
        size = f"{letter}={case['m']}"
        line = (f"\n    {size:<8} {'PASS' if case['passed'] else 'FAIL'}  max_abs_err {_fmt(case['max_abs_err'])}  "
                f"rel_err {_fmt(case['rel_err'])}")
        if case.get("repeat_differed"):
            line += f"  not deterministic: {case['repeat_differed']} repeated launches changed C's bits"
        if case.get("first_fail"):
            line += f"\n        first failure: {case['first_fail']}"
        lines.append(line)
    return lines


@main.command()
@click.argument("dirs", nargs=-1, type=click.Path(path_type=Path))
@click.option("--arch", type=ARCH_CHOICE, help="Which build to run (default: the planned arch if built).")
@click.option("--reps", type=click.IntRange(5), default=50, show_default=True, help="Timed samples (median).")
@click.option("--warmup", type=click.IntRange(0), default=10, show_default=True, help="Untimed launches first.")
@click.option("--m", "sizes", metavar="LIST",
              help="Run-time sizes to time, e.g. 1,8,16,64, for kernels whose spec sizes a row letter at run time "
                   "(`m: {min: 1, max: 256}`); kernels of a fixed size ignore it, and each kernel runs the sizes "
                   "inside its range (a note names those left out; a size inside no kernel's range is refused). "
                   "Default: 1, 8, 16, 64, 128, 256, min and max, within the range.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list, one object per kernel.")
def bench(dirs: tuple[Path, ...], arch: str | None, reps: int, warmup: int, sizes: str | None, as_json: bool) -> None:
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
    chained back to back; run alone, a kernel can take microseconds longer (docs/DESIGN.md, "Bench").

    The baseline is cuBLAS on the same views without copies: every formulation that exists (operand
    swap, transpose flags, which segment becomes the batch dim) is timed and the fastest is reported
    (`baseline_formulation`). Only when none exists is it copy to contiguous + cuBLAS. With a fused
    epilogue the baseline is the cheapest a user would run: cuBLAS then one elementwise kernel
    (`baseline_epilogue: elementwise`), or cuBLASLt with the epilogue fused where it has it
    (BIAS / RELU_BIAS / GELU_BIAS), whichever is faster.
    ratio = baseline time / kernel time (> 1: faster than cuBLAS). `copy_gbps` is a device-to-device
    copy of 3x L2 timed the same way in the same run: the bandwidth a weight stream can approach.

    A kernel whose spec sizes a row letter at run time is timed at each size of --m, one line a size
    (`m_rows` in --json; the top-level numbers are the largest size's), cuBLAS at the same size."""
    rows, any_error = [], False
    _, runs = _run_harnesses(dirs, arch, ["bench", "--reps", str(reps), "--warmup", str(warmup)], sizes)
    if not as_json:
        click.echo(f"{'kernel':<24} {'arch':<7} {'µs':>10} {'TFLOP/s':>9} {'GB/s':>8}   {'baseline':<14} "
                   f"{'µs':>10} {'ratio':>7}")
    for run in runs:
        r = run.report
        any_error |= run.exit_code != 0 or "error" in r
        row = {"name": r.get("name", run.directory.name), "arch": run.arch, **{k: r.get(k) for k in (
            "us", "tflops", "gbps", "baseline", "baseline_us", "baseline_tflops", "ratio", "device", "error", "method",
            "baseline_formulation", "us_stream", "baseline_us_stream", "us_passes", "baseline_us_passes",
            "baseline_candidates", "copy_gbps",
            # A run-time size: its range, the size of the numbers above (the largest) and every size's row.
            "m", "dynamic", "m_rows",
            # A fused epilogue: its steps, the view written, and what the baseline ran after (or fused into)
            # the GEMM ("elementwise": cuBLAS + one harness kernel; or cuBLASLt's fused epilogue).
            "epilogue", "output", "baseline_epilogue")}}
        rows.append(row)
        if as_json:
            continue
        if row["error"]:
            click.echo(f"{row['name']:<24} {row['arch']:<7} ERROR: {row['error']}")
            continue
        letter = (row["dynamic"] or {}).get("letter")
        for size in row["m_rows"] or [row]:
            label = f"{row['name']} {letter}={size['m']}" if letter else row["name"]
            click.echo(f"{label:<24} {row['arch']:<7} {_fmt(size['us']):>10} {_fmt(size['tflops']):>9} "
                       f"{_fmt(size['gbps']):>8}   {str(size['baseline'])[:14]:<14} {_fmt(size['baseline_us']):>10} "
                       f"{_fmt(size['ratio']):>7}")
        if row["baseline_formulation"]:
            click.echo(f"{'':<24} baseline formulation: {row['baseline_formulation']}"
                       + (f", then {row['baseline_epilogue']}" if row["baseline_epilogue"] else ""))
    if as_json:
        click.echo(json.dumps(rows, indent=2))
    sys.exit(EXIT_FAILED if any_error else EXIT_OK)


@main.command()
@click.option("--nvcc", "nvcc_path", help="Check this nvcc instead of searching.")
@click.option("--json", "as_json", is_flag=True)
def doctor(nvcc_path: str | None, as_json: bool) -> None:
    """Which nvcc was found and from where, its version, the host compiler, the GPU and driver,
    and whether they fit together. Exits 0 when nvcc and the host compiler are usable."""
    report = doctor_report(nvcc_path)
    click.echo(json.dumps(report, indent=2) if as_json else format_doctor(report))
    sys.exit(EXIT_OK if "error" not in report.get("nvcc", {}) and report.get("host_compiler") else 4)


@main.command()
@click.argument("spec_path", type=click.Path(path_type=Path))
@click.option("--arch", type=ARCH_CHOICE, help="Plan for this arch instead of the spec's.")
@click.option("--dump-ptx", is_flag=True, help="Also print the PTX of OUT/<name>/<name>.cu (nvcc -ptx).")
@click.option("--dump-sass", is_flag=True,
              help="Also print the SASS of its build in OUT/<name>/build/<arch> (cuobjdump).")
@click.option("--nvcc", "nvcc_path", help="nvcc to use for --dump-ptx / --dump-sass.")
@click.option("-o", "--out", type=click.Path(path_type=Path), default=DEFAULT_OUT, show_default=True,
              help="Where `gen` wrote the spec's directory (for --dump-*).")
@click.option("--db", "db_path", type=click.Path(path_type=Path),
              help="Tuning database whose measured ranking to show (default: the one gen consults).")
def explain(spec_path: Path, arch: str | None, dump_ptx: bool, dump_sass: bool, nvcc_path: str | None,
            out: Path, db_path: Path | None) -> None:
    """Show the view analysis, why this kernel family and not the others, each family's tiling
    constraint graph and the solved plan with the reason for every choice (and, if the spec was
    tuned, the measured ranking)."""
    try:
        spec = load_spec(spec_path)
        target = get_arch(arch or spec.arch)
        db = _tuning_db(db_path)[1]
        entry = lookup(db, spec, target.name, None) if db["entries"] and not spec.dynamic else None
        tuned = tuned_buckets(db, spec, target, None) if db["entries"] and spec.dynamic else {}
        click.echo(explain_text(spec, target, entry, tuned_buckets=tuned))
        if dump_ptx:
            click.echo(_ptx(out / spec.name, spec.name, target.name, nvcc_path))
        if dump_sass:
            click.echo(_sass(out / spec.name, spec.name, target.name, nvcc_path))
    except DeepGemmError as err:
        _fail(err)


@main.command(name="random-specs")
@click.argument("count", type=click.IntRange(1, 100000))
@click.option("-o", "--out", type=click.Path(path_type=Path), required=True, help="Folder for the YAML files.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--tma-share", type=click.FloatRange(0.0, 1.0), default=TMA_SHARE, show_default=True,
              help="Share of 16-bit specs with TMA-friendly views (16-byte strides, sizes in the hundreds).")
@click.option("--small-m-share", type=click.FloatRange(0.0, 1.0), default=SMALL_M_SHARE, show_default=True,
              help="Share of decode-shaped specs (M = 1..64 rows, K in the hundreds to thousands), drawn first.")
@click.option("--dynamic-share", type=click.FloatRange(0.0, 1.0), default=DYNAMIC_SHARE, show_default=True,
              help="Share of specs with a row letter sized at run time ({min, max}: one kernel a bucket of sizes); "
                   "applies to specs whose A and C strides are explicit.")
@click.option("--epilogue-share", type=click.FloatRange(0.0, 1.0), default=EPILOGUE_SHARE, show_default=True,
              help="Share of specs with a fused epilogue (bias / scale / residual views, activations, clamps) and "
                   "sometimes an output view D. Drawn apart from the product: the other specs stay the same.")
@click.option("--row-blocks-share", type=click.FloatRange(0.0, 1.0), default=ROW_BLOCKS_SHARE, show_default=True,
              help="Share of TMA specs with two row letters, one sized in whole 64-row blocks: the hopper family's "
                   "tiles then run across the other (flat rows). Drawn apart: 0 leaves every spec as before.")
@click.option("--a-vectors-share", type=click.FloatRange(0.0, 1.0), default=A_VECTORS_SHARE, show_default=True,
              help="Share of decode-shaped specs whose A is redrawn k-contiguous, rows a whole number of 16-, 8- or "
                   "4-byte vectors apart (or not): reaches the small-M families' vector loads of A. Drawn apart.")
@click.option("--wide-decode-share", type=click.FloatRange(0.0, 1.0), default=WIDE_DECODE_SHARE, show_default=True,
              help="Share of decode-shaped specs redrawn wide (N = 2112..16384, K = 512..8192, tails included; f16 or "
                   "bf16, B mostly nn.Linear [N, K]): reaches the tcgemv family. Drawn apart.")
@click.option("--wide-batch-share", type=click.FloatRange(0.0, 1.0), default=WIDE_BATCH_SHARE, show_default=True,
              help="Share of the wide decode specs drawn over a batch of 2..8 products (attention heads over a KV "
                   "cache, MoE experts): reaches tcgemv over a batch. Drawn apart.")
@click.option("--wide-short-k-share", type=click.FloatRange(0.0, 1.0), default=WIDE_SHORT_K_SHARE, show_default=True,
              help="Share of the wide decode specs with a short K: 8..192 in whole 64s, 8s or not (split over two "
                   "letters, up to 256): reaches tcgemv's short-K path (2 warps a block, warps with no 64-k segment, "
                   "K tails), which K = 512..8192 never does. Drawn apart.")
@click.option("--wide-staged-share", type=click.FloatRange(0.0, 1.0), default=WIDE_STAGED_SHARE, show_default=True,
              help="Share of the wide decode specs shaped for tcgemv's staged activation: one product, M = 9..16, "
                   "N = 6..8 groups of 16 columns x 119..132 blocks (some with the last block's columns past N), K = "
                   "512..6656 in whole 512s. The planner prices that kernel above hopper: generate these with `gen "
                   "--family tcgemv` to reach it. Drawn apart.")
def random_specs_cmd(count: int, out: Path, seed: int, tma_share: float, small_m_share: float,
                     dynamic_share: float, epilogue_share: float, row_blocks_share: float,
                     a_vectors_share: float, wide_decode_share: float, wide_batch_share: float,
                     wide_short_k_share: float, wide_staged_share: float) -> None:
    """Write COUNT random valid specs (sizes 1..300, permuted / padded / broadcast / offset views,
    all dtypes) for a verification sweep: `deepgemm gen OUT/*.yaml -o G && deepgemm build G && deepgemm verify G`."""
    import yaml

    from dgemm_cli.randspec import random_specs

    out.mkdir(parents=True, exist_ok=True)
    for spec in random_specs(count, seed, tma_share, small_m_share, dynamic_share, epilogue_share, row_blocks_share,
                             a_vectors_share, wide_decode_share, wide_batch_share, wide_short_k_share,
                             wide_staged_share):
        (out / f"{spec['name']}.yaml").write_text(yaml.safe_dump(spec, sort_keys=False, default_flow_style=None))
    click.echo(f"wrote {count} specs to {out}/")


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
    cmd = [*nvcc.compile_prefix(), *plan["build"]["nvcc_flags"], f"-arch={get_arch(arch).compute}", "-ptx",
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


# ------------------------------------------------------------------------------------------------ tune


def _tuning_db(db_path: Path | None) -> tuple[Path, dict]:
    path = db_path or default_db_path()
    return path, load_db(path)


@main.command()
@click.argument("specs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--level", type=click.IntRange(0, 3), default=1, show_default=True,
              help="0: the cost model alone (prints its ranking, measures nothing); 1, 2, 3: measure the 4, 16 or "
                   f"every feasible (at most {LEVEL3_CAP}) cheapest candidates of every kernel family.")
@click.option("--arch", type=ARCH_CHOICE, help="Target arch; overrides the spec's `arch:`.")
@click.option("--family", "families", multiple=True, type=click.Choice(list(FAMILIES)),
              help="Measure only this kernel family's candidates (repeatable; default: every family the problem "
                   "allows). The winner is then the fastest of these, and the database entry says so.")
@click.option("--db", "db_path", type=click.Path(path_type=Path),
              help="Tuning database to read and write (default: $DEEPGEMM_TUNING_DB or the user cache dir); "
                   "a file a team can commit.")
@click.option("--merge", "merge_paths", multiple=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Merge this database (from another machine or job) into --db first; repeatable.")
@click.option("--budget", type=click.FloatRange(1), default=600, show_default=True,
              help="Seconds of measuring per spec; candidates are measured in the cost model's order.")
@click.option("--reps", type=click.IntRange(5), default=20, show_default=True,
              help="Timed graph replays per candidate.")
@click.option("-j", "--jobs", type=click.IntRange(1, 64), default=min(os.cpu_count() or 2, 64), show_default=True,
              help="Parallel candidate builds.")
@click.option("-o", "--work", type=click.Path(path_type=Path), default=DEFAULT_OUT / ".tune", show_default=True,
              help="Where the candidates are generated and built (WORK/<name>/<candidate>/).")
@click.option("--nvcc", "nvcc_path", help="nvcc to use.")
@click.option("--resume", is_flag=True,
              help="Skip the specs (and run-time buckets) that --db already holds at this level or higher for this "
                   "GPU, generator and family choice: an interrupted tune goes on where it stopped.")
@click.option("--json", "as_json", is_flag=True, help="Print the database entries written, as JSON.")
def tune(specs: tuple[Path, ...], level: int, arch: str | None, families: tuple[str, ...], db_path: Path | None,
         merge_paths: tuple[Path, ...], budget: float, reps: int, jobs: int, work: Path, nvcc_path: str | None,
         resume: bool, as_json: bool) -> None:
    """Pick each spec's plan by measurement and keep it in the tuning database.

    Candidates (the cost model's cheapest plans of every kernel family the problem allows) compile in
    parallel; on the GPU each must pass a quick verify (one seed) before it is timed (graph replay,
    inputs rotated past L2); the fastest wins, equal times going to the cost model's order. The
    winner is benched against cuBLAS once more. `deepgemm gen` then renders the tuned plan (plan.json
    records the measured µs, the ratio and the level) and `explain` shows the measured ranking.

    Specs are measured in order while the next ones' candidates compile. With several GPUs, one worker a
    GPU (CUDA_VISIBLE_DEVICES) measures candidates in parallel. Beyond one host, run one tune per job with
    its own --db and merge the files with --merge."""
    try:
        path, db = _tuning_db(db_path)
        merged = sum(merge(db, load_db(m)) for m in merge_paths)
        work_items = []
        for spec in (load_spec(p) for p in specs):
            target = get_arch(arch or spec.arch)
            for problem in tuning_problems(spec):  # a run-time spec: each bucket of its sizes
                views = analyse(problem)
                work_items.append((problem, target, views, tune_candidates(views, target, level, families)))
    except DeepGemmError as err:
        _fail(err)
    if level == 0:
        for spec, target, views, _ in work_items:
            click.echo(_model_ranking(spec, views, target))
        if merged:
            save_db(path, db)
            click.echo(f"merged {merged} entr{'y' if merged == 1 else 'ies'} into {path}")
        return
    try:
        gpus = find_gpus()
        if not gpus:
            raise NoGpuError("no CUDA GPU visible (nvidia-smi lists none): tune measures on one; "
                             "`deepgemm tune --level 0` prints the cost model's ranking without")
        nvcc = find_nvcc(nvcc_path)
    except DeepGemmError as err:
        _fail(err)
    if resume:
        done = [w for w in work_items if _tuned_here(db, w[0], w[1].name, gpus[0].name, level, families)]
        for spec, *_ in done:
            click.echo(f"{spec.name}: tuned at level {level} or higher already (--resume): skipped", err=True)
        work_items = [w for w in work_items if w not in done]
    dirs = {}
    for spec, target, _, cands in work_items:
        for c in cands:
            d = work / spec.name / c.ident
            generate(spec, target, work, plan=c.plan, directory=d)
            dirs[(spec.name, c.ident)] = (d, target.name)
    env = harness_env()
    entries = []
    # Every candidate is queued for the compiler in the specs' order; a spec is measured as soon as its
    # own candidates are built, while the next ones compile.
    pool = ThreadPoolExecutor(max_workers=jobs, initializer=_lower_build_priority)
    try:
        pending = {key: pool.submit(build, d, a, nvcc) for key, (d, a) in dirs.items()}
        for spec, target, _, cands in work_items:
            built = _tune_built(spec, cands, pending, as_json)
            measured = _tune_problem(spec, target, cands, dirs, built, gpus, env, budget, reps, level, families,
                                     as_json)
            if measured is None:
                continue
            key, entry = measured
            db["entries"][key] = entry
            save_db(path, db)  # after every spec: an interrupted tune keeps what it measured
            entries.append(entry)
            if not as_json:
                click.echo(_tune_line(entry))
    finally:  # an interrupted tune does not wait for the compiles it no longer needs
        pool.shutdown(cancel_futures=True)
    save_db(path, db)
    if as_json:
        click.echo(json.dumps(entries, indent=2))
    else:
        click.echo(f"wrote {len(entries)} entr{'y' if len(entries) == 1 else 'ies'} to {path}")
    sys.exit(EXIT_OK if len(entries) == len(work_items) else EXIT_FAILED)


def _lower_build_priority() -> None:
    """tune's compiler threads run at nice 10 (Linux keeps a nice value per thread, and the nvcc a thread
    starts inherits it), so that the harness runs measuring earlier specs meanwhile keep their CPU."""
    if hasattr(os, "setpriority"):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)


def _tuned_here(db: dict, spec, arch: str, gpu: str, level: int, families: tuple[str, ...]) -> bool:
    """--resume: the database holds this problem, measured on this GPU by this generator at `level` or
    higher, over the same families."""
    entry = lookup(db, spec, arch, gpu)
    return (entry is not None and entry.get("gpu") == gpu and entry.get("level", 0) >= level
            and entry.get("families") == (sorted(families) if families else "all"))


def _tune_built(spec, cands, pending: dict, quiet: bool) -> dict:
    """Waits for one spec's candidate builds; returns (spec name, candidate) -> ok (built, no spills)."""
    built = {}
    with click.progressbar(cands, label=f"building {spec.name}", file=sys.stderr, hidden=quiet) as bar:
        for c in bar:
            res = pending[(spec.name, c.ident)].result()
            built[(spec.name, c.ident)] = res.ok and not any(k.spills for k in res.kernels)
    return built


def _tune_problem(spec, target, cands, dirs, built, gpus, env, budget: float, reps: int, level: int,
                  families: tuple[str, ...], quiet: bool) -> tuple[str, dict] | None:
    """Measures one spec's candidates and benches the winner against cuBLAS: its (key, database entry)."""
    measured = _tune_measure(spec, cands, dirs, built, gpus, env, budget, reps, quiet)
    winner = pick(measured)
    if winner is None:
        click.echo(f"error: {spec.name}: no candidate passed verify; nothing recorded", err=True)
        return None
    d, arch_name = dirs[(spec.name, winner["id"])]
    final = run_harness(d, harness_path(d, arch_name), arch_name, ["bench", "--reps", str(reps)]
                        + _range_ends(spec), env).report
    return make_entry(spec, target.name, gpus[0].name, gpus[0].driver_version, level, measured, winner, final,
                      families)


def _model_ranking(spec, views, target) -> str:
    lines = [f"{spec.name}: the cost model's ranking on {target.name} (level 0: nothing measured)"]
    for c in tune_candidates(views, target, 1):
        lines.append(f"  {c.ident:<10} {c.model_us:10.1f} µs (model)  {c.plan.primary.summary}")
    return "\n".join(lines)


def _tune_measure(spec, cands, dirs, built, gpus, env, budget: float, reps: int, quiet: bool) -> list[dict]:
    """Verify (one seed) and time each built candidate, one worker a GPU, until the budget is spent."""
    order = sorted(cands, key=lambda c: (c.model_rank, list(FAMILIES).index(c.family)))
    todo = [c for c in order if built.get((spec.name, c.ident))]
    start = time.monotonic()
    results: dict[str, dict] = {}

    def measure(c, gpu_env) -> dict:
        d, arch_name = dirs[(spec.name, c.ident)]
        if time.monotonic() - start > budget:
            return c.row(skipped="budget spent")
        row = c.row()
        try:
            exe = harness_path(d, arch_name)
            ends = _range_ends(spec)
            ver = run_harness(d, exe, arch_name, ["verify", "--seeds", "1", "--samples", "32", *ends], gpu_env,
                              timeout=TUNE_RUN_TIMEOUT_S)
            row["verified"] = ver.exit_code == 0 and bool(ver.report.get("passed"))
            if row["verified"]:
                b = run_harness(d, exe, arch_name, ["bench", "--reps", str(reps), "--baseline", "0", *ends],
                                gpu_env, timeout=TUNE_RUN_TIMEOUT_S)
                # A range of run-time sizes is timed at both ends; the candidate is ranked by their mean.
                sizes = [r["us"] for r in b.report.get("m_rows", []) if isinstance(r.get("us"), (int, float))]
                row["us"] = sum(sizes) / len(sizes) if sizes else b.report.get("us")
        except DeepGemmError as err:  # this candidate cannot run: it loses, the others go on
            row["error"] = str(err)
        return row

    queues = [todo[i::len(gpus)] for i in range(len(gpus))]
    with click.progressbar(length=len(todo), label=f"measuring {spec.name}", file=sys.stderr, hidden=quiet) as bar:
        def worker(i: int) -> None:
            gpu_env = {**env, "CUDA_VISIBLE_DEVICES": str(gpus[i].index)}
            for c in queues[i]:
                results[c.ident] = measure(c, gpu_env)
                bar.update(1)
        with ThreadPoolExecutor(max_workers=len(gpus)) as pool:
            list(pool.map(worker, range(len(gpus))))
    return [results.get(c.ident) or c.row(skipped="build failed or spilled") for c in order]


def _range_ends(spec) -> list[str]:
    """--m for a tuning problem that is a range of run-time sizes: its first and last size."""
    rt = spec.run_time_letter
    return ["--m", f"{rt[1]},{rt[2]}"] if rt else []


def _tune_line(entry: dict) -> str:
    w = entry["winner"]
    ok = [m for m in entry["measured"] if m.get("us")]
    model = next((m for m in entry["measured"] if m["model_rank"] == 0 and m.get("us")), None)
    vs_model = f", the model's pick {model['us']:.4g} µs ({model['id']})" if model else ""
    return (f"{entry['name']}: {w['id']} wins at {w['us']:.4g} µs (ratio {_fmt(w.get('ratio'))} vs cuBLAS), "
            f"{len(ok)} of {len(entry['measured'])} candidates measured{vs_model}")
