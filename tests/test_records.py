"""The typed records read back after gen: plan.json, the harness's reports and the tuning database. Round trips,
and a record of another schema version or with a malformed key refused with the file, the key and the fix."""

from __future__ import annotations

import json
import math

import pytest

from dgemm_cli.arch import get_arch
from dgemm_cli.pipeline import generate
from dgemm_cli.records import (
    HARNESS_SCHEMA_VERSION,
    PLAN_SCHEMA_VERSION,
    TUNING_FORMAT,
    TUNING_SCHEMA_VERSION,
    BenchReport,
    MeasuredCandidate,
    PlanRecord,
    RecordError,
    RunTimeRange,
    TunedSummary,
    TuningDb,
    TuningDbError,
    TuningRecord,
    TuningWinner,
    VerifyReport,
    harness_report,
)
from dgemm_cli.spec import parse_spec


def _plan(**changes) -> dict:
    """plan.json's fields that PlanRecord reads, as render writes them."""
    plan = {
        "schema_version": PLAN_SCHEMA_VERSION, "generator": "deepgemm 0.1.0", "arch": "sm_90a", "content_hash": "ab12",
        "spec": {"name": "dyn", "sizes": {"m": {"min": 1, "max": 16}, "n": 64, "k": 32}},
        "plan": {"family": "cta", "smem_bytes": 40960},
        "build": {"nvcc_flags": ["-O3"], "arch_features": ["griddepcontrol"], "requires_arch": ["sm_90a"],
                  "kernel_smem": {"m1_cta": 40960}},
    }
    for path, value in changes.items():
        *outer, key = path.split("__")
        target = plan
        for part in outer:
            target = target[part]
        if value is None:
            del target[key]
        else:
            target[key] = value
    return plan


# ------------------------------------------------------------------------------------------------ plan.json

def test_plan_record_reads_what_the_stages_after_gen_need_and_round_trips():
    plan = PlanRecord.from_dict(_plan(), "g/dyn/plan.json")
    assert (plan.name, plan.arch, plan.family, plan.smem_bytes) == ("dyn", "sm_90a", "cta", 40960)
    assert plan.nvcc_flags == ("-O3",) and plan.arch_features == ("griddepcontrol",)
    assert plan.requires_arch == ("sm_90a",) and plan.kernel_smem == {"m1_cta": 40960}
    assert plan.run_time == RunTimeRange("m", 1, 16) and 16 in plan.run_time and 17 not in plan.run_time
    assert PlanRecord.from_dict(plan.to_dict()) == plan
    fixed = PlanRecord.from_dict(_plan(spec__sizes={"m": 8, "n": 64, "k": 32}))
    assert fixed.run_time is None


def test_a_generated_folders_plan_json_loads(tmp_path):
    g = generate(parse_spec({"name": "small", "gemm": {"m": 8, "n": 8, "k": 8}}), get_arch("sm_80"), tmp_path)
    plan = PlanRecord.load(g.directory)
    assert plan.name == "small" and plan.arch == "sm_80" and plan.content_hash == g.content_hash
    assert plan.schema_version == PLAN_SCHEMA_VERSION and plan.nvcc_flags and plan.run_time is None


@pytest.mark.parametrize("version, words", [
    (None, "schema_version: missing: written by a deepgemm older than schema version 1. "
           "Fix: regenerate it with `deepgemm gen SPEC`"),
    (0, "schema_version: is 0; this deepgemm reads version 1. Fix: regenerate it with `deepgemm gen SPEC`"),
    (PLAN_SCHEMA_VERSION + 1, "Fix: use the deepgemm that wrote it, or regenerate it with `deepgemm gen SPEC`"),
])
def test_a_plan_json_of_another_schema_version_names_the_fix(version, words):
    with pytest.raises(RecordError) as err:
        PlanRecord.from_dict(_plan(schema_version=version), "g/dyn/plan.json")
    assert str(err.value).startswith("g/dyn/plan.json: ") and words in str(err.value)


