"""deepgemm tune without a GPU: candidates per level, the database (key, round trip, merge, lookup),
the measured choice, and gen/explain reading a tuned plan back."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace

import pytest

from dgemm_cli.arch import get_arch
from dgemm_cli.records import (
    TUNING_SCHEMA_VERSION,
    BenchReport,
    MeasuredCandidate,
    TuningDb,
    TuningRecord,
    VerifyReport,
)
from dgemm_cli.spec import load_spec, parse_spec
from dgemm_cli.tune import (
    FORMAT,
    TuningDbError,
    candidates,
    db_key,
    empty_db,
    load_db,
    lookup,
    merge,
    pick,
    save_db,
    spec_hash,
    tuned_plan,
)
from dgemm_cli.views import analyse

from .conftest import REPO, SPECS

SQUARE = next(p for p in SPECS if p.stem == "square_bf16")


def _entry(spec, winner_family="cta", rank=3, date="2026-11-30T10:00:00+00:00", gpu="NVIDIA H200", us=100.0):
    views = analyse(spec)
    cands = candidates(views, get_arch("sm_90a"), 2)
    measured = [{"id": c.ident, "family": c.family, "model_rank": c.model_rank, "model_us": c.model_us,
                 "assignment": c.plan.primary.assignment, "verified": True,
                 "us": us if (c.family, c.model_rank) == (winner_family, rank) else us * 1.5 + c.model_rank}
                for c in cands]
    winner = pick([MeasuredCandidate(**m) for m in measured]).to_dict()
    return TuningRecord.from_dict({
        "spec_hash": spec_hash(spec), "name": spec.name, "arch": "sm_90a", "gpu": gpu, "driver": "580.159.04",
        "generator": __import__("dgemm_cli").__version__, "level": 2, "date": date, "families": "all",
        "winner": {**winner, "ratio": 0.9, "baseline_us": 90.0, "baseline": "C^T=BA"}, "measured": measured})


def _verify(ok: bool) -> VerifyReport:
    """A verify report as the harness prints it."""
    return VerifyReport.from_dict({"command": "verify", "name": "k", "passed": ok, "tol": 0.01, "max_abs_err": 0.0,
                                   "rel_err": 0.0, "first_fail": None})


def _bench(**fields) -> BenchReport:
    """A bench report as the harness prints it."""
    return BenchReport.from_dict({"command": "bench", "name": "k", **fields})


def test_levels_measure_4_16_or_every_candidate_of_every_family():
    views = analyse(load_spec(SQUARE))
    assert candidates(views, get_arch("sm_90a"), 0) == []
    one = candidates(views, get_arch("sm_90a"), 1)
    assert [c.ident for c in one] == [f"{f}-{i:02d}" for f in ("hopper", "cta") for i in range(4)]
    assert len(candidates(views, get_arch("sm_90a"), 2)) == 32
    # Gated families offer none: sm_80 has no wgmma.
    assert {c.family for c in candidates(views, get_arch("sm_80"), 1)} == {"cta"}
    # Every candidate is a distinct, feasible plan; rank 0 is the model's pick.
    hop = [c for c in one if c.family == "hopper"]
    assert len({json.dumps(c.plan.primary.assignment, sort_keys=True) for c in hop}) == 4
    assert [c.model_us for c in hop] == sorted(c.model_us for c in hop)


def test_spec_hash_ignores_name_and_file_not_the_problem(tmp_path):
    a = parse_spec({"name": "x", "gemm": {"m": 8, "n": 8, "k": 8}}, "a.yaml")
    b = parse_spec({"name": "y", "gemm": {"m": 8, "n": 8, "k": 8}}, str(tmp_path / "b.yaml"))
    c = parse_spec({"name": "x", "gemm": {"m": 8, "n": 8, "k": 8}, "operands": {"A": {"layout": "col"}}})
    assert spec_hash(a) == spec_hash(b) != spec_hash(c)
    assert db_key(a, "sm_90a", "H200", "580") != db_key(a, "sm_90a", "H100", "580")


def test_database_round_trip_merge_and_lookup(tmp_path):
    spec = load_spec(SQUARE)
    old, new = _entry(spec, date="2026-11-01T00:00:00+00:00"), _entry(spec, rank=1)
    db = empty_db()
    db.entries["k"] = old
    save_db(tmp_path / "a.json", db)
    assert load_db(tmp_path / "a.json") == db
    other = empty_db()
    other.entries["k"] = new
    other.entries["k2"] = _entry(spec, gpu="NVIDIA H100", date="2026-11-02T00:00:00+00:00")
    assert merge(db, other) == 2 and db.entries["k"] is new
    assert merge(db, TuningDb({"k": old})) == 0  # older never replaces newer
    assert lookup(db, spec, "sm_90a").date == new.date  # most recent of any GPU
    assert lookup(db, spec, "sm_90a", gpu="NVIDIA H100").gpu == "NVIDIA H100"
    assert lookup(db, spec, "sm_80") is None
    assert lookup(db, parse_spec({"name": "z", "gemm": {"m": 8, "n": 8, "k": 8}}), "sm_90a") is None


@pytest.mark.parametrize("text,match", [
    ("{", "not readable JSON"), ('{"format": "x", "entries": {}}', "format: is 'x': not a deepgemm tuning database"),
    (json.dumps({"format": FORMAT, "schema_version": 99, "entries": {}}), "schema_version: is 99; this deepgemm reads"),
    (json.dumps({"format": FORMAT, "entries": {}}), "schema_version: missing.*Fix: move it away and tune again"),
    (json.dumps({"format": FORMAT, "schema_version": 1, "entries": {"k": {"name": "x"}}}),
     "entries.k.winner: missing"),
])
def test_bad_database_files_are_refused(tmp_path, text, match):
    path = tmp_path / "db.json"
    path.write_text(text)
    with pytest.raises(TuningDbError, match=match):
        load_db(path)


def test_pick_takes_the_fastest_verified_and_breaks_ties_by_family_then_model_rank():
    rows = [MeasuredCandidate(ident, family, rank, 1.0, {}, verified, us) for ident, family, rank, verified, us in (
        ("cta-00", "cta", 0, True, 5.0), ("hopper-02", "hopper", 2, True, 5.0), ("hopper-01", "hopper", 1, True, 5.0),
        ("hopper-00", "hopper", 0, False, 1.0), ("cta-01", "cta", 1, True, None))]
    assert pick(rows).id == "hopper-01"
    assert pick([r for r in rows if not r.verified]) is None


def test_tuned_plan_is_the_measured_winner():
    spec = load_spec(SQUARE)
    entry = _entry(spec, winner_family="cta", rank=3)
    plan = tuned_plan(analyse(spec), get_arch("sm_90a"), entry)
    assert plan.family == "cta" and plan.primary.assignment == entry.winner.assignment
    assert "measured by deepgemm tune" in plan.family_decision.summary()
    assert plan.tuned["us"] == 100.0 and plan.tuned["level"] == 2


def _dg(*args, env=None):
    return subprocess.run([sys.executable, "-m", "dgemm_cli", *map(str, args)], capture_output=True, text=True,
                          cwd=REPO, env=env, check=False)


def test_gen_renders_the_tuned_plan_and_explain_shows_the_ranking(tmp_path):
    spec = load_spec(SQUARE)
    db = empty_db()
    entry = _entry(spec, winner_family="cta", rank=3)
    # one candidate the budget left untimed
    db.entries["k"] = replace(entry, measured=(*entry.measured[:-1], replace(entry.measured[-1], us=None)))
    save_db(tmp_path / "db.json", db)
    out = _dg("gen", SQUARE, "-o", tmp_path / "g", "--db", tmp_path / "db.json")
    assert out.returncode == 0, out.stderr
    # gen says the tiling is the measured winner, and how many candidates were timed of how many.
    assert "tuned: candidate cta-03, the fastest of 31 timed of 32 by deepgemm tune (level 2" in out.stdout
    assert "by the cost model)" not in out.stdout.split("cta:", 1)[1].split("run-time fallback")[0]
    plan = json.loads((tmp_path / "g" / spec.name / "plan.json").read_text())
    assert plan["plan"]["family"] == "cta" and plan["plan"]["tuned"]["us"] == 100.0
    assert plan["plan"]["primary"]["assignment"] == db.entries["k"].winner.assignment
    out = _dg("gen", SQUARE, "-o", tmp_path / "u", "--db", tmp_path / "db.json", "--untuned")
    assert json.loads((tmp_path / "u" / spec.name / "plan.json").read_text())["plan"]["tuned"] is None
    out = _dg("explain", SQUARE, "--db", tmp_path / "db.json")
    assert out.returncode == 0, out.stderr
    assert "## Tuned (deepgemm tune level 2" in out.stdout and "gen renders cta-03" in out.stdout


def test_tune_level_0_prints_the_model_ranking_without_a_gpu(tmp_path):
    out = _dg("tune", SQUARE, "--level", "0", "--db", tmp_path / "db.json")
    assert out.returncode == 0, out.stderr
    assert "hopper-00" in out.stdout and "cta-03" in out.stdout and "nothing measured" in out.stdout
    assert not (tmp_path / "db.json").exists()


def test_tune_merges_databases(tmp_path):
    spec = load_spec(SQUARE)
    other = empty_db()
    other.entries["k"] = _entry(spec)
    save_db(tmp_path / "job1.json", other)
    out = _dg("tune", SQUARE, "--level", "0", "--db", tmp_path / "team.json", "--merge", tmp_path / "job1.json")
    assert out.returncode == 0, out.stderr
    assert load_db(tmp_path / "team.json").entries["k"].name == spec.name


@pytest.fixture
def fake_gpu(monkeypatch):
    """tune's compiler and GPU faked: one H200, every build ok; each test fakes the harness runs."""
    from dgemm_cli import tune_run
    from dgemm_cli.build import BuildResult
    from dgemm_cli.cli import gen_cmd, tune_cmd
    from dgemm_cli.toolchain import GpuInfo

    gpus = [GpuInfo(0, "NVIDIA H200", "9.0", "580.159.04")]
    monkeypatch.setattr(tune_cmd, "find_gpus", lambda: gpus)
    monkeypatch.setattr(gen_cmd, "find_gpus", lambda: gpus)
    monkeypatch.setattr(tune_cmd, "find_nvcc", lambda path=None: object())
    monkeypatch.setattr(tune_run, "build", lambda d, arch, nvcc: BuildResult(d, d.name, arch, True, 0.1))
    monkeypatch.setattr(tune_run, "harness_path", lambda d, arch: d / "build" / arch / "harness")


