"""The `gemv` family's index maps as data (pure): dg/gemv.cuh's kernel for one plan, as a `KernelModel` per load
width the launcher can take: B's CH-element loads (behind the B_CHECK pointer check where there is one) with A's
slice staged in A_VEC-element vectors (behind the kernel's A_CHECK test where there is one), and where a check can
fail, B's CH_PROMISED-element loads with A staged element by element. (The two checks are independent; each access's
obligations involve only its own operand, so the two models cover the four combinations.)

A block: blockIdx.x = column tile x SPLITS + cluster rank; the rank is the K slice [k0, k0 + k_len). B's chunks,
round x of the two-buffer loop at kb = kb0 + x * STEP, u of the round's UNROLL and column c of the warp (lanes along
k) are loaded whole (VEC-element vectors) or element by element at the slice's or the view's end, zero past it; A's
slice is staged once; the partial tile is stored by dg/reduce.cuh's walk. Full K: the (split, lane or k-warp, round,
u, element) a column's sum takes cover K once.

Each intermediate is a `Let` named as the header declares it; `SPELLED` lists the header lines where the model
resolves a compile-time branch or a loop's variable."""

from __future__ import annotations

from dgemm_cli.families.cta.index import Origin, Rows, rows_of
from dgemm_cli.families.gemv import GemvPlan
from dgemm_cli.formal.expr import INDEX, INT, Cmp, Expr, Ite, Let, Min, Not, Pred, Var, all_of
from dgemm_cli.formal.expr import const as _c
from dgemm_cli.formal.model import BLOCK, LANE, THREAD, Access, Bijection, KernelModel, Range, Reach
from dgemm_cli.formal.reduce import tile_store, tile_walk, walk_facts
from dgemm_cli.formal.views import operand_reach, role_offset, segments
from dgemm_cli.views import ProblemViews, output_unit_role

HEADERS = ("dg/gemv.cuh", "dg/reduce.cuh")

