"""On a GPU: every example spec verifies, and a deliberately broken kernel does not.

Marked `gpu`: skipped where nvidia-smi sees no GPU (CI). Run on the device machine."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from dgemm_cli.arch import get_arch
from dgemm_cli.build import build
from dgemm_cli.families import hopper
from dgemm_cli.families.solving import of_assignment
from dgemm_cli.pipeline import generate
from dgemm_cli.plan import Plan, make_plan
from dgemm_cli.spec import load_spec, parse_spec
from dgemm_cli.toolchain import find_nvcc
from dgemm_cli.views import analyse

from .conftest import REPO, SPECS
from .test_family_hopper import MULTICAST_64X32

pytestmark = pytest.mark.gpu


def _verify(directory):
    proc = subprocess.run([sys.executable, "-m", "dgemm_cli", "verify", str(directory), "--json", "--seeds", "11,12"],
                          capture_output=True, text=True, cwd=REPO, check=False)
    return proc.returncode, json.loads(proc.stdout)


def test_odd_tails_verifies(tmp_path):
    g = generate(load_spec(next(p for p in SPECS if p.stem == "odd_tails")), get_arch("sm_90a"), tmp_path)
    assert build(g.directory, "sm_90a", find_nvcc()).ok
    rc, rows = _verify(g.directory)
    assert rc == 0 and rows[0]["passed"] and rows[0]["rel_err"] < 1e-2


@pytest.mark.parametrize("clamp", [[-1.562, -1.43], [1.5, 2.0]], ids=["below", "above"])
def test_a_nan_input_stays_nan_through_tanh_and_a_clamp_outside_its_range(tmp_path, clamp):
    """tanh.approx's result lies in [-1, 1], and ptxas folds a clamp beyond that range to a constant, NaN or not:
    the kernel passes NaN on itself (a random spec found it: a full reduction, a scalar residual, tanh, a clamp)."""
    spec = parse_spec({"name": "nan_tanh", "dtype": "bf16", "contraction": "mk,k->", "sizes": {"m": 3, "k": 4096},
                       "epilogue": [{"activation": "tanh"}, {"clamp": clamp}]})
    g = generate(spec, get_arch("sm_90a"), tmp_path)
    assert build(g.directory, "sm_90a", find_nvcc()).ok
    rc, rows = _verify(g.directory)
    assert rc == 0 and rows[0]["passed"], rows[0]["first_fail"]


def test_broken_kernel_fails_verification(tmp_path):
    # Drop the last k-tile: verify must notice (the reference does not share this code).
    spec = parse_spec({"name": "broken", "gemm": {"m": 40, "n": 24, "k": 100}})
    g = generate(spec, get_arch("sm_90a"), tmp_path, family="cta")
    cu = g.directory / "broken.cu"
    loop = "for (int kt = 0; kt < K_TILES; ++kt)"
    cu.write_text(cu.read_text().replace(loop, loop.replace("K_TILES", "K_TILES - 1")))
    assert build(g.directory, "sm_90a", find_nvcc()).ok
    rc, rows = _verify(g.directory)
    assert rc == 1 and not rows[0]["passed"] and rows[0]["first_fail"] is not None


def test_broken_hopper_kernel_fails_verification(tmp_path):
    # The Hopper family's producer and consumers both stop one k-tile early: verify must notice.
    spec = parse_spec({"name": "broken_h", "dtype": "bf16", "gemm": {"m": 192, "n": 128, "k": 320},
                       "operands": {x: {"align": 16} for x in "ABC"}})
    g = generate(spec, get_arch("sm_90a"), tmp_path, family="hopper")
    assert g.planned.plan.family == "hopper" and g.planned.plan.fallback is None
    cu = g.directory / "broken_h.cu"
    loop = "for (int kt = 0; kt < K_ITERS; ++kt)"
    assert cu.read_text().count(loop) == 2
    cu.write_text(cu.read_text().replace(loop, loop.replace("K_ITERS", "K_ITERS - 1")))
    assert build(g.directory, "sm_90a", find_nvcc()).ok
    rc, rows = _verify(g.directory)
    assert rc == 1 and not rows[0]["passed"] and rows[0]["first_fail"] is not None


# Decode with the roles swapped (C^T = W X^T): the weight is A, the tokens B, C m-contiguous; A's box is shared
# over 2-block clusters along n by TMA multicast.
SWAPPED_ALIGNED = {"A": {"layout": "row", "align": 16}, "B": {"layout": "col", "align": 16},
                   "C": {"layout": "col", "align": 16}}


def _multicast_generated(tmp_path, doc):
    """The spec generated with the multicast plan MULTICAST_64X32 (64x32 tiles, 10 stages): the model takes the K
    split at these sizes."""
    spec = parse_spec(doc)
    views = analyse(spec)
    primary = of_assignment(hopper.problem(views, get_arch("sm_90a")), MULTICAST_64X32)
    g = generate(spec, get_arch("sm_90a"), tmp_path, "hopper",
                 plan=Plan(primary, None, make_plan(views, get_arch("sm_90a")).family_decision), views=views)
    assert g.planned.plan.primary.a_multicast == 2 and g.planned.plan.fallback is None
    return g


@pytest.mark.parametrize("dtype, gemm, beta", [
    ("bf16", {"m": 2000, "n": 40, "k": 1000}, 0.5),  # f32 staging store (beta), a last tile row past M, a K tail
    ("f16", {"m": 4096, "n": 33, "k": 4096}, 0.0),  # the packed store; the second tile column one token wide
])
def test_a_multicast_kernel_verifies(tmp_path, dtype, gemm, beta):
    g = _multicast_generated(tmp_path, {"name": "mc", "dtype": dtype, "gemm": gemm, "beta": beta,
                                        "operands": SWAPPED_ALIGNED})
    assert build(g.directory, "sm_90a", find_nvcc()).ok
    rc, rows = _verify(g.directory)
    assert rc == 0 and rows[0]["passed"]


def test_broken_a_multicast_fails_verification(tmp_path):
    # Both blocks of a cluster load the first half of A's box (each into its own part of every block): the tile's
    # second 32 rows are the first ones again, and verify must notice.
    g = _multicast_generated(tmp_path, {"name": "broken_mc", "dtype": "bf16", "gemm": {"m": 2000, "n": 40, "k": 1000},
                                        "operands": SWAPPED_ALIGNED})
    cu = g.directory / "broken_mc.cu"
    part = "k0, tile.m0 + a_part * A_PART_ROWS);"
    assert cu.read_text().count(part) == 2  # the load and the L2 prefetch
    cu.write_text(cu.read_text().replace(part, "k0, tile.m0);"))
    assert build(g.directory, "sm_90a", find_nvcc()).ok
    rc, rows = _verify(g.directory)
    assert rc == 1 and not rows[0]["passed"] and rows[0]["first_fail"] is not None


def test_unwritten_output_is_caught(tmp_path):
    # Skip the store of the last column: the NaN poison must survive and fail the run.
    spec = parse_spec({"name": "holes", "gemm": {"m": 16, "n": 17, "k": 16}})
    g = generate(spec, get_arch("sm_90a"), tmp_path, family="cta")
    cu = g.directory / "holes.cu"
    cu.write_text(cu.read_text().replace("if (gm >= M || gn >= N) return;", "if (gm >= M || gn >= N - 1) return;"))
    assert build(g.directory, "sm_90a", find_nvcc()).ok
    rc, rows = _verify(g.directory)
    assert rc == 1 and not rows[0]["passed"]


def test_view_past_2_31_elements(tmp_path):
    # A's rows are 2^30 + 8 elements apart: the last row starts past 2^31 - 1, so every offset
    # is 64-bit. The buffer is ~4.3 GB; only the touched rows matter to the kernel.
    spec = parse_spec({"name": "huge", "gemm": {"m": 3, "n": 40, "k": 72},
                       "operands": {"A": {"strides": [2**30 + 8, 1]}}})
    g = generate(spec, get_arch("sm_90a"), tmp_path)
    assert "using index_t = long long;" in (g.directory / "huge.cu").read_text()
    assert build(g.directory, "sm_90a", find_nvcc()).ok
    rc, rows = _verify(g.directory)
    assert rc == 0 and rows[0]["passed"], rows[0]


NN_LINEAR = {"A": {"layout": "row"}, "B": {"layout": "col"}, "C": {"layout": "row"}}  # B as [N, K]


def _repeated_20_times(directory):
    """verify --repeat 20 (seed 3) of a built directory: it must pass, C's bits the same every launch; its report."""
    proc = subprocess.run([sys.executable, "-m", "dgemm_cli", "verify", str(directory), "--json", "--seeds", "3",
                           "--repeat", "20"], capture_output=True, text=True, cwd=REPO, check=False)
    report = json.loads(proc.stdout)[0]["report"]
    assert proc.returncode == 0 and report["repeat"] == 20 and report["repeat_differed"] == 0
    return report