def test_tune_measures_verifies_picks_and_writes_the_database(tmp_path, monkeypatch, fake_gpu):
    """The whole tune command in process, with the compiler and the GPU faked: builds are ok, each
    candidate's harness "runs" at a time derived from its rank, one candidate fails verify."""
    from click.testing import CliRunner

    from dgemm_cli import cli, tune_run
    from dgemm_cli.run import HarnessRun


    def fake_run(directory, harness, arch, args, env, timeout=None):
        ident = directory.name
        family, rank = ident.split("-")
        us = 10.0 + int(rank) + (5.0 if family == "cta" else 0.0)
        if args[0] == "verify":
            ok = ident != "hopper-00"
            return HarnessRun(directory, arch, 0 if ok else 1, _verify(ok), "")
        report = {"us": us}
        if "--baseline" not in args:
            report.update(ratio=0.5, baseline_us=us / 2, baseline_formulation="C^T=BA")
        return HarnessRun(directory, arch, 0, _bench(**report), "")
    monkeypatch.setattr(tune_run, "run_harness", fake_run)

    db = tmp_path / "db.json"
    res = CliRunner().invoke(cli.main, ["tune", str(SQUARE), "--level", "1", "--db", str(db), "-o",
                                        str(tmp_path / "w"), "--json"])
    assert res.exit_code == 0, res.output
    entry = next(iter(load_db(db).entries.values()))
    assert entry.winner.id == "hopper-01"  # hopper-00 failed verify
    assert entry.winner.ratio == 0.5 and entry.gpu == "NVIDIA H200" and entry.driver == "580.159.04"
    assert entry.winner.baseline == "C^T=BA" and entry.winner.us == 11.0
    assert len(entry.measured) == 8 and not entry.measured[0].verified
    assert json.loads((tmp_path / "db.json").read_text())["schema_version"] == TUNING_SCHEMA_VERSION
    assert (tmp_path / "w" / "square_bf16" / "cta-03" / "square_bf16.cu").is_file()


