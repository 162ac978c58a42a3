"""`deepgemm tune`'s measuring loop, the I/O half of `dgemm_cli.tune`: generate every candidate, compile them in
parallel, verify and time each problem's candidates on the GPUs as soon as they are built, keep the fastest in
the tuning database.

Candidates are queued for the compiler in the problems' order, and a problem is measured as soon as its own
candidates are built while the next ones compile. With several GPUs, one worker a GPU (CUDA_VISIBLE_DEVICES)
measures candidates in parallel.

Each candidate is a harness process of its own, so the timing is interleaved across processes: once every
candidate is verified, each round runs every verified candidate's harness once (tune.round_order), and a candidate's
time is the median of its rounds' (each round's the harness's median of --reps graph replays).
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from pathlib import Path

from dgemm_cli.arch import Arch
from dgemm_cli.build import BuildResult, build, harness_path
from dgemm_cli.errors import DeepGemmError
from dgemm_cli.families import FAMILIES
from dgemm_cli.pipeline import generate
from dgemm_cli.records import BenchReport, MeasuredCandidate, TuningDb, TuningRecord, VerifyReport
from dgemm_cli.run import harness_env, run_harness
from dgemm_cli.spec import Spec
from dgemm_cli.toolchain import GpuInfo, Nvcc
from dgemm_cli.tune import (
    Candidate,
    candidates,
    make_entry,
    pick,
    round_order,
    save_db,
    timing_rounds,
    tuning_problems,
)
from dgemm_cli.views import ProblemViews, analyse

RUN_TIMEOUT_S = 120  # one candidate's verify or bench; a hung candidate loses instead of stalling the tune

# (label, total) -> a context whose value advances the bar by n; the command line draws it, tests pass a no-op.
Progress = Callable[[str, int], AbstractContextManager[Callable[[int], None]]]


@dataclass(frozen=True)
class TuneProblem:
    """One spec, or one bucket of a run-time spec's sizes, and the candidates to measure for it."""

    spec: Spec
    arch: Arch
    views: ProblemViews
    candidates: list[Candidate]


@dataclass(frozen=True)
class TuneSettings:
    level: int
    families: tuple[str, ...]  # only these families' candidates (every family when empty)
    budget_s: float  # seconds of measuring a problem
    reps: int  # timed graph replays a candidate
    jobs: int  # parallel candidate builds
    work: Path  # candidates go to work/<problem>/<candidate>/
    roof: bool = False  # the winner's final bench also times the compute roof (tune --plot draws it)


@dataclass(frozen=True)
class Tuned:
    """A tuned problem: its database entry and the winner's final bench against the baseline."""

    entry: TuningRecord
    final: BenchReport


def tune_problems(specs: list[Spec], arch: Callable[[Spec], Arch], level: int,
                  families: tuple[str, ...]) -> list[TuneProblem]:
    """Every spec's tuning problems (a run-time spec: one a bucket of its sizes) with their candidates."""
    out = []
    for spec in specs:
        target = arch(spec)
        for problem in tuning_problems(spec):
            views = analyse(problem)
            out.append(TuneProblem(problem, target, views, candidates(views, target, level, families)))
    return out