# Every kernel that sums partial results across threads, warps or blocks, each in the order it promises: 20 more
# launches must reproduce C's bits.
@pytest.mark.parametrize("name, family, gemm, summed", [
    # K split over a cluster, summed in rank order through DSMEM.
    ("splitk", "splitk", {"m": 5, "n": 300, "k": 3000}, lambda p: p.splits > 1),
    ("gemv", "gemv", {"m": 3, "n": 1000, "k": 3000}, lambda p: True),
    # The warps of a block split K and add their partial tiles in warp order through shared memory (8 tokens with
    # a K tail; 16 tokens; 8 tokens over a batch of 4 products).
    ("tcgemv8", "tcgemv", {"m": 6, "n": 4096, "k": 1000}, lambda p: p.k_warps > 1 and p.tokens == 8),
    ("tcgemv16", "tcgemv", {"m": 13, "n": 2500, "k": 4096}, lambda p: p.k_warps > 1 and p.tokens == 16),
    ("tcgemv_batch", "tcgemv", {"batch": 4, "m": 8, "n": 2048, "k": 1536}, lambda p: p.k_warps > 1),
    # A staged in shared memory by TMA, 7 row groups: the last block's columns past N, tokens past M as TMA's zero
    # fill.
    ("tcgemv_staged", "tcgemv", {"m": 11, "n": 14300, "k": 4096}, lambda p: p.shared_act and p.row_groups == 7),
    # Two blocks of a cluster a tile, each half the k-iterations, summed through DSMEM.
    ("hopper_split", "hopper", {"m": 64, "n": 4096, "k": 4096}, lambda p: p.k_splits == 2),
])
def test_summing_kernels_are_bit_identical_run_to_run(tmp_path, name, family, gemm, summed):
    spec = parse_spec({"name": f"det_{name}", "dtype": "f16", "gemm": gemm, "operands": NN_LINEAR, "beta": 0.5})
    g = generate(spec, get_arch("sm_90a"), tmp_path, family=family)
    assert g.planned.plan.family == family and summed(g.planned.plan.primary), g.planned.plan.primary.summary
    assert build(g.directory, "sm_90a", find_nvcc()).ok
    _repeated_20_times(g.directory)


