"""The `fp8_hopper` family's index maps as data (pure): dg/fp8_hopper.cuh's persistent or K-split kernel, for one
plan, as a `formal.model.KernelModel`.

The kernel is the hopper family's persistent kernel (dg/hopper_common.cuh's tile_at, issue_stage through the same
tensor maps, and store_tile) with e4m3 wgmma: its loads, grid, tile map and store phases are the hopper model's
(families/hopper/index.py, `model`), which this module takes whole. Beside them, the scales (load_scales, scale_at):
each consumer thread's scale of its rows (columns), or the tile's one where a tile's rows (columns) share it, at the
k-iteration it promotes (or once a tile, for a scale constant along k), as:

  <x>_scale_load      an access: every scale_at load the kernel issues (rows past the view clamped to the last)
                      inside the scale view, the view's element at the clamped row and the k-iteration's first k;
  <x>_scale_applied   a fact: every product (m, n, k) of a consumer's accumulators (the m64nNk32 fragment layout:
                      warp w, lane g = lane / 4, q = lane % 4 holds rows 16w + g + 8 (e / 2), columns 8j + 2q + e % 2
                      as d[4j + e]) with m < M (n < N) and k < K is multiplied, through factor()'s index, by the
                      scale A_scales (B_scales) holds at (m, k) ((n, k));
  <x>_scale_index     a fact: factor()'s index is one of the scales the thread loaded (below ScaleOf::COUNT).

The references are the spec's scale views (fp8_cta.index.scale_reference). Each intermediate is a `Let` named as
the header declares it; tests/test_formal_fp8.py checks that dg/fp8_hopper.cuh spells each one as the model prints
it or holds the lines of `SPELLED`."""

from __future__ import annotations

import dataclasses

from dgemm_cli.families.fp8_cta.index import applied_fact, scale_reach, scale_reference, scale_view
from dgemm_cli.families.fp8_hopper import Fp8HopperPlan
from dgemm_cli.families.fp8_hopper.scales import ScaleLoad
from dgemm_cli.families.hopper.index import TILE_T, Rows, k_iteration, model, rows_of, tile_at
from dgemm_cli.formal.expr import INDEX, TRUE, Cmp, Const, Expr, Let, Min, Var, all_of, substitute
from dgemm_cli.formal.expr import const as _c
from dgemm_cli.formal.model import Access, Fact, KernelModel, Range, Reach
from dgemm_cli.views import ProblemViews

HEADER = "dg/fp8_hopper.cuh"

# The header's text of the intermediates the model resolves for one plan (a constexpr branch taken, a cast, the
# kernel's own loop over the tiles): a change to these lines is a change the model must follow.
SPELLED: dict[str, tuple[str, ...]] = {
    "t": ("for (int t = blockIdx.x; t < T::TILES; t += gridDim.x) {",),
    "tiles_m": ("const TileOf<T> tile = hopper::tile_at<T>(t, T::TILES_M);",),
    "kt": ("for (int kt = 0; kt < T::K_ITERS; ++kt) {",
           "if constexpr (SA::ALONG_K) load_scales<T, true>(fa[B], scales.a, tile, kt, wg, warp, lane);",
           "if constexpr (SB::ALONG_K) load_scales<T, false>(fb[B], scales.b, tile, kt, wg, warp, lane);",
           "if constexpr (!SA::ALONG_K) load_scales<T, true>(fa, scales.a, tile, 0, wg, warp, lane);",
           "if constexpr (!SB::ALONG_K) load_scales<T, false>(fb, scales.b, tile, 0, wg, warp, lane);"),
    "wg": ("const int wg = warpgroup - 1, tid = threadIdx.x % 128, lane = tid % 32, warp = tid / 32;",),
    "mn": ("v[0] = scale_at<S>(base, IsA ? tile.m0 : tile.n0, kt);",
           "for (int i = 0; i < Of::COUNT; ++i) v[i] = scale_at<S>(base, row + (i / 2) * 64 + (i % 2) * 8, kt);",
           "for (int i = 0; i < Of::COUNT; ++i) v[i] = scale_at<S>(base, col + (i / 2) * 8 + i % 2, kt);"),
    "at": ("if constexpr (S::MN_BLOCK != 0) at += static_cast<long long>(min(mn, S::MN_LAST) / S::MN_BLOCK) * "
           "S::MN_STRIDE;", "if constexpr (S::K_ITERS_PER != 0) at += static_cast<long long>(kt / S::K_ITERS_PER) * "
           "S::K_STRIDE;", "return base[at];"),
    # factor(): accumulator i of m64 block mi takes its row's scale and its column's.
    "factor": ("if constexpr (UseA) f *= ScaleOf<T, true>::UNIFORM ? fa[0] : fa[mi * 2 + (i % 4) / 2];",
               "if constexpr (UseB) f *= ScaleOf<T, false>::UNIFORM ? fb[0] : fb[(i / 4) * 2 + i % 2];",
               "static constexpr int COUNT = UNIFORM ? 1 : (IsA ? 2 * Config<T>::MI : T::BN / 4);",
               "static constexpr bool UNIFORM = S::MN_BLOCK == 0 || S::MN_BLOCK % (IsA ? T::BM : T::BN) == 0;"),
    # The fragment layout the products come from (trusted, as the hopper model's store).
    "fragment": ("// Accumulator layout of m64nN: warp w holds rows 16w + g and 16w + g + 8 (g = lane / 4), columns "
                 "8j + 2q and", "// 8j + 2q + 1 (q = lane % 4) as d[4j .. 4j + 3]."),
}


