"""The verify/bench harness for e4m3 inputs with f32 scales (issue 41, docs/design/fp8.md): the generated tables
(the A_scales and B_scales slots, their strides per block and each letter's blocks), the launch wrapper's pointer
order, the cuBLAS baseline marked unavailable, the harness's host-side e4m3 helpers checked against a hand-filled
problem, its compile against a hand-written FP8 kernel, and on a GPU the self-test's e4m3 case (planted bugs
included).

No family plans e4m3 yet, so the harness is rendered from render's table builders, not through `gen`."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dgemm_cli import __version__
from dgemm_cli.baseline import plan_baseline
from dgemm_cli.records import VerifyReport
from dgemm_cli.render import (
    E4M3_TOLERANCE,
    HARNESS,
    HARNESS_SLOTS,
    TOLERANCE,
    _baseline_ctx,
    _harness_ctx,
    environment,
    template_dir,
)
from dgemm_cli.spec import parse_spec
from dgemm_cli.views import analyse

from .conftest import REPO, gpu_present
from .test_harness_dynamic import _compile, _nvcc, _run  # nvcc with -Wall, one JSON line back

# DeepGEMM's format on small sizes with tails: 1 x 128 blocks of A (m-contiguous scales, padded to 48 a K block,
# offset 3), 32 x 128 blocks of B (n tail: 48 = 32 + 16; k tail: 200 = 128 + 72), bf16 C.
STUB_SPEC = {
    "name": "f8stub", "dtype": "e4m3", "gemm": {"m": 40, "n": 48, "k": 200},
    "operands": {"A": {"layout": "row"}, "B": {"layout": "col"}, "C": {"layout": "row", "dtype": "bf16"}},
    "alpha": 1.5,
    "scales": {"A": {"block": {"k": 128}, "strides": [1, 48], "offset": 3}, "B": {"block": {"n": 32, "k": 128}}},
}


def _harness_source(doc: dict) -> str:
    """harness.cu.j2 rendered from the spec's tables alone (no kernels, no header)."""
    spec = parse_spec(doc)
    k = {"name": spec.name, "version": __version__, "arch": "sm_90a", "h": _harness_ctx(spec),
         "bl": _baseline_ctx(plan_baseline(analyse(spec))), "dyn": None}
    return environment().get_template("harness.cu.j2").render(k=k)


# ------------------------------------------------------------------------------------------------
# the generated tables and launch wrapper


def test_the_tables_carry_the_scale_slots_strides_blocks_and_dtypes():
    h = _harness_ctx(parse_spec(STUB_SPEC))
    assert HARNESS_SLOTS[7:] == ("A_scales", "B_scales", "B_zeros")
    assert h["nslots"] == 9 and h["present"] == [1, 1, 1, 0, 0, 0, 0, 1, 1, 0] and h["scales"]
    m, n, k = h["dims"]
    # scale_strides: A_scales, B_scales, B_zeros, per block; blocks: how many indices one scale covers (0: no such
    # letter).
    assert (m["strides"], m["scale_strides"], m["blocks"]) == ([200, 0, 48], [1, 0, 0], [1, 0])
    assert (n["strides"], n["scale_strides"], n["blocks"]) == ([0, 200, 1], [0, 1, 0], [0, 32])
    assert (k["strides"], k["scale_strides"], k["blocks"]) == ([1, 1, 0], [48, 2, 0], [128, 128])
    assert all(d["extra_strides"] == [0, 0, 0, 0] for d in h["dims"])
    assert h["offsets"] == [0, 0, 0, 0, 0, 0, 0, 3, 0, 0]
    # A_scales: 3 + 39 + 48 + 1 (two K blocks); B_scales [2 K blocks, 2 N blocks] row-major.
    assert h["spans"] == [40 * 200, 48 * 200, 40 * 48, 0, 0, 0, 0, 91, 4, 0]
    assert h["dtypes"] == ["DG_E4M3", "DG_E4M3", "DG_BF16", "0", "0", "0", "0", "DG_F32", "DG_F32", "0"]
    assert h["aligns"] == [1, 1, 2, 0, 0, 0, 0, 4, 4, 0]
    assert h["tol"] == TOLERANCE["bf16"]  # the output's 16-bit tolerance dominates e4m3's
    f32_out = {**STUB_SPEC, "operands": {**STUB_SPEC["operands"], "C": {"layout": "row", "dtype": "f32"}}}
    assert _harness_ctx(parse_spec(f32_out))["tol"] == E4M3_TOLERANCE == 2.0**-11


