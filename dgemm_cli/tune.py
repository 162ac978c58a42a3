"""`deepgemm tune` without the I/O (pure): the candidates a tuning level measures, the tuning database
and its key, and the choice among measured candidates. cli.py renders, builds and runs them.

Levels: 0 is the cost model alone (nothing measured); 1, 2 and 3 measure the 4, 16 or every feasible
(at most LEVEL3_CAP) cheapest candidates of every kernel family whose gates allow the problem, in
the cost model's order, so that a budget that runs out has measured the likeliest ones.

Timing: the verified candidates are timed in rounds, each round every candidate once (round_order), and each is
ranked by the median of its rounds; so a clock or power state that drifts during a tune weighs on every candidate
alike, and one slow or fast moment moves no pick.

The database is one JSON file, read and written as a records.TuningDb: {"format": FORMAT, "schema_version":
records.TUNING_SCHEMA_VERSION, "entries": {key: entry}}. A key is
the spec's content hash (its normalised form without the name or the file it came from), the arch,
the GPU's name, the driver version and the generator version. Entries from several machines or
runs merge by key, the newer `date` winning: a Ray or Slurm job array that tunes different specs or
GPUs writes one file each and merges them with `deepgemm tune --merge`.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from dgemm_cli import __version__
from dgemm_cli.arch import Arch
from dgemm_cli.constraints import Decision, Rejection, Unsatisfiable
from dgemm_cli.errors import PlanError
from dgemm_cli.families import FAMILIES, FamilyPlan
from dgemm_cli.families.solving import of_assignment, pinned, ranked
from dgemm_cli.plan import Plan, fallback_plan, family_gates, needs_fallback, no_family, row_buckets
from dgemm_cli.records import (
    TUNING_FORMAT,
    BenchReport,
    MeasuredCandidate,
    TunedSummary,
    TuningDb,
    TuningDbError,
    TuningRecord,
    TuningWinner,
)
from dgemm_cli.spec import Spec
from dgemm_cli.views import ProblemViews, analyse

FORMAT = TUNING_FORMAT
LEVELS = {0: 0, 1: 4, 2: 16, 3: None}
LEVEL3_CAP = 256
ROUNDS = 3  # timing rounds at least: the median of three discards one round taken at an odd moment


@dataclass(frozen=True)
class Candidate:
    ident: str  # "<family>-<model rank>", e.g. "hopper-03"
    family: str
    model_rank: int  # 0: the cost model's pick within the family
    model_us: float
    plan: Plan

    def row(self, **measured: Any) -> MeasuredCandidate:
        """This candidate's line in a database entry's `measured` list; unmeasured until told otherwise."""
        return MeasuredCandidate(self.ident, self.family, self.model_rank, self.model_us,
                                 self.plan.primary.assignment, **measured)


def spec_hash(spec: Spec) -> str:
    """The problem's identity: the normalised spec without its name (the file it came from is not in it)."""
    d = spec.to_dict()
    d.pop("name")
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()


def db_key(spec: Spec, arch: str, gpu: str, driver: str) -> str:
    return f"{spec_hash(spec)}|{arch}|{gpu}|{driver}|{__version__}"


def default_db_path(env: dict[str, str] | None = None) -> Path:
    """$DEEPGEMM_TUNING_DB, else the user cache dir: $XDG_CACHE_HOME (or ~/.cache) on Linux,
    ~/Library/Caches on macOS, %LOCALAPPDATA% on Windows; deepgemm/tuning.json inside."""
    env = dict(os.environ if env is None else env)
    if env.get("DEEPGEMM_TUNING_DB"):
        return Path(env["DEEPGEMM_TUNING_DB"])
    if sys.platform == "darwin":
        root = Path.home() / "Library" / "Caches"
    elif sys.platform.startswith("win"):
        root = Path(env.get("LOCALAPPDATA", Path.home() / "AppData" / "Local"))
    else:
        root = Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return root / "deepgemm" / "tuning.json"


def empty_db() -> TuningDb:
    return TuningDb()


def load_db(path: Path) -> TuningDb:
    """The database at `path` (empty where there is none); TuningDbError names the file, the key and the fix."""
    return TuningDb.load(path)