SPELLED = {
    "split": "const int split = cluster_rank<T::SPLITS>();",
    "tile": "const index_t tile = blockIdx.x / T::SPLITS;",
    "kb": "for (int kb = kb0; kb < k_len; kb += 2 * STEP) {",
    "gn": "load_b_chunk<T, VEC>(w[u][c], B, col0 + c, k0, kb + u * 32 * CH, k_len);",
    "kk": "load_b_chunk<T, VEC>(w[u][c], B, col0, k0, kb + u * WK, k_len);",
    "valid": "const int valid = T::LANES_ALONG_K ? (gn < T::N ? min(CH, k_len - kk) : 0)",
    "p": "const B_t* p = B + (Bv::n::offset(gn) + Bv::k::offset(k0 + kk));",
    "k_len": "const int k_len = int(min(index_t(K_SLICE), T::K - k0));",
    "col0": "const index_t col0 = T::LANES_ALONG_K ? n0 + warp * COLS : n0 + (wn * 32 + lane) * CH;",
    "kb0": "const int kb0 = T::LANES_ALONG_K ? lane * CH : wk;",
    "i": "const int i = threadIdx.x + (b0 + b) * THREADS;",
    "r": "const int r = i / (K_SLICE / AV), kk = i % (K_SLICE / AV) * AV;",
    "a_kk": "const int r = i / (K_SLICE / AV), kk = i % (K_SLICE / AV) * AV;",
    # dg/reduce.cuh's walk (store_partial_tile<T, M, BN, THREADS, SPLITS, RED_PITCH>(partial, C, T::M, 0, n0, ...)).
    "rows": "const int rows = int(min(index_t(BM), M - m0)), cols = int(min(index_t(BN), T::N - n0));",
    "cols": "const int rows = int(min(index_t(BM), M - m0)), cols = int(min(index_t(BN), T::N - n0));",
    "e": "for (int e = split * Threads + int(threadIdx.x); e < rows * cols; e += Splits * Threads) {",
    "gm": "T::store(C, m0 + r, n0 + c, sum, alpha, beta, M, ep);",
}
# A's element staging (stage_a<T, 1>) and the unsplit walk spell these names so.
SPELLED_ELEMENTS = {
    "i": "for (int i = threadIdx.x; i < M * K_SLICE; i += THREADS) {",
    "r": "const int r = i / K_SLICE, kk = i % K_SLICE;",
    "a_kk": "const int r = i / K_SLICE, kk = i % K_SLICE;",
    "e": "for (int e = int(threadIdx.x); e < rows * cols; e += Threads) {",
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


def models(views: ProblemViews, plan: GemvPlan, name: str) -> list[KernelModel]:
    rows = rows_of(views)  # the rows are fixed: a bucket of a run-time size has its own instantiation
    variants = [(plan.chunk, plan.b_check, plan.a_vec, plan.a_check)]
    if plan.b_check or (plan.a_vec > 1 and plan.a_check):
        variants.append((plan.chunk_promised, 0, 1, 0))
    out = []
    for n, (vec, b_check, a_vec, a_check) in enumerate(variants):
        label = "primary" if n == 0 else "narrow loads (pointer checks failed)"
        out.append(_model(views, plan, rows, vec, b_check, a_vec, a_check,
                          f"{name} [{label}: B {vec}-element loads, A staged {a_vec}-element]"))
    return out


def _model(views: ProblemViews, plan: GemvPlan, rows: Rows, vec: int, b_check: int, a_vec: int, a_check: int,
           kernel: str) -> KernelModel:
    S = plan.splits
    threads = _c(plan.threads, "T::THREADS")
    N, K = _c(views.n, "T::N", INDEX), _c(views.k, "T::K", INDEX)
    split: Expr = Let("split", BLOCK % _c(S, "T::SPLITS")) if S > 1 else _c(0, "split")
    tile = Let("tile", (BLOCK // _c(S, "T::SPLITS")).as_(INDEX), INDEX)
    tiles_n = _c(plan.tiles_n, "T::TILES_N", INDEX)
    n0 = Let("n0", (tile % tiles_n) * _c(plan.block_n, "T::BN", INDEX), INDEX)
    batch: Expr = Let("batch", tile // tiles_n, INDEX) if views.batch > 1 else _c(0, ctype=INDEX)
    k_slice = _c(plan.k_slice, "K_SLICE", INDEX)
    k0 = Let("k0", split.as_(INDEX) * k_slice, INDEX)
    k_len = Let("k_len", Min(k_slice, K - k0, INDEX), INT)
    block_range = Range(BLOCK, _c(0), _c(plan.blocks, "T::BLOCKS"))
    origin = Origin(BLOCK, _c(0, ctype=INDEX), n0, batch, _c(1, ctype=INDEX), _c(plan.blocks // S), (block_range,))

    b_loads, cover = _b_loads(views, plan, vec, n0, batch, k0, k_len, block_range)
    a_loads, a_walk = _a_stage(views, plan, a_vec, batch, k0, k_len, block_range)

    # dg/reduce.cuh: store_partial_tile<T, M, BN, THREADS, SPLITS, RED_PITCH>(partial, C, T::M, 0, n0, split, ...).
    it = Var("i")
    per_thread = -(-(views.m * plan.block_n) // (S * plan.threads))
    ranges = (block_range, Range(THREAD, _c(0), threads), Range(it, _c(0), _c(per_thread)))
    e_value = (split * threads + THREAD + it * (_c(S, "Splits") * threads) if S > 1 else THREAD + it * threads)
    bm, bn = _c(views.m, "BM", INDEX), _c(plan.block_n, "BN", INDEX)
    walk = tile_walk(bm, bn, rows.M, origin.m0, n0, N, e_value, output_unit_role(views) == "m")

    def thread_inverse(e: Expr) -> dict[str, Expr]:
        return {"thread": e % plan.threads, "i": e // (plan.threads * S)}

    stores, once = tile_store(views, (views.m, plan.block_n, plan.tiles_n), rows, origin, ranges, walk,
                              lambda t, e: t * S + (e // plan.threads) % S if S > 1 else t, "store_once",
                              f"the store: (block, thread, i) onto {views.spec.output.name}'s {views.batch} x "
                              f"{views.m} x {views.n} elements, each once", thread_inverse)
    reach: dict[str, Reach] = {a.operand: operand_reach(views, a.operand, None) for a in stores}
    reach["A"] = operand_reach(views, "A", None, a_check)
    reach["B"] = operand_reach(views, "B", None, b_check)
    return KernelModel(kernel, "gemv", plan.index_type, reach, (*b_loads, *a_loads, *stores), (once, cover, a_walk),
                       walk_facts(walk, bm, bn, rows.M, origin.m0, n0, N, (block_range,)), trusted=TRUSTED)


def _b_loads(views: ProblemViews, plan: GemvPlan, vec: int, n0: Expr, batch: Expr, k0: Expr, k_len: Expr,
             block_range: Range) -> tuple[tuple[Access, ...], Bijection]:
    """load_b_chunk<T, VEC> of every (round x, u, column c): whole chunks as vectors, element by element at the
    end; and the k a column's sums take, over the splits, lanes (k-warps), rounds and elements."""
    along_k = plan.lanes_along == "k"
    CH = plan.chunk
    U = plan.unroll if vec == CH else 1
    cols = plan.cols if along_k else 1
    wn_count = 1 if along_k else plan.warps_n
    wk_count = plan.threads // 32 // wn_count
    step = 32 * CH * U if along_k else wk_count * U
    rounds = 2 * -(-plan.k_slice // (2 * step)) + 1  # loads at rounds 0 .. 2 x the loop's iterations
    N = _c(views.n, "T::N", INDEX)
    warp, lane = Let("warp", THREAD // _c(32)), Let("lane", THREAD % _c(32))
    ch = _c(CH, "CH")
    if along_k:
        col0 = Let("col0", n0 + warp.as_(INDEX) * _c(cols, "COLS", INDEX), INDEX)
        kb0 = Let("kb0", lane * ch)
    else:
        wn, wk = Let("wn", warp % _c(wn_count, "WN")), Let("wk", warp // _c(wn_count, "WN"))
        col0 = Let("col0", n0 + ((wn * _c(32) + lane) * ch).as_(INDEX), INDEX)
        kb0 = wk
    x, u, c, v, e = Var("x"), Var("u"), Var("c"), Var("v"), Var("e")
    kb = Let("kb", kb0 + x * _c(step, "STEP"))
    if along_k:
        gn = Let("gn", col0 + c, INDEX)
        kk = Let("kk", kb + u * _c(32 * CH, "32 * CH"))
        valid = Let("valid", Ite(Cmp("<", gn, N), Min(ch, k_len - kk), _c(0)))
    else:
        gn = col0
        kk = Let("kk", kb + u * _c(wk_count, "WK"))
        valid = Let("valid", Ite(Cmp("<", kk, k_len), Min(ch, N - gn, INDEX), _c(0)))
    base = (block_range, Range(THREAD, _c(0), _c(plan.threads, "T::THREADS")), Range(x, _c(0), _c(rounds)),
            Range(u, _c(0), _c(U, "U")), Range(c, _c(0), _c(cols, "COLS")))
    whole = Cmp("==", valid, ch)
    slice_end = k0 + k_len
    p = Let("p", _offset(views, "B", batch, n=gn, k=k0 + kk), INDEX)
    V = _c(vec, "VEC")
    if along_k:
        lg_vec = {"n": gn, "k": k0 + kk + v * V + LANE}
    else:
        lg_vec = {"n": gn + v * V + LANE, "k": k0 + kk}
    lg_vec, ext = _in(views, lg_vec, {"n": N, "k": slice_end}, batch)
    wide = Access(f"b_vec{vec}", f"B: a whole chunk, {vec}-element loads", "B", "load",
                  (*base, Range(v, _c(0), _c(CH // vec))), Ite(whole, V, _c(0)), p + v * V, vec, lg_vec, ext,
                  aligned=vec if vec > 1 else 1, always=(valid,))
    if along_k:
        tail_addr = _offset(views, "B", batch, n=gn, k=k0 + kk + e)
        lg_tail = {"n": gn, "k": k0 + kk + e}
    else:
        tail_addr = _offset(views, "B", batch, n=gn + e, k=k0 + kk)
        lg_tail = {"n": gn + e, "k": k0 + kk}
    lg_tail, ext = _in(views, lg_tail, {"n": N, "k": slice_end}, batch)
    tail = Access("b_elem", "B: a chunk at the slice's or the view's end, element by element, zero past it", "B",
                  "load", (*base, Range(e, _c(0), ch)), Ite(all_of(Not(whole), Cmp("<", e, valid)), _c(1), _c(0)),
                  tail_addr, 1, lg_tail, ext, zero_fill=True, slot=Not(whole), always=(valid,))
    return (wide, tail), _k_cover(views, plan, U, step, rounds)


def _k_cover(views: ProblemViews, plan: GemvPlan, U: int, step: int, rounds: int) -> Bijection:
    """A column's sum: (split, lane or k-warp, round x, u, element e of the chunk) onto K, each k once. The loop
    computes round x where kb0 + (x - x % 2) * STEP < k_len (both rounds of an iteration), each chunk with kk < k_len;
    the chunk's elements past the slice are zero (b_elem_zero_fill)."""
    along_k = plan.lanes_along == "k"
    CH, S, ks = plan.chunk, plan.splits, plan.k_slice
    split, x, u, e = Var("split"), Var("x"), Var("u"), Var("e")
    k0 = split * ks
    k_len = Min(_c(ks), _c(views.k) - k0)
    y = Var("out_k", INDEX)
    if along_k:
        lane = Var("lane")
        kb0, lanes = lane * CH, Range(lane, _c(0), _c(32))
        kk = kb0 + x * step + u * (32 * CH)
        elems = Range(e, _c(0), _c(CH))
        off = y % ks
        inverse = {"split": y // ks, "lane": (off // CH) % 32, "u": (off // CH // 32) % U,
                   "x": off // CH // (32 * U), "e": off % CH}
    else:
        wk_count = plan.threads // 32 // plan.warps_n
        lane = Var("wk")
        kb0, lanes = lane, Range(lane, _c(0), _c(wk_count))
        kk = kb0 + x * step + u * wk_count
        elems = Range(e, _c(0), _c(1))
        off = y % ks
        inverse = {"split": y // ks, "wk": off % wk_count, "u": (off // wk_count) % U, "x": off // (wk_count * U),
                   "e": _c(0)}
    guard: Pred = all_of(Cmp("<", kb0 + (x - x % 2) * step, k_len), Cmp("<", kk, k_len), Cmp("<", kk + e, k_len))
    return Bijection("k_cover", f"a column's sum: (split, {lane.name}, round, u, element) covers K = {views.k} once",
                     "full-k", (Range(split, _c(0), _c(S)), lanes, Range(x, _c(0), _c(rounds)),
                                Range(u, _c(0), _c(U)), elems),
                     guard, (k0 + kk + e,), (Range(y, _c(0), _c(views.k)),), inverse)


def _a_stage(views: ProblemViews, plan: GemvPlan, av: int, batch: Expr, k0: Expr, k_len: Expr,
             block_range: Range) -> tuple[tuple[Access, ...], Bijection]:
    """stage_a<T, AV>: A's K slice, every row, into [M][K_SLICE] (shared), zero past the slice's end."""
    M, ks = views.m, plan.k_slice
    threads = _c(plan.threads, "THREADS")
    K_SLICE = _c(ks, "K_SLICE")
    slice_end = k0 + k_len
    lane_slot = Var("lane_slot")
    slot_r, slot_c = Var("slot_row"), Var("slot_col")
    if av == 1:
        it = Var("it", INT, "i")
        i = Let("i", THREAD + it * threads)
        r, kk = Let("r", i // K_SLICE), Let("a_kk", i % K_SLICE)
        in_walk = Cmp("<", i, _c(M * ks, "M * K_SLICE"))
        ranges = (block_range, Range(THREAD, _c(0), threads), Range(it, _c(0), _c(-(-(M * ks) // plan.threads))))
        logical, ext = _in(views, {"m": r, "k": k0 + kk}, {"m": _c(M, "M", INDEX), "k": slice_end}, batch)
        load = Access("a_elem", "A: its K slice staged element by element, zero past the slice", "A", "load", ranges,
                      Ite(all_of(in_walk, Cmp("<", kk, k_len)), _c(1), _c(0)),
                      _offset(views, "A", batch, m=r, k=k0 + kk), 1, logical, ext, zero_fill=True, slot=in_walk)
        inv_c = slot_r * ks + slot_c
        walk = Bijection("a_elem_walk", f"A's staging: (thread, i) covers each slot of the {M} x {ks} slice once",
                         "full-k", (Range(THREAD, _c(0), threads), Range(it, _c(0), ranges[2].hi),
                                    Range(lane_slot, _c(0), _c(1))),
                         in_walk, (r, kk + lane_slot), (Range(slot_r, _c(0), _c(M)), Range(slot_c, _c(0), _c(ks))),
                         {"thread": inv_c % plan.threads, "it": inv_c // plan.threads, "lane_slot": _c(0)})
        return (load,), walk
    vecs = M * (ks // av)
    per = -(-vecs // plan.threads)
    batch_n = min(per, 4)
    q = Var("q", INT, "(b0 + b)")
    i = Let("i", THREAD + q * threads)
    per_row = _c(ks // av, "(K_SLICE / AV)")
    AV = _c(av, "AV")
    r, kk = Let("r", i // per_row), Let("a_kk", (i % per_row) * AV)
    in_walk = Cmp("<", i, _c(vecs, "A_VECS"))
    ranges = (block_range, Range(THREAD, _c(0), threads), Range(q, _c(0), _c(-(-per // batch_n) * batch_n)))
    address = _offset(views, "A", batch, m=r, k=k0 + kk)
    logical, ext = _in(views, {"m": r, "k": k0 + kk + LANE}, {"m": _c(M, "M", INDEX), "k": slice_end}, batch)
    accesses: list[Access] = []
    if views.k % av:
        whole = all_of(in_walk, Cmp("<=", kk + AV, k_len))
        accesses.append(Access(f"a_vec{av}", f"A: its K slice staged in {av}-element vectors", "A", "load", ranges,
                               Ite(whole, AV, _c(0)), address, av, logical, ext, aligned=av))
        x = Var("ax", INT, "x")
        lg, ext2 = _in(views, {"m": r, "k": k0 + kk + x}, {"m": _c(M, "M", INDEX), "k": slice_end}, batch)
        accesses.append(Access("a_vec_tail", "A: a vector at K's end, element by element, zero past it", "A", "load",
                               (*ranges, Range(x, _c(0), AV)),
                               Ite(all_of(Not(whole), in_walk, Cmp("<", kk + x, k_len)), _c(1), _c(0)),
                               _offset(views, "A", batch, m=r, k=k0 + kk + x), 1, lg, ext2, zero_fill=True,
                               slot=all_of(in_walk, Not(Cmp("<=", kk + AV, k_len)))))
    else:
        accesses.append(Access(f"a_vec{av}", f"A: its K slice staged in {av}-element vectors, zero past the slice", "A",
                               "load", ranges, Ite(all_of(in_walk, Cmp("<", kk, k_len)), AV, _c(0)), address, av,
                               logical, ext, aligned=av, zero_fill=True, slot=in_walk))
    inv_c = slot_r * (ks // av) + slot_c // av
    walk = Bijection(f"a_vec{av}_walk", f"A's staging: (thread, vector, lane) covers each slot of the {M} x {ks} slice "
                     "once", "full-k", (Range(THREAD, _c(0), threads), Range(q, _c(0), ranges[2].hi),
                                        Range(lane_slot, _c(0), AV)),
                     in_walk, (r, kk + lane_slot), (Range(slot_r, _c(0), _c(M)), Range(slot_c, _c(0), _c(ks))),
                     {"thread": inv_c % plan.threads, "q": inv_c // plan.threads, "lane_slot": slot_c % av})
    return tuple(accesses), walk


TRUSTED = ("the PTX semantics of the vector loads (__ldg) and nvcc and ptxas",
           "the register side: the two buffers (a round's FMAs read the chunks the load before them filled) and the "
           "FMAs' reads of A's staged slice",
           "the shared-memory side: A's staged slice as the FMAs read it, the warps' partial tiles and their sum",
           "the warp shuffles (a fixed tree) and the cluster: its rank is blockIdx.x % SPLITS, the DSMEM sum reads "
           "each rank's partial tile at (r, c) once, in rank order")
