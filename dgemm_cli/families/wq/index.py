"""The `wq` family's index maps as data (pure): dg/wq.cuh's kernel for one plan, one `KernelModel`.

Block b owns the COLS columns from n0 = (b % TILES_N) COLS and the MT rows from m0 = (b / TILES_N) MT; thread (row
s, column col) = (threadIdx.x / COLS, threadIdx.x % COLS) takes column n = n0 + col and k = s + i KSPLIT for the
iterations i while k < K, and only where n < N. At each k it reads B's integer at (k, n) through integer_at: a byte at
the Weights Roles' offset (int8/uint8), or the word at that offset and the value at place `at` of its eight (the
Roles' slot, in the view's order: linear, or AWQ's), or in the dg layout the word and place that (k, n) give alone;
the scale at the Scales Roles' offset of (k, n) and the zero point at the Zeros Roles' (a float, a byte, or a word
and place as the weights'); then A at (m0 + r, k) for its rows r below M. The block's KSPLIT partial sums meet in
shared memory; thread t < MT x COLS of the block (and t + THREADS ...) stores (m0 + t / COLS, n0 + t % COLS) through
T::store, which writes nothing past M or N.

Obligations beyond the framework's: each column's sum takes every k of K once over (thread row, iteration)
(`k_cover`); the threads' partial sums fill each (thread row, row, column) slot once (`partial_slots`); and the
summing thread reads the slots of its own column (`partial_column`).

The Roles are dg/wq.cuh's `dg::wq::Role<index_t, Seg<size, block, stride, packed>...>`: `wq_segments` builds their
template arguments from the spec as render.py's `_segs` does, and tests/test_formal_weight_only.py checks the rendered
traits declare exactly `wq_role_type` of them. Each intermediate is a `Let` named as the header declares it; `SPELLED`
lists the header lines where the model resolves a compile-time branch or a loop's variable."""

from __future__ import annotations

from dgemm_cli.families.cta.index import Rows, epilogue_accesses, rows_of
from dgemm_cli.families.wq import WqPlan
from dgemm_cli.formal.expr import INDEX, INT, TRUE, Cmp, Const, Expr, Ite, Let, Var, all_of
from dgemm_cli.formal.expr import const as _c
from dgemm_cli.formal.model import BLOCK, THREAD, Access, Bijection, Fact, KernelModel, Range, Reach
from dgemm_cli.formal.packed import QuantView, quant_reach_of, quant_views
from dgemm_cli.formal.views import operand_reach, role_offset, segments
from dgemm_cli.spec.model import VALUES_PER_WORD
from dgemm_cli.views import ProblemViews

HEADERS = ("dg/wq.cuh",)

