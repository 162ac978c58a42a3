"""The `tcgemv` family's index maps as data (pure): dg/tcgemv.cuh's two kernels, one `KernelModel` per plan.

kernel<T> (A through L1): blockIdx.x is the column tile (and the batch product, columns fastest); warp w's K slice is
[k0, k0 + k_len), k0 = min(w x K_SLICE, K). Lane (e, q) = (lane % 8, lane / 8) loads rows 2q and 2q + 1 of each octet
of B: chunk e of row 2q and chunk e ^ 4 (= (e + 4) % 8) of row 2q + 1, 16 bytes each, over the rounds x of the
two-buffer loop and their UNROLL segments while the segment lies below k_whole (the slice's whole 64-k segments); a
row past N reads nothing. Where K is not whole segments, the segment at k_whole is loaded after the loop, each
chunk tested against k_len. Lane (g, t) = (lane / 4, lane % 4) loads chunks t and t + 4 of tokens g and g + 8 of A,
a token past M clamped to row M - 1 (its products land in rows of the tile never stored: `token_clamp_stored`).
PREFETCH_ROUNDS rounds of B are prefetched into L2 under the chunk test. The store is dg/reduce.cuh's walk of the
TOKENS x BN partial tile (one split, 0 as the row origin).

staged_kernel<T> (A in shared memory): block = column tile, group = warp / K_WARPS its 8 x OCTETS columns, k_warp its
slice (no guard: K = K_WARPS x K_SLICE, whole round pairs); A's TOKENS x K comes by TMA, box s = 64-k segment s at
(k = 64 s, row 0): each box element is stated against A's view through the tensor map's dims {K, M} and row stride
(`a_tma_*`), zero past M. The swizzle, the shared reads and the mbarriers are trusted.

The register side is stated where it is index arithmetic: the row-pair loads fill each (row, chunk) of an octet's
segment once (`b_octet_walk`), after the keep and the swap with lane ^ 4 lane (g, t) holds chunks t and t + 4 of row g
(`lane_keeps_*`, `lane_swaps_*`), the activation's lanes take each (token, chunk) once (`a_lane_walk`), and a
column's sum takes each k of K once over (warp, round, segment, chunk, element) (`k_cover`).

Each intermediate is a `Let` named as the header declares it; `SPELLED` lists the header lines where the model
resolves a compile-time branch or a loop's variable."""

from __future__ import annotations

from dgemm_cli.families.cta.index import Origin, Rows, rows_of
from dgemm_cli.families.tcgemv import SEGMENT, TcGemvPlan
from dgemm_cli.formal.expr import INDEX, INT, TRUE, Cmp, Expr, Ite, Let, Min, Pred, Var, all_of
from dgemm_cli.formal.expr import const as _c
from dgemm_cli.formal.model import BLOCK, LANE, THREAD, Access, Bijection, Fact, KernelModel, Range, Reach
from dgemm_cli.formal.reduce import tile_store, tile_walk, walk_facts
from dgemm_cli.formal.views import operand_reach, role_offset, segments
from dgemm_cli.views import ProblemViews, output_unit_role

HEADERS = ("dg/tcgemv.cuh", "dg/reduce.cuh")

