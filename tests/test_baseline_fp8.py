"""cuBLASLt FP8 as the bench baseline of an e4m3 spec (issue 41), without a GPU: which scale-mode pairs are tried
in which order and how each is labelled for every scaling mode of the spec, what the harness gets (the letters'
blocks and scale strides, the rendered construction, the headers shipped), and the header compiling beside
dg_harness.cuh and alone with its GPU self-test."""

from __future__ import annotations

import pytest

from dgemm_cli.baseline import (
    BLK128,
    OUTER_VEC,
    SCALAR,
    VEC128,
    fp8_scaling,
    plan_baseline,
    plan_fp8,
)
from dgemm_cli.spec import parse_spec
from dgemm_cli.views import analyse

from .test_baseline_lt import SELFTEST_DIR, _compile_clean, _nvcc

DEEPGEMM = {"A": {"block": {"k": 128}, "layout": "col"}, "B": {"block": {"n": 128, "k": 128}}}


def _spec(scales=DEEPGEMM, gemm=None, **top):
    doc = {"name": "f8", "dtype": "e4m3", "gemm": gemm or {"m": 4096, "n": 7168, "k": 16384},
           "operands": {"A": {"layout": "row"}, "B": {"layout": "col"}, "C": {"layout": "row", "dtype": "bf16"}},
           "scales": scales}
    doc.update(top)
    return parse_spec(doc, "f8.yaml")


def _pairs(spec):
    return [(c.mode_a, c.mode_b) for c in plan_fp8(analyse(spec)).candidates]


def test_deepgemm_format_runs_as_vec128_by_blk128x128_first():
    spec = _spec()
    a, b = (fp8_scaling(spec, sc) for sc in spec.scales)
    assert (a.mode, a.words, b.mode, b.words) == (VEC128, "1x128", BLK128, "128x128")
    plan = plan_fp8(analyse(spec))
    assert plan.available
    first = plan.candidates[0]
    assert (first.mode_a, first.mode_b) == (VEC128, BLK128)
    assert first.label == ("A scales VEC128_32F (1x128), B scales BLK128x128_32F (128x128): the spec's scaling")
    # Then the same scales in a finer mode (B's 128x128 blocks as 1x128), then the nearest coarser ones.
    assert _pairs(spec) == [(VEC128, BLK128), (VEC128, VEC128), (OUTER_VEC, OUTER_VEC), (SCALAR, SCALAR)]
    assert "nearest" in plan.candidates[2].label and "nearest" in plan.candidates[3].label
    assert "exactly" in plan.candidates[1].label


def test_the_harness_gets_each_letters_blocks_and_scale_strides():
    plan = plan_fp8(analyse(_spec()))
    # A_scales [m, k/128] m-contiguous (layout col); B's letters are (k, n), its scales row-major over them.
    assert dict((x, rest) for x, *rest in plan.letters) == {
        "m": [1, 0, 1, 0], "n": [0, 128, 0, 1], "k": [128, 128, 4096, 56]}
    alt = plan.alternative()
    assert alt.header == "dg_cublaslt_fp8.cuh" and alt.includes == ("dg_cublaslt.cuh",)
    assert alt.cls == "DgCublasLtFp8Alternative<DgAltBaseline, DgProblem>"
    assert alt.ctor_args.startswith("({{'m', 1LL, 0LL, 1LL, 0LL}, ")
    assert '{DG_LT_FP8_VEC128, DG_LT_FP8_BLK128x128, "A scales VEC128_32F (1x128), ' in alt.ctor_args
    assert alt.ctor_args.endswith("DgLtFp8Scales{0LL, 0LL})")


def test_the_cublas_plan_is_unavailable_and_carries_the_fp8_alternative():
    bl = plan_baseline(analyse(_spec()))
    assert not bl.available and bl.kind == "unavailable: cuBLAS's GemmEx has no e4m3 inputs"
    assert bl.alternative is not None and bl.alternative.header == "dg_cublaslt_fp8.cuh"


def test_per_tensor_scales_run_tensorwise():
    spec = _spec({"A": {"per": "tensor"}, "B": {"per": "tensor"}})
    pairs = _pairs(spec)
    assert pairs[0] == (SCALAR, SCALAR)
    assert plan_fp8(analyse(spec)).candidates[0].label.endswith("the spec's scaling")
    # Every finer mode holds a scalar exactly.
    assert set(pairs) == {(SCALAR, SCALAR), (OUTER_VEC, OUTER_VEC), (OUTER_VEC, BLK128), (BLK128, OUTER_VEC),
                          (VEC128, BLK128), (BLK128, VEC128), (VEC128, VEC128)}


