"""The `cpu` family's index maps as data (pure): dg/cpu_gemm.hpp's engine for one plan, as `KernelModel`s.

Per call the engine builds each role's scatter vector in each slot that uses it (`role_offsets`: index i of the role
in mixed radix over the role's segments, innermost fastest, each digit times the segment's stride in that slot, the
outermost digit unbounded; `formal.views.role_offset` is that closed form) and addresses every global element through
them. The models state the addresses it forms, in the header's own names, each part once where it is shared:

- **scatter tables**: one step of `role_offsets`' loop (the digits and the offset it carries from index i to i + 1)
  takes the closed form at i to the closed form at i + 1, for every role of two or more segments and every slot whose
  table the Problem builds; with out[0] = 0, every entry is the closed form the other models address through.
- **packing** (`pack_panel<width>`, called for A's and B's micro-panels whatever the micro-tile and orientation): the
  gather src[line[l] + step[k]] of src = the operand's batch base (in bounds, the element at (first + l, pc + k),
  lines past the role's end left zero, 64-bit), for any panel origin `first` inside the role, lines = min(width,
  extent - first), any width, over the pc loop's kc blocks (bl.kc symbolic); the contiguous-lines copy
  src[line[0] + step[k] + l] and the read along contiguous k src[line[l] + step[0] + k] at the gather's address
  (`*_is_gather`), each under the instance of the run-time `is_contiguous` check that picks it; and the pc loop:
  each output's sum takes every k once, finished at the last block only.
- **finish_block** (called by every path): the output's store, C's read for beta and the epilogue's reads of output
  (i0 + r, j0 + c) of any block inside the output one at a time (start[s] + step_at[s][step0 + q]), the lines along
  m or along n; a run's output q (start[s] + q, where every out slot steps by one along the line) at the one-output
  address of step q0 + q (`*_is_one`); and each walk (l, run, q) onto the block's rows x cols once.
- **blocked path** (`gemm_one_batch`), one model per micro-tile kMR x kNR of the ISAs the header compiles for
  (`cost.MICRO_TILES`) and per orientation the engine takes over the rows (C^T = B^T A^T where the output (kLeadSlot)
  steps by one along m and not along n): the call sites' arguments meet packing's and finish_block's ranges, the map
  (batch, it, jt, r, c) onto the product's elements of the column block [jc, jc + nc) is one-to-one and onto, and the
  jc and MC-block loops tile their ranges.
- **small-M path** (`small_m_gemm`, where m <= kSmallM and B's n or k scatter vector is contiguous, decided here over
  the whole table as the engine decides it): A's rows gathered, B's rows streamed (`small_m_rows`) or its columns
  dotted (`small_m_dots`), and finish_block's arguments for each thread's column share.

Composed: each output element is stored once (the tile map, then finish_block's walk) at its own element (the stores'
element lemmas), and its sum covers every k once (the pc loop, and each packed panel slot (k, l) holds the element at
(first + l, pc + k)). The block sizes KC and NC, the thread shares, the MC blocks and the rows sized at run time are
symbolic, each over the range the engine guarantees; pinned sizes (the plan's `kc`, `nc`) are the values
`blocking_for` derives from them. What is trusted is `TRUSTED`; `SPELLED` lists the header line that declares each
intermediate the model names (tests/test_formal_cpu.py checks the header still holds each)."""

from __future__ import annotations

from dataclasses import dataclass

from dgemm_cli.families.cpu import CpuPlan, engine_paths, rows_ranges
from dgemm_cli.families.cpu.cost import MICRO_TILES
from dgemm_cli.formal.expr import INDEX, INT, TRUE, Cmp, Const, Expr, Ite, Let, Min, Not, Or, Pred, Var, all_of
from dgemm_cli.formal.expr import const as _c
from dgemm_cli.formal.model import Access, Bijection, Fact, KernelModel, Range, Reach, reach_of, reference_offset
from dgemm_cli.formal.views import role_offset, segments
from dgemm_cli.views import ProblemViews

HEADERS = ("dg/cpu_gemm.hpp", "dg/cpu_types.hpp")
K_RUN = 64  # dg::cpu::kRun: the longest run finish_run is handed
CHUNK = 4096  # small_m_gemm's `chunk`: the columns one call of small_m_rows takes
UNIT = 16  # small_m_gemm's `unit`: the column shares are multiples of it
WIDEST = max(max(t) for t in MICRO_TILES.values())  # the widest micro-panel (pack_panel's `width`)
# dg::cpu::Slot of each operand, as the traits' Shape and finish_run name them.
SLOT = {"A": "kA", "B": "kB", "C": "kC", "D": "kD", "bias": "kBias", "scale": "kScale", "residual": "kResidual"}

