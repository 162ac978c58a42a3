"""The small-M families (splitk, gemv): gates, plan invariants over random decode-shaped views, rendering."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from dgemm_cli.arch import get_arch
from dgemm_cli.baseline import plan_baseline
from dgemm_cli.errors import PlanError
from dgemm_cli.families import FAMILIES, gemv, splitk
from dgemm_cli.families.solving import best, of_assignment, ranked
from dgemm_cli.plan import Plan, make_plan, plan_detail
from dgemm_cli.randspec import random_spec
from dgemm_cli.render import render_sources
from dgemm_cli.spec import load_spec, parse_spec
from dgemm_cli.views import analyse

from .conftest import REPO
from .test_splitk_groups import (
    check as check_groups,  # imported here: importing it inside a @given test nests its @given (a health check)
)

SM90, SM80 = get_arch("sm_90a"), get_arch("sm_80")


FAMILY_MODULES = {"splitk": splitk, "gemv": gemv}


def _views(gemm: dict, **extra):
    return analyse(parse_spec({"name": "g", "dtype": "f16", "gemm": gemm, **extra}))


def test_gates_name_what_rules_each_family_out():
    assert splitk.gates(_views({"m": 1, "n": 128, "k": 4096}), SM90) == []
    assert gemv.gates(_views({"m": 1, "n": 128, "k": 4096}), SM90) == []
    # Past 64 rows the K split stays only for skinny outputs over a long K whose largest tiles (64 x 128) leave
    # SMs idle.
    assert splitk.gates(_views({"m": 4096, "n": 32, "k": 2048}), SM90) == []
    assert splitk.gates(_views({"m": 65, "n": 64, "k": 1024}), SM90) == []
    assert [c for c, _ in splitk.gates(_views({"m": 65, "n": 65, "k": 4096}), SM90)] == ["small M"]
    assert [c for c, _ in splitk.gates(_views({"m": 65, "n": 64, "k": 1023}), SM90)] == ["small M"]
    assert [c for c, _ in splitk.gates(_views({"m": 9000, "n": 64, "k": 4096}), SM90)] == ["few output tiles"]
    assert [c for c, _ in splitk.gates(_views({"m": 1, "n": 128, "k": 32}), SM90)] == ["K to split"]
    assert [c for c, _ in splitk.gates(_views({"m": 1, "n": 128, "k": 4096}), SM80)] == ["thread-block clusters"]
    assert [c for c, _ in gemv.gates(_views({"m": gemv.MAX_M + 1, "n": 128, "k": 4096}), SM90)] == ["few rows"]


def test_gemv_runs_without_clusters_on_sm80():
    p, _ = best(gemv.problem(_views({"m": 1, "n": 128, "k": 4096}), SM80))
    assert p.splits == 1


def test_decode_plans_a_small_m_family_and_explain_says_why_the_others_lost():
    views = analyse(load_spec(REPO / "specs" / "decode_qk.yaml"))
    detail = plan_detail(views, SM90)
    assert detail.plan.family in ("gemv", "splitk")
    rejected = {r.value for r in detail.plan.family_decision.rejected}
    assert rejected == {name for name, f in FAMILIES.items() if f.backend == "cuda"} - {detail.plan.family}


def test_big_products_keep_their_families():
    views = analyse(load_spec(REPO / "specs" / "square_bf16.yaml"))
    assert make_plan(views, SM90).family == "hopper"


def _check_splitk(p, views):
    check_groups(p, views)  # the K split with its groups
    assert p.smem_bytes >= p.tile.block_m * p.red_pitch * 4 and p.smem_bytes <= SM90.smem_per_block
    assert p.tile.tiles_m == math.ceil(views.m / p.tile.block_m) and p.tile.block_m <= splitk.MAX_M


def _check_gemv(p, views):
    assert p.splits * p.k_slice >= views.k > (p.splits - 1) * p.k_slice and p.k_slice % p.chunk == 0
    assert p.chunk * p.elem_bytes <= 16 and p.chunk % p.chunk_promised == 0
    if p.lanes_along == "k":
        assert p.block_n == p.warps * p.cols
    else:
        assert p.block_n % (32 * p.chunk) == 0 and p.warps % p.warps_n == 0
    assert p.partial_offset % 16 == 0 and p.partial_offset >= views.m * p.k_slice * views.operands["A"].elem_bytes
    assert p.smem_bytes <= SM90.smem_per_block and p.blocks == views.batch * p.tiles_n * p.splits
    assert p.tiles_n * p.block_n >= views.n


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10**9))
def test_every_candidate_of_a_random_decode_view_is_consistent(seed):
    import random
    views = analyse(parse_spec(random_spec(random.Random(seed), "r", small_m_share=1.0)))
    for family, check in ((splitk, _check_splitk), (gemv, _check_gemv)):
        if family.gates(views, SM90):
            continue
        for p in ranked(family.problem(views, SM90), 6):
            check(p, views)


def _render(gemm: dict, family: str, **extra) -> str:
    return _render_files(gemm, family, **extra)["g.cu"]


def _render_files(gemm: dict, family: str, **extra) -> dict[str, str]:
    spec = parse_spec({"name": "g", "dtype": "f16", "gemm": gemm, **extra})
    views = analyse(spec)
    plan = make_plan(views, SM90, family)
    assert plan.family == family
    return render_sources(spec, views, plan, plan_baseline(views), SM90)


def test_splitk_renders_a_cluster_launch_and_an_ordered_dsmem_sum():
    files = _render_files({"m": 3, "n": 100, "k": 3000}, "splitk")
    traits = _traits(files["g.cu"], "splitk")
    splits = int(re.search(r"static constexpr int SPLITS = (\d+), GROUPS = 1,", traits).group(1))
    assert splits > 1  # a K split over a cluster, summed in it (one group: no scratch)
    assert "dg::splitk::launch<Traits, " in files["g.cu"] and '#include "dg/splitk.cuh"' in files["g.cu"]
    splitk = files["dg/splitk.cuh"]
    # A cluster launch of SPLITS blocks that is a programmatic dependent launch (dg/launch.cuh: the attributes).
    assert "unsigned(T::LAUNCH_SMEM_BYTES), true,\n                          unsigned(T::SPLITS)};" in splitk
    launch = files["dg/launch.cuh"]
    assert "cudaLaunchAttributeClusterDimension" in launch and "attrs[n].val.clusterDim.x = shape.cluster;" in launch
    assert "cudaLaunchAttributeProgrammaticStreamSerialization" in launch[launch.index("if (shape.dependent) {"):]
    # The kernel waits for its predecessor before any memory access.
    kernel = splitk[splitk.index("    kernel("):]
    assert kernel.index("wait_for_predecessor();") < kernel.index("cluster.block_rank()")
    assert kernel.index("wait_for_predecessor();") < kernel.index("cta::mainloop<")
    assert 'asm volatile("griddepcontrol.wait;' in files["dg/ptx.cuh"]
    # One group: the partial tiles are summed over the cluster in rank order (dg/reduce.cuh).
    assert "store_partial_tile<T, T::BM, T::BN, T::THREADS, SPLITS, T::RED_PITCH>(" in kernel
    reduce = files["dg/reduce.cuh"]
    cluster = reduce[reduce.index("if constexpr (Splits > 1) {"):reduce.index("} else {")]
    assert "for (int s = 0; s < Splits; ++s) sum += cluster.map_shared_rank(partial, s)" in cluster
    assert cluster.count("cluster.sync();") == 2 and "#include <cooperative_groups.h>" in reduce


def _traits(cu: str, namespace: str = "gemv") -> str:
    """The Traits struct of one kernel namespace of a generated .cu."""
    body = cu[cu.index(f"namespace {namespace} {{"):]
    return body[body.index("struct Traits {"):body.index("};\n")]


GEMV_HEADER = (REPO / "templates" / "dg" / "gemv.cuh").read_text()


@pytest.mark.parametrize("layout, lanes", [("col", "k"), ("row", "n")])
def test_gemv_lanes_follow_b_and_check_its_pointer(layout, lanes):
    cu = _render({"m": 1, "n": 4096, "k": 4096}, "gemv", operands={"B": {"layout": layout}})
    traits = _traits(cu)
    assert f"LANES_ALONG_K = {'true' if lanes == 'k' else 'false'};" in traits
    # B is promised 2-byte aligned: 16-byte loads only when its pointer passes the check, else element loads.
    assert "B_CHECK = 16, CH_PROMISED = 1;" in traits and "CH = 8;" in traits
    assert "return dg::gemv::launch<Traits>(A, B, C, Traits::Epilogue{}, alpha, beta, stream);" in cu
    launch = GEMV_HEADER[GEMV_HEADER.index("cudaError_t launch(const"):]
    assert "% T::B_CHECK == 0) return launch_with<T, T::CH>" in launch
    assert "return launch_with<T, T::CH_PROMISED>" in launch


@pytest.mark.parametrize("gemm, operands, a_vec, a_check", [
    ({"m": 1, "n": 512, "k": 2048}, {}, 8, 16),  # k-contiguous A promised 2 bytes: checked in the kernel
    ({"m": 3, "n": 512, "k": 2048}, {"A": {"align": 16}}, 8, 0),  # promised: no check
    ({"m": 2, "n": 512, "k": 2048}, {"A": {"layout": "col"}}, 1, 0),  # m-contiguous A: element loads
    ({"m": 2, "n": 512, "k": 2050}, {}, 2, 4),  # rows 2050 elements apart: 4-byte vectors
    ({"m": 1, "n": 512, "k": 105}, {"B": {"layout": "col"}}, 1, 0),  # B's element loads: a K slice of 105
])
def test_gemv_stages_a_in_vectors_where_its_view_allows(gemm, operands, a_vec, a_check):
    views = _views(gemm, operands=operands)
    p = make_plan(views, SM90, "gemv").primary
    assert (p.a_vec, p.a_check) == (a_vec, a_check)
    assert p.a_vec == 1 or p.k_slice % p.a_vec == 0
    spec = parse_spec({"name": "g", "dtype": "f16", "gemm": gemm, "operands": operands})
    cu = render_sources(spec, views, make_plan(views, SM90, "gemv"), plan_baseline(views), SM90)["g.cu"]
    assert f"A_VEC = {a_vec}, A_CHECK = {a_check};" in _traits(cu)


def test_gemv_f32_stages_four_element_vectors():
    views = analyse(parse_spec({"name": "g", "dtype": "f32", "gemm": {"m": 1, "n": 512, "k": 2048}}))
    assert make_plan(views, SM90, "gemv").primary.a_vec == 4


def test_gemv_without_a_split_is_a_dependent_launch_without_a_cluster():
    """No cluster; a programmatic dependent launch whose kernel waits for its predecessor before any memory access
    and never triggers its dependents itself (they come in as its blocks exit)."""
    spec = parse_spec({"name": "g", "dtype": "f16", "gemm": {"m": 1, "n": 4096, "k": 256},
                       "operands": {"B": {"layout": "col", "align": 16}}})
    views = analyse(spec)
    p = next(c for c in ranked(gemv.problem(views, SM90), 64) if c.splits == 1)
    plan = Plan(p, None, make_plan(views, SM90, "gemv").family_decision)
    files = render_sources(spec, views, plan, plan_baseline(views), SM90)
    traits = _traits(files["g.cu"])
    assert "namespace cta" not in files["g.cu"]
    assert "SPLITS = 1," in traits and "DEPENDENT_LAUNCH = true;" in traits
    assert "B_CHECK = 0;" in traits and "CH_PROMISED" not in traits  # promised: one instantiation
    # The header's kernel waits before its first global access (A's staging, B's first round) and never triggers.
    kernel = files["dg/gemv.cuh"][files["dg/gemv.cuh"].index("__global__"):]
    assert kernel.index("wait_for_predecessor();") < kernel.index("load(wa, kb0);") < kernel.index("stage_a<T")
    assert "launch_dependents" not in kernel[:kernel.index("store_partial_tile")]
    assert "T::SPLITS > 1 || T::DEPENDENT_LAUNCH, unsigned(T::SPLITS)" in kernel


def test_gemv_before_sm90_launches_plainly_without_griddepcontrol():
    """griddepcontrol is sm_90 PTX: an unsplit gemv for sm_80 must neither wait nor launch dependent (ptxas would
    refuse the instruction)."""
    spec = parse_spec({"name": "g", "dtype": "f16", "arch": "sm_80", "gemm": {"m": 1, "n": 4096, "k": 4096},
                       "operands": {"B": {"layout": "col", "align": 16}}})
    views = analyse(spec)
    plan = make_plan(views, SM80, "gemv")
    assert plan.primary.splits == 1
    cu = render_sources(spec, views, plan, plan_baseline(views), SM80)["g.cu"]
    assert "SPLITS = 1," in _traits(cu) and "DEPENDENT_LAUNCH = false;" in _traits(cu)
    assert "griddepcontrol" not in cu


def test_generated_readme_states_the_cluster_requirements():
    views = analyse(load_spec(REPO / "specs" / "decode_qk.yaml"))
    spec = views.spec
    for family, expect in (("splitk", True), ("cta", False)):
        plan = make_plan(views, SM90, family)
        readme = render_sources(spec, views, plan, plan_baseline(views), SM90)["README.md"]
        assert ("## Requirements" in readme) == expect
        if expect:
            assert f"clusters of {plan.primary.splits} blocks" in readme and "bit-identical" in readme


def test_a_cluster_split_declares_the_arch_it_needs_in_plan_json():
    import json
    spec = parse_spec({"name": "g", "dtype": "f16", "gemm": {"m": 1, "n": 128, "k": 4096}})
    views = analyse(spec)
    for arch, splits_wanted, needs in ((SM90, True, ["sm_90a"]), (SM80, False, [])):
        plan = make_plan(views, arch, "gemv")
        assert (plan.primary.splits > 1) == splits_wanted
        files = render_sources(spec, views, plan, plan_baseline(views), arch)
        assert json.loads(files["plan.json"])["build"]["requires_arch"] == needs


def test_random_specs_draw_decode_shapes():
    import random
    rng = random.Random(5)
    for i in range(30):
        views = analyse(parse_spec(random_spec(rng, f"r{i}", small_m_share=1.0)))
        assert views.m <= 64 and views.k > 32


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10**9))
def test_a_vectors_share_draws_k_contiguous_activations(seed):
    """--a-vectors-share redraws A k-contiguous (its summed letters innermost, dense, nested as in B) with rows a
    whole number of vectors apart, or one element off; the product (letters, B unless redrawn, C) stays valid."""
    import random

    spec_dict = random_spec(random.Random(seed), "r", small_m_share=1.0, a_vectors_share=1.0)
    views = analyse(parse_spec(spec_dict))
    a_letters, b_letters, c_letters = spec_dict["contraction"].replace("->", ",").split(",")
    sizes, strides = spec_dict["sizes"], dict(zip(a_letters, spec_dict["operands"]["A"]["strides"]))
    ks = sorted((x for x in a_letters if x in b_letters and x not in c_letters),
                key=lambda x: strides[x])
    assert strides[ks[0]] == 1 and all(strides[y] == strides[x] * sizes[x] for x, y in zip(ks, ks[1:]))
    k_extent = strides[ks[-1]] * sizes[ks[-1]]
    assert all(s == 0 or s >= k_extent for x, s in strides.items() if x not in ks)
    a = views.operands["A"]
    if all(sizes[x] > 1 for x in ks):  # size-1 letters drop out of the views; the rest merge into one k segment
        assert a.unit_role == "k"


def test_a_vectors_share_reaches_the_vector_staging():
    """The share exists to reach gemv's vector loads of A: among 80 drawn decode specs, gemv plans 16-byte vectors
    of A both where the spec promises the alignment and where the kernel checks the pointer (without the share,
    about one gemv plan in 14 of a small-M suite)."""
    import random

    rng, reached = random.Random(21), set()
    for i in range(80):
        spec = parse_spec(random_spec(rng, f"r{i}", small_m_share=1.0, a_vectors_share=1.0))
        plan = make_plan(analyse(spec), SM90)
        if plan.family == "gemv" and plan.primary.a_vec * spec.operands[0].elem_bytes == 16:
            reached.add("checked" if plan.primary.a_check else "promised")
        if reached == {"checked", "promised"}:
            break
    assert reached == {"checked", "promised"}


def test_a_vectors_share_zero_leaves_the_draws_as_before():
    import random

    before = [random_spec(random.Random(9), f"r{i}", small_m_share=1.0) for i in range(20)]
    after = [random_spec(random.Random(9), f"r{i}", small_m_share=1.0, a_vectors_share=0.0) for i in range(20)]
    assert before == after


# Digests of draws made before --wide-decode-share existed (sha256 of the specs as sorted JSON): its default of 0 must
# leave every draw as it was (seeds 41 and 43 draw random decode sets that have run on the GPU).
DRAWS_BEFORE_WIDE_DECODE = [
    ((40, 41), {"small_m_share": 1.0, "a_vectors_share": 0.5},
     "49fff7f411e0be3b71bb4bf7502af3f8776d8ab91297344780c01e1546f256d8"),
    ((40, 43), {"small_m_share": 1.0, "a_vectors_share": 0.5, "dynamic_share": 1.0},
     "e9afe824473ee46969d240abe615808a6066f5cdf3f245d05a56bea333b3cd5e"),
    ((60, 7), {}, "ac6866deb8333f9662bb4daf71f0145599d193b612e5490fee18653a3f10c071"),
]


def _digest(specs: list[dict]) -> str:
    import hashlib
    import json

    return hashlib.sha256(json.dumps(specs, sort_keys=True).encode()).hexdigest()


def _n_k_rows(spec: dict) -> tuple[int, int, int]:
    """N, K and the rows (M times the batch, at their largest) of a contraction spec dict."""
    a, b, c = spec["contraction"].replace("->", ",").split(",")
    sizes = {x: (v["max"] if isinstance(v, dict) else v) for x, v in spec["sizes"].items()}
    n = math.prod(sizes[x] for x in b if x in c and x not in a)
    return n, math.prod(sizes[x] for x in a if x in b and x not in c), math.prod(sizes[x] for x in c if x in a)


@pytest.mark.parametrize("draw, shares, digest", DRAWS_BEFORE_WIDE_DECODE)
def test_wide_decode_share_zero_leaves_the_draws_as_before(draw, shares, digest):
    from dgemm_cli.randspec import random_specs

    assert _digest(random_specs(*draw, **shares)) == digest
    assert _digest(random_specs(*draw, **shares, wide_decode_share=0.0)) == digest


@pytest.mark.parametrize("dynamic_share", [0.0, 1.0])
def test_wide_decode_share_changes_only_the_specs_it_widens(dynamic_share):
    """Drawn apart: with the share on, every other spec (and its run-time range) is the one drawn without it."""
    from dgemm_cli.randspec import random_specs

    shares = {"small_m_share": 0.7, "a_vectors_share": 0.5, "dynamic_share": dynamic_share}
    before, after = random_specs(120, 5, **shares), random_specs(120, 5, **shares, wide_decode_share=0.5)
    changed = [b for a, b in zip(before, after) if a != b]
    assert 25 <= len(changed) <= 60
    assert all(_n_k_rows(spec)[0] >= 2112 for spec in changed)


def test_wide_decode_share_draws_wide_columns_in_its_share():
    from dgemm_cli.randspec import random_specs

    def wide(share: float) -> float:
        specs = random_specs(400, 3, small_m_share=1.0, wide_decode_share=share)
        return sum(_n_k_rows(spec)[0] >= 2112 for spec in specs) / len(specs)

    assert wide(0.0) < 0.1  # the decode draw's own N reaches 2112 now and then (one letter, up to 3000)
    assert 0.45 <= wide(0.5) <= 0.65
    assert wide(1.0) == 1.0


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 10**9), st.sampled_from([0.0, 1.0]), st.sampled_from([0.0, 1.0]), st.sampled_from([0.0, 1.0]),
       st.sampled_from([0.0, 1.0]))
# Found by hypothesis: 5 products of [74 x 64, 2816] weights, rows padded past the weight bound.
@example(seed=2141, a_vectors_share=0.0, dynamic_share=0.0, wide_batch_share=1.0, wide_short_k_share=0.0)
def test_wide_decode_share_draws_bounded_wide_decode_shapes(seed, a_vectors_share, dynamic_share, wide_batch_share,
                                                            wide_short_k_share):
    """N = 2112..16384, K = 512..8192 (--a-vectors-share may round the inner k letter up to whole vectors: 100 to
    104), f16 or bf16 alike, sm_90a, under the MAC and weight bounds the GPU verify can run, and the views agree;
    with --wide-batch-share, over 2..8 products; with --wide-short-k-share, K = 8..192, up to 256 split over two
    letters (an inner letter of 128 whole vectors at most: --a-vectors-share may round the outer one up to 8 of them).
    The name varies with the seed: the shares' own generators are seeded by it."""
    import random

    from dgemm_cli.randspec import WIDE_MAX_MACS, WIDE_MAX_WEIGHT

    spec_dict = random_spec(random.Random(seed), f"r{seed % 1000}", small_m_share=1.0, wide_decode_share=1.0,
                            a_vectors_share=a_vectors_share, dynamic_share=dynamic_share,
                            wide_batch_share=wide_batch_share, wide_short_k_share=wide_short_k_share)
    if wide_batch_share:
        assert 2 <= _products(spec_dict) <= 8
    n, k, rows = _n_k_rows(spec_dict)
    if wide_short_k_share:
        assert 2112 <= n <= 16384 and 8 <= k <= (1024 if a_vectors_share else 256)
    else:
        assert 2112 <= n <= 16384 and 512 <= k <= (8192 * 104 // 100 if a_vectors_share else 8192)
    assert rows * n * k <= WIDE_MAX_MACS
    assert spec_dict["dtype"] in ("f16", "bf16") and spec_dict["arch"] == "sm_90a"
    assert not any("dtype" in spec_dict["operands"][x] for x in "AB")
    b_letters = spec_dict["contraction"].split(",")[1].split("->")[0]
    sizes = {x: (v["max"] if isinstance(v, dict) else v) for x, v in spec_dict["sizes"].items()}
    b_strides = spec_dict["operands"]["B"]["strides"]
    assert 1 + sum(s * (sizes[x] - 1) for x, s in zip(b_letters, b_strides)) <= WIDE_MAX_WEIGHT
    views = analyse(parse_spec(spec_dict))
    assert (views.n, views.k) == (n, k)


def test_wide_decode_specs_load_plan_and_reach_tcgemv(tmp_path):
    """Written by `deepgemm random-specs --wide-decode-share`, every spec loads and plans (each bucket of a run-time
    M), other families keep their share, and tcgemv is planned with 8 and with 16 tokens, with and without whole
    64-k segments, for a run-time M (without the option: about 1 random decode kernel in 100, 8 tokens, fixed
    M). The seed is one whose 40 specs reach every one of those paths; the share over seeds is about 1 kernel in 10."""
    from click.testing import CliRunner

    from dgemm_cli.cli import main
    from dgemm_cli.plan import BucketPlan

    out = tmp_path / "rs"
    result = CliRunner().invoke(main, ["random-specs", "40", "-o", str(out), "--seed", "54", "--small-m-share", "1.0",
                                       "--wide-decode-share", "0.5", "--a-vectors-share", "0.5", "--dynamic-share",
                                       "0.2"])
    assert result.exit_code == 0, result.output
    families: dict[str, int] = {}
    reached = set()
    for path in sorted(out.glob("*.yaml")):
        spec = load_spec(path)
        plan = make_plan(analyse(spec), SM90)
        buckets = [(b.plan, b.lo < b.hi) for b in plan.buckets] if isinstance(plan, BucketPlan) else [(plan, False)]
        for p, run_time in buckets:
            families[p.family] = families.get(p.family, 0) + 1
            if p.family == "tcgemv":
                reached |= {f"{p.primary.tokens} tokens", f"whole segments {p.primary.whole_segments}",
                            *(["run-time M"] if run_time else [])}
    assert len(list(out.glob("*.yaml"))) == 40
    assert families.get("tcgemv", 0) >= 0.08 * sum(families.values()), families  # 9 of 58 kernels when written
    assert {"splitk", "gemv", "hopper"} <= set(families)
    assert reached >= {"8 tokens", "16 tokens", "whole segments True", "whole segments False", "run-time M"}, reached


@pytest.mark.slow(minutes=2)
@pytest.mark.parametrize("family", ["splitk", "gemv"])
def test_random_decode_kernels_compile_without_spills(family, tmp_path):
    import random

    from dgemm_cli.build import build
    from dgemm_cli.pipeline import generate
    from dgemm_cli.toolchain import find_nvcc
    rng = random.Random(17)
    built = 0
    while built < 3:
        spec = parse_spec(random_spec(rng, f"r{built}", small_m_share=1.0))
        if FAMILY_MODULES[family].gates(analyse(spec), SM90):
            continue
        g = generate(spec, SM90, tmp_path, family=family)
        report = build(g.directory, "sm_90a", find_nvcc())
        assert report.ok, report.error
        assert report.kernels and not any(k.spills or k.stack_bytes for k in report.kernels), report.kernels
        built += 1


# Digests of draws made before --wide-batch-share existed: its default of 0 must leave every draw as it was (seed 12
# draws a random set that has run on the GPU).
DRAWS_BEFORE_WIDE_BATCH = [
    ((80, 12), {"small_m_share": 1.0, "wide_decode_share": 0.6, "a_vectors_share": 0.5, "dynamic_share": 0.25},
     "a1fa21423ad73711627e508d1d55aa96aefc2cb8b3d56d6a9c54896cb5a91f48"),
    ((60, 5), {"small_m_share": 0.7, "wide_decode_share": 1.0, "epilogue_share": 0.5},
     "6541dec7fbcfced0451488559a99882a5ba43902765106dbeea466e49d3f6fb7"),
]


@pytest.mark.parametrize("draw, shares, digest", DRAWS_BEFORE_WIDE_BATCH)
def test_wide_batch_share_zero_leaves_the_draws_as_before(draw, shares, digest):
    from dgemm_cli.randspec import random_specs

    assert _digest(random_specs(*draw, **shares)) == digest
    assert _digest(random_specs(*draw, **shares, wide_batch_share=0.0)) == digest


def _products(spec: dict) -> int:
    a, b, c = spec["contraction"].replace("->", ",").split(",")
    return math.prod(spec["sizes"][x] for x in a if x in b and x in c)


def test_wide_batch_share_draws_batches_of_wide_decode_products():
    """A share of the widened specs, and only those, become a batch of 2..8 products (a letter added where the
    spec had none); the rest of each draw stays as without the share. Every one plans, and tcgemv takes some."""
    from dgemm_cli.randspec import random_specs

    shares = {"small_m_share": 1.0, "wide_decode_share": 0.5, "a_vectors_share": 0.5, "dynamic_share": 0.2}
    before, after = random_specs(120, 4, **shares), random_specs(120, 4, **shares, wide_batch_share=1.0)
    changed = [(x, y) for x, y in zip(before, after) if x != y]
    assert 40 <= len(changed) <= 80
    assert all(_n_k_rows(x)[0] >= 2112 and 2 <= _products(y) <= 8 for x, y in changed)
    assert any(len(y["contraction"]) > len(x["contraction"]) for x, y in changed)  # a batch letter added
    tcgemv = 0
    for _, spec_dict in changed:
        views = analyse(parse_spec(spec_dict))
        tcgemv += "tcgemv" in make_plan(views, SM90).family.split("+")
    assert tcgemv >= 5, tcgemv


# Digests of draws made before --wide-short-k-share existed: its default of 0 must leave every draw as it was, the
# wide and batched ones included (seed 3 is the one the option's numbers are for).
DRAWS_BEFORE_WIDE_SHORT_K = [
    *DRAWS_BEFORE_WIDE_BATCH,
    ((60, 3), {"small_m_share": 1.0, "wide_decode_share": 1.0, "wide_batch_share": 0.3},
     "119baf4257f33267a32c25baa2781f88e85555a412c8739542697a2f72b66e3d"),
    ((80, 12), {"small_m_share": 1.0, "wide_decode_share": 0.6, "a_vectors_share": 0.5, "dynamic_share": 0.25,
                "wide_batch_share": 0.5},
     "da8b0ed71c8ff9a6656cc313563038b4a2ab2280e22c916f2136f98db901ea9d"),
]


@pytest.mark.parametrize("draw, shares, digest", DRAWS_BEFORE_WIDE_SHORT_K)
def test_wide_short_k_share_zero_leaves_the_draws_as_before(draw, shares, digest):
    from dgemm_cli.randspec import random_specs

    assert _digest(random_specs(*draw, **shares, wide_short_k_share=0.0)) == digest


def test_wide_short_k_share_draws_short_k_that_plans_and_reaches_tcgemv(tmp_path):
    """Written by `deepgemm random-specs --wide-short-k-share 1`, every wide decode spec draws its K short (8..192;
    split over two letters up to 256, and --a-vectors-share may round a k letter up), its contraction and rows as
    without the share; most have K <= 192, some not whole 8s, some not past one 64-k segment; every one plans (each
    bucket of a run-time M), and tcgemv takes some with K <= 192 (its 2-warp blocks; wide draws keep K >= 512). When
    written: 112 of 120 specs at K <= 192; 12 plan tcgemv, 11 of them at K <= 192 (16 kernels, all 2 warps a block;
    tcgemv's gates rule out K <= 64 and K not whole 8s, and the cost model gives many of the rest to hopper)."""
    import yaml
    from click.testing import CliRunner

    from dgemm_cli.cli import main
    from dgemm_cli.plan import BucketPlan
    from dgemm_cli.randspec import random_specs

    shares = {"small_m_share": 1.0, "wide_decode_share": 1.0, "a_vectors_share": 0.5, "dynamic_share": 0.2}
    out = tmp_path / "rs"
    result = CliRunner().invoke(main, ["random-specs", "120", "-o", str(out), "--seed", "4", "--small-m-share", "1",
                                       "--wide-decode-share", "1", "--a-vectors-share", "0.5", "--dynamic-share",
                                       "0.2", "--wide-short-k-share", "1"])
    assert result.exit_code == 0, result.output
    paths = sorted(out.glob("*.yaml"))
    after = [yaml.safe_load(path.read_text()) for path in paths]
    before = random_specs(120, 4, **shares)
    assert [x["name"] for x in before] == [y["name"] for y in after]
    assert all(x["contraction"] == y["contraction"] and _n_k_rows(x)[2] == _n_k_rows(y)[2]
               for x, y in zip(before, after))
    ks = [_n_k_rows(spec)[1] for spec in after]
    assert all(8 <= k <= 1024 for k in ks) and sum(k > 256 for k in ks) <= 3
    assert sum(k <= 192 for k in ks) >= 0.8 * len(ks)
    assert any(k % 8 for k in ks) and any(k <= 64 for k in ks) and any(k % 64 == 0 for k in ks)
    short_tcgemv, warps = 0, set()
    for path, k in zip(paths, ks):
        plan = make_plan(analyse(load_spec(path)), SM90)
        for p in [b.plan for b in plan.buckets] if isinstance(plan, BucketPlan) else [plan]:
            if p.family == "tcgemv" and k <= 192:
                short_tcgemv += 1
                warps.add(p.primary.k_warps)
    assert short_tcgemv >= 8, short_tcgemv
    assert warps == {2}, warps


def test_wide_staged_share_draws_shapes_that_reach_the_staged_activation(tmp_path):
    """Written by `deepgemm random-specs --wide-staged-share 1`, every wide decode spec is one product with M = 9..16,
    N in 6..8 groups of 16 columns x 119..132 blocks (or up to a group short of it) and K in whole 512s up to 6656,
    and with tcgemv forced a share plans the staged activation over 6, 7 and 8 row groups (when written: 12 of 40,
    the others ruled out by A's drawn view or the K split's rounding). Share 0 draws nothing from its generator: the
    digests above stand."""
    from click.testing import CliRunner

    from dgemm_cli.cli import main
    from dgemm_cli.plan import BucketPlan

    out = tmp_path / "rs"
    result = CliRunner().invoke(main, ["random-specs", "40", "-o", str(out), "--seed", "14", "--small-m-share", "1",
                                       "--wide-decode-share", "1", "--a-vectors-share", "0.5", "--dynamic-share",
                                       "0.2", "--wide-staged-share", "1"])
    assert result.exit_code == 0, result.output
    groups = []
    for path in sorted(out.glob("*.yaml")):
        views = analyse(load_spec(path))
        assert views.batch == 1 and 9 <= views.m <= 16 and 11424 - 95 <= views.n <= 16384, path.name
        assert views.k % 512 == 0 or views.k > 512, path.name  # a split over two letters may round K up
        try:
            plan = make_plan(views, SM90, "tcgemv")
        except PlanError:  # tcgemv's gates refuse this draw (or one of its buckets)
            continue
        for p in [b.plan for b in plan.buckets] if isinstance(plan, BucketPlan) else [plan]:
            if p.family == "tcgemv" and p.primary.shared_act:
                groups.append(p.primary.row_groups)
    assert len(groups) >= 8 and set(groups) == {6, 7, 8}, groups


def _splitk_tiling(block_n: int, block_k: int, warps_n: int, stages: int, splits: int) -> dict:
    return {"block_m": 16, "block_n": block_n, "block_k": block_k, "warps_m": 1, "warps_n": warps_n,
            "stages": stages, "smem_inner_a": "k", "smem_inner_b": "k", "loader_a": "cp_async",
            "loader_b": "cp_async", "splits": splits, "groups": 1}


def test_clusters_fill_fewer_sms_on_the_h200():
    """cudaOccupancyMaxActiveClusters on the H200: 78 KB blocks, two an SM, hold 224 blocks at once in clusters of 16
    (112 SMs), 240 in clusters of 8, 264 alone or in pairs."""
    h200 = get_arch("sm_90a")
    assert h200.resident_blocks(2, 16) == 224
    assert h200.resident_blocks(2, 8) == 240
    assert h200.resident_blocks(2, 2) == h200.resident_blocks(2) == 264
    assert get_arch("sm_80").resident_blocks(2) == 216  # no cluster table: every SM


# The splitk tilings measured on the H200 and the model's ranking of them: dgemm_cli/families/calibration.csv and
# tests/test_calibration.py.


def test_splitk_plan_says_how_many_waves_its_clusters_take():
    """256 blocks of 78 KB in clusters of 16: 224 at once, two waves (what the cost model prices and `explain`
    shows); 64-wide blocks fit all 512 in one."""
    views = analyse(load_spec(REPO / "tests/data/specs/sw_m4_n2048_k2048.yaml"))
    problem = splitk.problem(views, get_arch("sm_90a"))
    two = of_assignment(problem, _splitk_tiling(128, 128, 4, 2, 16))
    assert (two.blocks, two.at_once) == (256, 224)
    assert any("run in 2 waves" in line for line in two.detail_lines())
    one = of_assignment(problem, _splitk_tiling(64, 128, 2, 2, 16))
    assert one.blocks <= one.at_once and any("run in 1 wave " in line for line in one.detail_lines())
