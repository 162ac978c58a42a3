"""The command line as a user meets it: help, summaries, JSON, errors and exit codes (no GPU)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from .conftest import REPO, SPECS, gpu_present


def dg(*args, cwd=REPO):
    return subprocess.run([sys.executable, "-m", "dgemm_cli", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, check=False)


def test_help_teaches():
    out = dg("--help")
    assert out.returncode == 0
    for word in ("gen", "build", "verify", "bench", "explain", "doctor", "Exit codes"):
        assert word in out.stdout


def test_gen_prints_plan_summary(tmp_path):
    spec = next(p for p in SPECS if p.stem == "conv1x1_nchw")
    out = dg("gen", spec, "-o", tmp_path)
    assert out.returncode == 0, out.stderr
    assert "M=25088" in out.stdout and "2 segment(s): n[8] hw[3136]" in out.stdout
    assert "tile " in out.stdout and ("forced by" in out.stdout or "cost model" in out.stdout)
    assert (tmp_path / "conv1x1_nchw" / "conv1x1_nchw.cu").is_file()


def test_gen_json_lists_every_spec(tmp_path):
    out = dg("gen", *SPECS, "-o", tmp_path, "--json")
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert sorted(r["name"] for r in rows) == sorted(p.stem for p in SPECS)
    # A run-time-sized spec's plan is a kernel a bucket of sizes, each with its primary.
    plans = [p for r in rows for p in (r["plan"]["buckets"] if "buckets" in r["plan"] else [r["plan"]])]
    assert all(len(r["content_hash"]) == 64 for r in rows) and all(p["primary"]["threads"] > 0 for p in plans)
    assert any("buckets" in r["plan"] for r in rows)  # specs/decode_dynamic.yaml


def test_gen_arch_override(tmp_path):
    out = dg("gen", SPECS[0], "-o", tmp_path, "--arch", "sm_86", "--json")
    assert json.loads(out.stdout)[0]["arch"] == "sm_86"


def test_bad_spec_is_one_clear_line_exit_2(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"name": "x", "gemm": {"m": 4, "n": 4, "k": -3}}))
    out = dg("gen", bad, "-o", tmp_path)
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    (line,) = out.stderr.strip().splitlines()
    assert str(bad) in line and "gemm.k" in line and "Fix:" in line


def test_typo_in_spec_suggests_the_key(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ngemm: {m: 4, n: 4, k: 4}\noperands:\n  A: {layuot: row}\n")
    out = dg("gen", bad, "-o", tmp_path)
    assert out.returncode == 2
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith(f"error: {bad}: operands.A.layuot: unknown key 'layuot'. Fix: did you mean 'layout'?")


def test_gen_prints_dtype_alias_notes(tmp_path):
    spec = tmp_path / "aliased.yaml"
    spec.write_text("name: aliased\ndtype: half\ngemm: {m: 8, n: 8, k: 8}\noperands:\n  C: {dtype: float32}\n")
    out = dg("gen", spec, "-o", tmp_path / "g")
    assert out.returncode == 0, out.stderr
    assert out.stderr.splitlines() == [f"note: {spec}: dtype 'half' read as f16",
                                       f"note: {spec}: operands.C.dtype 'float32' read as f32"]
    assert "note:" not in out.stdout
    out = dg("gen", spec, "-o", tmp_path / "g", "--json")
    (row,) = json.loads(out.stdout)
    assert row["notes"] == ["dtype 'half' read as f16", "operands.C.dtype 'float32' read as f32"]
    plan = json.loads((tmp_path / "g" / "aliased" / "plan.json").read_text())
    assert [plan["spec"]["operands"][x]["dtype"] for x in "ABC"] == ["f16", "f16", "f32"]


def test_gen_json_notes_empty_without_aliases(tmp_path):
    out = dg("gen", SPECS[0], "-o", tmp_path, "--json")
    assert json.loads(out.stdout)[0]["notes"] == [] and out.stderr == ""


@pytest.mark.skipif(gpu_present(), reason="checks the no-GPU path")
@pytest.mark.parametrize("command", ["verify", "bench"])
def test_without_gpu_verify_and_bench_say_so_exit_3(command, tmp_path):
    dg("gen", SPECS[0], "-o", tmp_path)
    out = dg(command, tmp_path)
    assert out.returncode == 3
    assert "Traceback" not in out.stderr and "no CUDA GPU" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and out.stdout == ""


def test_build_of_nothing_generated_says_how(tmp_path):
    out = dg("build", tmp_path / "nope")
    assert out.returncode == 4 and "deepgemm gen" in out.stderr


def test_explain_shows_views_graph_and_plan():
    out = dg("explain", next(p for p in SPECS if p.stem == "nhwc_padded_f32"))
    assert out.returncode == 0, out.stderr
    for section in ("## Views", "## Kernel family", "## Family cta (chosen)", "## Baseline"):
        assert section in out.stdout
    assert "nhw[392]" in out.stdout and "instruction = ffma" in out.stdout
    assert "rejected: tensor-core dtypes" in out.stdout
    # Why the Hopper family lost: its gates, by name.
    assert "rejected: hopper: wgmma dtypes" in out.stdout


def test_explain_shows_the_hopper_family_and_its_tensor_maps():
    out = dg("explain", next(p for p in SPECS if p.stem == "conv1x1_nchw"))
    assert out.returncode == 0, out.stderr
    assert "## Family hopper (chosen)" in out.stdout and "## Family cta (run-time fallback)" in out.stdout
    assert "A: mn-major TMA, 3-d tensor map" in out.stdout


def test_explain_dump_sass_without_build_says_how(tmp_path):
    out = dg("explain", SPECS[0], "--dump-sass", "-o", tmp_path)
    assert out.returncode == 4 and "deepgemm build" in out.stderr


def test_doctor_json():
    out = dg("doctor", "--json")
    report = json.loads(out.stdout)
    assert "nvcc" in report and "checks" in report
    assert out.returncode in (0, 4)


def test_random_specs_are_valid(tmp_path):
    out = dg("random-specs", "12", "-o", tmp_path / "rs", "--seed", "5")
    assert out.returncode == 0
    gen = dg("gen", *sorted((tmp_path / "rs").glob("*.yaml")), "-o", tmp_path / "g", "--json")
    assert gen.returncode == 0, gen.stderr
    assert len(json.loads(gen.stdout)) == 12


@pytest.mark.slow
def test_build_reports_resources_json(tmp_path):
    dg("gen", next(p for p in SPECS if p.stem == "odd_tails"), "-o", tmp_path)
    out = dg("build", tmp_path / "odd_tails", "--arch", "sm_80", "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    (row,) = json.loads(out.stdout)
    assert row["ok"] and row["arch"] == "sm_80" and row["kernels"]
    assert all(k["spill_store_bytes"] == 0 and k["registers"] > 0 for k in row["kernels"])