def test_run_time_m_artifact_is_bit_identical_run_to_run(tmp_path):
    # One artifact, every bucket's kernel (gemv / tcgemv / hopper / splitk as the plan picks): each m verify runs
    # is launched 20 more times and must reproduce C's bits. K = 4096 takes gemv, tcgemv and hopper buckets.
    spec = parse_spec({"name": "det_dyn", "dtype": "bf16", "gemm": {"m": {"min": 1, "max": 64}, "n": 4096, "k": 4096},
                       "operands": NN_LINEAR, "beta": 0.5})
    g = generate(spec, get_arch("sm_90a"), tmp_path)
    assert len({b.plan.primary.family for b in g.planned.plan.buckets}) > 1
    assert build(g.directory, "sm_90a", find_nvcc()).ok
    report = _repeated_20_times(g.directory)
    assert len(report["m_cases"]) >= 10 and all(c["passed"] for c in report["m_cases"])


def test_broken_split_k_reduction_fails_verification(tmp_path):
    # The cluster sum skips the last rank's K slice: verify must notice.
    spec = parse_spec({"name": "broken_s", "dtype": "f16", "gemm": {"m": 2, "n": 200, "k": 2048}})
    g = generate(spec, get_arch("sm_90a"), tmp_path, family="splitk")
    cu = g.directory / "broken_s.cu"
    loop = "for (int s = 0; s < SPLITS; ++s)"
    assert cu.read_text().count(loop) == 1
    cu.write_text(cu.read_text().replace(loop, loop.replace("SPLITS", "SPLITS - 1")))
    assert build(g.directory, "sm_90a", find_nvcc()).ok
    rc, rows = _verify(g.directory)
    assert rc == 1 and not rows[0]["passed"]


def test_fp8_promotion_is_what_passes_at_k_7168(tmp_path):
    """specs/fp8/fp8_per_channel_f32 (K = 7168, f32 out) verifies as generated, and fails the e4m3 tolerance when
    built with -DDG_FP8_NO_PROMOTION (all of K summed on the tensor core's narrower accumulator)."""
    g = generate(load_spec(REPO / "specs" / "fp8" / "fp8_per_channel_f32.yaml"), get_arch("sm_90a"), tmp_path)
    assert build(g.directory, "sm_90a", find_nvcc()).ok
    rc, rows = _verify(g.directory)
    assert rc == 0 and rows[0]["passed"] and rows[0]["calc_diff"] < 1e-3, rows[0]
    flags = "-std=c++17 -O3 -lineinfo -DDG_FP8_NO_PROMOTION"
    subprocess.run(["make", "-C", str(g.directory), "harness", "BUILD=build/no_promotion", f"NVCCFLAGS={flags}"],
                   check=True, capture_output=True)
    proc = subprocess.run([str(g.directory / "build" / "no_promotion" / "fp8_per_channel_f32_harness"), "verify",
                           "--seeds", "11,12"], capture_output=True, text=True, check=False)
    report = json.loads(proc.stdout)
    assert proc.returncode == 1 and not report["passed"] and report["rel_err"] > report["tol"], report
