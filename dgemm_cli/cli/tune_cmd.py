"""`deepgemm tune`: the command line of the measuring loop (dgemm_cli.tune_run)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import click

from dgemm_cli.arch import Arch, get_arch
from dgemm_cli.cli.common import ARCH_CHOICE, DEFAULT_OUT, fail, fmt, tuning_db
from dgemm_cli.errors import EXIT_FAILED, EXIT_OK, DeepGemmError, NoGpuError
from dgemm_cli.families import FAMILIES
from dgemm_cli.records import TuningRecord
from dgemm_cli.spec import load_spec
from dgemm_cli.toolchain import find_gpus, find_nvcc
from dgemm_cli.tune import LEVEL3_CAP, already_tuned, load_db, merge, save_db
from dgemm_cli.tune import candidates as tune_candidates
from dgemm_cli.tune_run import TuneSettings, measure, tune_problems


@click.command()
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
@click.option("--nvcc", "nvcc_path",
              help="nvcc to use (else $DEEPGEMM_NVCC, $CUDA_HOME, $CUDA_PATH, the CUDA wheels, PATH).")
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
        path, db = tuning_db(db_path)
        merged = sum(merge(db, load_db(m)) for m in merge_paths)
        problems = tune_problems([load_spec(p) for p in specs], lambda spec: _gpu_target(arch or spec.arch), level,
                                 families)
    except DeepGemmError as err:
        fail(err)
    if level == 0:
        for p in problems:
            try:
                click.echo(_model_ranking(p.spec, p.views, p.arch))
            except DeepGemmError as err:
                fail(err)
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
        fail(err)
    if resume:
        done = [p for p in problems if already_tuned(db, p.spec, p.arch.name, gpus[0].name, level, families)]
        for p in done:
            click.echo(f"{p.spec.name}: tuned at level {level} or higher already (--resume): skipped", err=True)
        problems = [p for p in problems if p not in done]

    @contextmanager
    def progress(label: str, total: int) -> Iterator[Callable[[int], None]]:
        with click.progressbar(length=total, label=label, file=sys.stderr, hidden=as_json) as bar:
            yield bar.update

    settings = TuneSettings(level, families, budget, reps, jobs, work)
    entries = []
    for entry in measure(problems, settings, db, path, gpus, nvcc, progress,
                         lambda text: click.echo(f"error: {text}", err=True)):
        entries.append(entry)
        if not as_json:
            click.echo(_tune_line(entry))
    save_db(path, db)
    if as_json:
        click.echo(json.dumps([e.to_dict() for e in entries], indent=2))
    else:
        click.echo(f"wrote {len(entries)} entr{'y' if len(entries) == 1 else 'ies'} to {path}")
    sys.exit(EXIT_OK if len(entries) == len(problems) else EXIT_FAILED)


def _gpu_target(name: str) -> Arch:
    """tune measures CUDA candidates; the host's cpu family takes its blocks from the host's caches."""
    target = get_arch(name)
    if target.backend != "cuda":
        raise DeepGemmError(f"tune measures GPU kernels, and {name} is the host: the cpu family sizes its blocks from "
                            "the host's caches at run time. Fix: pin `kc`, `mc` or `nc` in the spec's `plan:`, or tune "
                            "for a GPU arch (--arch sm_90a)")
    return target


def _model_ranking(spec, views, target) -> str:
    lines = [f"{spec.name}: the cost model's ranking on {target.name} (level 0: nothing measured)"]
    for c in tune_candidates(views, target, 1):
        lines.append(f"  {c.ident:<10} {c.model_us:10.1f} µs (model)  {c.plan.primary.summary}")
    return "\n".join(lines)


def _tune_line(entry: TuningRecord) -> str:
    w = entry.winner
    ok = [m for m in entry.measured if m.us]
    model = next((m for m in entry.measured if m.model_rank == 0 and m.us), None)
    vs_model = f", the model's pick {model.us:.4g} µs ({model.id})" if model else ""
    return (f"{entry.name}: {w.id} wins at {w.us:.4g} µs (ratio {fmt(w.ratio)} vs cuBLAS), "
            f"{len(ok)} of {len(entry.measured)} candidates measured{vs_model}")
