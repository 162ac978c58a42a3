"""`deepgemm tune`: the command line of the measuring loop (dgemm_cli.tune_run)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import click

from dgemm_cli import plot
from dgemm_cli.arch import Arch, get_arch
from dgemm_cli.cli.common import ARCH_CHOICE, DEFAULT_OUT, fail, fmt, tuning_db
from dgemm_cli.errors import EXIT_FAILED, EXIT_OK, DeepGemmError, NoGpuError
from dgemm_cli.families import FAMILIES
from dgemm_cli.records import TuningRecord
from dgemm_cli.spec import load_spec
from dgemm_cli.stability import UNSTABLE_ABOVE, spread
from dgemm_cli.toolchain import find_gpus, find_nvcc
from dgemm_cli.tune import LEVEL3_CAP, already_tuned, load_db, merge, save_db, timing_rounds
from dgemm_cli.tune import candidates as tune_candidates
from dgemm_cli.tune_run import Tuned, TuneSettings, measure, tune_problems


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
              help="Timed graph replays per candidate and round (the candidates are timed in interleaved rounds, "
                   "each ranked by the median of its rounds).")
@click.option("-j", "--jobs", type=click.IntRange(1, 64), default=min(os.cpu_count() or 2, 64), show_default=True,
              help="Parallel candidate builds.")
@click.option("-o", "--work", type=click.Path(path_type=Path), default=DEFAULT_OUT / ".tune", show_default=True,
              help="Where the candidates are generated and built (WORK/<name>/<candidate>/).")
@click.option("--nvcc", "nvcc_path",
              help="nvcc to use (else $DEEPGEMM_NVCC, $CUDA_HOME, $CUDA_PATH, the CUDA wheels, PATH).")
@click.option("--resume", is_flag=True,
              help="Skip the specs (and run-time buckets) that --db already holds at this level or higher for this "
                   "GPU, generator and family choice: an interrupted tune goes on where it stopped.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Also draw the tuned problems into this image (.png, .svg, .pdf), a panel each: every timed "
                   "candidate's median and rounds, the winner, the cost model's pick, the baseline and the least time "
                   "the roofs allow (the winner's final bench then times the compute roof too). Needs matplotlib: "
                   "pip install 'deepgemm[plot]'.")
@click.option("--json", "as_json", is_flag=True, help="Print the database entries written, as JSON.")
def tune(specs: tuple[Path, ...], level: int, arch: str | None, families: tuple[str, ...], db_path: Path | None,
         merge_paths: tuple[Path, ...], budget: float, reps: int, jobs: int, work: Path, nvcc_path: str | None,
         resume: bool, plot_path: Path | None, as_json: bool) -> None:
    """Pick each spec's plan by measurement and keep it in the tuning database.

    Candidates (the cost model's cheapest plans of every kernel family the problem allows) compile in
    parallel; on the GPU each must pass a quick verify (one seed) before it is timed (graph replay,
    inputs rotated past L2). The verified candidates are timed in interleaved rounds (at least 3: each
    round times every candidate once, in an order that changes from round to round), and the fastest
    median wins, equal times going to the cost model's order: a candidate is not picked because it
    ran at a cooler moment. The winner is benched against cuBLAS once more. `deepgemm gen` then
    renders the tuned plan (plan.json records the measured µs, the ratio and the level) and `explain`
    shows the measured ranking.

    Specs are measured in order while the next ones' candidates compile. With several GPUs, one worker a
    GPU (CUDA_VISIBLE_DEVICES) verifies candidates in parallel, and the rounds are spread over the GPUs
    (round r on GPU r % n, as many rounds on each), so every candidate is timed on every GPU alike.
    Beyond one host, run one tune per job with its own --db and merge the files with --merge."""
    try:
        if plot_path is not None and level > 0:
            plot.require_matplotlib(plot_path)
        path, db = tuning_db(db_path)
        merged = sum(merge(db, load_db(m)) for m in merge_paths)
        problems = tune_problems([load_spec(p) for p in specs], lambda spec: _gpu_target(arch or spec.arch), level,
                                 families)
    except DeepGemmError as err:
        fail(err)
    if level == 0:
        if plot_path is not None:
            click.echo("note: --plot draws measured candidates, and level 0 measures none: nothing drawn", err=True)
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

    settings = TuneSettings(level, families, budget, reps, jobs, work, roof=plot_path is not None)
    entries, tuned = [], []
    for t in measure(problems, settings, db, path, gpus, nvcc, progress,
                     lambda text: click.echo(f"error: {text}", err=True)):
        entries.append(t.entry)
        tuned.append(t)
        if not as_json:
            click.echo(_tune_line(t.entry))
    save_db(path, db)
    if plot_path is not None and tuned:
        _draw(tuned, plot_path, timing_rounds(len(gpus)))
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


def _draw(tuned: list[Tuned], path: Path, rounds: int) -> None:
    try:
        plot.draw_tune([plot.tune_panel(t.entry, t.final, t.entry.arch) for t in tuned], path, rounds)
    except DeepGemmError as err:
        fail(err)
    click.echo(f"drew {len(tuned)} tuned problem{'s' if len(tuned) != 1 else ''} into {path}", err=True)


def _tune_line(entry: TuningRecord) -> str:
    """The winner and the model's pick, both medians of the same rounds; then the winner's final bench against the
    baseline (a run of its own, so its time may differ from the median); a warning where the rounds of some
    candidate moved by more than stability.UNSTABLE_ABOVE."""
    w = entry.winner
    timed = entry.timed
    rounds = max((len(m.us_rounds) for m in timed), default=0)
    model = entry.model_pick
    if model is None or model.id == w.id:
        vs_model = ", the cost model's pick"
    elif model.us is not None:
        vs_model = f"; the cost model's pick {model.id}: {model.us:.4g} µs"
    else:
        why = model.error or model.skipped or "failed verify"
        vs_model = f"; the cost model's pick {model.id} was not timed ({why})"
    of_rounds = f" (median of {rounds} rounds)" if rounds > 1 else ""
    line = (f"{entry.name}: {w.id} wins at {w.us:.4g} µs{of_rounds}{vs_model}; {len(timed)} of {len(entry.measured)} "
            "candidates timed")
    if w.bench_us is not None and w.ratio is not None:
        line += (f"\n  final bench: {w.bench_us:.4g} µs against {fmt(w.baseline_us)} µs for cuBLAS "
                 f"(ratio {fmt(w.ratio)})")
    moved = [(spread(m.us_rounds), m.id) for m in timed]
    moved = [(s, i) for s, i in moved if s is not None and s > UNSTABLE_ABOVE]
    if moved:
        worst = max(moved)
        line += (f"\n  warning: clocks or power moved the rounds of {len(moved)} candidate"
                 f"{'s' if len(moved) != 1 else ''} by more than {UNSTABLE_ABOVE:.0%} (up to {worst[0]:.1%}, "
                 f"{worst[1]}); the medians picked the winner: rerun or raise --reps")
    return line