# The header's line that declares each intermediate the model names.
SPELLED = {
    "m_extent": "const Problem p(shape, args.m_extent, Traits::kOutSlots);",
    "m_tiles": "const int64_t m_tiles = ceil_div(p.m, kMR);",
    "bl.nc": "nc = round_up(ceil_div(std::max<int64_t>(n, 1), ceil_div(std::max<int64_t>(n, 1), nc)), kNR);",
    "nc": "const int64_t nc = std::min(bl.nc, p.n - jc);",
    "n_tiles": "const int64_t n_tiles = ceil_div(nc, kNR);",
    "kc": "const int64_t kc = std::min(bl.kc, p.k - pc);",
    "it1": "const int64_t it1 = std::min(tile_hi, it0 + block_tiles);",
    "j": "const int64_t j = jc + jt * kNR;",
    "i": "const int64_t i = it * kMR;",
    "lines": "void pack_panel(float* dst, const T* src, const int64_t* line, int lines, const int64_t* step, "
             "int64_t kc) {",
    "rows": "finish_block<Traits>(args, shape, p, b, it * kMR, std::min<int64_t>(kMR, p.m - it * kMR), j,",
    "cols": "std::min<int64_t>(kNR, p.n - j), sums, kNR, stream);",
    "q0": "for (int64_t q0 = 0; q0 < steps; q0 += kRun) {",
    "run": "const int64_t run = std::min(kRun, steps - q0);",
    "base": "base[s] = shape.offset[s] + p.batch_at[s][b];",
    "start": "if ((out >> s) & 1) start[s] = base[s] + line_at[s][line0 + l] + step_at[s][step0 + q0];",
    "line_start": "if ((out >> s) & 1) start[s] = base[s] + line_at[s][line0 + l];",
    "at": "if ((out >> s) & 1) at[s] = start[s] + step_at[s][step0 + q];",
    "j0": "for (int64_t j0 = 0; j0 < p.n; j0 += chunk)",
    "chunk_cols": "std::min(chunk, p.n - j0), mine + j0, n_pad);",
    "share": "const int64_t share = round_up(ceil_div(p.n, team), unit);",
    "j_lo": "const int64_t j_lo = std::min(p.n, share * tid), j_hi = std::min(p.n, j_lo + share);",
    "j_hi": "const int64_t j_lo = std::min(p.n, share * tid), j_hi = std::min(p.n, j_lo + share);",
}
# The header's lines of the reads and writes the model states.
ADDRESS_LINES = (
    "for (int l = 0; l < lines; ++l) dst[k * width + l] = to_float(src[line[l] + step[k]]);",
    "for (int64_t k = 0; k < kc; ++k) convert_span(src + line[0] + step[k], dst + k * width, width);",
    "const T* s = src + line[l] + step[0];",
    "for (int64_t k = 0; k < kc; ++k) dst[k * width + l] = to_float(s[k]);",
    "const Lhs* a = lhs + p.batch_at[kA][b];",
    "const Rhs* bp = rhs + p.batch_at[kB][b];",
    "const A_t* a = static_cast<const A_t*>(args.ptr[kA]) + shape.offset[kA];",
    "a_rows[r * p.k + kk] = to_float(a[p.m_at[kA][r] + p.k_at[kA][kk]]);",
    "small_m_rows<M>(a_rows + k_lo, p.k, k_hi - k_lo, bb + p.n_at[kB][j0], p.k_at[kB] + k_lo,",
    "const T* row0 = b + k_at[kk];",
    "small_m_dots<M>(a_rows, p.k, bb + p.k_at[kB][0], p.n_at[kB] + j_lo, j_hi - j_lo, partials + j_lo, n_pad);",
    "for (int u = 0; u < group; ++u) col[u] = b + n_at[c + u];",
    "T* dst = static_cast<T*>(base) + at;",
    "return to_float(static_cast<const T*>(base)[at]);",
    "r.m_at[kA] = t.n_at[kB];",
    "for (int s = 0; s < kSlots; ++s) std::swap(r.m_at[s], r.n_at[s]);",
)


def _ix(name: str, spelled: str | None = None) -> Var:
    return Var(name, INDEX, spelled)


def _ceil_div(a: Expr, b: int) -> Expr:
    return (a + (b - 1)) // b


def _py_ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _one(cond: Pred) -> Expr:
    return Ite(cond, _c(1), _c(0))


def _implies(a: Pred, b: Pred) -> Pred:
    return Or((Not(a), b))


# ---- the problem as the engine sees it


@dataclass(frozen=True)
class RowsRange:
    """The rows' extent p.m of the untransposed problem: a constant, or m_extent = m x unit over the run-time
    letter's sizes (the entry point refuses a count outside its bucket's range)."""

    extent: Expr
    param: tuple[Range, ...]  # the run-time letter's size, or nothing
    rows: Var | None  # ... as a variable, for the reaches
    lo: int  # the extent's smallest and largest values
    hi: int

    def label(self) -> str:
        return "" if not self.param else f", m {self.lo}..{self.hi}"


def _rows(views: ProblemViews, extents: tuple[int, int] | None = None) -> RowsRange:
    """The rows over the extents lo..hi (every extent the spec allows where not given)."""
    rt = rows_ranges(views)
    if rt is None:
        return RowsRange(_c(views.m, "p.m", INDEX), (), None, views.m, views.m)
    lo, hi, unit = rt
    if extents is not None:
        lo, hi = extents[0] // unit, extents[1] // unit
    rows = _ix("mrows", "m")
    extent = Let("m_extent", rows * _c(unit, "unit", INDEX) if unit > 1 else rows, INDEX)
    return RowsRange(extent, (Range(rows, _c(lo), _c(hi + 1), size=True),), rows, lo * unit, hi * unit)


def out_slots(views: ProblemViews) -> tuple[str, ...]:
    """The operands finish_run addresses (the traits' kOutSlots, as families/cpu/render.py lists them): C (written,
    or read for a beta the caller passes at run time), D, then the epilogue's views."""
    spec = views.spec
    out = ["C", "D"] if spec.D is not None else ["C"]
    return (*out, *(op.name for op in spec.extra_operands if op.name != "D"))


def _segs_inner_first(views: ProblemViews, operand: str, role: str) -> tuple[tuple[int, int], ...]:
    """The role's (size, stride in `operand`) segments, innermost first, as the engine's Role holds them (stride 0
    where the operand lacks the role or is broadcast over it)."""
    return tuple((s.size, dict(s.strides).get(operand, 0)) for s in reversed(views.roles[role].segments))