def test_candidates_are_timed_in_interleaved_rounds_and_ranked_by_their_medians(tmp_path, monkeypatch, fake_gpu):
    """The first timing after the verify phase runs at a boosted clock (20% fast). Timed once, the candidate that
    happens to run then would win; timed in rounds it runs first in one round only, and its median is its own time.
    The winner's time stays its median, the final bench's goes beside it, and the line names the model's pick."""
    from click.testing import CliRunner

    from dgemm_cli import cli, tune_run
    from dgemm_cli.run import HarnessRun
    from dgemm_cli.tune import round_order

    calls = []

    def fake_run(directory, harness, arch, args, env, timeout=None):
        ident = directory.name
        if args[0] == "verify":
            return HarnessRun(directory, arch, 0, _verify(True), "")
        if "--baseline" not in args:  # the winner's final bench, a run of its own
            return HarnessRun(directory, arch, 0, _bench(us=9.3, ratio=1.1, baseline_us=10.23,
                                                         baseline_formulation="C^T=BA"), "")
        us = (9.0 if ident == "cta-02" else 10.0) * (0.8 if not calls else 1.0)
        calls.append(ident)
        return HarnessRun(directory, arch, 0, _bench(us=us), "")
    monkeypatch.setattr(tune_run, "run_harness", fake_run)

    db = tmp_path / "db.json"
    res = CliRunner().invoke(cli.main, ["tune", str(SQUARE), "--level", "1", "--db", str(db), "-o",
                                        str(tmp_path / "w")])
    assert res.exit_code == 0, res.output
    entry = next(iter(load_db(db).entries.values()))
    n = len(entry.timed)
    ids = calls[:n]
    assert len(calls) == 3 * n and [calls[r * n:(r + 1) * n] for r in range(3)] == [round_order(ids, r)
                                                                                    for r in range(3)]
    assert ids[0] != "cta-02"
    boosted = next(m for m in entry.measured if m.id == ids[0])
    assert boosted.us_rounds == (8.0, 10.0, 10.0) and boosted.us == 10.0
    w = entry.winner
    assert w.id == "cta-02" and w.us == 9.0 and w.us_rounds == (9.0, 9.0, 9.0)
    assert w.bench_us == 9.3 and w.ratio == 1.1 and w.baseline_us == 10.23
    pick_ = entry.model_pick
    assert f"cta-02 wins at 9 µs (median of 3 rounds); the cost model's pick {pick_.id}: 10 µs" in res.output
    assert "final bench: 9.3 µs against 10.2 µs for cuBLAS (ratio 1.1)" in res.output
    assert "warning: clocks or power moved the rounds of 1 candidate by more than 3% (up to 25.0%" in res.output