def save_db(path: Path, db: TuningDb) -> None:
    """Atomic: a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(db.to_dict(), indent=1, sort_keys=True) + "\n")
    tmp.replace(path)


def merge(into: TuningDb, other: TuningDb) -> int:
    """Adds `other`'s entries to `into` (the newer date wins a key); returns how many changed."""
    changed = 0
    for key, entry in other.entries.items():
        mine = into.entries.get(key)
        if mine is None or entry.date > mine.date:
            into.entries[key] = entry
            changed += 1
    return changed


def lookup(db: TuningDb, spec: Spec, arch: str, gpu: str | None = None) -> TuningRecord | None:
    """The entry for this spec, arch and generator version: the one for `gpu` if given and present,
    else the most recent of any GPU (gen runs where there may be no GPU to ask)."""
    h = spec_hash(spec)
    hits = [e for e in db.entries.values() if e.spec_hash == h and e.arch == arch and e.generator == __version__]
    if gpu is not None and any(e.gpu == gpu for e in hits):
        hits = [e for e in hits if e.gpu == gpu]
    return max(hits, key=lambda e: e.date) if hits else None


def candidates(views: ProblemViews, arch: Arch, level: int, families: tuple[str, ...] = ()) -> list[Candidate]:
    """Every family's `LEVELS[level]` cheapest plans, each a whole Plan (with the cta fallback where
    the candidate needs run-time pointer checks); `families`: only these (all when empty)."""
    count = LEVELS[level]
    count = LEVEL3_CAP if count is None else count
    if count == 0:
        return []
    gated = family_gates(views, arch)
    if all(gated.values()):  # no family runs the problem (e.g. e4m3 inputs TMA cannot load)
        raise no_family(views, arch, gated)
    if families and all(gated[f] for f in families):
        raise PlanError(f"{views.spec.source}: {', '.join(families)} cannot run this problem: "
                        + "; ".join(f"{f}: {why}" for f in families for _, why in gated[f]))
    fallbacks: dict[str, FamilyPlan] = {}  # by primary family: the fallback family's plan, made once
    out = []
    pins = dict(views.spec.pins)
    for name, family in FAMILIES.items():
        if gated[name] or (families and name not in families):
            continue
        if pins.get("family", name) != name:
            continue  # the spec's plan: names another family
        problem = family.problem(views, arch)
        pins_here = {node: value for node, value in pins.items() if node != "family"}
        if any(node not in {n.name for n in problem.graph.nodes} for node in pins_here):
            continue  # the spec's plan fixes a decision this family does not have
        problem, refused = pinned(problem, pins_here)
        if refused is not None:
            continue
        try:
            ranked_plans = ranked(problem, count)
        except Unsatisfiable:  # the pins leave this family no plan
            continue
        for rank, fplan in enumerate(ranked_plans):
            fb = None
            if needs_fallback(fplan):
                if name not in fallbacks:
                    fallbacks[name] = fallback_plan(fplan, views, arch)
                fb = fallbacks[name]
            decision = Decision("family", name, "the kernel family (a deepgemm tune candidate)", ())
            out.append(Candidate(f"{name}-{rank:02d}", name, rank, fplan.cost_us, Plan(fplan, fb, decision)))
    return out


def tuning_problems(spec: Spec) -> list[Spec]:
    """What `tune` measures for a spec: the spec itself, or for a letter sized at run time each bucket of
    its sizes (plan.row_buckets) as a problem of its own, named after the bucket. A range bucket is
    still run-time sized (its candidates take m); its database entry is keyed by its own content, so
    `gen` of the whole spec finds each bucket's (bucket_entries)."""
    rt = spec.run_time_letter
    if rt is None:
        return [spec]
    _, lo, hi = rt
    return [replace(spec.rows_bucket(blo, bhi), name=f"{spec.name}_m{blo}" + (f"_{bhi}" if bhi > blo else ""))
            for blo, bhi in row_buckets(lo, hi)]


def bucket_entries(db: TuningDb, spec: Spec, arch: str, gpu: str | None) -> dict[tuple[int, int], TuningRecord]:
    """The database entries of a run-time spec's buckets, by (first size, last size)."""
    out = {}
    for sub in tuning_problems(spec):
        entry = lookup(db, sub, arch, gpu)
        if entry is not None:
            rt = sub.run_time_letter
            size = sub.sizes[spec.run_time_letter[0]]
            out[(rt[1], rt[2]) if rt else (size, size)] = entry
    return out