@pytest.mark.parametrize("changes, words", [
    ({"plan__smem_bytes": None}, "plan.smem_bytes: missing"),
    ({"plan__smem_bytes": "big"}, "plan.smem_bytes: is str \"big\", not a whole number"),
    ({"build__kernel_smem": ["m1_cta"]}, "build.kernel_smem: is list"),
    ({"build__kernel_smem": {"m1_cta": "40960"}}, "build.kernel_smem: holds something other than byte counts"),
    ({"build__arch_features": ["tma", 3]}, "build.arch_features: holds something other than strings"),
    ({"spec__sizes__m": {"min": 1}}, "spec.sizes.m.max: missing"),
    ({"spec__sizes__n": "64"}, "spec.sizes.n: is str"),
    ({"build": None}, "build: missing"),
])
def test_a_malformed_plan_json_names_the_key(changes, words):
    with pytest.raises(RecordError, match="regenerate it with `deepgemm gen SPEC`") as err:
        PlanRecord.from_dict(_plan(**changes), "plan.json")
    assert f"plan.json: {words}" in str(err.value)


def test_an_unreadable_plan_json_names_the_file(tmp_path):
    (tmp_path / "plan.json").write_text("{")
    with pytest.raises(RecordError, match=r"plan.json: \(whole file\): not readable JSON"):
        PlanRecord.load(tmp_path)


# ------------------------------------------------------------------------------------------------ harness reports

VERIFY = {"command": "verify", "name": "dyn", "arch": "sm_90a", "device": "NVIDIA H200", "output": "C",
          "epilogue": ["relu"], "passed": False, "tol": 0.01, "max_abs_err": "nan", "rel_err": 0.1,
          "first_fail": {"m": 8, "seed": 1, "index": {"m": 7, "n": 0}, "got": "nan", "want": 1.5},
          "api_null_rejected": True, "api_misaligned_rejected": False, "repeat": 2, "repeat_differed": 1, "runs": [],
          "dynamic": {"letter": "m", "lo": 1, "hi": 16}, "api_m_rejected": False,
          "api_m_probes": [{"m": 0, "rejected": True}, {"m": 17, "rejected": False}],
          "m_cases": [{"m": 1, "passed": True, "max_abs_err": 0.002, "rel_err": 0.0003, "first_fail": None,
                       "repeat_differed": 0},
                      {"m": 8, "passed": False, "max_abs_err": "nan", "rel_err": 0.1,
                       "first_fail": {"m": 8, "seed": 1}, "repeat_differed": 1}]}


def test_verify_report_names_its_fields():
    r = VerifyReport.from_dict(VERIFY, "dyn_harness")
    assert not r.passed and r.error is None and math.isnan(r.max_abs_err) and r.rel_err == 0.1
    assert r.api_misaligned_rejected is False and r.repeat_differed == 1 and r.epilogue == ("relu",)
    assert r.dynamic == RunTimeRange("m", 1, 16) and [p.m for p in r.api_m_probes if not p.rejected] == [17]
    assert [(c.m, c.passed) for c in r.m_cases] == [(1, True), (8, False)]
    assert r.m_cases[1].to_dict()["max_abs_err"] == "nan"  # written back as the harness writes it
    assert r.raw["runs"] == [] and isinstance(harness_report("verify", VERIFY, "dyn_harness"), VerifyReport)


def test_a_fixed_size_verify_report_needs_only_the_common_fields():
    r = VerifyReport.from_dict({"schema_version": HARNESS_SCHEMA_VERSION, "command": "verify", "name": "k",
                                "passed": True, "tol": 1e-5, "max_abs_err": 0, "rel_err": 0.0, "first_fail": None})
    assert r.passed and r.dynamic is None and r.m_cases is None and r.repeat == 0 and r.max_abs_err == 0.0