# ---- addresses


def _offset(views: ProblemViews, operand: str) -> Const:
    return _c(views.spec.operand(operand).offset, f"shape.offset[{SLOT[operand]}]", INDEX)


def _at(views: ProblemViews, operand: str, role: str, i: Expr) -> Expr:
    """The scatter vector's entry p.<role>_at[slot][i]: `role`'s index i in `operand`."""
    return role_offset(segments(views, operand, role), i)


def _held(operand: str) -> tuple[str, ...]:
    """The roles of `operand`'s logical index (each, even of size 1: an index past it is past the view)."""
    return {"A": ("batch", "m", "k"), "B": ("batch", "n", "k")}.get(operand, ("batch", "m", "n"))


def _reference(views: ProblemViews, operand: str, logical: dict[str, Expr]) -> Expr:
    """The element the spec's letters put at `logical`, from the base pointer the C API receives (the view's offset
    plus `reference_offset`): the engine indexes every slot from args.ptr[s] + shape.offset[s]."""
    return _offset(views, operand) + reference_offset(views, operand, logical)


def _reach(views: ProblemViews, operand: str, rows: RowsRange) -> Reach:
    """The view's elements from the base pointer (its offset added); every access moves one element: no alignment."""
    r = reach_of(views, operand, rows.rows, 1, 0)
    off = _offset(views, operand)
    return Reach(operand, off + r.lo, off + r.hi, 1, 0)


def _batch_base(views: ProblemViews, operand: str, b: Expr) -> Expr:
    """shape.offset[s] + p.batch_at[s][b]: where the operand's batch b starts."""
    return _offset(views, operand) + _at(views, operand, "batch", b)


def _access(views: ProblemViews, rows: RowsRange, ident: str, text: str, operand: str, kind: str,
            ranges: tuple[Range, ...], count: Expr, address: Expr, index: dict[str, Expr], zero_fill: bool = False,
            always: tuple[Expr, ...] = ()) -> Access:
    extents = {"batch": _c(views.batch, "p.batch", INDEX), "m": rows.extent, "n": _c(views.n, "p.n", INDEX),
               "k": _c(views.k, "p.k", INDEX)}
    held = _held(operand)
    logical = {r: index[r] for r in held}
    return Access(ident, text, operand, kind, ranges, count, address, 1, logical, {r: extents[r] for r in held},
                  zero_fill=zero_fill, always=always, reference=_reference(views, operand, logical))


def _batch(views: ProblemViews) -> tuple[Expr, tuple[Range, ...]]:
    if views.batch == 1:
        return _c(0, "b", INDEX), ()
    b = _ix("b")
    return b, (Range(b, _c(0), _c(views.batch, "p.batch", INDEX)),)


def _extent(views: ProblemViews, rows: RowsRange, role: str) -> Expr:
    return rows.extent if role == "m" else _c(views.n, "p.n", INDEX)


# ---- the models


def models(views: ProblemViews, plan: CpuPlan, name: str) -> list[KernelModel]:
    """The scatter tables', packing's and finish_block's models, the blocked path's per micro-tile and orientation
    over the rows it serves, and the small-M path's where the engine takes it."""
    paths = engine_paths(views)
    tables = _tables_model(views, f"{name} (cpu: scatter tables)")
    out = [tables] if tables.facts else []  # no role of two segments: every table is i x stride
    if paths.blocked:
        rows = _rows(views, (min(lo for _, lo, _ in paths.blocked), max(hi for _, _, hi in paths.blocked)))
        out.append(_packing_model(views, plan, rows, f"{name} (cpu: pack_panel{rows.label()})"))
    out.append(_finish_model(views, _rows(views), f"{name} (cpu: finish_block)"))
    for transposed, lo, hi in paths.blocked:
        rows = _rows(views, (lo, hi))
        for isa, (mr, nr) in MICRO_TILES.items():
            what = "C^T = B^T A^T" if transposed else "A B"
            out.append(_blocked_model(views, plan, rows, transposed, mr, nr,
                                      f"{name} (cpu {isa} {mr}x{nr}: blocked {what}{rows.label()})"))
    if paths.small is not None:
        assert paths.small_rows is not None
        rows = _rows(views, paths.small_rows)
        how = "rows of B streamed" if paths.small == "n" else "dot products with B's columns"
        out.append(_small_model(views, rows, paths.small, f"{name} (cpu: small-M, {how}{rows.label()})"))
    return out


def _pinned_kc(views: ProblemViews, plan: CpuPlan) -> int | None:
    """blocking_for's bl.kc where the plan pins kc: ceil_div(k, ceil_div(k, pin))."""
    if not plan.kc:
        return None
    k = max(views.k, 1)
    return _py_ceil_div(k, _py_ceil_div(k, plan.kc))


def _pinned_nc(plan: CpuPlan, n: int | None, nr: int) -> int | None:
    """blocking_for's bl.nc where the plan pins nc and the product's columns are a constant."""
    if not plan.nc or n is None:
        return None
    n = max(n, 1)
    nc0 = _py_ceil_div(plan.nc, nr) * nr
    return _py_ceil_div(_py_ceil_div(n, _py_ceil_div(n, nc0)), nr) * nr