def measure(problems: list[TuneProblem], settings: TuneSettings, db: TuningDb, db_path: Path,
            gpus: list[GpuInfo], nvcc: Nvcc, progress: Progress,
            warn: Callable[[str], None]) -> Iterator[Tuned]:
    """Measures each problem and yields its database entry (saved into `db_path` first) with the winner's final
    bench; a problem whose candidates all fail verify yields nothing (`warn` says so)."""
    dirs: dict[tuple[str, str], tuple[Path, str]] = {}
    for p in problems:
        for c in p.candidates:
            d = settings.work / p.spec.name / c.ident
            generate(p.spec, p.arch, settings.work, plan=c.plan, directory=d)
            dirs[(p.spec.name, c.ident)] = (d, p.arch.name)
    env = harness_env()
    pool = ThreadPoolExecutor(max_workers=settings.jobs, initializer=_lower_build_priority)
    try:
        pending = {key: pool.submit(build, d, a, nvcc) for key, (d, a) in dirs.items()}
        for p in problems:
            built = _wait_built(p, pending, progress)
            rows = _measure_candidates(p, dirs, built, gpus, env, settings, progress)
            winner = pick(rows)
            if winner is None:
                warn(f"{p.spec.name}: no candidate passed verify; nothing recorded")
                continue
            d, arch_name = dirs[(p.spec.name, winner.id)]
            roof = ["--roof", "1"] if settings.roof else []
            final = run_harness(d, harness_path(d, arch_name), arch_name,
                                ["bench", "--reps", str(settings.reps), *roof, *_range_ends(p.spec)], env).report
            assert isinstance(final, BenchReport)
            key, entry = make_entry(p.spec, p.arch.name, gpus[0].name, gpus[0].driver_version, settings.level, rows,
                                    winner, final, settings.families)
            db.entries[key] = entry
            save_db(db_path, db)  # after every problem: an interrupted tune keeps what it measured
            yield Tuned(entry, final)
    finally:  # an interrupted tune does not wait for the compiles it no longer needs
        pool.shutdown(cancel_futures=True)


def _lower_build_priority() -> None:
    """The compiler threads run at nice 10 (Linux keeps a nice value per thread, and the nvcc a thread starts
    inherits it), so that the harness runs measuring earlier problems meanwhile keep their CPU."""
    if hasattr(os, "setpriority"):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)


def _wait_built(p: TuneProblem, pending: dict[tuple[str, str], Future[BuildResult]],
                progress: Progress) -> dict[str, str | None]:
    """Candidate -> why it is not measured (None: built without spills), once every candidate of the problem is
    compiled: the compiler's first error line, or the kernel that spills and how much."""
    built: dict[str, str | None] = {}
    with progress(f"building {p.spec.name}", len(p.candidates)) as advance:
        for c in p.candidates:
            built[c.ident] = _not_built(pending[(p.spec.name, c.ident)].result())
            advance(1)
    return built


def _not_built(res: BuildResult) -> str | None:
    if not res.ok:
        lines = [line.strip() for line in res.error.splitlines() if line.strip()]
        errors = [line for line in lines if "error" in line.lower()]  # the first error: what the others follow from
        return "build failed: " + (errors[0] if errors else lines[-1] if lines else "no compiler output")[:200]
    spilled = [k for k in res.kernels if k.spills]
    if spilled:
        k = spilled[0]
        return (f"spilled: {k.kernel} ({k.registers} registers, {k.spill_store_bytes} bytes of spill stores, "
                f"{k.spill_load_bytes} of loads)")
    return None


def _measure_candidates(p: TuneProblem, dirs: dict[tuple[str, str], tuple[Path, str]], built: dict[str, str | None],
                        gpus: list[GpuInfo], env: dict[str, str], settings: TuneSettings,
                        progress: Progress) -> list[MeasuredCandidate]:
    """Verify (one seed) each built candidate in the cost model's order until the budget is spent, then time the
    verified ones in interleaved rounds (_time_rounds): a row each (Candidate.row)."""
    order = sorted(p.candidates, key=lambda c: (c.model_rank, list(FAMILIES).index(c.family)))
    todo = [c for c in order if c.ident in built and built[c.ident] is None]
    ends = _range_ends(p.spec)
    start = time.monotonic()
    results: dict[str, MeasuredCandidate] = {}

    def verify_one(c: Candidate, gpu_env: dict[str, str]) -> MeasuredCandidate:
        if time.monotonic() - start > settings.budget_s:
            return c.row(skipped="budget spent")
        d, arch_name = dirs[(p.spec.name, c.ident)]
        try:
            ver = run_harness(d, harness_path(d, arch_name), arch_name,
                              ["verify", "--seeds", "1", "--samples", "32", *ends], gpu_env, timeout=RUN_TIMEOUT_S)
        except DeepGemmError as err:  # this candidate cannot run: it loses, the others go on
            return c.row(error=str(err))
        assert isinstance(ver.report, VerifyReport)
        return c.row(verified=ver.exit_code == 0 and ver.report.passed)

    queues = [todo[i::len(gpus)] for i in range(len(gpus))]
    with progress(f"verifying {p.spec.name}", len(todo)) as advance:
        def verifier(i: int) -> None:
            gpu_env = {**env, "CUDA_VISIBLE_DEVICES": str(gpus[i].index)}
            for c in queues[i]:
                results[c.ident] = verify_one(c, gpu_env)
                advance(1)
        with ThreadPoolExecutor(max_workers=len(gpus)) as pool:
            list(pool.map(verifier, range(len(gpus))))
    verified = [c for c in todo if results[c.ident].verified]
    times = _time_rounds(p, verified, dirs, gpus, env, settings, progress, start)
    for c in verified:
        rounds, error = times[c.ident]
        row = results[c.ident]
        if error is not None:
            results[c.ident] = replace(row, error=error, us_rounds=tuple(rounds))
        else:
            results[c.ident] = replace(row, us=statistics.median(rounds), us_rounds=tuple(rounds))
    return [results.get(c.ident) or c.row(skipped=built.get(c.ident) or "not built") for c in order]


