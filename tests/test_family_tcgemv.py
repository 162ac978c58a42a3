"""The tcgemv family (M = 2..16 on the tensor cores, the weight streamed through registers): gates, the cost
model's picks at the decode shapes it was fitted to, plan invariants over random shapes, rendering."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dgemm_cli.arch import get_arch
from dgemm_cli.baseline import plan_baseline
from dgemm_cli.families import tcgemv
from dgemm_cli.families.solving import best, ranked
from dgemm_cli.plan import make_plan
from dgemm_cli.render import render_sources
from dgemm_cli.spec import load_spec, parse_spec
from dgemm_cli.views import analyse

from .conftest import REPO

SM90, SM80 = get_arch("sm_90a"), get_arch("sm_80")
LINEAR = {"A": {"layout": "row"}, "B": {"layout": "col"}, "C": {"layout": "row"}}  # B in nn.Linear's [N, K]


def _views(m, n, k, dtype="f16", operands=None, **extra):
    return analyse(parse_spec({"name": "g", "dtype": dtype, "gemm": {"m": m, "n": n, "k": k},
                               "operands": operands or LINEAR, **extra}))


def _gates(views, arch=SM90):
    return [c for c, _ in tcgemv.gates(views, arch)]


def test_gates_name_what_rules_the_family_out():
    assert _gates(_views(8, 4096, 4096)) == []
    assert _gates(_views(8, 4096, 4096), SM80) == ["measured arch"]  # measured on the H200 only
    assert _gates(_views(1, 4096, 4096)) == ["one row"]
    assert _gates(_views(17, 4096, 4096)) == ["few rows"]
    assert _gates(_views(8, 4096, 4096, dtype="f32"))[0] == "input types"  # (and 4-element vectors of A and B)
    # B k-major ([K, N], n contiguous): the loads need k-contiguous rows.
    assert _gates(_views(8, 4096, 4096, operands={"A": {"layout": "row"}, "B": {"layout": "row"},
                                                  "C": {"layout": "row"}})) == ["B along k"]
    padded = {"A": {"strides": [4104, 1]}, "B": {"strides": [1, 4104]}, "C": {"layout": "row"}}
    assert _gates(_views(8, 4096, 4100, operands=padded)) == ["whole chunks"]  # rows 16-byte apart, K ends mid-chunk
    # 8 tokens plan 16-column blocks: N = 2000 gives 125 blocks for 132 SMs; 16 tokens take 8-column ones.
    assert _gates(_views(8, 2000, 4096)) == ["work for every SM"]
    assert _gates(_views(16, 2000, 4096)) == []
    # A batch of products: a block per column tile of every product, so the batch counts toward the SMs' work.
    strides = {"A": {"strides": [32768, 4096, 1]}, "B": {"strides": [16777216, 1, 4096]},
               "C": {"strides": [32768, 4096, 1]}}
    batched = analyse(parse_spec({"name": "b", "dtype": "f16", "gemm": {"m": 8, "n": 4096, "k": 4096, "batch": 2},
                                  "operands": strides}))
    assert _gates(batched) == []
    assert _gates(_views(8, 1000, 4096)) == ["work for every SM"]  # 63 blocks
    wide = analyse(parse_spec({"name": "b", "dtype": "f16", "gemm": {"m": 8, "n": 1000, "k": 4096, "batch": 3},
                               "operands": LINEAR}))
    assert _gates(wide) == []  # 3 x 63 blocks
    # Each of a block's (at least 2) warps needs a 64-k segment of K.
    assert _gates(_views(8, 4096, 64)) == ["K for every warp"]
    assert _gates(_views(8, 4096, 72)) == []


@pytest.mark.parametrize("m, n, family", [
    (1, 14336, "gemv"), (2, 14336, "tcgemv"), (8, 14336, "tcgemv"), (16, 14336, "hopper"), (12, 14336, "hopper"),
    (1, 4096, "gemv"), (4, 4096, "tcgemv"), (8, 4096, "tcgemv"), (16, 4096, "tcgemv"), (32, 4096, "hopper"),
    (16, 8192, "hopper"),
])
def test_the_model_picks_it_where_the_probe_measured_it_faster(m, n, family):
    """The fit to the register-stream kernel's H200 timings: faster than hopper at 2..8 tokens for both widths and at
    16 for N = 4096, not at 16 for N = 14336 (slower through L1, alike with A staged in shared memory): hopper stays
    there and tune decides."""
    assert make_plan(_views(m, n, 4096), SM90).family == family


def _tilings(views):
    return {(p.octets, p.k_warps) for p in ranked(tcgemv.problem(views, SM90), 20) if not p.shared_act}


def _staged(views):
    return [p for p in ranked(tcgemv.problem(views, SM90), 40) if p.shared_act]


def test_measured_configurations_only():
    assert _tilings(_views(8, 4096, 4096)) == {(2, 2), (2, 4), (2, 8)}
    # 16 tokens at 2 octets x 2 warps (168 registers) is measured slower at K = 4096
    assert _tilings(_views(16, 4096, 4096)) == {(1, 4), (2, 4)}
    # the wave model: at N = 4096, 256 blocks of 8 warps fill 132 SMs x 2 in one wave; at N = 14336, 896 blocks of
    # 2 warps fill 132 SMs x 8 in one (measured faster than 4 warps)
    assert best(tcgemv.problem(_views(8, 4096, 4096), SM90))[0].k_warps == 8
    assert best(tcgemv.problem(_views(8, 14336, 4096), SM90))[0].k_warps == 2


def test_every_problem_the_gates_pass_has_a_tiling():
    """16 tokens at K = 576 (9 segments: 4 warps of 192 leave the last without one) still plan: the 4-warp tilings
    stay (one idle warp, as before) rather than none."""
    assert _tilings(_views(11, 9472, 576)) == {(1, 4), (2, 4)}
    for k in (72, 128, 136, 192, 200, 264, 576, 1000):
        for m in (2, 8, 9, 16):
            assert _tilings(_views(m, 4096, k)), (m, k)


def test_short_k_leaves_no_warp_idle():
    """K = 128 is two 64-k segments: only 2-warp blocks (4 warps, two idle, measured slower over a KV cache), for 8
    and for 16 tokens."""
    assert _tilings(_views(8, 4096, 128)) == {(2, 2)}
    assert _tilings(_views(16, 8192, 128)) == {(2, 2)}
    assert _tilings(_views(8, 4096, 192)) == {(2, 2)}
    assert _tilings(_views(16, 8192, 256)) == {(1, 4), (2, 4)}


@settings(max_examples=60, deadline=None)
@given(m=st.integers(2, 16), n=st.integers(2112, 40000), k8=st.integers(9, 2048), batch=st.integers(1, 6))
def test_every_plan_covers_n_k_and_the_tokens(m, n, k8, batch):
    k = 8 * k8
    views = analyse(parse_spec({
        "name": "g", "dtype": "f16", "gemm": {"m": m, "n": n, "k": k, **({"batch": batch} if batch > 1 else {})},
        "operands": {"A": {"strides": [m * k, k, 1][-3 if batch > 1 else -2:]},
                     "B": {"strides": [n * k, 1, k][-3 if batch > 1 else -2:]},
                     "C": {"strides": [m * n, n, 1][-3 if batch > 1 else -2:]}}}))
    for p in ranked(tcgemv.problem(views, SM90), 20):
        assert p.tokens >= m and p.tokens in (8, 16)
        assert p.tiles_n * p.block_n >= n > (p.tiles_n - 1) * p.block_n and p.blocks == batch * p.tiles_n
        # whole 64-k segments a warp, as few as cover K, and no more warps than segments
        assert p.k_slice % 64 == 0 and p.k_slice * p.k_warps >= k > (p.k_slice - 64) * p.k_warps
        assert p.k_warps <= math.ceil(k / 64)
        assert p.min_blocks >= 1 and p.threads * p.regs * p.min_blocks <= 65536
        if p.shared_act:  # one block an SM of 6..8 row groups, A's whole K in dynamic shared memory
            assert p.row_groups in (6, 7, 8) and p.tokens == 16 and batch == 1
            assert 0.9 * SM90.sms <= p.blocks <= SM90.sms and p.smem_bytes <= SM90.smem_per_block
            assert p.act_bytes == 16 * 128 * k // 64 and k % 512 == 0 and p.k_slice == k // 2
        else:
            assert p.row_groups == 1 and p.smem_bytes <= 48 * 1024  # static shared memory
        # the weight's first 2 rounds into L2 before the wait where a warp streams 16 rounds or more
        assert p.prefetch_rounds == (2 if not p.shared_act and p.k_slice >= 16 * 128 else 0)
        assert math.isfinite(p.cost_us)


def test_pointers_the_spec_does_not_promise_are_checked_with_a_fallback():
    plan = make_plan(_views(8, 4096, 4096), SM90)
    assert plan.primary.runtime_align == {"A": 16, "B": 16} and plan.fallback.family == "cta"
    promised = {x: {**v, "align": 16} for x, v in LINEAR.items()}
    plan = make_plan(_views(8, 4096, 4096, operands=promised), SM90)
    assert plan.primary.runtime_align == {} and plan.fallback is None


def _source(spec):
    views = analyse(spec)
    plan = make_plan(views, SM90, "tcgemv")
    return render_sources(spec, views, plan, plan_baseline(views), SM90)[f"{spec.name}.cu"]


def _namespace(cu, namespace="tcgemv"):
    """The text of one kernel namespace of a generated .cu."""
    start = cu.index(f"namespace {namespace} {{")
    return cu[start:cu.index(f"}}  // namespace {namespace}", start)]


def _traits(body):
    """The values of the `static constexpr` members of a namespace's Traits (with its Problem's, where a fallback
    shares that): name -> C++ literal."""
    start = body.index("struct Problem {") if "struct Problem {" in body else body.index("struct Traits")
    traits = body[start:body.index("\n};\n", body.index("struct Traits"))]
    out = {}
    for decl in re.findall(r"static constexpr (?:int|bool|index_t) ([^;]*);", traits):
        for item in decl.split(","):
            name, value = (x.strip() for x in item.split("="))
            out[name] = value
    return out


HEADER = (REPO / "templates" / "dg" / "tcgemv.cuh").read_text()


def _device(name):
    """The text of one kernel template of dg/tcgemv.cuh, `kernel` or `staged_kernel`."""
    start = HEADER.index(f"    {name}(")
    return HEADER[start:HEADER.index("\n}\n", start)]


def _bench(name):
    return _source(load_spec(REPO / "specs" / "bench" / f"{name}.yaml"))


def test_the_traits_carry_the_plan_and_launch_the_header_kernel():
    cu = _bench("decode_8x4096x14336")
    assert '#include "dg/tcgemv.cuh"' in cu and "__global__" not in _namespace(cu) and "using B_t = __half;" in cu
    traits = _traits(_namespace(cu))
    assert {x: traits[x] for x in ("TOKENS", "K_WARPS", "THREADS", "MIN_BLOCKS", "has_batch", "A_STAGED")} == {
        "TOKENS": "8", "K_WARPS": "2", "THREADS": "64", "MIN_BLOCKS": "8", "has_batch": "false", "A_STAGED": "false"}
    assert traits["rows_at_run_time"] == "false" and "ROW_GROUPS" in traits and "ACT_BYTES" not in traits
    assert ("return dg::tcgemv::launch<Traits>(A, B, C, Traits::M, Traits::Epilogue{}, alpha, beta, stream);"
            in _namespace(cu))
    bf = parse_spec({"name": "bf", "dtype": "bf16", "gemm": {"m": 16, "n": 4096, "k": 4096}, "operands": LINEAR})
    cu = _source(bf)
    assert _traits(_namespace(cu))["TOKENS"] == "16" and "using B_t = __nv_bfloat16;" in cu
    # the mma's input type follows B_t; 8 tokens leave the tile's rows 8..15 zero
    assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in HEADER and "f32.bf16.bf16.f32" in HEADER
    assert "mma16816<E>" in HEADER and "mma_segment<B_t>(" in _device("kernel")
    assert "uint4 y0{}, y1{};  // tokens 8..15: none with 8 tokens" in _device("kernel")
    assert "__launch_bounds__(T::THREADS, T::MIN_BLOCKS)" in HEADER


def test_the_register_stream_kernel_is_a_dependent_launch():
    """The kernel reads memory only after its wait for its predecessor. Without the prefetch (a warp's 4 rounds at
    [8,4096]x[4096,4096]) it never triggers: the next grid comes in as its blocks exit, and its weight loads are
    `.nc`."""
    traits = _traits(_namespace(_bench("decode_8x4096x4096")))
    assert traits["PREFETCH_ROUNDS"] == "0"
    kernel = _device("kernel")
    wait = kernel.index("wait_for_predecessor();")
    assert wait < kernel.index("load_stream<") and wait < kernel.index("__ldg(")
    assert "if constexpr (T::PREFETCH_ROUNDS > 0) launch_dependents();" in kernel
    assert "constexpr bool COHERENT = T::PREFETCH_ROUNDS > 0;" in kernel
    assert 'asm volatile("ld.global.nc.L1::no_allocate.v4.u32' in HEADER
    launch = HEADER[HEADER.index("cudaError_t launch("):]
    assert "unsigned(T::THREADS), 0, true, 1};" in launch and "dg::launch(kernel<T>, shape, stream," in launch


def test_a_long_stream_prefetches_its_first_rounds_and_lets_the_next_grid_in_after_its_loads():
    """16 rounds a warp at [8,4096]x[4096,14336]: the first 2 into L2 before the wait, coherent weight loads, the
    trigger after the last load, and nothing but prefetches before the wait."""
    assert _traits(_namespace(_bench("decode_8x4096x14336")))["PREFETCH_ROUNDS"] == "2"
    kernel = _device("kernel")
    head, tail = kernel.split("wait_for_predecessor();")
    assert "prefetch_l2(" in head and "for (int r = 0; r < T::PREFETCH_ROUNDS; ++r)" in head
    assert not any(x in head for x in ("load_stream<", "__ldg(", "C[", "store"))
    assert tail.index("launch_dependents") > tail.rindex("mma_round(") > tail.index("load_stream<")
    assert 'asm volatile("ld.global.L1::no_allocate.v4.u32' in HEADER  # load_stream<true>


def test_a_k_tail_is_loaded_after_the_loop_not_tested_in_it():
    """K = 8096 is not whole 64-k segments: the loop streams each warp's whole segments with one warp-wide test a
    segment, and the warp whose slice ends inside a segment loads that one after the loop, a chunk tested a lane
    (tested in the loop, the kernel spilled at 128 registers)."""
    spec = parse_spec({"name": "kt", "dtype": "bf16", "gemm": {"m": 3, "n": 16128, "k": 8096}, "operands": LINEAR})
    assert _traits(_namespace(_source(spec)))["WHOLE_SEGMENTS"] == "false"
    assert _traits(_namespace(_bench("decode_8x4096x14336")))["WHOLE_SEGMENTS"] == "true"
    kernel = _device("kernel")
    loop = kernel[kernel.index("const auto load = "):kernel.index("const auto mma_round = ")]
    assert "< k_len" not in loop and "const bool in = seg < k_whole;" in loop
    main, partial = kernel.split("for (int kk = 0; kk < k_whole; kk += 2 * STEP) {")[1].split("if (k_whole < k_len)")
    assert "< k_len" not in main and "mma_round(wb, xb, kk + STEP, k_whole);" in main
    assert "if constexpr (!T::WHOLE_SEGMENTS) {" in main  # whole segments: no partial one
    assert "seg + 8 * t < k_len" in partial and "mma_round(wa, xa, k_whole, k_whole + 1);" in partial


def test_run_time_tokens_are_a_kernel_argument():
    spec = parse_spec({"name": "dyn", "dtype": "f16", "gemm": {"m": {"min": 2, "max": 16}, "n": 14336, "k": 4096},
                       "operands": LINEAR})
    plan = make_plan(analyse(spec), SM90)
    families = {(b.lo, b.hi): b.plan.family for b in plan.buckets}
    assert families == {(2, 2): "tcgemv", (3, 3): "tcgemv", (4, 4): "tcgemv", (5, 8): "tcgemv", (9, 16): "hopper"}
    cu = render_sources(spec, analyse(spec), plan, plan_baseline(analyse(spec)), SM90)["dyn.cu"]
    body = _namespace(cu, "m5_8_tcgemv")
    assert _traits(body)["rows_at_run_time"] == "true" and _traits(body)["M"] == "8"
    assert "const Traits::index_t M = Traits::index_t(m) * Traits::M_UNIT;" in body
    assert "dg::tcgemv::launch<Traits>(A, B, C, M, " in body
    # The one-size buckets differ in M alone: one template, instantiated at each bucket's m by the entry point.
    fixed = _namespace(cu, "m2_4_tcgemv")
    assert "template <int ROWS>\nstruct Bucket {" in fixed and _traits(fixed)["M"] == "ROWS"
    assert _traits(fixed)["rows_at_run_time"] == "false"
    assert all(f"m2_4_tcgemv::Bucket<{m}>::launch(A, B, C, alpha, beta, stream)" in cu for m in (2, 3, 4))
    assert not any(f"namespace m{m}_tcgemv {{" in cu for m in (2, 3, 4))
    assert "const index_t M = T::rows_at_run_time ? m : T::M;" in _device("kernel")


@pytest.mark.slow(minutes=2)
def test_tcgemv_kernels_compile_without_spills(tmp_path):
    from dgemm_cli.build import build
    from dgemm_cli.pipeline import generate
    from dgemm_cli.toolchain import find_nvcc

    from .test_build import nvcc_or_skip
    nvcc_or_skip()
    # the third: K not whole 64-k segments (its partial one after the loop); the last: A staged
    for m, n, k, dtype in ((8, 4096, 4096, "f16"), (16, 4096, 4096, "bf16"), (3, 16128, 8096, "bf16"),
                           (12, 14336, 4096, "f16")):
        spec = parse_spec({"name": f"t{m}", "dtype": dtype, "gemm": {"m": m, "n": n, "k": k},
                           "operands": LINEAR})
        g = generate(spec, SM90, tmp_path, family="tcgemv")
        assert g.planned.plan.primary.shared_act == (n == 14336)
        report = build(g.directory, "sm_90a", find_nvcc())
        assert report.ok, report.error
        kernels = [x for x in report.kernels if "tcgemv" in x.kernel]
        assert kernels and not any(x.spill_store_bytes or x.stack_bytes for x in kernels), report.kernels


def test_a_batch_moves_the_views_to_the_blocks_product():
    body = _namespace(_bench("gqa_scores_b32_m8"))  # a KV cache in place
    traits = _traits(body)
    assert (traits["TILES_N"], traits["BLOCKS"], traits["has_batch"]) == ("256", "8192", "true")
    # B's batch role: the cache's head stride, not a dense one
    b_view = body[body.index("using B_view"):body.index("using C_view")]
    assert "dg::View<dg::Role<index_t, dg::Seg<32, 128>>," in b_view
    kernel = _device("kernel")
    assert "const index_t batch = index_t(blockIdx.x / T::TILES_N);" in kernel
    for x in ("A += Av::batch", "B += Bv::batch", "C += T::C_view::batch", "T::move_to_batch(ep, batch);"):
        assert x in kernel


def test_a_staged_in_shared_memory_where_one_block_an_sm_fills_the_sms():
    """A in shared memory: 16 tokens, 2 octets x 2 warps a row group, and as many row groups as make one wave of one
    block an SM reach at least 90% of the SMs: 7 at N = 14336 (128 blocks), 6 at 12288, 8 at 16384; none at 8192
    (64..85 blocks) or with 8 tokens (measured slower than through L1)."""
    for n, groups in ((14336, 7), (12288, 6), (16384, 8), (13440, 7)):
        (p,) = _staged(_views(12, n, 4096))
        assert (p.tokens, p.octets, p.k_warps, p.row_groups) == (16, 2, 2, groups)
        assert p.block_n == 16 * groups and p.blocks == math.ceil(n / p.block_n) <= SM90.sms
        assert p.blocks >= 0.9 * SM90.sms and p.threads == 64 * groups and p.min_blocks == 1
        assert p.act_bytes == 16 * 64 * 128 and p.barriers == 2 * 16  # 2 slices of 32 segments, 2 a barrier
        assert p.smem_bytes == 1024 + p.act_bytes + 8 * p.barriers + 2 * 16 * (p.block_n + 4) * 4
    # The staged plan is tcgemv's best at those widths, priced just above hopper's (measured alike): tune decides.
    views = _views(12, 14336, 4096)
    staged, hop = best(tcgemv.problem(views, SM90))[0], make_plan(views, SM90).primary
    assert staged.shared_act and hop.family == "hopper" and 1.0 < staged.cost_us / hop.cost_us < 1.02
    assert not _staged(_views(16, 8192, 4096)) and not _staged(_views(8, 14336, 4096))
    # K must be 2 slices of whole round pairs (a multiple of 512): a guarded loop is measured slower than hopper.
    for k in (1000, 4040, 4160):
        assert not _staged(_views(16, 14336, k)), k
    (p,) = _staged(_views(16, 14336, 1024))
    assert p.k_slice == 512 and p.act_bytes == 16 * 16 * 128 and p.barriers == 2 * 4


def test_a_is_staged_only_through_one_tensor_map_that_fits():
    def staged_why(views):
        g = tcgemv.build_tiling_graph(views, SM90)
        check = next(c for c in g.constraints if c.name == "A staged by TMA").check
        return check({"a_stage": "shared", "row_groups": 7})
    assert staged_why(_views(16, 14336, 4096)) is None
    # rows padded to a 16-byte multiple: still one map
    assert staged_why(_views(16, 14336, 4096, operands={**LINEAR, "A": {"strides": [4104, 1]}})) is None
    assert "bytes apart" in staged_why(_views(16, 14336, 4096, operands={**LINEAR, "A": {"strides": [4100, 1]}}))
    assert "bytes apart" in staged_why(_views(16, 14336, 4096, operands={**LINEAR, "A": {"strides": [0, 1]}}))
    batched = analyse(parse_spec({"name": "b", "dtype": "f16", "gemm": {"m": 16, "n": 14336, "k": 4096, "batch": 2},
                                  "operands": {"A": {"strides": [65536, 4096, 1]}, "B": {"strides": [0, 1, 4096]},
                                               "C": {"strides": [229376, 14336, 1]}}}))
    assert "batch" in staged_why(batched)
    assert "B >" in staged_why(_views(16, 14336, 8192))  # 16 x 8192 x 2 bytes = 256 KB of activation
    assert "round pairs" in staged_why(_views(16, 14336, 4040))
    assert not _staged(_views(16, 14336, 8192))


def test_the_staged_kernel_renders_its_layout_and_loads_a_only_by_tma():
    body = _namespace(_bench("decode_16x4096x14336"))
    traits = _traits(body)
    assert {x: traits[x] for x in ("A_STAGED", "ROW_GROUPS", "THREADS", "BN", "ACT_BYTES", "BARRIERS", "SMEM_ALIGN")} \
        == {"A_STAGED": "true", "ROW_GROUPS": "7", "THREADS": "448", "BN": "112", "ACT_BYTES": str(16 * 64 * 128),
            "BARRIERS": "32", "SMEM_ALIGN": "1024"}
    assert "PREFETCH_ROUNDS" not in traits  # a plain launch: nothing before a wait
    # A's tensor map reads its rows' stride off A's view: 4096 f16 elements, 8192 bytes
    assert "dg::Role<index_t, dg::Seg<16, 4096>>," in body[body.index("using A_view"):body.index("using B_view")]
    staged = _device("staged_kernel")
    assert "const __grid_constant__ CUtensorMap map_a" in staged and "tma_load(act + s * BOX, &map_a, bar" in staged
    assert "__ldg" not in staged and "Av::" not in staged and "mbar_arrive(" not in staged  # A only by TMA
    assert "wait_for_predecessor" not in staged and "n0 + 8 * OCTETS * group + 8 * o + 2 * q" in staged
    mapping = HEADER[HEADER.index("cudaError_t activation_map("):]
    assert "CU_TENSOR_MAP_SWIZZLE_128B" in mapping and "Av::m::offset(1) * sizeof(typename T::A_t)" in mapping
    launch = HEADER[HEADER.index("cudaError_t launch("):]
    assert "activation_map<T>(A, M, &map_a)" in launch and "unsigned(T::SMEM_BYTES), false, 1};" in launch
    # the L1 kernel is unchanged by the option: one row group, no staged layout
    traits8 = _traits(_namespace(_bench("decode_8x4096x14336")))
    assert traits8["ROW_GROUPS"] == "1" and traits8["A_STAGED"] == "false" and "ACT_BYTES" not in traits8


def test_run_time_tokens_through_the_staged_activation_encode_the_map_with_m():
    spec = parse_spec({"name": "dyn", "dtype": "bf16", "gemm": {"m": {"min": 9, "max": 16}, "n": 14336, "k": 3584},
                       "operands": LINEAR})
    plan = make_plan(analyse(spec), SM90, "tcgemv")
    assert [(b.lo, b.hi, b.plan.primary.shared_act) for b in plan.buckets] == [(9, 16, True)]
    files = render_sources(spec, analyse(spec), plan, plan_baseline(analyse(spec)), SM90)
    body = _namespace(files["dyn.cu"], "m9_16_tcgemv")
    assert _traits(body)["rows_at_run_time"] == "true" and _traits(body)["A_STAGED"] == "true"
    assert "dg::tcgemv::launch<Traits>(A, B, C, M, " in body and "using A_t = __nv_bfloat16;" in files["dyn.cu"]
    assert "const index_t M = T::rows_at_run_time ? m : T::M;" in _device("staged_kernel")
    assert "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16" in HEADER and "dg/tcgemv.cuh" in files
    # the header tells the caller of the tensor-map cache and the shared-memory opt-in its launcher keeps
    assert "a cache of TMA tensor maps" in files["dyn.h"] and "cudaFuncSetAttribute" in files["dyn.h"]
