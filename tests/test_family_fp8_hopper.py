"""The `fp8_hopper` family (docs/design/fp8.md): its gates, its tiling graph's FP8 constraints, how it reads each
scaling mode's scales, and what it renders (pure; the kernel's GPU checks are verify's)."""

from __future__ import annotations

import copy

import pytest

from dgemm_cli.arch import get_arch
from dgemm_cli.baseline import plan_baseline
from dgemm_cli.errors import PlanError
from dgemm_cli.explain import explain_text
from dgemm_cli.families import FAMILIES
from dgemm_cli.families.fp8_hopper import Fp8HopperPlan, gates
from dgemm_cli.plan import family_gates, make_plan
from dgemm_cli.render import render_sources
from dgemm_cli.spec import parse_spec
from dgemm_cli.views import analyse

H200 = get_arch("sm_90a")
DEEPGEMM = {"A": {"block": {"k": 128}, "layout": "col"}, "B": {"block": {"n": 128, "k": 128}}}


def _spec(scales=DEEPGEMM, m=512, n=384, k=1040, a=None, b=None, c=None, **top) -> dict:
    spec = {"name": "f8", "arch": "sm_90a", "dtype": "e4m3", "gemm": {"m": m, "n": n, "k": k},
            "operands": {"A": a or {"layout": "row", "align": 16}, "B": b or {"layout": "col", "align": 16},
                         "C": c or {"layout": "row", "dtype": "bf16", "align": 16}},
            "scales": scales}
    spec.update(top)
    return spec


def _views(data: dict):
    return analyse(parse_spec(data, "f8.yaml"))


def _plan(data: dict) -> Fp8HopperPlan:
    plan = make_plan(_views(data), H200)
    assert plan.family == "fp8_hopper" and plan.fallback is None
    return plan.primary


def test_deepgemm_format_plans_fp8_hopper_with_promotion_and_its_scale_loads():
    plan = _plan(_spec())
    sa, sb = plan.scales
    assert (sa.mn_block, sa.mn_stride, sa.k_block, sa.k_stride) == (1, 1, 128, 512)  # [m, k/128], m-contiguous
    assert (sb.mn_block, sb.mn_stride, sb.k_block, sb.k_stride) == (128, 1, 128, 3)  # [k/128, n/128]
    assert plan.block_k == 128 and plan.k_iters == 9 and plan.promotion_k == 128
    assert not plan.runtime_align  # nothing left to check at run time: no fallback
    lines = "\n".join(plan.detail_lines())
    assert "promotion: every 128 k" in lines
    assert "A_scales[mk] f32, 1 x 128 blocks (rows x k): 2 loads an m64 block" in lines
    assert "B_scales[kn] f32, 128 x 128 blocks (columns x k): one load a k-iteration" in lines
    assert "note: A_scales is not m-contiguous" not in lines


def test_every_other_family_refuses_e4m3_and_fp8_hopper_refuses_16_bit():
    gated = family_gates(_views(_spec()), H200)
    assert gated["fp8_hopper"] == [] and gated["fp8_cta"] == []  # the two e4m3 families
    for name in FAMILIES:
        if FAMILIES[name].backend != "cuda":  # the host's families are not asked about a GPU target
            assert gated[name] == [("backend", f"{name} renders C++ for the host, and sm_90a is a CUDA target")]
        elif FAMILIES[name].inputs != "e4m3":
            assert gated[name][0][0] == "e4m3 inputs", name
    bf16 = {"name": "b", "dtype": "bf16", "gemm": {"m": 64, "n": 64, "k": 64},
            "operands": {"A": {"layout": "row"}, "B": {"layout": "col"}, "C": {"layout": "row"}}}
    assert gates(_views(bf16), H200) == [("e4m3 inputs", "A and B are bf16: this family runs e4m3 inputs with scales")]