def test_the_launch_wrapper_passes_the_scales_after_the_epilogue_views():
    doc = {**STUB_SPEC, "operands": {**STUB_SPEC["operands"], "D": {"layout": "col", "dtype": "f32"}},
           "epilogue": [{"bias": {"letters": "n", "dtype": "bf16"}}, {"activation": "relu"}]}
    text = _harness_source(doc)
    assert ("void *const A = bufs[DG_A], *const B = bufs[DG_B], *const C = bufs[DG_C], *const D = bufs[DG_D], "
            "*const bias = bufs[DG_BIAS], *const A_scales = bufs[DG_A_SCALES], *const B_scales = bufs[DG_B_SCALES];"
            ) in text
    assert ("f8stub(static_cast<const __nv_fp8_e4m3*>(A), static_cast<const __nv_fp8_e4m3*>(B), "
            "static_cast<const __nv_bfloat16*>(C), static_cast<float*>(D), static_cast<const __nv_bfloat16*>(bias), "
            "static_cast<const float*>(A_scales), static_cast<const float*>(B_scales), alpha, beta, stream);") in text
    # Each letter's strides in all nine slots, then its blocks in A_scales and B_scales.
    assert "{'k', DG_K, 200LL, { 1LL, 1LL, 0LL, 0LL, 0LL, 0LL, 0LL, 48LL, 2LL }, { 128LL, 128LL } }," in text
    assert "{'n', DG_N, 48LL, { 0LL, 200LL, 1LL, 40LL, 1LL, 0LL, 0LL, 0LL, 1LL }, { 0LL, 32LL } }," in text
    assert "    { DG_E4M3, DG_E4M3, DG_BF16, DG_F32, DG_BF16, 0, 0, DG_F32, DG_F32 },\n" in text


def test_a_spec_without_scales_renders_its_tables_as_before():
    doc = {"name": "plain", "dtype": "f16", "gemm": {"m": 40, "n": 24, "k": 33}}
    h = _harness_ctx(parse_spec(doc))
    assert not h["scales"] and h["nslots"] == 3 and all(d["blocks"] == [0, 0] for d in h["dims"])
    text = _harness_source(doc)
    assert "{'m', DG_M, 40LL, { 33LL, 0LL, 24LL } }," in text and "A_scales" not in text


def test_the_cublas_baseline_is_unavailable_for_e4m3_inputs_and_cublaslt_fp8_runs_instead():
    bl = plan_baseline(analyse(parse_spec(STUB_SPEC)))
    assert not bl.available and bl.kind == "unavailable: cuBLAS's GemmEx has no e4m3 inputs"
    assert bl.alternative is not None and bl.alternative.header == "dg_cublaslt_fp8.cuh" and not bl.calls
    assert '    0, "unavailable: cuBLAS\'s GemmEx has no e4m3 inputs",' in _harness_source(STUB_SPEC)


# ------------------------------------------------------------------------------------------------
# the tables describe the semantics: walked as the reference walks them, they give numpy's dequantized product


def _walk_tables(h: dict, buffers: dict[str, np.ndarray], alpha: float) -> np.ndarray:
    """The reference from the tables alone: each slot's address offset + sum (index // block) * stride (block 1
    outside the scale slots, 0 read as 1), terms (A * sa) * (B * sb) summed over the summed letters."""
    dims, nc = h["dims"], h["nc"]
    idx = np.indices([d["size"] for d in dims])

    def gather(x: str) -> np.ndarray:
        s = HARNESS_SLOTS.index(x)
        addr = np.full(idx.shape[1:], h["offsets"][s])
        for i, d in zip(idx, dims):
            stride = (d["strides"] + d["extra_strides"] + d["scale_strides"])[s]
            block = max(d["blocks"][s - 7], 1) if s >= 7 else 1
            addr = addr + i // block * stride
        return buffers[x][addr]

    terms = (gather("A") * gather("A_scales")) * (gather("B") * gather("B_scales"))
    return alpha * terms.sum(axis=tuple(range(nc, len(dims))))


