"""The `dot` family's index maps as data (pure): dg/dot.cuh's kernel for one plan (M = N = 1, blocks along K), as a
`KernelModel` per instantiation the launcher can take: the wide loads where both view pointers pass its 16-byte check
(where it checks), the promised ones, and with GROUPS > 1 the finish kernel.

Block b: output (batch index) tile = b / GROUPS, K slice group = b % GROUPS, [k0, k0 + k_len). Thread t's chunk u of
iteration x is CH consecutive k at kk = t * CH + x * STEP * UNROLL + u * STEP of the slice: whole (VEC-element loads,
or element loads), or element by element at the slice's end, zero past it. One group: thread 0 stores C; more: the
block's sum goes to partials[b] ([output][group]) and finish adds an output's GROUPS sums and stores it.

Each intermediate is a `Let` named as the header declares it; `SPELLED` lists the header lines where the model
resolves a compile-time branch or a loop's variable."""

from __future__ import annotations

from dgemm_cli.families.cta.index import epilogue_accesses, rows_of
from dgemm_cli.families.dot import DotPlan
from dgemm_cli.formal.expr import INDEX, TRUE, Cmp, Const, Expr, Ite, Let, Min, Not, Var, all_of
from dgemm_cli.formal.expr import const as _c
from dgemm_cli.formal.model import BLOCK, LANE, THREAD, Access, Bijection, KernelModel, Range, Reach
from dgemm_cli.formal.views import operand_reach, role_offset, segments
from dgemm_cli.views import ProblemViews

HEADERS = ("dg/dot.cuh",)
SCRATCH = "partials"
CHECK_BYTES = 16  # the launcher's check of both view pointers for the wide loads

SPELLED = {
    "tile": "const int tile = int(blockIdx.x) / T::GROUPS, group = int(blockIdx.x) % T::GROUPS;",
    "group": "const int tile = int(blockIdx.x) / T::GROUPS, group = int(blockIdx.x) % T::GROUPS;",
    "k_len": "const index_t k_len = min(index_t(T::K_SLICE), T::K - k0);  // >= 1: the plan leaves no slice empty",
    "kb": "for (index_t kb = index_t(threadIdx.x) * CH; kb < k_len; kb += STEP * UNROLL) {",
    "kk": "load_chunk<T, A_t, typename T::A_view, VA>(a[u], A, k0, kb + u * STEP, k_len);",
    "g": "for (int g = int(threadIdx.x); g < T::GROUPS; g += T::FINISH_THREADS) v += partials[",
}




def models(views: ProblemViews, plan: DotPlan, name: str) -> list[KernelModel]:
    variants = [(plan.vec_aligned, CHECK_BYTES)] if plan.runtime_dispatch else []
    variants.append((plan.vec, 0))
    out = []
    for vec, checked in variants:
        label = "wide loads (pointers checked)" if checked else "primary" if not plan.runtime_dispatch else \
            "promised loads (pointer check failed)"
        out.append(_kernel(views, plan, vec, checked, f"{name} [{label}: A x{vec['A']}, B x{vec['B']}]"))
    if plan.groups > 1:
        out.append(_finish(views, plan, name))
    return out


def _batch(views: ProblemViews, operand: str, tile: Expr) -> Expr:
    return role_offset(segments(views, operand, "batch"), tile)


def _logical(views: ProblemViews, tile: Expr, k: Expr, k_end: Expr) -> tuple[dict, dict]:
    if views.batch > 1:
        return {"batch": tile, "k": k}, {"batch": _c(views.batch, "T::BATCH", INDEX), "k": k_end}
    return {"k": k}, {"k": k_end}