def test_per_channel_scales_run_as_outer_vectors():
    spec = _spec({"A": {"per": "channel"}, "B": {"per": "channel"}})
    a, b = (fp8_scaling(spec, sc) for sc in spec.scales)
    assert (a.mode, a.words, b.mode) == (OUTER_VEC, "per-channel", OUTER_VEC)
    assert _pairs(spec)[0] == (OUTER_VEC, OUTER_VEC)
    assert (VEC128, VEC128) in _pairs(spec)  # one a row and 128 k holds a per-channel scale exactly


def test_both_128x128_has_no_pair_of_its_own_and_is_exact_as_1x128():
    spec = _spec({"A": {"block": {"m": 128, "k": 128}}, "B": {"block": {"n": 128, "k": 128}}})
    plan = plan_fp8(analyse(spec))
    assert [(c.mode_a, c.mode_b) for c in plan.candidates][:3] == [(VEC128, BLK128), (BLK128, VEC128),
                                                                  (VEC128, VEC128)]
    assert all("exactly" in c.label for c in plan.candidates[:3])


def test_per_channel_with_128x128_tries_its_own_pair_first():
    spec = _spec({"A": {"per": "channel"}, "B": {"block": {"n": 128, "k": 128}}})
    assert _pairs(spec)[:2] == [(OUTER_VEC, BLK128), (VEC128, BLK128)]  # the second: the same scales, exactly


def test_mixed_1x128_and_per_channel_is_exact_as_two_vec128():
    spec = _spec({"A": {"block": {"k": 128}}, "B": {"per": "channel"}})
    first = plan_fp8(analyse(spec)).candidates[0]
    assert (first.mode_a, first.mode_b) == (VEC128, VEC128) and "exactly" in first.label


def test_other_blocks_get_the_nearest_modes_block_then_outer_vector_then_tensorwise():
    spec = _spec({"A": {"block": {"k": 64}}, "B": {"block": {"n": 128, "k": 64}}})
    a, b = (fp8_scaling(spec, sc) for sc in spec.scales)
    assert (a.mode, a.words, b.mode, b.words) == (None, "blocks m:1 k:64", None, "blocks k:64 n:128")
    plan = plan_fp8(analyse(spec))
    assert [(c.mode_a, c.mode_b) for c in plan.candidates] == [(VEC128, VEC128), (OUTER_VEC, OUTER_VEC),
                                                               (SCALAR, SCALAR)]
    assert all("nearest to the spec's scales (A blocks m:1 k:64, B blocks k:64 n:128)" in c.label
               for c in plan.candidates)


def test_a_batch_is_unavailable_with_the_reason():
    spec = parse_spec({"name": "bf8", "dtype": "e4m3", "contraction": "bmk,bnk->bmn",
                       "sizes": {"b": 4, "m": 256, "n": 256, "k": 512},
                       "operands": {"C": {"dtype": "bf16"}},
                       "scales": {"A": {"block": {"k": 128}}, "B": {"block": {"n": 128, "k": 128}}}}, "bf8.yaml")
    plan = plan_fp8(analyse(spec))
    assert not plan.available and "batch of 4" in plan.why
    assert plan_baseline(analyse(spec)).alternative is None


# --- the header: compile checks (nvcc, no GPU) ---------------------------------------------------------------


@pytest.mark.slow
def test_the_fp8_header_builds_beside_dg_harness(tmp_path):
    _compile_clean(_nvcc(), ["-c", str(SELFTEST_DIR / "fp8_with_harness.cu"), "-o", str(tmp_path / "fp8.o")])


@pytest.mark.slow
def test_the_fp8_selftest_compiles_with_the_harness_declarations_only(tmp_path):
    _compile_clean(_nvcc(), [str(SELFTEST_DIR / "fp8_selftest.cu"), "-o", str(tmp_path / "fp8_selftest"), "-ldl"])


def test_bench_reports_read_and_write_the_bf16_fields():
    import json

    from dgemm_cli.records import BenchReport

    data = {"command": "bench", "name": "f8", "us": 700.0, "baseline": "cublaslt:fp8", "baseline_us": 840.2,
            "bf16_baseline": "cublasLt bf16 TN m=7168 n=4096 k=16384", "bf16_baseline_us": 1151.8,
            "bf16_baseline_tflops": 835.2, "bf16_ratio": 1.645}
    row = BenchReport.from_dict(data).row
    assert (row.bf16_baseline_us, row.bf16_baseline_tflops, row.bf16_ratio) == (1151.8, 835.2, 1.645)
    again = BenchReport.from_dict(json.loads(json.dumps(BenchReport.from_dict(data).to_dict()))).row
    assert again.bf16_baseline == data["bf16_baseline"] and again.bf16_ratio == 1.645
    assert "bf16_baseline" not in BenchReport.from_dict({"command": "bench", "name": "k", "us": 1.0}).to_dict()
