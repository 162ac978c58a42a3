"""bench --plot and tune --plot without a GPU: the roofline's points and roofs from recorded bench JSON, the tune
panels from a database entry, the pictures themselves (skipped without matplotlib), and --plot's errors.

tests/data/bench/host_2core.json is `deepgemm bench --json --plot` of three host folders (decode_dynamic at m = 1
and 64, cpu_gemm_1024_f32, conv1x1_nchw; --reps 5) on the 2-core development machine. GPU_ROWS below is shaped
like an H200 bench's JSON, its numbers made up for the test."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from dgemm_cli import plot
from dgemm_cli.arch import get_arch, nominal_tflops
from dgemm_cli.records import BenchReport, MeasuredCandidate, TuningRecord, TuningWinner

from .conftest import REPO

HOST = json.loads((REPO / "tests" / "data" / "bench" / "host_2core.json").read_text())


def _gpu_row(name: str, dtype: str, us: float, tflops: float, gbps: float, base_us: float, **more) -> dict:
    base_tflops = tflops * us / base_us
    return {"command": "bench", "name": name, "arch": "sm_90a", "device": "NVIDIA H200", "dtype": dtype, "us": us,
            "tflops": tflops, "gbps": gbps, "us_passes": [us * 0.99, us * 1.01], "baseline": "cublas",
            "baseline_formulation": "C^T=B^TA", "baseline_us": base_us, "baseline_tflops": base_tflops,
            "baseline_us_passes": [base_us, base_us], "ratio": base_us / us, "copy_gbps": 4100.0, **more}


GPU_ROWS = [
    _gpu_row("square_bf16", "bf16", 180.0, 760.0, 700.0, 190.0, roof_tflops=780.0,
             roof_gemm="cuBLAS bf16 8192x8192x8192 TN, f32 accumulation"),
    _gpu_row("decode_1x4096x4096", "bf16", 9.0, 3.7, 3700.0, 10.0, roof_tflops=770.0,
             roof_gemm="cuBLAS bf16 8192x8192x8192 TN, f32 accumulation"),
    _gpu_row("fp8_4096x7168x2048", "e4m3", 90.0, 1300.0, 900.0, 95.0, roof_tflops=None,
             roof_gemm="unavailable: cuBLAS's GemmEx has no e4m3 inputs"),
]


def test_the_recorded_host_bench_gives_a_point_pair_a_size_under_its_measured_roofs():
    line = plot.roofline(plot.bench_results(HOST))
    assert [p.label for p in line.points] == ["decode_dynamic m=1", "decode_dynamic m=64", "cpu_gemm_1024_f32",
                                              "conv1x1_nchw"]
    first, row = line.points[0], HOST[0]["m_rows"][0]
    assert first.intensity == pytest.approx(1e3 * row["tflops"] / row["gbps"])
    assert first.ours.tflops == row["tflops"] and first.baseline.tflops == row["baseline_tflops"]
    assert first.ours.passes == pytest.approx([row["tflops"] * row["us"] / p for p in row["us_passes"]])
    assert first.baseline_kind == "numpy" and line.device == "AMD EPYC (2 threads)" and not line.left_out
    # One bandwidth roof (the best copy of the run) and one compute roof: the host's f32, whatever the dtype.
    bandwidth, compute = line.roofs
    assert bandwidth.kind == "bandwidth" and bandwidth.measured
    assert bandwidth.value == max(r["copy_gbps"] for r in HOST) and "memory copy" in bandwidth.label
    assert compute.dtype == "f32" and compute.measured and compute.value == max(r["roof_tflops"] for r in HOST)
    assert {p.dtype for p in line.points} == {"f32"}


def test_a_gpu_bench_has_a_roof_a_dtype_and_a_dtype_it_did_not_measure_is_nominal():
    line = plot.roofline(plot.bench_results(GPU_ROWS))
    roofs = {(r.kind, r.dtype): r for r in line.roofs}
    assert roofs[("bandwidth", None)].value == 4100.0 and roofs[("bandwidth", None)].measured
    bf16 = roofs[("compute", "bf16")]
    assert bf16.measured and bf16.value == 780.0 and "cuBLAS bf16 8192x8192x8192" in bf16.label
    fp8 = roofs[("compute", "e4m3")]
    assert not fp8.measured and fp8.value == nominal_tflops(get_arch("sm_90a"), "e4m3")
    assert "NOMINAL, not measured" in fp8.label and "H200" in fp8.label
    decode = next(p for p in line.points if p.label == "decode_1x4096x4096")
    assert decode.intensity == pytest.approx(1.0) and decode.baseline_kind == "cuBLAS"


def test_without_a_copy_the_bandwidth_roof_is_the_nominal_one_and_errors_are_left_out():
    rows = [{**GPU_ROWS[0], "copy_gbps": "nan"}, {"command": "bench", "name": "broken", "arch": "sm_90a",
                                                 "error": "CUDA error: an illegal memory access"}]
    line = plot.roofline(plot.bench_results(rows))
    bandwidth = next(r for r in line.roofs if r.kind == "bandwidth")
    assert not bandwidth.measured and bandwidth.value == get_arch("sm_90a").dram_gbps
    assert len(line.points) == 1 and line.left_out == ("broken: CUDA error: an illegal memory access",)


def test_nominal_peaks_follow_the_arch_table():
    h200 = get_arch("sm_90a")
    assert nominal_tflops(h200, "bf16") == pytest.approx(132 * 4096 * 1.98 / 1e3)
    assert nominal_tflops(h200, "e4m3") == 2 * nominal_tflops(h200, "f16")
    assert nominal_tflops(h200, "f32") == pytest.approx(132 * 256 * 1.98 / 1e3)
    cpu = get_arch("cpu")
    assert nominal_tflops(cpu, "bf16") == nominal_tflops(cpu, "f32")


# ------------------------------------------------------------------------------------------------ tune panels

def _tuned(rounds: dict[str, tuple[float, ...]], model_us: dict[str, float]) -> TuningRecord:
    measured = tuple(MeasuredCandidate(i, i.split("-")[0], int(i.split("-")[1]), model_us[i], {}, verified=True,
                                       us=sorted(r)[len(r) // 2], us_rounds=r) for i, r in rounds.items())
    measured += (MeasuredCandidate("gemv-00", "gemv", 0, 999.0, {}, error="failed verify"),)
    best = min((m for m in measured if m.us), key=lambda m: m.us)
    winner = TuningWinner(**vars(best), ratio=1.05, baseline_us=200.0, baseline="C^T=B^TA", bench_us=190.0)
    return TuningRecord("h", "square_bf16", "sm_90a", "NVIDIA H200", "580", "0.1.0", 1, "2026-12-05T00:00:00+00:00",
                        winner, measured)


ROUNDS = {"hopper-00": (176.6, 150.0, 180.0), "hopper-01": (164.1, 163.0, 166.0), "cta-00": (300.0, 310.0, 305.0)}
MODEL = {"hopper-00": 120.0, "hopper-01": 130.0, "cta-00": 200.0}


def test_a_tune_panel_ranks_the_medians_and_reads_them_against_the_baseline_and_the_roofs():
    final = BenchReport.from_dict(GPU_ROWS[0])
    panel = plot.tune_panel(_tuned(ROUNDS, MODEL), final, "sm_90a")
    assert [c.id for c in panel.candidates] == ["hopper-01", "hopper-00", "cta-00"]
    assert panel.candidates[0].winner and panel.candidates[1].model_pick and not panel.candidates[0].model_pick
    assert panel.untimed == 1 and panel.baseline_us == 190.0 and panel.baseline_kind == "cuBLAS"
    flops, moved = 760.0e12 * 180e-6, 700.0e9 * 180e-6
    assert panel.roof_us == pytest.approx(max(flops / 780e12, moved / 4100e9) * 1e6) and panel.roof_bound == "compute"


def test_a_range_bucket_panel_averages_its_two_ends():
    ends = [{"m": 1, "us": 10.0, "tflops": 1.0, "gbps": 1000.0, "baseline_us": 12.0},
            {"m": 8, "us": 20.0, "tflops": 4.0, "gbps": 500.0, "baseline_us": 18.0}]
    final = BenchReport.from_dict({**GPU_ROWS[1], "dynamic": {"letter": "m", "lo": 1, "hi": 8}, "m_rows": ends})
    panel = plot.tune_panel(_tuned(ROUNDS, MODEL), final, "sm_90a")
    assert panel.baseline_us == 15.0 and panel.roof_bound == "bandwidth"
    moved = [1000e9 * 10e-6, 500e9 * 20e-6]
    assert panel.roof_us == pytest.approx(sum(b / 4100e9 * 1e6 for b in moved) / 2)


# ------------------------------------------------------------------------------------------------ pictures

def test_the_recorded_bench_and_a_tune_draw_as_pictures(tmp_path):
    pytest.importorskip("matplotlib")
    png = tmp_path / "host.png"
    plot.draw_roofline(plot.roofline(plot.bench_results(HOST)), png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
    svg = tmp_path / "gpu.svg"
    plot.draw_roofline(plot.roofline(plot.bench_results(GPU_ROWS)), svg)
    text = svg.read_text()
    assert "square_bf16" in text and "NOMINAL, not measured" in text and "measured in this run" in text
    tune = tmp_path / "tune.svg"
    final = BenchReport.from_dict(GPU_ROWS[0])
    panels = [plot.tune_panel(_tuned(ROUNDS, MODEL), final, "sm_90a")] * 3
    plot.draw_tune(panels, tune, rounds=3)
    text = tune.read_text()
    assert "hopper-01" in text and "the roofs allow" in text and "3 rounds" in text


def test_a_missing_matplotlib_names_the_install_command(tmp_path, monkeypatch):
    for name in ("matplotlib", "matplotlib.figure", "matplotlib.backend_bases"):
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(plot.PlotError, match=r"--plot .*x.png: drawing needs matplotlib.*Fix: pip install "
                                             r"'deepgemm\[plot\]'"):
        plot.require_matplotlib(tmp_path / "x.png")


def test_a_suffix_matplotlib_does_not_write_is_refused(tmp_path):
    pytest.importorskip("matplotlib")
    with pytest.raises(plot.PlotError, match=r"'.docx' names no format matplotlib writes. Fix: .*\.png"):
        plot.require_matplotlib(tmp_path / "x.docx")


# ------------------------------------------------------------------------------------------------ the command

FAKE_SMI = """#!/bin/sh
case "$*" in
  *query-gpu*) echo "0, NVIDIA H200, 9.0, 580.159.04" ;;
  *) echo "GPU 0: NVIDIA H200 (UUID: GPU-fake)" ;;