SPELLED = {
    "n0": "n0 = index_t(blockIdx.x % T::TILES_N) * T::BN;",
    "batch": "const index_t batch = index_t(blockIdx.x / T::TILES_N);",
    "k0": "const index_t k0 = min(index_t(warp) * K_SLICE, T::K);",
    "k_len": "const int k_len = int(min(index_t(K_SLICE), T::K - k0));",
    "warp": "const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;",
    "lane": "const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;",
    "e": "const int e = lane % 8, q = lane / 8, g = lane / 4, t = lane % 4;",
    "q": "const int e = lane % 8, q = lane / 8, g = lane / 4, t = lane % 4;",
    "g": "const int e = lane % 8, q = lane / 8, g = lane / 4, t = lane % 4;",
    "t": "const int e = lane % 8, q = lane / 8, g = lane / 4, t = lane % 4;",
    "even_chunk": "const int even_chunk = 8 * e, odd_chunk = 8 * (e ^ 4);",
    "odd_chunk": "const int even_chunk = 8 * e, odd_chunk = 8 * (e ^ 4);",
    "n_even": "const index_t n_even = n0 + 8 * o + 2 * q, n_odd = n_even + 1;",
    "n_odd": "const index_t n_even = n0 + 8 * o + 2 * q, n_odd = n_even + 1;",
    "even_in": "even_in[o] = T::WHOLE_BLOCKS || n_even < T::N;",
    "odd_in": "odd_in[o] = T::WHOLE_BLOCKS || n_odd < T::N;",
    "k_whole": "const int k_whole = T::WHOLE_SEGMENTS ? k_len : k_len / SEGMENT * SEGMENT;",
    "seg": "const int seg = kk + SEGMENT * s;",
    "prefetch_seg": "const int seg = r * STEP + SEGMENT * s;",
    "token": "const index_t token = min(index_t(g + 8 * h), M - 1);",
    "rows": "const int rows = int(min(index_t(BM), M - m0)), cols = int(min(index_t(BN), T::N - n0));",
    "cols": "const int rows = int(min(index_t(BM), M - m0)), cols = int(min(index_t(BN), T::N - n0));",
    "gm": "T::store(C, m0 + r, n0 + c, partial[r * RedPitch + c], alpha, beta, M, ep);",
    "gn": "T::store(C, m0 + r, n0 + c, partial[r * RedPitch + c], alpha, beta, M, ep);",
    "M": "const index_t M = T::rows_at_run_time ? m : T::M;",
}
# The walk of store_partial_tile<T, TOKENS, BN, T::THREADS, 1, RED_PITCH> (one split), the staged kernel's names and
# A's tensor map (activation_map); a name in both dicts is spelled by either line.
SPELLED_WALK = {
    "e": "for (int e = int(threadIdx.x); e < rows * cols; e += Threads) {",
    "n0": "const index_t n0 = index_t(blockIdx.x) * T::BN;",
    "k0": "const index_t k0 = index_t(k_warp) * K_SLICE;  // the warp's K slice: [k0, k0 + K_SLICE)",
    "k_len": "const int k_whole = T::WHOLE_SEGMENTS ? k_len : k_len / SEGMENT * SEGMENT;",
    "warp": "const int group = warp / K_WARPS, k_warp = warp % K_WARPS;",
    "group": "const int group = warp / K_WARPS, k_warp = warp % K_WARPS;",
    "k_warp": "const int group = warp / K_WARPS, k_warp = warp % K_WARPS;",
    "n_even": "const index_t n_even = n0 + 8 * OCTETS * group + 8 * o + 2 * q, n_odd = n_even + 1;",
    "row_stride": "const cuuint64_t strides[1] = {row_bytes};  // bytes between A's rows",
    "tma_k": "tma_load(act + s * BOX, &map_a, bar, s * SEGMENT, 0);",
}


def _offset(views: ProblemViews, operand: str, batch: Expr, **at: Expr) -> Expr:
    """The view's offset: batch (the pointer moved to the block's product), then the roles given."""
    total = role_offset(segments(views, operand, "batch"), batch)
    for role, i in at.items():
        total = total + role_offset(segments(views, operand, role), i)
    return total


def _in(views: ProblemViews, logical: dict[str, Expr], extents: dict[str, Expr], batch: Expr) -> tuple[dict, dict]:
    if views.batch > 1:
        return {"batch": batch, **logical}, {"batch": _c(views.batch, "T::BATCH", INDEX), **extents}
    return logical, extents


def _one(p: Pred, n: Expr | int = 1) -> Expr:
    return Ite(p, n if isinstance(n, Expr) else _c(n), _c(0))


def models(views: ProblemViews, plan: TcGemvPlan, name: str) -> list[KernelModel]:
    rows = rows_of(views)
    if plan.shared_act:
        return [_staged(views, plan, rows, f"{name} [staged_kernel: A by TMA in shared memory]")]
    return [_l1(views, plan, rows, f"{name} [kernel: A through L1]")]