def scale_at(s: ScaleLoad, mn: Expr, kt: Expr) -> Expr:
    """scale_at<S>(base, mn, kt): the row's (column's) block, clamped to the last row, times MN_STRIDE, plus the
    k-iteration's block times K_STRIDE, each term where its role has blocks; in long long."""
    at: Expr = Const(0, ctype=INDEX)
    if s.mn_block:
        block = (Min(mn, _c(s.mn_size - 1, "S::MN_LAST")) // _c(s.mn_block, "S::MN_BLOCK")).as_(INDEX)
        at = at + block * _c(s.mn_stride, "S::MN_STRIDE", INDEX)
    if s.k_block:
        at = at + (kt // _c(s.k_iters_per, "S::K_ITERS_PER")).as_(INDEX) * _c(s.k_stride, "S::K_STRIDE", INDEX)
    return Let("at", at, INDEX)


def scale_loads(views: ProblemViews, plan: Fp8HopperPlan, rows: Rows) -> tuple[tuple[Access, ...], tuple[Fact, ...],
                                                                                  dict[str, Reach]]:
    """load_scales<T, IsA> of each scale view: every load of a tile's k-iteration (or once a tile), and what each
    accumulator is multiplied by."""
    t = TILE_T
    tile = tile_at(plan, rows, t)
    over_t = (*rows.params, Range(t, _c(0), rows.TILES))
    wg, tid = Var("wg"), Var("tid", spelled="tid")
    warp, lane = Let("warp", tid // _c(32)), Let("lane", tid % _c(32))
    kt = Var("kt")
    it = k_iteration(plan, kt)
    K = _c(views.k, "T::K", INDEX)
    mi, acc = Var("mi"), Var("acc_i", spelled="i")
    g, q = lane // _c(4), lane % _c(4)
    threads = (Range(wg, _c(0), _c(plan.consumers, "T::CONSUMERS")), Range(tid, _c(0), _c(128)))
    # The accumulator's row and column in the tile: the m64nNk32 fragment layout (trusted).
    frag_m = (wg * _c(plan.wg_m, "T::WG_M") + mi * _c(64) + warp * _c(16) + g + _c(8) * ((acc % _c(4)) // _c(2)))
    frag_n = _c(8) * (acc // _c(4)) + _c(2) * q + acc % _c(2)
    frags = (Range(mi, _c(0), _c(plan.wg_m // 64, "Config<T>::MI")), Range(acc, _c(0), _c(plan.block_n // 2, "NACC")))
    accesses: list[Access] = []
    facts: list[Fact] = []
    reach: dict[str, Reach] = {}
    for s in plan.scales:
        x = s.operand
        is_a = x == "A"
        spec_scale = scale_view(views, x)
        extent = rows.M_INNER if is_a else _c(plan.n_inner, "T::N_INNER")
        origin = tile.m0 if is_a else tile.n0
        uniform = s.uniform(plan.block_m if is_a else plan.block_n)
        count = s.held(plan.block_m if is_a else plan.block_n, plan.wg_m)
        i = Var("i")
        if uniform:
            mn: Expr = origin
            index_of_acc: Expr = _c(0)
        elif is_a:
            row = Let("row", tile.m0 + wg * _c(plan.wg_m, "T::WG_M") + warp * _c(16) + lane // _c(4))
            mn = Let("mn", row + (i // _c(2)) * _c(64) + (i % _c(2)) * _c(8))
            index_of_acc = mi * _c(2) + (acc % _c(4)) // _c(2)
        else:
            col = Let("col", tile.n0 + _c(2) * (lane % _c(4)))
            mn = Let("mn", col + (i // _c(2)) * _c(8) + i % _c(2))
            index_of_acc = (acc // _c(4)) * _c(2) + acc % _c(2)
        k_at_load: Expr = kt if s.along_k else _c(0)
        address = scale_at(s, mn, k_at_load)
        role = s.role
        k_first: Expr = it.k0.as_(INDEX) if s.along_k else Const(0, ctype=INDEX)
        clamped = Min(mn, _c(s.mn_size - 1, "S::MN_LAST")) if s.mn_block else mn
        logical = {role: clamped.as_(INDEX), "k": k_first}
        extents = {role: extent, "k": K}
        k_ranges = (Range(kt, _c(0), _c(plan.k_iters, "T::K_ITERS")),) if s.along_k else ()
        loads = () if uniform else (Range(i, _c(0), _c(count, "Of::COUNT")),)
        what = "rows" if is_a else "columns"
        when = "at each k-iteration" if s.along_k else "once a tile"
        how = "the tile's one" if uniform else f"each of its {what} (rows past the view clamped to the last)"
        accesses.append(Access(f"{x.lower()}_scale_load", f"{s.name}: a consumer thread's scale_at load, {how}, {when}",
                               s.name, "load", (*over_t, *threads, *loads, *k_ranges), _c(1), address, 1, logical,
                               extents, reference=scale_reference(views, spec_scale, logical), always=(mn,)))
        # Each product of an accumulator: factor()'s index names the load whose scale multiplies it.
        applied_address = substitute(address, {"i": index_of_acc})
        product = (origin + (frag_m if is_a else frag_n)).as_(INDEX)
        if s.along_k:
            k_in = Var("k_in")
            k_at: Expr = k_first + k_in.as_(INDEX)
            k_over: tuple[Range, ...] = (*k_ranges, Range(k_in, _c(0), _c(plan.block_k, "T::BK")))
        else:
            k_all = Var("k_all", INDEX)
            k_at = k_all
            k_over = (Range(k_all, _c(0), K),)
        applied_logical = {role: product, "k": k_at}
        ranges = (*over_t, *threads, *frags, *k_over)
        facts.append(applied_fact(f"{x.lower()}_scale_applied", f"{s.name}: each product of a consumer's accumulators "
                                  f"with its index inside the view is multiplied by the scale factor() takes, "
                                  f"{s.name}'s element at the product's index", ranges, applied_address,
                                  applied_logical, extents, scale_reference(views, spec_scale, applied_logical)))
        facts.append(Fact(f"{x.lower()}_scale_index", text=f"{s.name}: factor()'s index of every accumulator is "
                          f"one of the {count} scale(s) the thread loaded", prop="full-k", ranges=(*threads, *frags),
                          hyps=TRUE, goal=all_of(Cmp("<=", _c(0), index_of_acc), Cmp("<", index_of_acc, _c(count)))))
        reach[s.name] = scale_reach(views, spec_scale)
    return tuple(accesses), tuple(facts), reach


def models(views: ProblemViews, plan: Fp8HopperPlan, name: str) -> list[KernelModel]:
    """The persistent or K-split kernel of dg/fp8_hopper.cuh: the hopper model of its loads, grid and store phases
    (the split's grid, slices and reduce are dg/hopper_split.cuh's body, which the FP8 kernel runs), with the
    scales. The scale loads are stated over every tile and every k-iteration, which covers a split block's slice."""
    assert plan.a_multicast == 1 and not plan.tile_loops and not plan.k_loops, \
        "dg/fp8_hopper.cuh's kernels walk one tiled segment a role, without A multicast"
    out = []
    for rows in rows_of(views, plan):
        base = model(views, plan, name, rows)
        accesses, facts, reach = scale_loads(views, plan, rows)
        prefix = f"{name} [hopper "
        assert base.kernel.startswith(prefix), base.kernel
        out.append(dataclasses.replace(base, kernel=f"{name} [fp8_hopper {base.kernel[len(prefix):]}",
                                       family="fp8_hopper", reach={**base.reach, **reach},
                                       accesses=(*base.accesses, *accesses), facts=(*base.facts, *facts),
                                       trusted=TRUSTED if plan.k_splits == 1 else TRUSTED[:-2] + TRUSTED_SPLIT))
    return out


TRUSTED = ("the PTX semantics of cp.async.bulk.tensor (a box element inside every dim is the element at the sum of "
           "coordinate x stride, one outside a dim is zero: FLOAT_OOB_FILL_NONE), cuTensorMapEncodeTiled encoding "
           "what encode() passes, stmatrix, e4m3 wgmma and the m64nNk32 fragment layout (warp w, lane g = lane / 4, "
           "q = lane % 4 holds rows 16w + g + 8 (e / 2) and columns 8j + 2q + e % 2 as d[4j + e])",
           "the shared-memory side: the 128B swizzle and descriptors, which stage a k-iteration lands in, the mbarrier "
           "protocol (full/empty phases, expect_tx bytes), the two tensor-core accumulator sets' alternation and the "
           "scales' registers (fa[set], fb[set]) following it, the staging buffers' round trip",
           "the promotion's arithmetic: each k-iteration's tensor-core sum times the scales the model names, added in "
           "f32",
           "the launcher's grid: min(tiles, resident blocks) (every grid size is proved)",
           "nvcc and ptxas")
# The split kernel's in place of the persistent grid's launcher line.
TRUSTED_SPLIT = ("the K split's cluster: the parked partial tiles' round trip through distributed shared memory, the "
                 "cluster barriers, and each rank promoting its slice of the k-iterations as the persistent kernel "
                 "promotes a tile's; the launcher's grid of a cluster of SPLITS blocks a tile",
                 "nvcc and ptxas")