def _kc_blocks(views: ProblemViews, plan: CpuPlan) -> tuple[Var, Range, Var, Range, Let]:
    """The pc loop: pc over 0..p.k - 1 by bl.kc (1..p.k: blocking_for balances it over K; or the pinned value), the
    block kc = min(bl.kc, p.k - pc)."""
    K = _c(views.k, "p.k", INDEX)
    pc, KC = _ix("pc"), _ix("bl_kc", "bl.kc")
    pinned = _pinned_kc(views, plan)
    r_kc = Range(KC, _c(pinned or 1), _c(pinned + 1 if pinned else views.k + 1))
    return pc, Range(pc, _c(0), K), KC, r_kc, Let("kc", Min(KC, K - pc, INDEX), INDEX)


def _packing_model(views: ProblemViews, plan: CpuPlan, rows: RowsRange, kernel: str) -> KernelModel:
    """pack_panel<width>(dst, src, line = p.<role>_at[slot] + first, lines, step = p.k_at[slot] + pc, kc), src the
    operand's batch base, for A along m and B along n (whichever slot and width the orientation and micro-tile give
    them): any first inside the role, lines = min(width, extent - first) (the call sites' fact `panel_rows` /
    `panel_cols`), any width; and the pc loop."""
    K = _c(views.k, "p.k", INDEX)
    b, r_b = _batch(views)
    pc, r_pc, KC, r_kc, kc = _kc_blocks(views, plan)
    k, first, width = _ix("k"), _ix("first"), Var("width", INT)
    ln = Var("l", INT)
    accesses, facts = [], []
    for operand, role in (("A", "m"), ("B", "n")):
        E = _extent(views, rows, role)
        lines = Let("lines", Min(width, E - first, INT), INT)
        ranges = (*rows.param, *r_b, Range(first, _c(0), E), Range(width, _c(1), _c(WIDEST + 1)), r_pc, r_kc,
                  Range(k, _c(0), kc), Range(ln, _c(0), width))
        base = _batch_base(views, operand, b)
        li = first + ln.as_(INDEX)
        index = {"batch": b, role: li, "k": pc + k}
        at_line = lambda i, x=operand, r=role: _at(views, x, r, i)  # noqa: E731
        at_k = lambda i, x=operand: _at(views, x, "k", i)  # noqa: E731
        x = operand.lower()
        accesses.append(_access(views, rows, f"{x}_pack", f"{operand}: pack_panel's gather src[line[l] + step[k]] "
                                "(lines past the role's end left zero)", operand, "load", ranges,
                                _one(Cmp("<", ln, lines)), base + at_line(li) + at_k(pc + k), index, zero_fill=True,
                                always=(lines, kc)))
        gather = base + at_line(li) + at_k(pc + k)
        # The contiguous branches: each address is the gather's at the same (l, k), under the instance of the check
        # that picks the branch; the gather's obligations then hold of it.
        whole = all_of(Cmp("==", lines, width), Cmp("==", at_line(li), at_line(first) + ln.as_(INDEX)))
        facts.append(Fact(f"{x}_pack_lines_is_gather", "in-bounds", f"{operand}: pack_panel's copy of contiguous lines "
                          "reads src[line[0] + step[k] + l] (where lines == width and is_contiguous(line, width), at "
                          "l): the gather's element at (l, k), l < lines", ranges, whole,
                          all_of(Cmp("<", ln, lines),
                                 Cmp("==", base + at_line(first) + ln.as_(INDEX) + at_k(pc + k), gather))))
        along = all_of(Cmp("<", ln, lines), Cmp("==", at_k(pc + k), at_k(pc) + k))
        facts.append(Fact(f"{x}_pack_steps_is_gather", "in-bounds", f"{operand}: pack_panel's read along contiguous k "
                          "reads src[line[l] + step[0] + k] (where is_contiguous(step, kc), at k): the gather's "
                          "element at (l, k)", ranges, along, Cmp("==", base + at_line(li) + at_k(pc) + k, gather)))
    last = Cmp("<=", K, pc + kc)
    k_loop = _block_loop("k_blocks", "full-k", "the pc loop: each block [pc, pc + kc) is non-empty, the next starts "
                         "where it ends, the last ends at p.k, and `last` (pc + kc >= p.k) holds at the last block "
                         "only: every output's sum takes each k once and is finished once", pc, K, KC, pc + kc,
                         (r_pc, r_kc), (_implies(last, Cmp("<=", K, pc + KC)), _implies(Cmp("<=", K, pc + KC), last)))
    reach = {a.operand: _reach(views, a.operand, rows) for a in accesses}
    return KernelModel(kernel, "cpu", "long long", reach, tuple(accesses), (), (*facts, k_loop), trusted=TRUSTED)


def _block_loop(ident: str, prop: str, text: str, x: Var, hi: Expr, step: Expr, end: Expr,
                ranges: tuple[Range, ...], extra: tuple[Pred, ...] = ()) -> Fact:
    """`for (x = lo; x < hi; x += step)` with block [x, end): the block is non-empty and below hi, and the next
    iteration starts where it ends, or the loop ends there at hi; by induction the blocks cover lo..hi - 1 once, in
    order."""
    goal = all_of(Cmp("<", x, end), Cmp("<=", end, hi), _implies(Cmp("<", x + step, hi), Cmp("==", end, x + step)),
                  _implies(Cmp("<=", hi, x + step), Cmp("==", end, hi)), *extra)
    return Fact(ident, prop, text, ranges, TRUE, goal)


# ---- finish_block


@dataclass(frozen=True)
class Walk:
    """finish_block's walk of a rows x cols block: line l, run run_i (q0 = run_i x kRun) and q, onto (r, c)."""

    ranges: tuple[Range, ...]
    r: Expr
    c: Expr
    inverse: dict[str, Expr]