@pytest.mark.parametrize("change, gate, words", [
    ({"b": {"layout": "row", "align": 16}}, "K-major B", "8-bit wgmma reads both operands K-major"),
    ({"a": {"layout": "row"}}, "aligned A", "promise `align: 16`"),
    ({"scales": {"A": {"block": {"k": 64}}, "B": {"block": {"k": 64}}}}, "scale k blocks", "a multiple of 128"),
    ({"k": 1000}, "TMA A", "not a positive multiple of 16"),
])
def test_the_gates_say_what_rules_the_problem_out(change, gate, words):
    data = _spec(**change)
    reasons = dict(gates(_views(data), H200))
    assert gate in reasons and words in reasons[gate], reasons


def test_a_batch_letter_or_older_arch_is_refused():
    batched = _spec(scales={"A": {"per": "tensor"}, "B": {"per": "tensor"}})
    batched["gemm"]["batch"] = 2
    assert "one segment a role" in dict(gates(_views(batched), H200))
    assert "e4m3 inputs need sm_89 or later" in dict(gates(_views(_spec()), get_arch("sm_80")))["wgmma"]
    assert "sm_89 has no wgmma" in dict(gates(_views(_spec()), get_arch("sm_89")))["wgmma"]


def test_promotion_registers_rule_out_one_consumer_on_a_128_row_tile():
    plan = _plan(_spec(m=4096, n=7168, k=16384))
    assert (plan.block_m, plan.block_n, plan.consumers) == (128, 128, 2)
    why = {d.node: {str(r.value): r.why for r in d.rejected} for d in plan.decisions}
    assert "128 accumulators x 3 (the promoted f32 ones and the tensor core's two sets)" in why["consumers"]["1"]


B_COLUMNS = {"A": {"block": {"k": 128}, "layout": "col"}, "B": {"block": {"k": 128}, "layout": "row"}}


def test_promotion_registers_count_three_accumulator_sets_and_the_factors():
    """A consumer holds the promoted accumulators, the tensor core's two sets, two sets of its scales and, with a
    scale a column of B, a factor a row-column pair: 128 x 128 tiles fit with DeepGEMM's scales and not with B's column
    scales (which spilled 2 KB a thread), where 128 x 64 tiles run."""
    deepgemm = _plan(_spec(m=4096, n=4096, k=7168))
    assert (deepgemm.block_m, deepgemm.block_n) == (128, 128)
    plan = _plan(_spec(B_COLUMNS, m=4096, n=4096, k=7168))
    assert (plan.block_m, plan.block_n, plan.consumers) == (128, 64, 2)
    text = explain_text(parse_spec(_spec(B_COLUMNS, m=4096, n=4096, k=7168), "f8.yaml"), H200)
    assert ("1          rejected: promotion registers: 64 accumulators x 3 (the promoted f32 ones and the tensor "
            "core's two sets) + 20 scales x 2 + 64 factors = 296 registers a consumer thread, 210 free") in text


@pytest.mark.slow
def test_the_plan_with_column_scales_of_b_builds_without_spills(tmp_path):
    from dgemm_cli.build import build
    from dgemm_cli.pipeline import generate
    from dgemm_cli.toolchain import find_nvcc

    spec = parse_spec(_spec(B_COLUMNS, m=4096, n=4096, k=7168), "f8.yaml")
    report = build(generate(spec, H200, tmp_path).directory, "sm_90a", find_nvcc(), lib_only=True)
    assert report.ok, report.error
    assert report.kernels and not any(k.spills or k.stack_bytes for k in report.kernels), report.kernels


def test_tiles_stay_inside_blocks_of_b_scales():
    """A B scale of 64 columns: every tile 64 wide or narrower along n reads one scale a k-iteration."""
    plan = _plan(_spec({"A": {"block": {"m": 128, "k": 256}}, "B": {"block": {"n": 64, "k": 128}}}, n=448))
    assert plan.block_n == 64 and all(s.uniform(t) for s, t in zip(plan.scales, (plan.block_m, plan.block_n)))