def test_error_reports_carry_only_the_error():
    r = VerifyReport.from_dict({"schema_version": HARNESS_SCHEMA_VERSION, "command": "verify", "error": "no CUDA GPU"})
    assert r.error == "no CUDA GPU" and not r.passed and r.name is None
    b = BenchReport.from_dict({"command": "bench", "name": "k", "error": "CUDA error"})
    assert b.error == "CUDA error" and b.row is None and b.rows == ()
    assert b.to_dict()["us"] is None and b.to_dict()["error"] == "CUDA error"  # every key, as bench --json rows
    assert BenchReport.failed("timed out").error == "timed out"


@pytest.mark.parametrize("report, words", [
    ({**VERIFY, "passed": None}, "verify_harness: passed: missing"),
    ({**VERIFY, "passed": "yes"}, "verify_harness: passed: is str \"yes\", not true or false"),
    ({**VERIFY, "tol": "tight"}, "verify_harness: tol: is str \"tight\", not a number"),
    ({**VERIFY, "m_cases": [{"m": 1}]}, "verify_harness: m_cases[0].passed: missing"),
    ({**VERIFY, "dynamic": {"letter": "m", "lo": 1}}, "verify_harness: dynamic.hi: missing"),
    ({**VERIFY, "command": "bench"}, "verify_harness: command: is 'bench', the harness was asked for 'verify'"),
    ({**VERIFY, "schema_version": HARNESS_SCHEMA_VERSION + 1}, "verify_harness: schema_version: is 2"),
    ([1, 2], "verify_harness: (top level): is list"),
])
def test_a_malformed_harness_report_names_the_key_and_the_rebuild(report, words):
    report = {k: v for k, v in report.items() if v is not None} if isinstance(report, dict) else report
    with pytest.raises(RecordError) as err:
        VerifyReport.from_dict(report, "verify_harness")
    assert words in str(err.value) and "rebuild it with `deepgemm build`" in str(err.value)


BENCH_ROW = {"us": 3.0, "tflops": 0.5, "gbps": 50.0, "us_stream": 3.4, "us_passes": [2.9, 3.1], "baseline": "cublas",
             "baseline_formulation": "C^T=B^TA", "baseline_epilogue": None, "baseline_us": 4.0,
             "baseline_tflops": 0.37, "baseline_us_stream": 4.4, "baseline_us_passes": [4.0, 4.0], "ratio": 1.33,
             "baseline_candidates": [{"formulation": "C^T=B^TA", "us": 4.0, "us_passes": [4.0, 4.0], "rel_diff": 2e-3},
                                     {"formulation": "copy", "us": None, "error": "no memory"}]}
BENCH = {"command": "bench", "name": "dyn", "arch": "sm_90a", "device": "NVIDIA H200", "output": "C", "epilogue": [],
         "method": "graph", **BENCH_ROW, "copy_gbps": "nan", "sets": 4, "reps": 50, "m": 16,
         "dynamic": {"letter": "m", "lo": 1, "hi": 16},
         "m_rows": [{"m": 1, **BENCH_ROW, "us": 2.0, "ratio": 2.0}, {"m": 16, **BENCH_ROW}]}


def test_bench_report_rows_are_named_and_round_trip():
    b = BenchReport.from_dict(BENCH, "dyn_harness")
    assert b.row.us == 3.0 and b.row.m == 16 and b.row.baseline_formulation == "C^T=B^TA"
    assert [(r.m, r.us, r.ratio) for r in b.rows] == [(1, 2.0, 2.0), (16, 3.0, 1.33)]
    assert b.row.baseline_candidates[1].us is None and b.row.baseline_candidates[1].error == "no memory"
    assert b.row.baseline_candidates[0].rel_diff == 2e-3 and b.row.baseline_candidates[1].rel_diff is None
    assert math.isnan(b.copy_gbps) and b.to_dict()["copy_gbps"] == "nan"
    again = BenchReport.from_dict(json.loads(json.dumps(b.to_dict())))
    assert again.to_dict() == b.to_dict() and again.rows == b.rows  # NaN != NaN: the whole records differ only there
    fixed = BenchReport.from_dict({"command": "bench", "name": "k", "us": 10.0})
    assert fixed.rows == (fixed.row,) and fixed.row.ratio is None and fixed.m_rows is None