class _Lanes:
    """A thread's warp and lane, and the lane's two roles: (e, q) for the row-pair loads, (g, t) for the mma."""

    def __init__(self) -> None:
        self.warp = Let("warp", THREAD // _c(32))
        self.lane = Let("lane", THREAD % _c(32))
        self.e = Let("e", self.lane % _c(8))
        self.q = Let("q", self.lane // _c(8))
        self.g = Let("g", self.lane // _c(4))
        self.t = Let("t", self.lane % _c(4))
        self.even_chunk = Let("even_chunk", _c(8) * self.e)
        self.odd_chunk = Let("odd_chunk", _c(8) * ((self.e + _c(4)) % _c(8)))  # e ^ 4 for e < 8


def _b_rows(views: ProblemViews, plan: TcGemvPlan, lanes: _Lanes, n_base: Expr, batch: Expr, k0: Expr,
            ranges: tuple[Range, ...], seg: Expr, count: dict[str, Pred], ident: str, text: str,
            zero_slot: Pred | None, aligned: bool = True) -> tuple[Access, ...]:
    """The row-pair loads of every octet o: chunk e of row 2q (even) and chunk e ^ 4 of row 2q + 1 (odd) of the
    octet, at k offset `seg` of the warp's slice, 8 elements where `count[parity]` holds. `zero_slot`: where the
    mma reads the chunk (a lane left zero must lie past the view there)."""
    N, K = _c(views.n, "T::N", INDEX), _c(views.k, "T::K", INDEX)
    o = ranges[-1].var
    n_even = Let("n_even", n_base + (_c(8) * o + _c(2) * lanes.q).as_(INDEX), INDEX)
    n_odd = Let("n_odd", n_even + _c(1, ctype=INDEX), INDEX)
    out = []
    for parity, n, chunk in (("even", n_even, lanes.even_chunk), ("odd", n_odd, lanes.odd_chunk)):
        row_in: Pred = TRUE if plan.whole_blocks else Cmp("<", n, N)
        row = _offset(views, "B", batch, n=n, k=k0)
        logical, ext = _in(views, {"n": n, "k": k0 + (seg + chunk).as_(INDEX) + LANE}, {"n": N, "k": K}, batch)
        out.append(Access(f"{ident}_{parity}", f"B: {text}, row {'2q' if parity == 'even' else '2q + 1'} of each "
                          "octet (16 bytes)", "B", "load", ranges,
                          _one(all_of(row_in, count[parity]), 8), row + (seg + chunk).as_(INDEX), 8, logical, ext,
                          aligned=8 if aligned else 1, zero_fill=zero_slot is not None,
                          slot=zero_slot if zero_slot is not None else TRUE))
    return tuple(out)


def _store(views: ProblemViews, plan: TcGemvPlan, rows: Rows, n0: Expr, batch: Expr,
           block_range: Range) -> tuple[tuple[Access, ...], Bijection, tuple[Fact, ...]]:
    """reduce_and_store's end: store_partial_tile<T, TOKENS, BN, T::THREADS, 1, RED_PITCH>(partial, C, M, 0, n0, 0,
    ...), the walk of the TOKENS x BN tile's valid rows min(TOKENS, M) and columns."""
    threads = _c(plan.threads, "T::THREADS")
    N = _c(views.n, "T::N", INDEX)
    origin = Origin(BLOCK, _c(0, ctype=INDEX), n0, batch, _c(1, ctype=INDEX), _c(plan.blocks), (block_range,))
    it = Var("i")
    per_thread = -(-(plan.tokens * plan.block_n) // plan.threads)
    ranges = (*rows.param, block_range, Range(THREAD, _c(0), threads), Range(it, _c(0), _c(per_thread)))
    bm, bn = _c(plan.tokens, "BM", INDEX), _c(plan.block_n, "BN", INDEX)
    walk = tile_walk(bm, bn, rows.M, origin.m0, n0, N, THREAD + it * threads, output_unit_role(views) == "m")
    stores, once = tile_store(views, (plan.tokens, plan.block_n, plan.tiles_n), rows, origin, ranges, walk,
                              lambda tile, e: tile, "store_once",
                              f"the store: (block, thread, i) onto {views.spec.output.name}'s {views.batch} x "
                              f"{views.m} x {views.n} elements, each once",
                              lambda e: {"thread": e % plan.threads, "i": e // plan.threads})
    return stores, once, walk_facts(walk, bm, bn, rows.M, origin.m0, n0, N, (*rows.param, block_range))


def _layout_checks(plan: TcGemvPlan) -> tuple[tuple[Bijection, ...], tuple[Fact, ...]]:
    """The register side's index arithmetic: the row-pair loads of an octet's segment, the keep and the swap with lane
    ^ 4, the activation's lanes."""
    q, ev, which = Var("q"), Var("e"), Var("which")
    row, chunk = Var("oct_row"), Var("oct_chunk")
    octet = Bijection("b_octet_walk", "an octet's segment: (q, e, row of the pair) covers each (row, chunk) of the "
                      "8 rows x 8 chunks once", "full-k",
                      (Range(q, _c(0), _c(4)), Range(ev, _c(0), _c(8)), Range(which, _c(0), _c(2))), TRUE,
                      (_c(2) * q + which, Ite(Cmp("==", which, _c(0)), ev, (ev + _c(4)) % _c(8))),
                      (Range(row, _c(0), _c(8)), Range(chunk, _c(0), _c(8))),
                      {"q": row // 2, "which": row % 2,
                       "e": Ite(Cmp("==", row % 2, _c(0)), chunk, (chunk + _c(4)) % _c(8))})
    g, t, j, h = Var("g"), Var("t"), Var("j"), Var("h")
    token, a_chunk = Var("tok"), Var("tok_chunk")
    halves = plan.tokens // 8
    a_walk = Bijection("a_lane_walk", f"the activation's lanes: (g, t, chunk t or t + 4, half h) cover each (token, "
                       f"chunk) of the {plan.tokens} tokens x 8 chunks of a segment once", "full-k",
                       (Range(g, _c(0), _c(8)), Range(t, _c(0), _c(4)), Range(j, _c(0), _c(2)),
                        Range(h, _c(0), _c(halves))), TRUE, (g + _c(8) * h, t + _c(4) * j),
                       (Range(token, _c(0), _c(plan.tokens)), Range(a_chunk, _c(0), _c(8))),
                       {"g": token % 8, "h": token // 8, "t": a_chunk % 4, "j": a_chunk // 4})
    lane = Var("lane")
    e, qq, gg, tt = lane % _c(8), lane // _c(8), lane // _c(4), lane % _c(4)
    g_odd = Cmp("<=", _c(4), e)
    partner = Ite(g_odd, lane - _c(4), lane + _c(4))  # lane ^ 4
    pe, pq = partner % _c(8), partner // _c(8)
    p_odd = Cmp("<=", _c(4), pe)
    lanes = (Range(lane, _c(0), _c(32)),)
    keeps = Fact("lane_keeps_its_row", "full-k", "lane (g, t) keeps from its own loads (the second where g is odd) "
                 "chunk t of row g", lanes, TRUE,
                 all_of(Cmp("==", Ite(g_odd, _c(2) * qq + _c(1), _c(2) * qq), gg),
                        Cmp("==", Ite(g_odd, (e + _c(4)) % _c(8), e), tt)))
    swaps = Fact("lane_swaps_with_lane_xor_4", "full-k", "lane (g, t) gets from lane ^ 4 that lane's other load: "
                 "chunk t + 4 of row g", lanes, TRUE,
                 all_of(Cmp("==", Ite(p_odd, _c(2) * pq, _c(2) * pq + _c(1)), gg),
                        Cmp("==", Ite(p_odd, pe, (pe + _c(4)) % _c(8)), tt + _c(4))))
    return (octet, a_walk), (keeps, swaps)


def _k_cover(views: ProblemViews, plan: TcGemvPlan, rounds: int, staged: bool) -> Bijection:
    """A column's sum: (warp, round x, segment s, chunk c, element) onto K, each k once; where K is not whole
    segments, `part` 1 is the segment after the loop (chunks below k_len)."""
    KS, K, U = plan.k_slice, views.k, plan.unroll
    step = SEGMENT * U
    w, x, s, c, el = Var("w"), Var("x"), Var("s"), Var("c"), Var("el")
    k0 = w * KS if staged else Min(w * KS, _c(K))
    k_len = _c(KS) if staged else Min(_c(KS), _c(K) - k0)
    k_whole = k_len if plan.whole_segments else (k_len // SEGMENT) * SEGMENT
    seg = x * step + s * SEGMENT
    loop: Pred = all_of(Cmp("<", (x - x % 2) * step, k_whole), Cmp("<", seg, k_whole))
    y = Var("out_k", INDEX)
    off = y % KS
    dom = [Range(w, _c(0), _c(plan.k_warps)), Range(x, _c(0), _c(rounds)), Range(s, _c(0), _c(U)),
           Range(c, _c(0), _c(8)), Range(el, _c(0), _c(8))]
    inverse = {"w": y // KS, "x": off // step, "s": (off % step) // SEGMENT, "c": (off % SEGMENT) // 8, "el": off % 8}
    if plan.whole_segments:
        guard, image = loop, k0 + seg + c * 8 + el
    else:
        part = Var("part")
        dom.append(Range(part, _c(0), _c(2)))
        tail = all_of(Cmp("==", x, _c(0)), Cmp("==", s, _c(0)), Cmp("<", k_whole, k_len),
                      Cmp("<", k_whole + c * 8, k_len))
        in_loop = Cmp("==", part, _c(0))
        guard = Cmp("<", _c(0), Ite(in_loop, _one(loop), _one(tail)))
        image = k0 + Ite(in_loop, seg, k_whole) + c * 8 + el
        # The segment after the loop is K's last, partial one: its k lie at K - K % 64 and above.
        in_tail = Cmp("<=", _c(K - K % SEGMENT), y)
        inverse = {**inverse, "x": Ite(in_tail, _c(0), inverse["x"]), "s": Ite(in_tail, _c(0), inverse["s"]),
                   "part": _one(in_tail)}
    return Bijection("k_cover", f"a column's sum: (warp, round, segment, chunk, element) covers K = {K} once",
                     "full-k", tuple(dom), guard, (image,), (Range(y, _c(0), _c(K)),), inverse)


TRUSTED = ("the PTX semantics of the 16-byte loads (ld.global[.nc].L1::no_allocate, __ldg), prefetch.global.L2, "
           "mma.sync.m16n8k16 and its fragment layout (lane (g, t) holding chunks t and t + 4 of weight row g and of "
           "tokens g and g + 8 computes that column's dot products over those k), and nvcc and ptxas",
           "the warp shuffles (__shfl_xor_sync with lane ^ 4) as the lane_swaps fact states them, the register "
           "double buffers (a round's mmas read the loads of that round)",
           "the shared-memory side: the warps' partial tiles at their slot and column0, their sum in order, the "
           "walk's reads of it",
           "the rows of the mma tile past M (a clamped token's or the zero rows 8..15 with 8 tokens) are never "
           "stored: their products stay in rows the walk does not reach (the walk stores rows below min(TOKENS, M))")
TRUSTED_STAGED = ("the TMA copy of A: cuTensorMapEncodeTiled encoding dims {K, M}, the row stride, boxes 64 x TOKENS "
                  "as activation_map passes them (a pointer or stride it refuses fails the launch), the 128-byte "
                  "swizzle and the shared-memory reads of the boxes, the mbarriers and their expect_tx bytes",)


def _l1(views: ProblemViews, plan: TcGemvPlan, rows: Rows, kernel: str) -> KernelModel:
    """kernel<T>: A through L1 with each round, a block one group of K_WARPS warps."""
    threads = _c(plan.threads, "T::THREADS")
    K = _c(views.k, "T::K", INDEX)
    block_range = Range(BLOCK, _c(0), _c(plan.blocks, "T::BLOCKS"))
    bn = _c(plan.block_n, "T::BN", INDEX)
    if views.batch > 1:
        tiles_n = _c(plan.tiles_n, "T::TILES_N")
        n0: Expr = Let("n0", (BLOCK % tiles_n).as_(INDEX) * bn, INDEX)
        batch: Expr = Let("batch", (BLOCK // tiles_n).as_(INDEX), INDEX)
    else:
        n0, batch = Let("n0", BLOCK.as_(INDEX) * bn, INDEX), _c(0, ctype=INDEX)
    lanes = _Lanes()
    k_slice = _c(plan.k_slice, "K_SLICE", INDEX)
    k0 = Let("k0", Min(lanes.warp.as_(INDEX) * k_slice, K, INDEX), INDEX)
    k_len = Let("k_len", Min(k_slice, K - k0, INDEX), INT)
    k_whole = k_len if plan.whole_segments else Let("k_whole", (k_len // _c(SEGMENT)) * _c(SEGMENT))
    step = plan.unroll * SEGMENT
    rounds = 2 * -(-plan.k_slice // (2 * step)) + 1  # loads at rounds 0 .. 2 x the loop's iterations
    x, s, o = Var("x"), Var("s"), Var("o")
    seg = Let("seg", x * _c(step, "STEP") + _c(SEGMENT, "SEGMENT") * s)
    thread_range = Range(THREAD, _c(0), threads)
    loop_ranges = (block_range, thread_range, Range(x, _c(0), _c(rounds)), Range(s, _c(0), _c(plan.unroll, "UNROLL")))
    in_loop = Cmp("<", seg, k_whole)
    o_range = Range(o, _c(0), _c(plan.octets, "OCTETS"))
    accesses: list[Access] = list(_b_rows(views, plan, lanes, n0, batch, k0, (*loop_ranges, o_range), seg,
                                          {"even": in_loop, "odd": in_loop}, "b_loop", "a round's segment",
                                          in_loop))
    tail_in = Cmp("<", k_whole, k_len)
    if not plan.whole_segments:
        accesses += _b_rows(views, plan, lanes, n0, batch, k0, (block_range, thread_range, o_range), k_whole,
                            {p: all_of(tail_in, Cmp("<", k_whole + c, k_len))
                             for p, c in (("even", lanes.even_chunk), ("odd", lanes.odd_chunk))},
                            "b_tail", "the segment after the loop, each chunk below k_len", tail_in)
    if plan.prefetch_rounds:
        r = Var("r")
        pseg = Let("prefetch_seg", r * _c(step, "STEP") + _c(SEGMENT, "SEGMENT") * s)
        accesses += _b_rows(views, plan, lanes, n0, batch, k0,
                            (block_range, thread_range, Range(r, _c(0), _c(plan.prefetch_rounds, "PREFETCH_ROUNDS")),
                             Range(s, _c(0), _c(plan.unroll, "UNROLL")), o_range), pseg,
                            {p: Cmp("<", pseg + c, k_len) for p, c in (("even", lanes.even_chunk),
                                                                        ("odd", lanes.odd_chunk))},
                            "b_prefetch", "prefetch into L2 of the first rounds", None)

    # The activation: tokens g and g + 8 (h), chunks t and t + 4 (j) of each segment, a token past M at row M - 1.
    h, j = Var("h"), Var("j")
    token = Let("token", Min((lanes.g + _c(8) * h).as_(INDEX), rows.M - _c(1, ctype=INDEX), INDEX), INDEX)
    x_row = _offset(views, "A", batch, m=token, k=k0)
    halves = (Range(h, _c(0), _c(plan.tokens // 8, "TOKEN_HALVES")), Range(j, _c(0), _c(2)))
    M = rows.M

    def a_access(ident: str, text: str, ranges: tuple[Range, ...], at: Expr, moved: Pred, slot: Pred | None):
        chunk = (at + _c(8) * lanes.t + _c(32) * j).as_(INDEX)
        logical, ext = _in(views, {"m": token, "k": k0 + chunk + LANE}, {"m": M, "k": K}, batch)
        return Access(ident, f"A: {text} (16 bytes of token min(g + 8h, M - 1))", "A", "load", (*rows.param, *ranges),
                      _one(moved, 8), x_row + chunk, 8, logical, ext, aligned=8, zero_fill=slot is not None,
                      slot=slot if slot is not None else TRUE)

    accesses.append(a_access("a_loop", "a round's segment", (*loop_ranges, *halves), seg, in_loop, in_loop))
    if not plan.whole_segments:
        accesses.append(a_access("a_tail", "the segment after the loop, each chunk below k_len",
                                 (block_range, thread_range, *halves), k_whole,
                                 all_of(tail_in, Cmp("<", k_whole + _c(8) * lanes.t + _c(32) * j, k_len)), tail_in))
    stores, once, facts = _store(views, plan, rows, n0, batch, block_range)
    walks, lane_facts = _layout_checks(plan)
    clamp = Fact("token_clamp_stored", "full-k", "a token below M (a row the walk stores) reads its own row of A",
                 (*rows.param, thread_range, halves[0]), Cmp("<", (lanes.g + _c(8) * h).as_(INDEX), M),
                 Cmp("==", token, (lanes.g + _c(8) * h).as_(INDEX)))
    reach: dict[str, Reach] = {a.operand: operand_reach(views, a.operand, rows.rows) for a in stores}
    reach["A"] = operand_reach(views, "A", rows.rows, plan.a_check)
    reach["B"] = operand_reach(views, "B", rows.rows, plan.b_check)
    return KernelModel(kernel, "tcgemv", plan.index_type, reach, (*accesses, *stores),
                       (once, _k_cover(views, plan, rounds, False), *walks), (*facts, *lane_facts, clamp),
                       trusted=TRUSTED)


def _staged(views: ProblemViews, plan: TcGemvPlan, rows: Rows, kernel: str) -> KernelModel:
    """staged_kernel<T>: A's TOKENS x K by TMA into shared memory, ROW_GROUPS groups of K_WARPS warps a block."""
    threads = _c(plan.threads, "T::THREADS")
    K = _c(views.k, "T::K", INDEX)
    block_range = Range(BLOCK, _c(0), _c(plan.blocks, "T::BLOCKS"))
    n0 = Let("n0", BLOCK.as_(INDEX) * _c(plan.block_n, "T::BN", INDEX), INDEX)
    batch = _c(0, ctype=INDEX)
    lanes = _Lanes()
    group = Let("group", lanes.warp // _c(plan.k_warps, "K_WARPS"))
    k_warp = Let("k_warp", lanes.warp % _c(plan.k_warps, "K_WARPS"))
    k0 = Let("k0", k_warp.as_(INDEX) * _c(plan.k_slice, "K_SLICE", INDEX), INDEX)
    step = plan.unroll * SEGMENT
    rounds = plan.k_slice // step
    x, s, o = Var("x"), Var("s"), Var("o")
    seg = Let("seg", x * _c(step, "STEP") + _c(SEGMENT, "SEGMENT") * s)
    thread_range = Range(THREAD, _c(0), threads)
    ranges = (block_range, thread_range, Range(x, _c(0), _c(rounds)), Range(s, _c(0), _c(plan.unroll, "UNROLL")),
              Range(o, _c(0), _c(plan.octets, "OCTETS")))
    n_base = n0 + (_c(8 * plan.octets, "8 * OCTETS") * group).as_(INDEX)
    accesses: list[Access] = list(_b_rows(views, plan, lanes, n_base, batch, k0, ranges, seg,
                                          {"even": TRUE, "odd": TRUE}, "b_loop", "a round's segment", TRUE))
    # The tensor map of A: box s (64-k segment s) at coordinates (k = s x SEGMENT, row 0), element (token r, k j) at
    # r x the row stride + k, zero past M (dim 1 is M); dim 0 is K = SEGMENTS x 64 (no box passes it).
    sb, r, jj = Var("box"), Var("r"), Var("j")
    row_stride = Let("row_stride", _c(plan.a_row_stride, "row_bytes / sizeof(A_t)", INDEX), INDEX)
    tma_k = Let("tma_k", sb * _c(SEGMENT, "SEGMENT") + jj)
    segments_k = views.k // SEGMENT
    tma_ranges = (*rows.param, block_range, Range(sb, _c(0), _c(segments_k, "SEGMENTS")),
                  Range(r, _c(0), _c(plan.tokens, "TOKENS")), Range(jj, _c(0), _c(SEGMENT)))
    accesses.append(Access("a_tma", "A: an element of TMA box s (token r, k = 64 s + j) through the tensor map "
                           "[M][K], zero past M", "A", "load", tma_ranges,
                           _one(all_of(Cmp("<", r.as_(INDEX), rows.M), Cmp("<", tma_k.as_(INDEX), K))),
                           r.as_(INDEX) * row_stride + tma_k.as_(INDEX), 1,
                           {"m": r.as_(INDEX), "k": tma_k.as_(INDEX)}, {"m": rows.M, "k": K}, zero_fill=True))
    elem = views.operands["A"].elem_bytes
    rules = Fact("a_tma_map_rules", "in-bounds", "A's tensor map: the row stride a multiple of 16 bytes below 2^40 "
                 "and no less than a row of K, boxes 64 x TOKENS within 256, K whole boxes", (), TRUE,
                 all_of(Cmp("==", (row_stride * elem) % _c(16), _c(0)), Cmp("<=", K * elem, row_stride * elem),
                        Cmp("<", row_stride * elem, _c(2 ** 40, ctype=INDEX)),
                        Cmp("<=", _c(plan.tokens), _c(256)), Cmp("==", K % _c(SEGMENT), _c(0))))
    stores, once, facts = _store(views, plan, rows, n0, batch, block_range)
    walks, lane_facts = _layout_checks(plan)
    reach: dict[str, Reach] = {a.operand: operand_reach(views, a.operand, rows.rows) for a in stores}
    reach["A"] = operand_reach(views, "A", rows.rows, plan.a_check)
    reach["B"] = operand_reach(views, "B", rows.rows, plan.b_check)
    return KernelModel(kernel, "tcgemv", plan.index_type, reach, (*accesses, *stores),
                       (once, _k_cover(views, plan, rounds, True), *walks), (*facts, *lane_facts, rules),
                       trusted=(*TRUSTED, *TRUSTED_STAGED))