def _kernel(views: ProblemViews, plan: DotPlan, vec: dict[str, int], checked: int, kernel: str) -> KernelModel:
    G = plan.groups
    threads, ch, unroll = plan.threads, plan.chunk, plan.unroll
    step = threads * ch
    tile = Let("tile", BLOCK // _c(G, "T::GROUPS"))
    group = Let("group", BLOCK % _c(G, "T::GROUPS"))
    k_slice = _c(plan.k_slice, "T::K_SLICE", INDEX)
    k0 = Let("k0", group.as_(INDEX) * k_slice, INDEX)
    k_len = Let("k_len", Min(k_slice, _c(views.k, "T::K", INDEX) - k0, INDEX), INDEX)
    x, u, v, e = Var("x"), Var("u"), Var("v"), Var("e")
    rounds = -(-plan.k_slice // (step * unroll))
    kb = Let("kb", THREAD.as_(INDEX) * _c(ch, "CH", INDEX) + x * _c(step * unroll, "STEP * UNROLL", INDEX), INDEX)
    kk = Let("kk", kb + u * _c(step, "STEP", INDEX), INDEX)
    block_range = Range(BLOCK, _c(0), _c(plan.blocks, "Grid<T>::BLOCKS"))
    base = (block_range, Range(THREAD, _c(0), _c(threads, "T::THREADS")), Range(x, _c(0), _c(rounds)),
            Range(u, _c(0), _c(unroll, "UNROLL")))
    in_loop = Cmp("<", kb, k_len)
    whole = Cmp("<=", kk + ch, k_len)
    slice_end = k0 + k_len
    accesses: list[Access] = []
    reach: dict[str, Reach] = {}
    for x_op in ("A", "B"):
        lo = x_op.lower()
        at = _batch(views, x_op, tile)
        w = vec[x_op]
        k_seg = segments(views, x_op, "k")
        if w > 1:
            lg, ext = _logical(views, tile, k0 + kk + v * w + LANE, slice_end)
            accesses.append(Access(f"{lo}_vec{w}", f"{x_op}: a whole chunk, {w}-element loads", x_op, "load",
                                   (*base, Range(v, _c(0), _c(ch // w))), Ite(all_of(in_loop, whole), _c(w), _c(0)),
                                   at + role_offset(k_seg, k0 + kk + v * w), w, lg, ext, aligned=w))
        else:
            lg, ext = _logical(views, tile, k0 + kk + e, slice_end)
            accesses.append(Access(f"{lo}_whole", f"{x_op}: a whole chunk, element loads", x_op, "load",
                                   (*base, Range(e, _c(0), _c(ch, "CH"))), Ite(all_of(in_loop, whole), _c(1), _c(0)),
                                   at + role_offset(k_seg, k0 + kk + e), 1, lg, ext))
        lg, ext = _logical(views, tile, k0 + kk + e, slice_end)
        accesses.append(Access(f"{lo}_tail", f"{x_op}: a chunk at the slice's end, element by element, zero past it",
                               x_op, "load", (*base, Range(e, _c(0), _c(ch, "CH"))),
                               Ite(all_of(in_loop, Not(whole), Cmp("<", kk + e, k_len)), _c(1), _c(0)),
                               at + role_offset(k_seg, k0 + kk + e), 1, lg, ext, zero_fill=True,
                               slot=all_of(in_loop, Not(whole))))
        reach[x_op] = operand_reach(views, x_op, None, checked)
    # Full K: (group, thread, x, u, e) onto the K of an output, each k once.
    y = Var("out_k", INDEX)
    gv, tv = Var("group"), Var("thread")
    kk_v = tv * ch + x * (step * unroll) + u * step
    k_len_v = Min(_c(plan.k_slice), _c(views.k) - gv * plan.k_slice)
    off = y % plan.k_slice
    cover = Bijection("k_cover", f"an output's sum: (group, thread, iteration, u, element) covers K = {views.k} once",
                      "full-k", (Range(gv, _c(0), _c(G)), Range(tv, _c(0), _c(threads)), Range(x, _c(0), _c(rounds)),
                                 Range(u, _c(0), _c(unroll)), Range(e, _c(0), _c(ch))),
                      all_of(Cmp("<", tv * ch + x * (step * unroll), k_len_v), Cmp("<", kk_v + e, k_len_v)),
                      (gv * plan.k_slice + kk_v + e,), (Range(y, _c(0), _c(views.k)),),
                      {"group": y // plan.k_slice, "thread": (off // ch) % threads,
                       "u": (off // ch // threads) % unroll, "x": off // ch // (threads * unroll), "e": off % ch})
    bijections = [cover]
    if G == 1:
        stores, once = _store(views, plan, (block_range,), tile, "the block's sum: thread 0 stores its output")
        accesses.extend(stores)
        bijections.append(once)
        for a in stores:
            reach[a.operand] = operand_reach(views, a.operand, None)
    else:
        elems = Const(plan.blocks - 1, ctype=INDEX)
        accesses.append(Access("partial_store", "the scratch buffer: thread 0 writes the block's sum to partials[b]",
                               SCRATCH, "store", (block_range,), _c(1), BLOCK.as_(INDEX), 1,
                               {"tile": tile, "group": group}, {"tile": _c(plan.tiles), "group": _c(G)},
                               reference=tile.as_(INDEX) * G + group))
        reach[SCRATCH] = Reach(SCRATCH, Const(0, ctype=INDEX), elems, 1, 0)
        y_t, y_g = Var("slot_tile"), Var("slot_group")
        bijections.append(Bijection("slot_once", "the blocks' sums: blockIdx.x onto the scratch slots (output, group), "
                                    "each once", "written-once", (block_range,), TRUE, (tile, group),
                                    (Range(y_t, _c(0), _c(plan.tiles)), Range(y_g, _c(0), _c(G))),
                                    {"block": y_t * G + y_g}))
    return KernelModel(kernel, "dot", plan.index_type, reach, tuple(accesses), tuple(bijections), trusted=TRUSTED)


def _store(views: ProblemViews, plan: DotPlan, ranges: tuple[Range, ...], tile: Expr,
           text: str) -> tuple[tuple[Access, ...], Bijection]:
    """T::store(C, 0, 0, sum, ...) by thread 0 of each block, C moved to the block's output; the blocks onto the
    outputs, each once."""
    zero = Const(0, ctype=INDEX)
    stores = epilogue_accesses(views, rows_of(views), tile, ranges, zero, zero, _c(1))
    y_t = Var("out_batch")
    once = Bijection("store_once", f"{text}: the blocks onto the {plan.tiles} output(s), each once", "written-once",
                     ranges, TRUE, (tile,), (Range(y_t, _c(0), _c(plan.tiles)),), {"block": y_t * plan.groups})
    return stores, once


def _finish(views: ProblemViews, plan: DotPlan, name: str) -> KernelModel:
    """finish<T>: block t, thread i reads the sums at g = i, i + FINISH_THREADS, ... of output t; thread 0 stores."""
    G, ft = plan.groups, plan.finish_threads
    j = Var("j")
    g = Let("g", THREAD + j * _c(ft, "T::FINISH_THREADS"))
    block_range = Range(BLOCK, _c(0), _c(plan.tiles, "T::TILES"))
    ranges = (block_range, Range(THREAD, _c(0), _c(ft, "T::FINISH_THREADS")), Range(j, _c(0), _c(-(-G // ft))))
    read = Access("partial_load", "the scratch buffer: finish reads output t's GROUPS sums", SCRATCH, "load", ranges,
                  Ite(Cmp("<", g, _c(G, "T::GROUPS")), _c(1), _c(0)), BLOCK.as_(INDEX) * G + g, 1,
                  {"tile": BLOCK, "group": g}, {"tile": _c(plan.tiles), "group": _c(G)},
                  reference=BLOCK.as_(INDEX) * G + g)
    y_t, y_g = Var("slot_tile"), Var("slot_group")
    read_once = Bijection("slot_read_once", "finish: (block, thread, j) onto the scratch slots (output, group), each "
                          "read once", "full-k", ranges, Cmp("<", g, _c(G)), (BLOCK, g),
                          (Range(y_t, _c(0), _c(plan.tiles)), Range(y_g, _c(0), _c(G))),
                          {"block": y_t, "thread": y_g % ft, "j": y_g // ft})
    zero = Const(0, ctype=INDEX)
    stores = epilogue_accesses(views, rows_of(views), BLOCK, (block_range,), zero, zero, _c(1))
    y_b = Var("out_batch")
    once = Bijection("store_once", f"finish: the blocks onto the {plan.tiles} output(s), each once", "written-once",
                     (block_range,), TRUE, (BLOCK,), (Range(y_b, _c(0), _c(plan.tiles)),), {"block": y_b})
    reach = {SCRATCH: Reach(SCRATCH, Const(0, ctype=INDEX), Const(plan.blocks - 1, ctype=INDEX), 1, 0),
             **{a.operand: operand_reach(views, a.operand, None) for a in stores}}
    return KernelModel(f"{name} [finish: the {G} groups' sums]", "dot", plan.index_type, reach, (read, *stores),
                       (read_once, once), trusted=TRUSTED)


TRUSTED = ("the PTX semantics of the vector loads (__ldg) and nvcc and ptxas",
           "the register side: each thread's UNROLL accumulators and the FMAs over its loaded chunks",
           "block_sum: the warp shuffles (a fixed tree) and the warps' sums in shared memory, valid in thread 0",
           "the scratch buffer's allocation (cudaMallocAsync of scratch_bytes) and the dependent launch: finish reads "
           "the sums after the first kernel has completed")