def test_with_two_gpus_every_candidate_is_timed_on_each_alike(tmp_path, monkeypatch, fake_gpu):
    from click.testing import CliRunner

    from dgemm_cli import cli, tune_run
    from dgemm_cli.cli import tune_cmd
    from dgemm_cli.run import HarnessRun
    from dgemm_cli.toolchain import GpuInfo

    gpus = [GpuInfo(0, "NVIDIA H200", "9.0", "580.159.04"), GpuInfo(1, "NVIDIA H200", "9.0", "580.159.04")]
    monkeypatch.setattr(tune_cmd, "find_gpus", lambda: gpus)
    timed = []

    def fake_run(directory, harness, arch, args, env, timeout=None):
        if args[0] == "verify":
            return HarnessRun(directory, arch, 0, _verify(True), "")
        gpu = env.get("CUDA_VISIBLE_DEVICES", "0")  # the final bench runs on the first
        if "--baseline" in args:
            timed.append((directory.name, gpu))
        return HarnessRun(directory, arch, 0, _bench(us=10.0 + int(gpu)), "")
    monkeypatch.setattr(tune_run, "run_harness", fake_run)

    res = CliRunner().invoke(cli.main, ["tune", str(SQUARE), "--level", "1", "--db", str(tmp_path / "db.json"),
                                        "-o", str(tmp_path / "w")])
    assert res.exit_code == 0, res.output
    counts = {}
    for ident, gpu in timed:
        counts.setdefault(ident, []).append(gpu)
    assert all(sorted(g) == ["0", "0", "1", "1"] for g in counts.values())  # 4 rounds: 2 a GPU
    entry = next(iter(load_db(tmp_path / "db.json").entries.values()))
    assert all(m.us == 10.5 and sorted(m.us_rounds) == [10.0, 10.0, 11.0, 11.0] for m in entry.timed)