esac
"""


def _fake_bench(tmp_path: Path) -> tuple[Path, dict]:
    """A generated folder whose harness prints GPU_ROWS[0], with a roof only when asked for --roof 1; and the
    environment with a fake nvidia-smi."""
    from dgemm_cli.arch import get_arch as arch
    from dgemm_cli.pipeline import generate
    from dgemm_cli.spec import parse_spec

    bin_dir = tmp_path / "fakebin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text(FAKE_SMI)
    (bin_dir / "nvidia-smi").chmod(0o755)
    g = generate(parse_spec({"name": "square_bf16", "gemm": {"m": 8, "n": 8, "k": 8}}), arch("sm_90a"), tmp_path)
    exe = g.directory / "build" / "sm_90a" / "square_bf16_harness"
    exe.parent.mkdir(parents=True)
    row = {k: v for k, v in GPU_ROWS[0].items() if k not in ("roof_tflops", "roof_gemm")}
    roofed = {**row, "roof_tflops": 780.0, "roof_gemm": GPU_ROWS[0]["roof_gemm"]}
    exe.write_text(f"""#!/bin/sh
case "$*" in *"--roof 1"*) echo '{json.dumps(roofed)}' ;; *) echo '{json.dumps(row)}' ;; esac
""")
    exe.chmod(0o755)
    import os
    return g.directory, {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


def _dg(env, *args):
    return subprocess.run([sys.executable, "-m", "dgemm_cli", *map(str, args)], capture_output=True, text=True,
                          cwd=REPO, env=env, check=False)


def test_bench_plot_asks_the_harness_for_the_roof_and_draws(tmp_path):
    pytest.importorskip("matplotlib")
    d, env = _fake_bench(tmp_path)
    out = _dg(env, "bench", d, "--plot", tmp_path / "roof.png", "--json")
    assert out.returncode == 0, out.stderr
    (row,) = json.loads(out.stdout)
    assert row["roof_tflops"] == 780.0 and row["dtype"] == "bf16"
    assert "drew 1 point pair into" in out.stderr and (tmp_path / "roof.png").stat().st_size > 10_000
    (plain,) = json.loads(_dg(env, "bench", d, "--json").stdout)
    assert plain["roof_tflops"] is None and math.isclose(plain["ratio"], 190.0 / 180.0)


def test_bench_plot_without_matplotlib_fails_before_running_anything(tmp_path):
    d, env = _fake_bench(tmp_path)
    hide = tmp_path / "hide" / "matplotlib"
    hide.mkdir(parents=True)
    (hide / "__init__.py").write_text("raise ImportError('hidden for the test')\n")
    env = {**env, "PYTHONPATH": f"{hide.parent}:{env.get('PYTHONPATH', '')}"}
    out = _dg(env, "bench", d, "--plot", tmp_path / "roof.png")
    assert out.returncode == 2 and "Fix: pip install 'deepgemm[plot]'" in out.stderr
    assert "kernel" not in out.stdout and not (tmp_path / "roof.png").exists()