def _time_rounds(p: TuneProblem, verified: list[Candidate], dirs: dict[tuple[str, str], tuple[Path, str]],
                 gpus: list[GpuInfo], env: dict[str, str], settings: TuneSettings, progress: Progress,
                 start: float) -> dict[str, tuple[list[float], str | None]]:
    """Each verified candidate's time in each round, and why it could not be timed (None when it was). A round
    times every candidate once (tune.round_order), round r on GPU r % len(gpus), the GPUs' rounds in parallel.
    A GPU's first round always runs, its later ones only while the budget lasts, and a round once started runs to
    its end: every candidate has the same rounds. A candidate whose harness fails in any round is not ranked."""
    ids = [c.ident for c in verified]
    total = timing_rounds(len(gpus))
    times: dict[str, tuple[list[float], str | None]] = {i: ([], None) for i in ids}
    lock = threading.Lock()
    ends = _range_ends(p.spec)

    def time_one(ident: str, gpu_env: dict[str, str]) -> None:
        d, arch_name = dirs[(p.spec.name, ident)]
        try:
            b = run_harness(d, harness_path(d, arch_name), arch_name,
                            ["bench", "--reps", str(settings.reps), "--baseline", "0", *ends], gpu_env,
                            timeout=RUN_TIMEOUT_S)
            assert isinstance(b.report, BenchReport)
            # A range of run-time sizes is timed at both ends; the candidate is ranked by their mean.
            sizes = [r.us for r in b.report.m_rows or ()]
            us = sum(sizes) / len(sizes) if sizes else b.report.row.us if b.report.row is not None else None
            error = b.report.error or "no time reported"
        except DeepGemmError as err:
            us, error = None, str(err)
        with lock:
            rounds, failed = times[ident]
            if us is None:
                failed = failed or error
            else:
                rounds.append(us)
            times[ident] = (rounds, failed)

    with progress(f"timing {p.spec.name} ({total} rounds)", total * len(ids)) as advance:
        def worker(g: int) -> None:
            gpu_env = {**env, "CUDA_VISIBLE_DEVICES": str(gpus[g].index)}
            for r in range(g, total, len(gpus)):
                if r >= len(gpus) and time.monotonic() - start > settings.budget_s:
                    advance(len(ids) * len(range(r, total, len(gpus))))
                    return
                for ident in round_order(ids, r):
                    time_one(ident, gpu_env)
                    advance(1)
        with ThreadPoolExecutor(max_workers=len(gpus)) as pool:
            list(pool.map(worker, range(len(gpus))))
    return times


def _range_ends(spec: Spec) -> list[str]:
    """--m for a tuning problem that is a range of run-time sizes: its first and last size."""
    rt = spec.run_time_letter
    return ["--m", f"{rt[1]},{rt[2]}"] if rt else []