def test_a_run_time_spec_is_tuned_bucket_by_bucket_and_gen_renders_the_winners(tmp_path, monkeypatch, fake_gpu):
    """Each bucket of the run-time size is a tuning problem of its own (ranges verified and timed at
    both ends, with --m); gen of the whole spec then takes every bucket's winner and merges neighbouring
    ranges whose winners agree."""
    from click.testing import CliRunner

    from dgemm_cli import cli, tune_run
    from dgemm_cli.cli.gen_cmd import _tuned
    from dgemm_cli.plan import BucketPlan
    from dgemm_cli.run import HarnessRun
    from dgemm_cli.tune import tuning_problems

    doc = {"name": "dyn", "gemm": {"m": {"min": 1, "max": 32}, "n": 4096, "k": 4096},
           "operands": {"A": {"dtype": "f16"}, "B": {"dtype": "f16", "layout": "col"}, "C": {"dtype": "f16"}}}
    path = tmp_path / "dyn.yaml"
    path.write_text(json.dumps(doc))
    assert [p.name for p in tuning_problems(parse_spec(doc))] == [
        "dyn_m1", "dyn_m2", "dyn_m3", "dyn_m4", "dyn_m5_8", "dyn_m9_16", "dyn_m17_32"]

    seen_m = {}

    def fake_run(directory, harness, arch, args, env, timeout=None):
        problem, ident = directory.parent.name, directory.name
        seen_m[problem] = args[args.index("--m") + 1] if "--m" in args else None
        if args[0] == "verify":
            return HarnessRun(directory, arch, 0, _verify(True), "")
        family, rank = ident.split("-")
        us = 10.0 + int(rank) + (0.0 if family == "cta" else 3.0)  # cta-00 wins every bucket
        rows = [{"m": 1, "us": us}, {"m": 2, "us": us}] if "--m" in args else []
        return HarnessRun(directory, arch, 0, _bench(us=us, m_rows=rows, ratio=0.9), "")
    monkeypatch.setattr(tune_run, "run_harness", fake_run)

    db = tmp_path / "db.json"
    res = CliRunner().invoke(cli.main, ["tune", str(path), "--level", "1", "--db", str(db), "-o",
                                        str(tmp_path / "w"), "--json"])
    assert res.exit_code == 0, res.output
    assert len(load_db(db).entries) == 7
    assert seen_m["dyn_m1"] is None and seen_m["dyn_m5_8"] == "5,8" and seen_m["dyn_m17_32"] == "17,32"

    res = CliRunner().invoke(cli.main, ["gen", str(path), "-o", str(tmp_path / "g"), "--db", str(db), "--json"])
    assert res.exit_code == 0, res.output
    plan = json.loads(res.output)[0]["plan"]
    assert "measured" in plan["run_time"]["why"]
    assert [b["family"] for b in plan["buckets"]] == ["cta"] * len(plan["buckets"])
    ranges = [(b["min"], b["max"]) for b in plan["buckets"] if b["min"] < b["max"]]
    # Neighbouring ranges merge exactly where their winners (each bucket's cta-00) are the same plan: one kernel.
    winners = {e.name: (e.winner.family, e.winner.assignment) for e in load_db(db).entries.values()}
    merged: list[list] = []
    for name, lo, hi in (("dyn_m5_8", 5, 8), ("dyn_m9_16", 9, 16), ("dyn_m17_32", 17, 32)):
        if merged and winners[name] == merged[-1][2]:
            merged[-1][1] = hi
        else:
            merged.append([lo, hi, winners[name]])
    assert ranges == [(lo, hi) for lo, hi, _ in merged]
    assert all(b["tuned"] for b in plan["buckets"])
    assert isinstance(_tuned(load_db(db), parse_spec(doc), analyse(parse_spec(doc)), get_arch("sm_90a"),
                                 "NVIDIA H200"), BucketPlan)


def test_explain_of_a_run_time_spec_shows_which_buckets_were_measured(tmp_path):
    """gen and explain read the same database: explain lists each bucket, the measured ones with their time."""
    from dgemm_cli.explain import explain_text
    from dgemm_cli.tune import tuning_problems

    doc = {"name": "dyn", "gemm": {"m": {"min": 1, "max": 8}, "n": 256, "k": 512},
           "operands": {"A": {"dtype": "f16"}, "B": {"dtype": "f16", "layout": "col"}, "C": {"dtype": "f16"}}}
    spec = parse_spec(doc)
    two = next(p for p in tuning_problems(spec) if p.name == "dyn_m2")
    entry = _entry(two, winner_family="splitk", rank=1, us=7.5)
    plan = tuned_plan(analyse(two), get_arch("sm_90a"), entry)
    text = explain_text(spec, get_arch("sm_90a"), tuned_buckets={(2, 2): plan})
    assert "1 of 5 buckets measured" in text
    section = text[text.index("### m = 2:"):text.index("### m = 3:")]
    assert "measured (deepgemm tune level 2" in section and "7.5 µs" in section and "splitk" in section