def test_the_tables_walked_give_numpys_dequantized_product():
    spec = parse_spec(STUB_SPEC)
    h = _harness_ctx(spec)
    rng = np.random.default_rng(41)
    views = {op.name: op for op in (*spec.operands, *spec.quant_views)}
    buffers = {x: rng.uniform(-1, 1, v.span) for x, v in views.items()}
    got = _walk_tables(h, buffers, spec.alpha)

    def strided(x: str) -> np.ndarray:
        v = views[x]
        buf = buffers[x]
        return np.lib.stride_tricks.as_strided(buf[v.offset:], v.sizes, [s * buf.itemsize for s in v.strides])

    a, b = strided("A"), strided("B")            # [m, k], [k, n] (B stored [n, k])
    sa, sb = strided("A_scales"), strided("B_scales")  # [m, ceil(k/128)], [ceil(k/128), ceil(n/32)]
    m, n, k = np.arange(40), np.arange(48), np.arange(200)
    a_deq = a * sa[m[:, None], k[None, :] // 128]
    b_deq = b * sb[k[:, None] // 128, n[None, :] // 32]
    np.testing.assert_allclose(got, spec.alpha * a_deq @ b_deq, rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------------------------------------------
# compiled: the harness's host helpers, the rendered harness against a stub kernel, the GPU self-test


def _hand_problem() -> tuple[np.ndarray, np.ndarray]:
    """fp8_problem.inc's problem from its definition: C[m, n] = alpha * sum over i, j of (A[m, i, j] * sa[m // 2,
    i, j // 2]) * (B[i, j, n] * sb[i, j // 4]), with fp8_helpers.cu's hand-filled values; and sum |term|."""
    a = np.array([[[(m + 1) * ((i * 5 + j) % 3 - 1) for j in range(5)] for i in range(2)] for m in range(4)], float)
    a[0, 0, 0], a[3, 1, 4] = 448.0, 2.0**-9
    b = np.array([[[(n + 1) - ((i * 5 + j) % 2) * 3 for n in range(3)] for j in range(5)] for i in range(2)], float)
    sa = np.array([[[0.5 + bm + 2 * bi + 0.25 * bj for bj in range(3)] for bi in range(2)] for bm in range(2)])
    sb = np.array([[0.25 * (1 + bi + 2 * bj) for bj in range(2)] for bi in range(2)])
    out, mag = np.zeros((4, 3)), np.zeros((4, 3))
    for m in range(4):
        for n in range(3):
            terms = [(a[m, i, j] * sa[m // 2, i, j // 2]) * (b[i, j, n] * sb[i, j // 4])
                     for i in range(2) for j in range(5)]
            out[m, n], mag[m, n] = sum(terms), sum(abs(t) for t in terms)
    return 0.5 * out, 0.5 * mag


@pytest.mark.slow
def test_the_fp8_helpers(tmp_path):
    """Both references dequantize with the blocks (a K letter outside the innermost, tail blocks, a padded scale
    view at an offset, runs starting inside blocks), e4m3 loads and stores, the random fills' range, calc_diff,
    bench's bytes and dg_check_problem's refusals (host code only: no GPU needed)."""
    exe = tmp_path / "fp8_helpers"
    _compile(_nvcc(), [REPO / "tests" / "harness_selftest" / "fp8_helpers.cu"], exe, template_dir())
    rc, got = _run(exe)
    assert rc == 0, got
    want, mag = _hand_problem()
    np.testing.assert_allclose(got["host_ref"], want.ravel(), rtol=1e-15)
    np.testing.assert_allclose(got["host_mag"], mag.ravel(), rtol=1e-15)
    # dg_reference_run (the GPU reference's walk) leaves alpha to dg_reference_sum_kernel.
    np.testing.assert_allclose(got["run_ref"], 2 * want.ravel(), rtol=1e-15)
    np.testing.assert_allclose(got["run_split"], 2 * want.ravel(), rtol=1e-15)
    # 1000 and -1000 saturate to +-448 (0x7E, 0xFE), NaN is 0x7F, 0.0017 rounds to the smallest subnormal 2^-9.
    assert got["e4m3_bits"] == [0x7E, 0xFE, 0x7F, 0x01] and got["e4m3_load_3"] == 2.0**-9 and got["e4m3_load_nan"]
    assert got["e4m3_size"] == 1 and (got["poison"], got["sentinel"]) == (0x7F, 0xFF)
    fill = got["e4m3_fill"]
    assert fill["nan"] == 0 and fill["largest"] == 448.0 and fill["subnormal"] > 0 and fill["near_max"] > 0
    assert 0.03 < fill["at_least_1"] / fill["n"] < 0.08  # most of the 1/16 drawn over every finite pattern
    scales = got["scale_fill"]
    assert 2.0**-10 <= scales["min"] and scales["max"] < 2.0**-2 and scales["exponents"] == 8
    # bias and residual drawn at the size of the scaled e4m3 product: above uniform inputs' sqrt(1000) / 3
    assert 30 < got["amplitude_k1000"] < 120
    assert (got["calc_diff_same"], got["calc_diff_zero"], got["calc_diff_nan"]) == (0, 0, "nan")
    assert got["calc_diff_off"] == pytest.approx(0.2**2 / (1 + 1 + 4 + 2.2**2), rel=1e-12)
    assert got["fp8_inputs"]
    # 2 * m n i j; A 40 and B 30 one-byte elements, A_scales 2*2*3 and B_scales 2*2 floats, C 12 floats written.
    assert (got["flops"], got["bytes"]) == (240, 40 + 30 + 4 * (12 + 4) + 4 * 12)
    for broken, words in (("span", "A_scales reaches elements [1, 14] but span is 14"),
                          ("negative_block", "letter 'j' has block -1 in scale slot A_scales"),
                          ("absent_block", "letter 'n' has block 3 in absent slot B_scales"),
                          ("no_scales", "A is e4m3 but slot A_scales is not present"),
                          ("c_e4m3", "dtype of C is 3"), ("scale_dtype", "dtype of A_scales is 2"),
                          ("baseline", "cublasGemmEx has no e4m3 inputs")):
        rc, report = _run(exe, broken)
        assert rc == 4 and words in report["error"], (broken, report)


# The kernel under test: naive and correct, with the FP8 C API: A [m, k] row-major, B [n, k] (K contiguous),
# sa [m, kb] m-contiguous, padded to 48 a K block, at offset 3; sb [kb, nb] row-major.
STUB_HEADER = r"""
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <cstdint>
extern "C" cudaError_t f8stub(const __nv_fp8_e4m3* A, const __nv_fp8_e4m3* B, __nv_bfloat16* C, const float* A_scales,
                              const float* B_scales, float alpha, float beta, cudaStream_t stream);
"""
STUB_KERNEL = r"""
#include "f8stub.h"

__global__ void f8stub_kernel(const __nv_fp8_e4m3* A, const __nv_fp8_e4m3* B, __nv_bfloat16* C, const float* sa,
                              const float* sb, float alpha) {
  const int o = blockIdx.x * blockDim.x + threadIdx.x;
  if (o >= 40 * 48) return;
  const int i = o / 48, j = o % 48;
  float acc = 0.0f;
  for (int k = 0; k < 200; ++k)
    acc += static_cast<float>(A[i * 200 + k]) * sa[3 + i + (k / 128) * 48] * static_cast<float>(B[j * 200 + k]) *
           sb[(k / 128) * 2 + j / 32];
  C[i * 48 + j] = __float2bfloat16_rn(alpha * acc);
}

static bool misaligned(const void* p, unsigned align) { return reinterpret_cast<uintptr_t>(p) % align != 0; }

extern "C" cudaError_t f8stub(const __nv_fp8_e4m3* A, const __nv_fp8_e4m3* B, __nv_bfloat16* C, const float* A_scales,
                              const float* B_scales, float alpha, float, cudaStream_t stream) {
  if (!A || !B || !C || !A_scales || !B_scales) return cudaErrorInvalidValue;
  if (misaligned(C, 2) || misaligned(A_scales, 4) || misaligned(B_scales, 4)) return cudaErrorInvalidValue;
  f8stub_kernel<<<(40 * 48 + 127) / 128, 128, 0, stream>>>(A, B, C, A_scales, B_scales, alpha);
  return cudaGetLastError();
}
"""


@pytest.mark.slow
def test_the_harness_compiles_with_an_fp8_entry_point(tmp_path):
    """The rendered harness against a hand-written FP8 kernel: -Wall clean; on a GPU verify passes (calc_diff
    reported) and bench runs with the baseline unavailable."""
    (tmp_path / "f8stub.h").write_text(STUB_HEADER)
    (tmp_path / "f8stub_harness.cu").write_text(_harness_source(STUB_SPEC))
    for header in (HARNESS, "dg_cublaslt.cuh", "dg_cublaslt_fp8.cuh"):  # the harness and its FP8 baseline
        (tmp_path / header).write_text((template_dir() / header).read_text())
    (tmp_path / "f8stub.cu").write_text(STUB_KERNEL)
    exe = tmp_path / "f8stub_harness"
    _compile(_nvcc(), [tmp_path / "f8stub_harness.cu", tmp_path / "f8stub.cu"], exe, tmp_path)
    if not gpu_present():
        rc, report = _run(exe, "verify")
        assert rc == 3 and "no CUDA GPU" in report["error"]
        return
    rc, report = _run(exe, "verify", "--repeat", "2")
    assert rc == 0 and report["passed"], report
    assert 0 <= report["calc_diff"] < 1e-3 and all(r["calc_diff"] < 1e-3 for r in report["runs"])
    # A and B promise 1 byte: no misaligned probe for them; null and misaligned for C and the scales.
    assert len(report["api_probes"]) == 5 + 3 and report["api_null_rejected"] and report["api_misaligned_rejected"]
    rc, report = _run(exe, "bench", "--reps", "5")
    assert rc == 0 and "cublasLt fp8 e4m3" in report["baseline_formulation"], report


def test_verify_reports_carry_calc_diff_where_the_harness_writes_it():
    base = {"command": "verify", "name": "k", "passed": True, "tol": 0.01, "max_abs_err": 0.0, "rel_err": 0.0,
            "first_fail": None}
    assert VerifyReport.from_dict(base).calc_diff is None  # a report from before calc_diff
    r = VerifyReport.from_dict({**base, "calc_diff": 2.5e-6, "dynamic": {"letter": "m", "lo": 1, "hi": 4},
                                "m_cases": [{"m": 1, "passed": True, "max_abs_err": 0, "rel_err": 0,
                                             "calc_diff": "nan", "first_fail": None}]})
    assert r.calc_diff == 2.5e-6 and math.isnan(r.m_cases[0].calc_diff)
    assert r.m_cases[0].to_dict()["calc_diff"] == "nan"


SELFTEST = REPO / "tests" / "harness_selftest" / "selftest_harness.cu"


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize("defines, args, want_rc, check", [
    ((), ["verify", "--repeat", "2"], 0,
     lambda r: r["passed"] and r["calc_diff"] < 1e-3 and all(x["ref_mismatch"] == 0 for x in r["runs"])),
    ((), ["bench", "--reps", "5"], 0, lambda r: r["baseline"].startswith("unavailable") and r["gbps"] > 0),
    # Leaves out B's scales: every output is off, calc_diff far above 1e-3.
    (("-DSELFTEST_BROKEN=11",), ["verify", "--seeds", "1"], 1, lambda r: r["calc_diff"] > 1e-3),
    # Indexes A's scales by B's K blocks.
    (("-DSELFTEST_BROKEN=12",), ["verify", "--seeds", "1"], 1, lambda r: not r["passed"]),
])
def test_the_harness_catches_fp8_bugs_on_a_gpu(tmp_path, defines, args, want_rc, check):
    exe = tmp_path / "selftest"
    _compile(_nvcc(), [SELFTEST], exe, template_dir(), ("-DSELFTEST_CASE=9", *defines))
    rc, report = _run(exe, *args)
    assert rc == want_rc and check(report), report
