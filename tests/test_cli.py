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


def test_gen_ends_with_the_folders_their_prototypes_and_the_next_command(tmp_path):
    spec = next(p for p in SPECS if p.stem == "decode_qk")
    out = dg("gen", spec, "-o", tmp_path)
    assert out.returncode == 0, out.stderr
    tail = out.stdout[out.stdout.index("\nwrote 1 folder(s) for sm_90a"):]
    header = tmp_path / "decode_qk" / "decode_qk.h"
    assert str(header) in tail and f"next: deepgemm build {tmp_path}" in tail
    (prototype,) = [line.strip() for line in tail.splitlines() if line.strip().startswith("cudaError_t")]
    assert prototype.rstrip(";") in " ".join(header.read_text().split())
    rows = json.loads(dg("gen", spec, "-o", tmp_path, "--json").stdout)
    assert rows[0]["header"] == str(header) and rows[0]["prototype"] == prototype.rstrip(";")


def test_two_specs_with_one_name_in_one_gen_are_an_error(tmp_path):
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text("name: same\ngemm: {m: 8, n: 8, k: 8}\n")
    b.write_text("name: same\ngemm: {m: 16, n: 16, k: 16}\n")
    out = dg("gen", a, b, "-o", tmp_path / "g")
    assert out.returncode == 2
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith(f"error: {b}: name: 'same' is also the name of {a}") and "Fix:" in line
    plan = json.loads((tmp_path / "g" / "same" / "plan.json").read_text())
    assert plan["spec"]["sizes"]["m"] == 8  # the first spec's folder, not overwritten


def test_build_for_an_arch_the_plan_cannot_run_on_refuses_in_one_line(tmp_path):
    """A one-block gemv planned for sm_90a launches dependently (griddepcontrol); sm_80 is refused before nvcc."""
    spec = tmp_path / "g.yaml"
    spec.write_text("name: g\ndtype: f16\ngemm: {m: 1, n: 32768, k: 64}\n")
    assert dg("gen", spec, "-o", tmp_path / "g", "--family", "gemv").returncode == 0
    out = dg("build", tmp_path / "g", "--arch", "sm_80")
    if "nvcc" in out.stderr and "refused" not in out.stderr:
        pytest.skip("no nvcc here: build stops before it looks at the plans")
    assert out.returncode == 1
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith("refused: ") and "griddepcontrol" in line and "sm_80 lacks" in line
    assert "--arch sm_80" in line
    assert out.stdout.strip().splitlines()[-1] == "0 built, 0 cached, 0 failed, 1 refused; no spills"
    rows = json.loads(dg("build", tmp_path / "g", "--arch", "sm_80", "--json").stdout)
    assert rows[0]["ok"] is False and "griddepcontrol" in rows[0]["refused"]