@pytest.mark.slow  # about 25 s: every invocation generates its candidates
def test_resume_skips_what_the_database_holds_at_this_level_and_measures_the_rest(tmp_path, monkeypatch,
                                                                                    fake_gpu):
    """--resume: an interrupted tune of a run-time spec goes on at the first bucket it has no entry for;
    an entry of a lower level, or of a narrower family choice, is tuned again."""
    from click.testing import CliRunner

    from dgemm_cli import cli, tune_run
    from dgemm_cli.run import HarnessRun

    doc = {"name": "dyn", "gemm": {"m": {"min": 1, "max": 2}, "n": 4096, "k": 4096},
           "operands": {"A": {"dtype": "f16"}, "B": {"dtype": "f16", "layout": "col"}, "C": {"dtype": "f16"}}}
    path = tmp_path / "dyn.yaml"
    path.write_text(json.dumps(doc))
    measured = []

    def fake_run(directory, harness, arch, args, env, timeout=None):
        if args[0] == "verify":
            measured.append(directory.parent.name)
            return HarnessRun(directory, arch, 0, _verify(True), "")
        return HarnessRun(directory, arch, 0, _bench(us=10.0, ratio=1.0), "")
    monkeypatch.setattr(tune_run, "run_harness", fake_run)

    db = tmp_path / "db.json"
    tune = ["tune", str(path), "--db", str(db), "-o", str(tmp_path / "w"), "--json"]
    assert CliRunner().invoke(cli.main, [*tune, "--level", "1"]).exit_code == 0
    entries = load_db(db).entries
    assert sorted(e.name for e in entries.values()) == ["dyn_m1", "dyn_m2"]
    # As if the tune had stopped after the first bucket: the second goes.
    stopped = load_db(db)
    stopped.entries = {k: e for k, e in entries.items() if e.name == "dyn_m1"}
    save_db(db, stopped)
    measured.clear()
    res = CliRunner().invoke(cli.main, [*tune, "--level", "1", "--resume"])
    assert res.exit_code == 0, res.output
    assert set(measured) == {"dyn_m2"}
    # Level 1 entries do not hold for level 2; a level-2 tune of one family does not hold for all of them.
    measured.clear()
    assert CliRunner().invoke(cli.main, [*tune, "--level", "2", "--resume", "--family", "cta"]).exit_code == 0
    assert set(measured) == {"dyn_m1", "dyn_m2"}
    measured.clear()
    assert CliRunner().invoke(cli.main, [*tune, "--level", "2", "--resume"]).exit_code == 0
    assert set(measured) == {"dyn_m1", "dyn_m2"}
    measured.clear()
    assert CliRunner().invoke(cli.main, [*tune, "--level", "1", "--resume"]).exit_code == 0
    assert measured == []  # level 2 entries hold for level 1


def test_a_candidate_not_measured_says_why():
    """A candidate that failed to build names the compiler's error; one that spills names the kernel and the bytes
    (the database row's `skipped`); one built cleanly is measured."""
    from pathlib import Path

    from dgemm_cli.build import BuildResult, KernelResources
    from dgemm_cli.tune_run import _not_built

    def result(ok=True, error="", spill=0):
        kernel = KernelResources("persistent_kernel", "sm_90a", 240, spill, spill, spill, 0)
        return BuildResult(Path("x"), "x", "sm_90a", ok, 1.0, kernels=[kernel], error=error)

    failed = result(ok=False, error="x.cu(12): error: identifier \"Q\" is undefined\n1 error detected\n")
    assert _not_built(failed) == 'build failed: x.cu(12): error: identifier "Q" is undefined'
    assert _not_built(result(ok=False)) == "build failed: no compiler output"
    assert _not_built(result(spill=96)) == ("spilled: persistent_kernel (240 registers, 96 bytes of spill stores, "
                                            "96 of loads)")
    assert _not_built(result()) is None