def test_a_bench_report_without_times_names_the_key():
    with pytest.raises(RecordError, match=r"k_harness: m_rows\[1\]\.us: missing"):
        BenchReport.from_dict({**BENCH, "m_rows": [{"m": 1, "us": 1.0}, {"m": 2}]}, "k_harness")


# ------------------------------------------------------------------------------------------------ tuning records

def _record(**changes) -> TuningRecord:
    cand = MeasuredCandidate("cta-00", "cta", 0, 12.5, {"BM": 64, "BN": 128}, verified=True, us=10.0)
    slow = MeasuredCandidate("hopper-00", "hopper", 0, 9.0, {"BM": 128}, verified=False, error="failed verify")
    untimed = MeasuredCandidate("hopper-01", "hopper", 1, 9.5, {"BM": 64}, skipped="budget spent")
    winner = TuningWinner(**vars(cand), ratio=0.9, baseline_us=9.0, baseline="C^T=BA")
    fields = {"spec_hash": "h", "name": "sq", "arch": "sm_90a", "gpu": "NVIDIA H200", "driver": "580.159.04",
              "generator": "0.1.0", "level": 1, "date": "2026-11-30T10:00:00+00:00", "winner": winner,
              "measured": (cand, slow, untimed), "families": ()}
    return TuningRecord(**{**fields, **changes})


@pytest.mark.parametrize("families", [(), ("cta", "hopper"), None])
def test_tuning_database_round_trips(tmp_path, families):
    db = TuningDb({"k": _record(families=families)})
    path = tmp_path / "db.json"
    path.write_text(json.dumps(db.to_dict()))
    assert TuningDb.load(path) == db
    data = json.loads(path.read_text())
    assert data["schema_version"] == TUNING_SCHEMA_VERSION and data["format"] == TUNING_FORMAT
    assert data["entries"]["k"].get("families") == {(): "all", None: None}.get(families, list(families or ()))
    assert [m.id for m in db.entries["k"].timed] == ["cta-00"]


def test_a_database_written_before_the_key_was_renamed_still_loads(tmp_path):
    data = {**TuningDb({"k": _record()}).to_dict(), "version": 1}
    del data["schema_version"]
    path = tmp_path / "db.json"
    path.write_text(json.dumps(data))
    assert TuningDb.load(path).entries["k"] == _record()
    assert TuningDb.load(tmp_path / "absent.json") == TuningDb()


def test_a_malformed_tuning_record_names_its_key():
    data = TuningDb({"k": _record()}).to_dict()
    data["entries"]["k"]["measured"][1]["model_rank"] = "first"
    with pytest.raises(TuningDbError, match=r"db.json: entries.k.measured\[1\].model_rank: is str \"first\", not a "
                                            r"whole number. Fix: move it away and tune again"):
        TuningDb.from_dict(data, "db.json")


def test_tuned_summary_is_what_plan_json_records():
    summary = TunedSummary.of(_record())
    assert (summary.candidate, summary.us, summary.measured, summary.timed) == ("cta-00", 10.0, 3, 1)
    assert TunedSummary.from_dict(summary.to_dict()) == summary
    with pytest.raises(RecordError, match="plan.json: plan.tuned.us: missing. Fix: regenerate"):
        TunedSummary.from_dict({k: v for k, v in summary.to_dict().items() if k != "us"})


def test_the_harness_writes_the_schema_version_the_reader_expects():
    """dg_harness.cuh stamps every report (results and errors) with the version records.py checks."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "templates" / "dg_harness.cuh").read_text()
    version = re.search(r"#define DG_REPORT_SCHEMA_VERSION (\d+)", text)
    assert version and int(version.group(1)) == HARNESS_SCHEMA_VERSION
    assert text.count('j.integer("schema_version", DG_REPORT_SCHEMA_VERSION);') == 2