def test_per_channel_and_per_tensor_scales_multiply_once_a_tile():
    per_channel = _plan(_spec({"A": {"per": "channel"}, "B": {"per": "channel"}}))
    assert [(s.mn_block, s.k_block, s.along_k) for s in per_channel.scales] == [(1, 0, False), (1, 0, False)]
    assert "once a tile (constant along k)" in "\n".join(per_channel.detail_lines())
    per_tensor = _plan(_spec({"A": {"per": "tensor"}, "B": {"per": "tensor"}}))
    assert [(s.mn_block, s.k_block) for s in per_tensor.scales] == [(0, 0), (0, 0)]
    assert all(s.uniform(64) for s in per_tensor.scales)


def test_explain_names_a_faster_scale_layout_and_not_for_the_fast_one():
    slow = _spec({"A": {"block": {"k": 128}, "layout": "row"}, "B": {"block": {"n": 128, "k": 128}}})
    text = explain_text(parse_spec(slow, "f8.yaml"), H200)
    assert "note: A_scales is not m-contiguous (stride 9 along m)" in text and "`scales.A.layout: col`" in text
    assert "not m-contiguous" not in explain_text(parse_spec(_spec(), "f8.yaml"), H200)


def test_the_store_vectorizes_only_as_far_as_the_spec_promises():
    """No fallback runs e4m3, so a bf16 C promised 2-byte alignment takes scalar stores, checked at no run time."""
    plan = _plan(_spec(c={"layout": "row", "dtype": "bf16"}))
    assert plan.c_vec == 1 and plan.c_runtime_align == 0 and not plan.packed_store
    assert ("note: C: 1-element stores, as the spec promises 2-byte alignment (no FP8 fallback checks a pointer at run "
            "time); `align: 16` on C would give 8-element vectors") in plan.detail_lines()


def test_the_generated_code_passes_the_scales_through_the_entry_point():
    data = _spec(offset_note=None) if False else _spec()
    data["scales"] = copy.deepcopy(DEEPGEMM)
    data["scales"]["B"]["offset"] = 5
    spec = parse_spec(data, "f8.yaml")
    views = analyse(spec)
    files = render_sources(spec, views, make_plan(views, H200), plan_baseline(views), H200)
    cu, h = files["f8.cu"], files["f8.h"]
    assert ("const float* A_scales, const float* B_scales, float alpha, float beta, cudaStream_t stream)" in cu
            and "const float* A_scales, const float* B_scales, float alpha" in h)
    assert "if (A_scales == nullptr || B_scales == nullptr) return cudaErrorInvalidValue;" in cu
    assert "B_scales += 5;" in cu
    assert "return fp8_hopper::launch(A, B, C, A_scales, B_scales, alpha, beta, stream);" in cu
    assert "static constexpr int MN_BLOCK = 128, MN_LAST = 383, K_ITERS_PER = 1;" in cu
    assert '#include "dg/fp8_hopper.cuh"' in cu and "dg/wgmma_fp8.cuh" in files
    assert "typedef __nv_fp8_e4m3 dg_e4m3;" in h and "typedef struct dg_e4m3 { unsigned char bits; } dg_e4m3;" in h


def test_a_spec_no_scale_varies_along_k_needs_no_per_k_loads():
    cu = render_sources(*(lambda s: (s, analyse(s)))(parse_spec(_spec({"A": {"per": "channel"},
                                                                          "B": {"per": "tensor"}}), "f8.yaml")),
                        make_plan(_views(_spec({"A": {"per": "channel"}, "B": {"per": "tensor"}})), H200),
                        plan_baseline(_views(_spec({"A": {"per": "channel"}, "B": {"per": "tensor"}}))), H200)["f8.cu"]
    assert "K_ITERS_PER = 0;" in cu and "K_ITERS_PER = 1;" not in cu


def test_a_misaligned_e4m3_problem_runs_on_fp8_cta_and_forcing_fp8_hopper_names_the_fix():
    views = _views(_spec(a={"layout": "row"}))
    assert make_plan(views, H200).family == "fp8_cta"
    with pytest.raises(PlanError, match="promise `align: 16`"):
        make_plan(views, H200, prefer="fp8_hopper")