def _walk(rows_n: Expr, cols_n: Expr, along_m: bool, runs: bool, r_t: Expr, c_t: Expr
          ) -> tuple[Walk, Var, Var, Expr | None, Expr]:
    """The walk's ranges and its (r, c); `r_t`, `c_t`: a target element's row and column in the block, for the
    inverse. Returns the walk, l, q, q0 (None one output at a time) and the step index along the line."""
    lines, steps = (cols_n, rows_n) if along_m else (rows_n, cols_n)
    ln, q = _ix("l"), _ix("q")
    line_t, step_t = (c_t, r_t) if along_m else (r_t, c_t)
    q0: Expr | None
    if runs:
        R = _ix("run_i", "q0 / kRun")
        q0 = Let("q0", R * _c(K_RUN, "kRun", INDEX), INDEX)
        run = Let("run", Min(_c(K_RUN, "kRun", INDEX), steps - q0, INDEX), INDEX)
        ranges = (Range(ln, _c(0), lines), Range(R, _c(0), _ceil_div(steps, K_RUN)), Range(q, _c(0), run))
        s = q0 + q
        inverse = {"l": line_t, "run_i": step_t // K_RUN, "q": step_t % K_RUN}
    else:
        q0 = None
        ranges = (Range(ln, _c(0), lines), Range(q, _c(0), steps))
        s = q
        inverse = {"l": line_t, "q": step_t}
    r, c = (s, ln) if along_m else (ln, s)
    return Walk(ranges, r, c, inverse), ln, q, q0, s


def _finish_model(views: ProblemViews, rows: RowsRange, kernel: str) -> KernelModel:
    """finish_block(b, i0, rows, j0, cols) over the untransposed tables, for every block inside the output (i0 + rows
    <= p.m, j0 + cols <= p.n: the call sites' facts) and both walk orders: output (i0 + r, j0 + c) of each out slot
    one at a time at start[s] + step_at[s][step0 + q], and in a run at start[s] + q, which is that address at step
    q0 + q where the instances at q0 and q0 + q of the slot's is_contiguous(step_at[s] + step0, steps) hold. The
    transposed product's calls are these at (j0, cols, i0, rows) in the other walk order: transposed() exchanges every
    out slot's m and n tables."""
    b, r_b = _batch(views)
    Em, En = rows.extent, _c(views.n, "p.n", INDEX)
    i0, j0 = _ix("i0"), _ix("j0")
    rows_n, cols_n = _ix("rows"), _ix("cols")
    block = (Range(i0, _c(0), Em), Range(rows_n, _c(1), Em - i0 + 1), Range(j0, _c(0), En),
             Range(cols_n, _c(1), En - j0 + 1))
    pre = (*rows.param, *r_b, *block)
    slots = out_slots(views)
    out = views.spec.output.name
    reads = [x for x in slots if x != out]
    accesses: list[Access] = []
    bijections, facts = [], []
    y_r, y_c = _ix("out_r"), _ix("out_c")
    for along_m in (False, True):
        for runs in (True, False):
            walk, ln, q, q0, s = _walk(rows_n, cols_n, along_m, runs, y_r, y_c)
            line_role, step_role = ("n", "m") if along_m else ("m", "n")
            line0, step0 = (j0, i0) if along_m else (i0, j0)
            ranges = (*pre, *walk.ranges)
            index = {"batch": b, "m": i0 + walk.r, "n": j0 + walk.c}
            order = f"lines along {line_role}"
            tag = f"{'run' if runs else 'one'}_{line_role}"
            for x in (*reads, out):
                kind = "store" if x == out else "load"
                what = "store" if kind == "store" else ("read for beta" if x == "C" else "read by the epilogue")
                if x == "C" and kind == "store":
                    what += " (and its read for beta, at the same address)"
                if x not in slots:
                    what += " (C is no out slot: the spec has D and beta 0, but beta is the caller's)"
                if x in slots:
                    base: Expr = Let("base", _batch_base(views, x, b), INDEX)
                    at_line = lambda i, x=x, r=line_role: _at(views, x, r, i)  # noqa: E731
                    at_step = lambda i, x=x, r=step_role: _at(views, x, r, i)  # noqa: E731
                else:  # no out slot: start[kC] and at[kC] keep their initial 0
                    base = _c(0, "start[kC]", INDEX)
                    at_line = at_step = lambda i: _c(0, ctype=INDEX)  # noqa: E731
                line_start = Let("line_start", base + at_line(line0 + ln), INDEX)
                one = Let("at", line_start + at_step(step0 + s), INDEX)  # the one-output address at step s
                if runs:
                    assert q0 is not None
                    start = Let("start", base + at_line(line0 + ln) + at_step(step0 + q0), INDEX)
                    unit = all_of(Cmp("==", at_step(step0 + q0), at_step(step0) + q0),
                                  Cmp("==", at_step(step0 + s), at_step(step0) + s))
                    text = f"{x}: finish_run's {what} of output q of a run ({order}, start[s] + q)"
                    if x in slots:  # the run's address is the one-output walk's at step q0 + q
                        facts.append(Fact(f"{x.lower()}_{kind}_{tag}_is_one", "in-bounds", f"{text}, where every out "
                                          "slot steps by one along the line (is_contiguous at q0 and q0 + q): the "
                                          "one-output address of step q0 + q < steps", ranges, unit,
                                          all_of(Cmp("<", s, rows_n if along_m else cols_n),
                                                 Cmp("==", start + q, one))))
                    else:
                        accesses.append(_access(views, rows, f"{x.lower()}_{kind}_{tag}", text, x, kind, ranges,
                                                _one(unit), start + q, index))
                else:
                    accesses.append(_access(views, rows, f"{x.lower()}_{kind}_{tag}",
                                            f"{x}: finish_run's {what} of one output ({order}, at[s] = start[s] + "
                                            "step_at[s][step0 + q])", x, kind, ranges, _c(1), one, index))
            variant = f"{'runs' if runs else 'one output at a time'}, {order}"
            bijections.append(Bijection(
                f"walk_once_{tag}", f"finish_block's walk ({variant}): (l, {'run, ' if runs else ''}q) onto the "
                "block's rows x cols, each once", "written-once", walk.ranges, TRUE, (walk.r, walk.c),
                (Range(y_r, _c(0), rows_n), Range(y_c, _c(0), cols_n)), walk.inverse,
                params=(*rows.param, Range(rows_n, _c(1), Em + 1), Range(cols_n, _c(1), En + 1))))
    reach = {a.operand: _reach(views, a.operand, rows) for a in accesses}
    return KernelModel(kernel, "cpu", "long long", reach, tuple(accesses), tuple(bijections), tuple(facts),
                       trusted=TRUSTED)


# ---- the blocked path


def _blocked_model(views: ProblemViews, plan: CpuPlan, rows: RowsRange, transposed: bool, mr: int, nr: int,
                   kernel: str) -> KernelModel:
    """gemm_one_batch for one micro-tile: the arguments its calls pass pack_panel and finish_block, the tile map onto
    the product's elements of a column block, and the jc and MC-block loops. The product's rows are p.m (m, or n
    where transposed), its columns p.n."""
    p_m, p_n = (_c(views.n, "p.m", INDEX), rows.extent) if transposed else (rows.extent, _c(views.n, "p.n", INDEX))
    MR, NR = _c(mr, "kMR", INDEX), _c(nr, "kNR", INDEX)
    b, r_b = _batch(views)
    dyn = rows.param
    it, jc, jt = _ix("it"), _ix("jc"), _ix("jt")
    m_tiles = Let("m_tiles", _ceil_div(p_m, mr), INDEX)
    r_it = Range(it, _c(0), m_tiles)
    # bl.nc: a positive multiple of kNR (nc_tiles of them), at most round_up(p.n, kNR), or the pinned value.
    NCT = _ix("nc_tiles", "bl.nc / kNR")
    pin_nc = _pinned_nc(plan, views.n if not transposed else None if rows.param else views.m, nr)
    r_nct = (Range(NCT, _c(pin_nc // nr), _c(pin_nc // nr + 1)) if pin_nc else
             Range(NCT, _c(1), _ceil_div(p_n, nr) + 1))
    bl_nc = Let("bl.nc", NCT * NR, INDEX)
    nc = Let("nc", Min(bl_nc, p_n - jc, INDEX), INDEX)
    n_tiles = Let("n_tiles", _ceil_div(nc, nr), INDEX)
    r_jc, r_jt = Range(jc, _c(0), p_n), Range(jt, _c(0), n_tiles)
    j = Let("j", jc + jt * NR, INDEX)
    i = Let("i", it * MR, INDEX)
    rows_n = Let("rows", Min(MR, p_m - i, INDEX), INDEX)
    cols_n = Let("cols", Min(NR, p_n - j, INDEX), INDEX)
    facts = [
        Fact("panel_rows", "in-bounds", "a row micro-panel (it < m_tiles): pack_panel<kMR>'s first = i = it x kMR "
             "lies inside the product's rows, and finish_block's i0 = i, rows = min(kMR, p.m - i) is a block inside "
             "them", (*dyn, r_it), TRUE,
             all_of(Cmp("<=", _c(0), i), Cmp("<", i, p_m), Cmp("<=", _c(1), rows_n), Cmp("<=", i + rows_n, p_m))),
        Fact("panel_cols", "in-bounds", "a column micro-panel (jt < n_tiles of the block at jc): pack_panel<kNR>'s "
             "first = j = jc + jt x kNR lies inside the product's columns, and finish_block's j0 = j, cols = "
             "min(kNR, p.n - j) is a block inside them", (*dyn, r_jc, r_nct, r_jt), TRUE,
             all_of(Cmp("<=", _c(0), j), Cmp("<", j, p_n), Cmp("<=", _c(1), cols_n), Cmp("<=", j + cols_n, p_n))),
        _block_loop("n_blocks", "written-once", "the jc loop: each column block [jc, jc + nc) is non-empty, the next "
                    "starts where it ends, the last ends at p.n, and a block that starts at a column tile (a multiple "
                    "of kNR) is followed by one that does", jc, p_n, bl_nc, jc + nc, (*dyn, r_jc, r_nct),
                    (_implies(Cmp("==", jc % nr, _c(0)), Cmp("==", (jc + bl_nc) % nr, _c(0))),)),
    ]
    lo, hi, it0, bt = _ix("tile_lo"), _ix("tile_hi"), _ix("it0"), _ix("block_tiles")
    it1 = Let("it1", Min(hi, it0 + bt, INDEX), INDEX)
    facts.append(_block_loop("m_blocks", "written-once", "the it0 loop over a thread's micro-panels [tile_lo, "
                             "tile_hi): each MC block [it0, it1) is non-empty, the next starts where it ends, the "
                             "last ends at tile_hi", it0, hi, bt, it1,
                             (*dyn, Range(lo, _c(0), m_tiles + 1), Range(hi, lo, m_tiles + 1), Range(it0, lo, hi),
                              Range(bt, _c(1), m_tiles + 1))))
    # tile_step(it, jt) at the last kc block: finish_block(b, i, rows, j, cols); its walk covers r < rows, c < cols.
    r, c = _ix("r"), _ix("c")
    y_b, y_r, y_c = _ix("out_batch"), _ix("out_row"), _ix("out_col")
    target = (Range(y_r, _c(0), p_m), Range(y_c, jc, jc + nc))
    image: tuple[Expr, ...] = (i + r, j + c)
    inverse = {"it": y_r // mr, "r": y_r % mr, "jt": (y_c - jc) // nr, "c": (y_c - jc) % nr}
    if views.batch > 1:
        target, image, inverse = (Range(y_b, _c(0), _c(views.batch, "p.batch", INDEX)), *target), (b, *image), \
            {**inverse, "b": y_b}
    tiles = Bijection("tile_once", "tile_step at the last kc block: (batch, it, jt, r < rows, c < cols) onto the "
                      "product's elements of the column block [jc, jc + nc), each once", "written-once",
                      (*r_b, r_it, r_jt, Range(r, _c(0), rows_n), Range(c, _c(0), cols_n)), TRUE, image, target,
                      inverse, params=(*dyn, r_jc, r_nct))
    return KernelModel(kernel, "cpu", "long long", {}, (), (tiles,), tuple(facts), trusted=TRUSTED)


# ---- the small-M path


def _small_model(views: ProblemViews, rows: RowsRange, direction: str, kernel: str) -> KernelModel:
    """small_m_gemm<M> (M = p.m): A's rows gathered, B's rows streamed (direction n) or its columns dotted (k), and
    finish_block(b, 0, M, j_lo, j_hi - j_lo) over each thread's share of the columns."""
    K, N = _c(views.k, "p.k", INDEX), _c(views.n, "p.n", INDEX)
    b, r_b = _batch(views)
    dyn = rows.param
    r, kk, c = _ix("r"), _ix("kk"), _ix("c")
    accesses = [_access(views, rows, "a_rows", "A: small_m_gemm's gather a[m_at[kA][r] + k_at[kA][kk]] of the M rows "
                        "(each thread its share of k)", "A", "load",
                        (*dyn, *r_b, Range(r, _c(0), rows.extent), Range(kk, _c(0), K)), _c(1),
                        _batch_base(views, "A", b) + _at(views, "A", "m", r) + _at(views, "A", "k", kk),
                        {"batch": b, "m": r, "k": kk})]
    bb = _batch_base(views, "B", b)
    if direction == "n":
        J0 = _ix("j0_i", "j0 / chunk")
        j0 = Let("j0", J0 * _c(CHUNK, "chunk", INDEX), INDEX)
        cols = Let("chunk_cols", Min(_c(CHUNK, "chunk", INDEX), N - j0, INDEX), INDEX)
        ranges = (*dyn, *r_b, Range(J0, _c(0), _c(_py_ceil_div(views.n, CHUNK))), Range(kk, _c(0), K),
                  Range(c, _c(0), cols))
        accesses.append(_access(views, rows, "b_rows", "B: small_m_rows' read row[c], row = b + k_at[kk] from bb + "
                                "n_at[kB][j0] (B steps by one along n)", "B", "load", ranges, _c(1),
                                bb + _at(views, "B", "n", j0) + _at(views, "B", "k", kk) + c,
                                {"batch": b, "n": j0 + c, "k": kk}, always=(cols,)))
    # Each thread's share of the columns: j_lo = min(p.n, share x tid), share a positive multiple of 16 (ceil_div(p.n,
    # team) rounded up), at most round_up(p.n, 16); finish_block runs where j_hi > j_lo.
    j_lo, sh = _ix("j_lo"), _ix("share_units", "share / unit")
    share = Let("share", sh * _c(UNIT, "unit", INDEX), INDEX)
    j_hi = Let("j_hi", Min(N, j_lo + share, INDEX), INDEX)
    r_sh = Range(sh, _c(1), _c(_py_ceil_div(views.n, UNIT) + 1))
    shares = (r_sh, Range(j_lo, _c(0), N))
    if direction == "k":
        ranges = (*dyn, *r_b, *shares, Range(c, _c(0), j_hi - j_lo), Range(kk, _c(0), K))
        accesses.append(_access(views, rows, "b_dots", "B: small_m_dots' read col[u][kk], col[u] = b + n_at[c + u] "
                                "from bb + k_at[kB][0] and n_at[kB] + j_lo (B steps by one along k)", "B", "load",
                                ranges, _c(1),
                                bb + _at(views, "B", "k", _c(0, ctype=INDEX)) + _at(views, "B", "n", j_lo + c) + kk,
                                {"batch": b, "n": j_lo + c, "k": kk}, always=(j_hi,)))
    x = _ix("share_tid", "share * tid")
    lo_t = Min(N, x, INDEX)
    facts = (
        Fact("finish_args", "in-bounds", "finish_block(b, 0, M, j_lo, j_hi - j_lo) where j_hi > j_lo: a block inside "
             "the output (M = p.m rows, j_lo + cols <= p.n, cols >= 1)", (*dyn, *shares), TRUE,
             all_of(Cmp("<=", _c(1), rows.extent), Cmp("<=", _c(1), j_hi - j_lo), Cmp("<=", j_hi, N))),
        Fact("column_shares", "written-once", "the column shares: j_hi of the thread at share x tid is j_lo of the "
             "next (min(p.n, share x (tid + 1))), and j_lo <= j_hi <= p.n", (r_sh, Range(x, _c(0), N + share)), TRUE,
             all_of(Cmp("==", Min(N, lo_t + share, INDEX), Min(N, x + share, INDEX)),
                    Cmp("<=", lo_t, Min(N, lo_t + share, INDEX)), Cmp("<=", Min(N, lo_t + share, INDEX), N))),
    )
    reach = {a.operand: _reach(views, a.operand, rows) for a in accesses}
    return KernelModel(kernel, "cpu", "long long", reach, tuple(accesses), (), facts, trusted=TRUSTED)


# ---- the scatter tables


def _digits(sizes: tuple[int, ...], i: Expr) -> list[Expr]:
    """The mixed-radix digits of i, innermost first, the outermost unbounded (role_offsets' digit[])."""
    out, inner = [], 1
    for pos, size in enumerate(sizes):
        d = i // inner if inner > 1 else i
        out.append(d if pos == len(sizes) - 1 else d % size)
        inner *= size
    return out


def _tables_model(views: ProblemViews, kernel: str) -> KernelModel:
    """role_offsets: one step of its loop (index i to i + 1) takes the digits of i and the closed-form offset at i to
    those of i + 1, for each role of two or more segments and each slot whose table the Problem builds (batch: A, B
    and the out slots; m: A and the out slots; n: B and the out slots; k: A and B)."""
    rows = _rows(views)
    slots = out_slots(views)
    users = {"batch": ("A", "B", *slots), "m": ("A", *slots), "n": ("B", *slots), "k": ("A", "B")}
    extents = {"batch": _c(views.batch, "p.batch", INDEX), "m": rows.extent, "n": _c(views.n, "p.n", INDEX),
               "k": _c(views.k, "p.k", INDEX)}
    facts = []
    i = _ix("i")
    for role, holders in users.items():
        sizes = tuple(s.size for s in reversed(views.roles[role].segments))
        if len(sizes) < 2:
            continue
        ranges = (*(rows.param if role == "m" else ()), Range(i, _c(0), extents[role] - 1))
        now, then = _digits(sizes, i), _digits(sizes, i + 1)
        # ++digit[inner]; while (s > 0 && digit[s] == size) { digit[s] = 0; ++digit[--s]; } (outer -> inner there).
        wraps: list[Pred] = []
        for pos, size in enumerate(sizes[:-1]):
            here = Cmp("==", now[pos] + 1, _c(size))
            wraps.append(all_of(wraps[-1], here) if wraps else here)
        new = []
        for pos in range(len(sizes)):
            carried = now[pos] + 1 if pos == 0 else Ite(wraps[pos - 1], now[pos] + 1, now[pos], INDEX)
            new.append(Ite(wraps[pos], _c(0, ctype=INDEX), carried, INDEX) if pos < len(sizes) - 1 else carried)
        for pos, (a, d) in enumerate(zip(new, then)):
            facts.append(Fact(f"{role}_digit{pos}_step", "in-bounds", f"role_offsets of {role}: incrementing digit[] "
                              f"with its carries takes digit {pos} (from the innermost) of i to that of i + 1", ranges,
                              TRUE, Cmp("==", a, d)))
        for x in dict.fromkeys(holders):
            segs = tuple(zip(sizes, (st for _, st in _segs_inner_first(views, x, role))))
            if not any(st for _, st in segs):
                continue
            delta: Expr = _c(segs[0][1], ctype=INDEX)
            for pos, (size, stride) in enumerate(segs[:-1]):
                delta = delta + Ite(wraps[pos], _c(segs[pos + 1][1] - size * stride, ctype=INDEX), _c(0, ctype=INDEX),
                                    INDEX)
            facts.append(Fact(f"{role}_{SLOT[x][1:].lower()}_offset_step", "in-bounds",
                              f"role_offsets of {role} in slot {SLOT[x]}: the offset plus the loop's change (the "
                              "innermost stride, and for each segment that wraps minus its size x stride plus the "
                              "next outer stride) is the offset of i + 1", ranges, TRUE,
                              Cmp("==", role_offset(segs, i) + delta, role_offset(segs, i + 1))))
    return KernelModel(kernel, "cpu", "long long", {}, (), (), tuple(facts), trusted=TRUSTED)


TRUSTED = ("the C++ compiler, OpenMP and the ISA intrinsics (vector loads and stores of whole runs; convert_span's "
           "vectors and tail, small_m_rows' and small_m_dots' groups, vectors and tails each covering its range once)",
           "OpenMP's partition of the work: the team's shares (the batch indices tid, tid + team, ...; B's column "
           "tiles and A's micro-panels n_tiles x tid / team ..; the small-M k shares p.k x tid / team .. and column "
           "shares share x tid ..) are adjacent and cover their ranges once for any team size, and the barriers order "
           "the packing before its use; the models take their union",
           "blocking_for: bl.kc in 1..p.k, bl.nc a positive multiple of kNR at most round_up(p.n, kNR), block_tiles "
           ">= 1 (the models take every such value; a pinned kc or nc is the value blocking_for derives)",
           "the packed side: the micro-kernel reads the panel slots packing wrote (slot (k, l) at dst[k x width + l]), "
           "the partial sums wait in acc between kc blocks, run_sums[q] is the sum of output q, small-M's a_rows and "
           "partials hold what its loops wrote and the threads' partials are added once",
           "role_offsets' induction over i from out[0] = 0 and the step facts",
           "the run-time checks (is_contiguous, the walk order, the small-M test, the transposition): each branch is "
           "stated under the instance of its check that it relies on; the entry point passes m_extent = m x unit for "
           "m inside the bucket's range, and every spec has p.k >= 1 (the empty-sum path never runs)")