SPELLED = {
    "col": "const int col = int(threadIdx.x) % T::COLS, row = int(threadIdx.x) / T::COLS;",
    "row": "const int col = int(threadIdx.x) % T::COLS, row = int(threadIdx.x) / T::COLS;",
    "n0": "const index_t n0 = index_t(blockIdx.x % unsigned(T::TILES_N)) * T::COLS;",
    "m0": "const index_t m0 = index_t(blockIdx.x / unsigned(T::TILES_N)) * T::MT;",
    "n": "const index_t n = n0 + col;",
    "k": "for (index_t k = row; k < T::K; k += T::KSPLIT) {",
    "M": "const index_t M = T::rows_at_run_time ? M_arg : T::M;",
    "A_offset": "const typename T::A_t* a = A + Av::k::offset(k);",
    "B_offset": "return int(__ldg(p + (R::k::offset(k) + R::n::offset(n))));",
    "B_word_offset": "const uint32_t word = __ldg(p + (R::k::offset(k) + R::n::offset(n)));",
    "B_dg_offset": "const uint32_t word = __ldg(p + ((n / I(16) * I(R::K_CHUNKS) + k / I(64)) * I(128) + I(4) * lane "
                   "+ (k % I(16)) / I(4)));",
    "lane": "const I lane = I(4) * (n % I(8)) + (k % I(64)) / I(16);",
    "at": "const int at = ORDER == AWQ ? (v & 1) * 4 + (v >> 1) : v;",
    "v": "return nibble<R::ORDER, R::SIGNED>(word, R::k::slot(k) + R::n::slot(n));",
    "dg_at": "const int at = int((n % I(16)) / I(8) + I(2) * ((k % I(4)) / I(2)) + I(4) * (k % I(2)));",
    "S_offset": "const float s = to_float(__ldg(quant.scales + (S::k::offset(k) + S::n::offset(n))));",
    "Z_offset": "z = to_float(__ldg(quant.zeros + (Z::k::offset(k) + Z::n::offset(n))));",
    "Z_byte_offset": "return int(__ldg(p + (R::k::offset(k) + R::n::offset(n))));",
    "Z_word_offset": "const uint32_t word = __ldg(p + (R::k::offset(k) + R::n::offset(n)));",
    "z_v": "return nibble<R::ORDER, R::SIGNED>(word, R::k::slot(k) + R::n::slot(n));",
    "z_at": "const int at = ORDER == AWQ ? (v & 1) * 4 + (v >> 1) : v;",
    "t": "for (int t = int(threadIdx.x); t < T::MT * T::COLS; t += T::THREADS) {",
    "r": "const int r = t / T::COLS, c = t % T::COLS;",
    "c": "const int r = t / T::COLS, c = t % T::COLS;",
    "gm": "T::store(C, m0 + r, n0 + c, v, alpha, beta, M, ep);",
    "gn": "T::store(C, m0 + r, n0 + c, v, alpha, beta, M, ep);",
}
# dg/wq.cuh's Role, whose offsets and slots `wq_role_offset` and `wq_role_slot` state.
ROLE_LINES = (
    "static constexpr I index(I i) { return (sizeof...(Outer) ? i % I(S::size) : i) / I(S::block); }",
    "const I here = S::packed ? (j / I(8)) * I(S::stride) : j * I(S::stride);",
    "return here + Role<I, Outer...>::offset(i / I(S::size));",
    "const int here = S::packed ? int(index(i) % I(8)) : 0;",
    "return here + Role<I, Outer...>::slot(i / I(S::size));",
    "const int at = ORDER == AWQ ? (v & 1) * 4 + (v >> 1) : v;",
)

# (size, block, stride, packed) of a dg::wq::Seg.
Seg = tuple[int, int, int, bool]


def wq_segments(views: ProblemViews, role: str, q: QuantView) -> tuple[Seg, ...]:
    """A role's letters as dg::wq::Seg<size, block, stride, packed>, innermost first: one element of `q`'s view per
    block of the letter, its stride (0 where the view lacks the letter), packed where the view packs it."""
    spec, view = views.spec, q.view
    out = []
    for x in reversed(views.roles[role].letters):
        stride = view.stride_of(x) if x in view.letters else 0
        packed = view.packing is not None and view.packing.along == x
        out.append((spec.sizes[x], q.blocks.get(x, 1), stride, packed))
    return tuple(out)


def wq_role_type(segs: tuple[Seg, ...]) -> str:
    """The C++ type of a dg::wq::Role, as the traits spell it."""
    return "dg::wq::Role<index_t" + "".join(
        f", dg::wq::Seg<{size}, {block}, {stride}{', true' if packed else ''}>" for size, block, stride, packed in segs
    ) + ">"


def _index(seg: Seg, i: Expr, outer: bool) -> Expr:
    """Role::index: (i % size where outer segments follow, else i) / block."""
    size, block, _, _ = seg
    j = i % Const(size, ctype=INDEX) if outer else i
    return j // Const(block, ctype=INDEX) if block > 1 else j