def test_every_fp8_random_draw_plans_fp8_hopper_over_every_scaling_mode():
    """`random-specs --fp8-share 1`: each draw parses and plans with fp8_hopper; the draws reach every scaling mode,
    K tails (K not a multiple of 128), padded rows and both scale layouts."""
    from dgemm_cli.randspec import random_specs
    from dgemm_cli.randspec.fp8 import SCALE_MODES

    modes, tails, padded, layouts = set(), 0, 0, set()
    for data in random_specs(150, 3, fp8_share=1.0):
        plan = _plan(data)
        modes.add(next(name for name, sa, sb in SCALE_MODES
                       if all({k: v for k, v in data["scales"][x].items() if k in ("per", "block")} == want
                              for x, want in (("A", sa), ("B", sb)))))
        tails += data["gemm"]["k"] % 128 != 0
        padded += data["operands"]["A"]["strides"][0] > -(-data["gemm"]["k"] // 16) * 16
        layouts |= {v.get("layout") for v in data["scales"].values()}
        assert plan.k_iters == -(-data["gemm"]["k"] // 128)
    assert modes == {name for name, _, _ in SCALE_MODES}
    assert tails > 50 and padded > 10 and {"row", "col"} <= layouts


def test_a_decode_shape_splits_k_over_a_cluster_and_a_large_one_does_not():
    """DeepGEMM's 64 x 2112 x 7168 row leaves most SMs idle on one block a tile: the K split's clusters share each
    tile's 56 k-iterations (every block a slice, one wave); 4096 rows fill the SMs with tiles and stay persistent."""
    decode = _plan(_spec(m=64, n=2112, k=7168))
    assert decode.k_splits > 1 and decode.tiles * decode.k_splits <= H200.sms
    assert decode.kt_per_split * (decode.k_splits - 1) < decode.k_iters <= decode.kt_per_split * decode.k_splits
    assert "k-iterations each, summed through DSMEM" in decode.summary
    assert _plan(_spec(m=4096, n=2112, k=7168)).k_splits == 1
    # Where unsplit tiles already fill the SMs (112 tiles of 64 x 64), the split measured slower: none.
    assert _plan(_spec(m=64, n=7168, k=16384)).k_splits == 1
    views = _views(_spec(m=64, n=2112, k=7168))
    assert make_plan(views, H200, disabled=("ksplit",)).primary.k_splits == 1


def test_a_split_plan_renders_the_cluster_kernel_around_the_promoted_slice():
    spec = parse_spec(_spec(m=64, n=2112, k=7168), "f8.yaml")
    views = analyse(spec)
    plan = make_plan(views, H200)
    files = render_sources(spec, views, plan, plan_baseline(views), H200)
    cu, header = files["f8.cu"], files["dg/fp8_hopper.cuh"]
    assert f"static constexpr int SPLITS = {plan.primary.k_splits}," in cu
    assert "return dg::fp8_hopper::launch_split<Traits>(" in cu and "dg/hopper_split.cuh" in files
    assert f"Thread-block clusters of {plan.primary.k_splits} blocks" in files["README.md"]  # what it asks of the GPU
    split = header[header.index("split_kernel(const"):]
    assert "hopper::split_body<T>(" in split and "stage, phase, tile, kt0, kt_end, wg," in split
    persistent = header[header.index("persistent_kernel("):header.index("split_kernel(const")]
    assert "promoted_slice<T>(acc, full, empty, stages_a, stages_b, stage, phase, tile, 0, T::K_ITERS" in persistent
    # The promotion loop counts from the slice's first k-iteration, sets alternating from it.
    body = header[header.index("void promoted_slice("):header.index("persistent_kernel(")]
    assert "} else if (issue(kt0, Zero{}), kt_end - kt0 > 1) {" in body and "kt + 1 < kt_end" in body