def tuned_buckets(db: TuningDb, spec: Spec, arch: Arch, gpu: str | None) -> dict[tuple[int, int], Plan]:
    """The measured plans of a run-time spec's buckets (plan.plan_buckets takes them), by (first, last size)."""
    return {b: tuned_plan(analyse(spec.rows_bucket(*b)), arch, e)
            for b, e in bucket_entries(db, spec, arch.name, gpu).items()}


def timing_rounds(gpus: int, rounds: int = ROUNDS) -> int:
    """How many rounds to time: at least `rounds`, a whole number a GPU. Round r runs on GPU r % gpus, so every
    candidate is timed on every GPU equally often and GPUs of one model that run at different clocks weigh on all
    candidates alike."""
    return gpus * -(-rounds // gpus)


def round_order(ids: Sequence[str], r: int) -> list[str]:
    """The order of timing round r over candidates `ids` (the model's order): it starts at the (r % n)-th and runs
    forwards on even rounds, backwards on odd ones. A candidate thus starts a round once every n rounds and follows
    a different candidate from round to round; with an even count every candidate takes every place once in n
    rounds."""
    n = len(ids)
    if n == 0:
        return []
    start = r % n
    step = 1 if r % 2 == 0 else -1
    return [ids[(start + step * i) % n] for i in range(n)]


def pick(measured: list[MeasuredCandidate]) -> MeasuredCandidate | None:
    """The fastest verified candidate; equal times go to the family listed first, then the model's rank."""
    ok = [m for m in measured if m.verified and m.us is not None]
    order = list(FAMILIES)
    return min(ok, key=lambda m: (m.us, order.index(m.family), m.model_rank)) if ok else None


def make_entry(spec: Spec, arch: str, gpu: str, driver: str, level: int, measured: list[MeasuredCandidate],
               winner: MeasuredCandidate, final: BenchReport,
               families: tuple[str, ...] = ()) -> tuple[str, TuningRecord]:
    """The database key and entry of one tuned spec; `final` is the winner's bench against cuBLAS (its times go to
    bench_us, ratio and baseline_us; `us` stays the median the winner was picked on); `families`: the families the
    tune was limited to (empty: all)."""
    row = final.row
    won = TuningWinner(**vars(winner), ratio=row.ratio if row else None, baseline_us=row.baseline_us if row else None,
                       baseline=row.baseline_formulation if row else None, bench_us=row.us if row else None)
    entry = TuningRecord(
        spec_hash=spec_hash(spec), name=spec.name, arch=arch, gpu=gpu, driver=driver, generator=__version__,
        level=level, date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        winner=won, measured=tuple(measured), families=tuple(sorted(families)))
    return db_key(spec, arch, gpu, driver), entry


def tuned_plan(views: ProblemViews, arch: Arch, entry: TuningRecord) -> Plan:
    """The winner of a database entry as a Plan, with the measured ranking as the family decision."""
    win = entry.winner
    if win.family not in FAMILIES:
        raise TuningDbError("tuning database", f"entry {entry.name}: winner.family",
                            f"'{win.family}' is unknown to deepgemm {__version__}", "tune it again")
    primary = of_assignment(FAMILIES[win.family].problem(views, arch), dict(win.assignment))
    fallback = fallback_plan(primary, views, arch) if needs_fallback(primary) else None
    best: dict[str, float] = {}
    for m in entry.timed:
        if m.family != win.family:
            best[m.family] = min(best.get(m.family, m.us), m.us)
    rejected = tuple(Rejection(f, f"measured +{(us / win.us - 1) * 100:.0f}% (deepgemm tune, level "
                                  f"{entry.level})") for f, us in sorted(best.items()))
    decision = Decision("family", win.family, "the kernel family", rejected)
    return Plan(primary, fallback, decision, tuned=summary(entry).to_dict())


def summary(entry: TuningRecord) -> TunedSummary:
    """What plan.json records of a tuned plan (its `tuned`)."""
    return TunedSummary.of(entry)


def already_tuned(db: TuningDb, spec: Spec, arch: str, gpu: str, level: int, families: tuple[str, ...]) -> bool:
    """`tune --resume`: the database holds this problem, measured on this GPU by this generator at `level` or
    higher, over the same families."""
    entry = lookup(db, spec, arch, gpu)
    return (entry is not None and entry.gpu == gpu and entry.level >= level
            and entry.families == tuple(sorted(families)))