def wq_role_offset(segs: tuple[Seg, ...], i: Expr) -> Expr:
    """dg::wq::Role::offset(i): index(i) x stride (a packed letter's index / 8 x stride) plus the outer segments'
    offset of i / size; a stride of 0 adds nothing."""
    if not segs:
        return Const(0, ctype=INDEX)
    seg, rest = segs[0], segs[1:]
    size, _, stride, packed = seg
    j = _index(seg, i, bool(rest))
    here: Expr = Const(0, ctype=INDEX)
    if stride:
        here = (j // Const(VALUES_PER_WORD, ctype=INDEX) if packed else j) * Const(stride, ctype=INDEX)
    return here + wq_role_offset(rest, i // Const(size, ctype=INDEX)) if rest else here


def wq_role_slot(segs: tuple[Seg, ...], i: Expr) -> Expr:
    """dg::wq::Role::slot(i): the packed letter's index % 8 (0 where the role holds no packed letter)."""
    if not segs:
        return _c(0)
    seg, rest = segs[0], segs[1:]
    size, _, _, packed = seg
    here: Expr = (_index(seg, i, bool(rest)) % Const(VALUES_PER_WORD, ctype=INDEX)).as_(INT) if packed else _c(0)
    return here + wq_role_slot(rest, i // Const(size, ctype=INDEX)) if rest else here


def nibble_at(order: str, v: Expr, name: str) -> Expr:
    """nibble<ORDER, SIGNED>(word, v)'s place: v (linear), or (v & 1) x 4 + (v >> 1) (AWQ's), v in 0..7."""
    return Let(name, (v % _c(2)) * _c(4) + v // _c(2)) if order == "awq" else v


def integer_access(views: ProblemViews, q: QuantView, ident: str, text: str, ranges: tuple[Range, ...],
                   count: Expr, k: Expr, n: Expr, names: dict[str, str]) -> Access:
    """integer_at<R>(p, k, n) of `q` (B or 4-bit / byte zero points): a byte at the Roles' offset, a word there and
    the place of its Roles' slot in the view's order, or the dg layout's word and place of (k, n)."""
    N, K = _c(views.n, "T::N", INDEX), _c(views.k, "T::K", INDEX)
    logical, extent = {"k": k, "n": n}, {"k": K, "n": N}
    seg_k, seg_n = wq_segments(views, "k", q), wq_segments(views, "n", q)
    if q.packing == "dg":
        k_chunks = _c(-(-views.k // 64), "R::K_CHUNKS", INDEX)
        c16, c64, c8 = (Const(v, ctype=INDEX) for v in (16, 64, 8))
        c4, c2 = Const(4, ctype=INDEX), Const(2, ctype=INDEX)
        lane = Let("lane", c4 * (n % c8) + (k % c64) // c16, INDEX)
        word = Let(names["dg"], ((n // c16) * k_chunks + k // c64) * Const(128, ctype=INDEX) + c4 * lane
                   + (k % c16) // c4, INDEX)
        at = Let("dg_at", ((n % c16) // c8 + c2 * ((k % c4) // c2) + c4 * (k % c2)).as_(INT))
        return Access(ident, text, q.name, "load", ranges, count, word, 1, logical, extent, place=at)
    if q.packing is not None:
        word = Let(names["word"], wq_role_offset(seg_k, k) + wq_role_offset(seg_n, n), INDEX)
        v = Let(names["v"], wq_role_slot(seg_k, k) + wq_role_slot(seg_n, n))
        return Access(ident, text, q.name, "load", ranges, count, word, 1, logical, extent,
                      place=nibble_at(q.packing, v, names["at"]))
    address = Let(names["byte"], wq_role_offset(seg_k, k) + wq_role_offset(seg_n, n), INDEX)
    return Access(ident, text, q.name, "load", ranges, count, address, 1, logical, extent)


def models(views: ProblemViews, plan: WqPlan, name: str) -> list[KernelModel]:
    assert views.batch == 1, "the wq family takes no batch (its gate)"
    rows = rows_of(views)
    return [_model(views, plan, rows, f"{name} [wq: {plan.cols} columns x {plan.rows} rows a block, K over "
                                      f"{plan.ksplit} thread rows]")]


def _model(views: ProblemViews, plan: WqPlan, rows: Rows, kernel: str) -> KernelModel:
    N, K, M = _c(views.n, "T::N", INDEX), _c(views.k, "T::K", INDEX), rows.M
    cols, mt = _c(plan.cols, "T::COLS"), _c(plan.rows, "T::MT")
    threads, tiles_n = _c(plan.threads, "T::THREADS"), _c(plan.tiles_n, "T::TILES_N")
    # The grid: TILES_N x ceil(M / MT) blocks (launch()).
    tiles: Expr = (_c(plan.blocks, "tiles") if not rows.param else
                   Let("tiles", Const(plan.tiles_n, ctype=INDEX) * ((M + Const(plan.rows - 1, ctype=INDEX))
                                                                     // Const(plan.rows, ctype=INDEX)), INDEX))
    block_range = Range(BLOCK, _c(0), tiles)
    thread_range = Range(THREAD, _c(0), threads)
    col, row = Let("col", THREAD % cols), Let("row", THREAD // cols)
    n0 = Let("n0", (BLOCK % tiles_n).as_(INDEX) * _c(plan.cols, "T::COLS", INDEX), INDEX)
    m0 = Let("m0", (BLOCK // tiles_n).as_(INDEX) * _c(plan.rows, "T::MT", INDEX), INDEX)
    n = Let("n", n0 + col.as_(INDEX), INDEX)
    it = Var("i")
    iterations = -(-views.k // plan.ksplit)
    k = Let("k", row.as_(INDEX) + it.as_(INDEX) * _c(plan.ksplit, "T::KSPLIT", INDEX), INDEX)
    loop = (*rows.param, block_range, thread_range, Range(it, _c(0), _c(iterations, "iterations")))
    in_loop = all_of(Cmp("<", n, N), Cmp("<", k, K))
    once = Ite(in_loop, _c(1), _c(0))
    quant = quant_views(views)

    accesses: list[Access] = [
        integer_access(views, quant["B"], "b_weight", f"B: the weight at (k, n) ({_what(quant['B'])})", loop, once,
                       k, n, {"dg": "B_dg_offset", "word": "B_word_offset", "v": "v", "at": "at",
                              "byte": "B_offset"}),
        _element(views, quant["B_scales"], "scale", "the scale of the group holding (k, n)", loop, once, k, n,
                 "S_offset"),
    ]
    zeros = quant.get("B_zeros")
    if zeros is not None:
        if zeros.view.dtype in ("f16", "bf16", "f32"):
            accesses.append(_element(views, zeros, "zero", "the zero point of the group holding (k, n)", loop, once,
                                     k, n, "Z_offset"))
        else:
            accesses.append(integer_access(views, zeros, "zero", f"B_zeros: the zero point of the group holding "
                                           f"(k, n) ({_what(zeros)})", loop, once, k, n,
                                           {"dg": "Z_dg_offset", "word": "Z_word_offset", "v": "z_v", "at": "z_at",
                                            "byte": "Z_byte_offset"}))
    r = Var("r")
    gm_a = m0 + r.as_(INDEX)
    a_offset = Let("A_offset", role_offset(segments(views, "A", "k"), k) + role_offset(segments(views, "A", "m"), gm_a),
                   INDEX)
    accesses.append(Access("a_row", "A: its element at (m0 + r, k) for each row r of the tile below M", "A", "load",
                           (*loop, Range(r, _c(0), mt)), Ite(all_of(in_loop, Cmp("<", gm_a, M)), _c(1), _c(0)),
                           a_offset, 1, {"m": gm_a, "k": k}, {"m": M, "k": K}))

    # The store: thread t (+ THREADS j) of the block at (m0 + t / COLS, n0 + t % COLS), T::store's own guard.
    j = Var("j")
    per_thread = -(-(plan.rows * plan.cols) // plan.threads)
    store_ranges = (*rows.param, block_range, thread_range, Range(j, _c(0), _c(per_thread)))
    t = Let("t", THREAD + j * threads)
    rr, cc = Let("r", t // cols), Let("c", t % cols)
    gm, gn = Let("gm", m0 + rr.as_(INDEX), INDEX), Let("gn", n0 + cc.as_(INDEX), INDEX)
    walked = Cmp("<", t, _c(plan.rows * plan.cols, "T::MT * T::COLS"))
    stored = all_of(walked, Cmp("<", gm, M), Cmp("<", gn, N))
    accesses += epilogue_accesses(views, rows, _c(0, ctype=INDEX), store_ranges, gm, gn, Ite(stored, _c(1), _c(0)),
                                  always=(t,))
    y_m, y_n = Var("out_m", INDEX), Var("out_n", INDEX)
    slot = (y_m % plan.rows) * plan.cols + y_n % plan.cols
    once_store = Bijection("store_once", f"the store: (block, thread, j) onto {views.spec.output.name}'s {views.m} x "
                           f"{views.n} elements, each once (none past M or N)", "written-once",
                           store_ranges[len(rows.param):], stored, (gm, gn),
                           (Range(y_m, _c(0), M), Range(y_n, _c(0), N)),
                           {"block": (y_m // plan.rows) * plan.tiles_n + y_n // plan.cols,
                            "thread": slot % plan.threads, "j": slot // plan.threads},
                           params=rows.param)

    reach: dict[str, Reach] = {a.operand: operand_reach(views, a.operand, rows.rows) for a in accesses
                               if a.operand not in quant}
    reach.update({name: quant_reach_of(views, name) for name in quant})
    return KernelModel(kernel, "wq", plan.index_type, reach, tuple(accesses),
                       (once_store, _k_cover(views, plan), _partial_slots(plan)),
                       (_partial_column(plan), _grid_fits(plan, rows, tiles)), trusted=TRUSTED)


def _what(q: QuantView) -> str:
    if q.packing == "dg":
        return "the dg layout's word and place of (k, n)"
    if q.packing is not None:
        return f"a word of eight along '{q.view.packing.along}', {q.packing} order"  # type: ignore[union-attr]
    return f"a byte ({q.view.dtype})"


def _element(views: ProblemViews, q: QuantView, ident: str, text: str, ranges: tuple[Range, ...], count: Expr,
             k: Expr, n: Expr, name: str) -> Access:
    """A float of a view over B's blocks at its Roles' offset of (k, n)."""
    address = Let(name, wq_role_offset(wq_segments(views, "k", q), k) + wq_role_offset(wq_segments(views, "n", q), n),
                  INDEX)
    return Access(ident, f"{q.name}: {text}", q.name, "load", ranges, count, address, 1, {"k": k, "n": n},
                  {"k": _c(views.k, "T::K", INDEX), "n": _c(views.n, "T::N", INDEX)})


def _k_cover(views: ProblemViews, plan: WqPlan) -> Bijection:
    """A column's sum: (thread row s, iteration i) with k = s + i KSPLIT < K onto K, each k once."""
    s, i, y = Var("row"), Var("i"), Var("out_k", INDEX)
    iterations = -(-views.k // plan.ksplit)
    k = s + i * plan.ksplit
    return Bijection("k_cover", f"a column's sum: (thread row, iteration) covers K = {views.k} once", "full-k",
                     (Range(s, _c(0), _c(plan.ksplit)), Range(i, _c(0), _c(iterations))), Cmp("<", k, _c(views.k)),
                     (k,), (Range(y, _c(0), _c(views.k)),), {"row": y % plan.ksplit, "i": y // plan.ksplit})


def _partial_slots(plan: WqPlan) -> Bijection:
    """partial[row][r][col] = acc[r]: (thread, r) fills each of the KSPLIT x MT x COLS slots once."""
    r = Var("r")
    s_, r_, c_ = Var("slot_row"), Var("slot_r"), Var("slot_col")
    return Bijection("partial_slots", "the partial sums: (thread, r) fill each (thread row, row, column) slot of "
                     "partial once", "full-k",
                     (Range(THREAD, _c(0), _c(plan.threads)), Range(r, _c(0), _c(plan.rows))), TRUE,
                     (THREAD // plan.cols, r, THREAD % plan.cols),
                     (Range(s_, _c(0), _c(plan.ksplit)), Range(r_, _c(0), _c(plan.rows)),
                      Range(c_, _c(0), _c(plan.cols))),
                     {"thread": s_ * plan.cols + c_, "r": r_})


def _partial_column(plan: WqPlan) -> Fact:
    """The sum at t adds partial[s][t / COLS][t % COLS] over s: slot (s, r, c) was written by thread s COLS + c, whose
    column is c (its n is n0 + c, the column the sum is stored at) and whose thread row is s."""
    s, c = Var("s"), Var("c")
    writer = s * plan.cols + c
    return Fact("partial_column", "full-k", "the partial slot (s, r, c) the store's sum reads holds thread (row s, "
                "column c)'s sums: the column it stores", (Range(s, _c(0), _c(plan.ksplit)),
                                                          Range(c, _c(0), _c(plan.cols))), TRUE,
                all_of(Cmp("==", writer % plan.cols, c), Cmp("==", writer // plan.cols, s),
                       Cmp("<", writer, _c(plan.threads))))


def _grid_fits(plan: WqPlan, rows: Rows, tiles: Expr) -> Fact:
    """launch()'s block count, TILES_N x ceil(M / MT), is a grid dimension (unsigned) and blockIdx.x an int here."""
    return Fact("grid_fits_int", "64-bit", "the grid's block count TILES_N x ceil(M / MT) fits 31 bits", rows.param,
                TRUE, all_of(Cmp("<=", _c(1), tiles), Cmp("<=", tiles, _c(2**31 - 1))))


TRUSTED = ("the PTX semantics of the loads (__ldg) and the shift-and-mask of nibble (a place p of a word is its bits "
           "4p .. 4p + 3) and nvcc and ptxas",
           "the shared-memory side beyond its indices: __syncthreads orders the partial sums' writes before the reads",
           "the launch: blockIdx.x below TILES_N x ceil(M / MT), threadIdx.x below THREADS, a run-time M within its "
           "bucket's range")
