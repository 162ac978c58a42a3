"""cuBLAS's formulations of a problem (pure): the no-copy ways one cublasGemmStridedBatchedEx call computes
it, for the bench baseline (baseline.py plans with them, and runs those it can through cuBLASLt with the epilogue
fused).

cuBLAS takes one column-major GEMM a call: C(m x n, ldc) = op(X)(m x k) op(Y)(k x n), repeated over
one batch dim with a batch stride per operand (0 allowed for the inputs). Our views have roles made
of merged segments. A *formulation* assigns every segment to one of cuBLAS's four dims without
copying anything:

  - batch segments go to cuBLAS's batch; so may m segments (B has stride 0 on them) and n segments
    (A has stride 0 on them): `out[n] = W . X[n]` for a 1x1 convolution over NCHW, say;
  - what is left must be at most one segment each of m, n and k;
  - the batch segments must chain into one (size, stride) in A, B and C;
  - C (or C^T, the operand swap C^T = B^T A^T) must be column-major with ldc >= rows, and X, Y
    column-major as they are (N) or transposed (T).

When the batch segments do not chain (several batch letters interleaved with the matrices' letters, as
`bshd,bthd->bhst` has b and h), no strided-batched call covers them. cublasGemmBatchedEx does: it takes one
pointer per matrix of X, Y and C from device arrays, so the batch segments may lie anywhere.
`pointer_formulations` lists those calls, under the same rules but for the chaining.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import product

from dgemm_cli.views import INT32_MAX, ProblemViews, ViewSegment

MATRIX_ROLES = {"A": ("m", "k"), "B": ("k", "n"), "C": ("m", "n")}
# The most matrices a pointer-array call batches: the harness keeps three pointers a matrix for each of bench's
# buffer sets (up to 64), 1.5 MiB a set at this count.
MAX_POINTER_BATCH = 1 << 16
# cublasGemmEx type combinations with CUBLAS_COMPUTE_32F that deepgemm's dtypes can hit.
SUPPORTED = {("f16", "f16"), ("f16", "f32"), ("bf16", "bf16"), ("bf16", "f32"), ("f32", "f32")}


@dataclass(frozen=True)
class StridedView:
    size: tuple[int, ...]
    stride: tuple[int, ...]
    scaled: tuple[int, ...] = ()  # dims whose size is proportional to the run-time letter's size

    def at_size(self, m: int, hi: int) -> StridedView:
        """The view when the run-time letter planned at `hi` is `m`."""
        return replace(self, size=tuple(n // hi * m if d in self.scaled else n for d, n in enumerate(self.size)))


@dataclass(frozen=True)
class PointerDim:
    """One batch segment of a pointer-array call: its size and element strides in X, Y and C."""

    label: str
    size: int
    stride_x: int
    stride_y: int
    stride_c: int
    scaled: bool = False  # the size is proportional to the run-time letter's (planned at its max)

    def at_size(self, m: int, hi: int) -> PointerDim:
        return replace(self, size=self.size // hi * m) if self.scaled else self


@dataclass(frozen=True)
class CublasCall:
    """One cublasGemmStridedBatchedEx call, or with `pointers` one cublasGemmBatchedEx call. X is A and Y is B,
    or with `swap` X is B and Y is A."""

    desc: str
    swap: bool
    trans_x: bool
    trans_y: bool
    m: int
    n: int
    k: int
    ldx: int
    ldy: int
    ldc: int
    stride_x: int
    stride_y: int
    stride_c: int
    batch: int
    # Fields proportional to the run-time letter's size (planned at its max): among m, n, k, batch and,
    # for dense temps, the batch strides. Empty for a fixed-size spec.
    scaled: tuple[str, ...] = ()
    # A pointer-array call: the batch segments, outermost first; matrix i of X, Y and C starts at the views'
    # first element plus the strides times i's index in each segment (row-major over them). Then `batch` is
    # their sizes' product, the batch strides are 0, and the call takes every operand in place (no dense temp).
    pointers: tuple[PointerDim, ...] = ()

    def at_size(self, m: int, hi: int) -> CublasCall:
        """The call when the run-time letter planned at `hi` is `m`."""
        return replace(self, **{f: getattr(self, f) // hi * m for f in self.scaled},
                       pointers=tuple(d.at_size(m, hi) for d in self.pointers))


@dataclass(frozen=True)
class Dim:
    """One cuBLAS dim: its size and element stride per operand (0 where an operand lacks it)."""

    label: str
    size: int
    stride: dict[str, int]
    scaled: bool = False  # the size is proportional to the run-time letter's
    scaled_strides: frozenset[str] = frozenset()  # operands whose stride is proportional to it (dense temps)


def _col_major(rows: int, cols: int, s_rows: int, s_cols: int) -> int | None:
    """Leading dimension if (rows x cols) with these strides is column-major, else None."""
    if rows > 1 and s_rows != 1:
        return None
    ld = s_cols if cols > 1 else max(1, rows)
    return ld if ld >= max(1, rows) else None


def seg_stride(seg: ViewSegment, op: str) -> int:
    return dict(seg.strides).get(op, 0)


def chain(segs: list[ViewSegment], run_time: str | None) -> Dim | None:
    """Segments as one batch dim, if they chain in A, B and C (outermost by C's stride first) for every
    size of the run-time letter: its segment's size enters the test unless it is the outermost."""
    if len(segs) <= 1:
        return single(tuple(segs), run_time)
    order = sorted(segs, key=lambda s: -seg_stride(s, "C"))
    for outer, inner in zip(order, order[1:]):
        if run_time in inner.letters or any(seg_stride(outer, op) != seg_stride(inner, op) * inner.size
                                            for op in "ABC"):
            return None
    inner = order[-1]
    size = 1
    for s in order:
        size *= s.size
    return Dim("".join(s.label for s in order), size, {op: seg_stride(inner, op) for op in "ABC"},
                scaled=run_time in order[0].letters)


def single(segs: tuple[ViewSegment, ...], run_time: str | None) -> Dim | None:
    """The segments of one role left for one cuBLAS dim: none (size 1) or exactly one."""
    if len(segs) > 1:
        return None
    if not segs:
        return Dim("-", 1, {"A": 0, "B": 0, "C": 0})
    s = segs[0]
    return Dim(s.label, s.size, {op: seg_stride(s, op) for op in "ABC"}, scaled=run_time in s.letters)


def fit(batch: Dim, m: Dim, n: Dim, k: Dim, swap: bool) -> CublasCall | None:
    """The call for this assignment of dims and this orientation of C, or None if it does not fit."""
    if swap:
        ldc = _col_major(n.size, m.size, n.stride["C"], m.stride["C"])
        xs, ys = ("B", n, k), ("A", k, m)
    else:
        ldc = _col_major(m.size, n.size, m.stride["C"], n.stride["C"])
        xs, ys = ("A", m, k), ("B", k, n)
    if ldc is None or ldc > INT32_MAX:
        return None
    fitted = []
    for op, rows, cols in (xs, ys):
        if (rows.size > 1 and rows.stride[op] == 0) or (cols.size > 1 and cols.stride[op] == 0):
            return None  # broadcast inside the matrix: cuBLAS has no stride-0 ld
        ld, trans = _col_major(rows.size, cols.size, rows.stride[op], cols.stride[op]), False
        if ld is None:
            ld, trans = _col_major(cols.size, rows.size, cols.stride[op], rows.stride[op]), True
        if ld is None or ld > INT32_MAX:
            return None
        fitted.append((op, ld, trans))
    (xo, ldx, tx), (yo, ldy, ty) = fitted
    rows, cols = (n, m) if swap else (m, n)
    desc = (f"{'C^T=' if swap else 'C='}{xo}{'^T' if tx else ''}{yo}{'^T' if ty else ''} "
            f"m={rows.label} n={cols.label} k={k.label}" + (f" batch={batch.label}" if batch.size > 1 else ""))
    # A leading dimension never scales: one valid for the largest rows or cols is valid for fewer.
    scaled = tuple(f for f, d in (("m", rows), ("n", cols), ("k", k), ("batch", batch)) if d.scaled)
    scaled += tuple(f for f, op in (("stride_x", xo), ("stride_y", yo), ("stride_c", "C"))
                    if op in batch.scaled_strides)
    return CublasCall(desc, swap, tx, ty, rows.size, cols.size, k.size, ldx, ldy, ldc,
                      batch.stride[xo], batch.stride[yo], batch.stride["C"], batch.size, scaled)


def _fewest_moves(views: ProblemViews, calls_of) -> list[CublasCall]:
    """The calls `calls_of(batch_segments, m, n, k, run_time)` gives for each choice of m and n segments moved into
    the batch, the fewest moves that give any call, without duplicates. Moving a segment that need not move turns a
    GEMM into a batch of GEMVs (valid, and far slower), so only the smallest number of moves that fits is kept."""
    roles = views.roles
    run_time = run_time_letter(views)
    k = single(roles["k"].segments, run_time)
    if k is None:
        return []
    movable = [("m", s) for s in roles["m"].segments] + [("n", s) for s in roles["n"].segments]
    calls: list[CublasCall] = []
    min_moves = 0
    for moved in sorted(product((False, True), repeat=len(movable)), key=sum):
        if calls and sum(moved) > min_moves:
            break
        segs = list(roles["batch"].segments) + [s for (_, s), mv in zip(movable, moved) if mv]
        left = {r: tuple(s for (rr, s), mv in zip(movable, moved) if rr == r and not mv) for r in ("m", "n")}
        m, n = single(left["m"], run_time), single(left["n"], run_time)
        if m is None or n is None:
            continue
        for call in calls_of(segs, m, n, k, run_time):
            if all(call_key(call) != call_key(c) for c in calls):
                calls.append(call)
                min_moves = sum(moved)
    return calls


def formulations(views: ProblemViews) -> list[CublasCall]:
    """The no-copy cuBLAS formulations of the problem that move the fewest segments into the batch,
    without duplicates."""
    def strided(segs, m, n, k, run_time):
        batch = chain(segs, run_time)
        if batch is None or batch.size > INT32_MAX or (batch.size > 1 and batch.stride["C"] == 0):
            return []
        return [c for c in (fit(batch, m, n, k, swap) for swap in (False, True)) if c is not None]

    return _fewest_moves(views, strided)


NO_BATCH = Dim("-", 1, {"A": 0, "B": 0, "C": 0})


def pointer_formulations(views: ProblemViews) -> list[CublasCall]:
    """The pointer-array formulations of a problem whose batch no strided-batched call covers: the batch
    segments (with the m or n segments moved there, the fewest that fit, as `formulations` moves them) do not
    chain into one stride, and what is left fits one column-major GEMM. Empty where they chain (a strided call
    takes them), where a matrix does not fit, or past MAX_POINTER_BATCH matrices."""
    def pointers(segs, m, n, k, run_time):
        if len(segs) < 2 or chain(segs, run_time) is not None:
            return []
        order = sorted(segs, key=lambda s: -seg_stride(s, "C"))
        count = 1
        for s in order:
            count *= s.size
        if count > MAX_POINTER_BATCH or any(seg_stride(s, "C") == 0 for s in order):
            return []
        out = []
        for swap in (False, True):
            call = fit(NO_BATCH, m, n, k, swap)
            if call is None:
                continue
            xo, yo = ("B", "A") if swap else ("A", "B")
            dims = tuple(PointerDim(s.label, s.size, seg_stride(s, xo), seg_stride(s, yo), seg_stride(s, "C"),
                                    run_time in s.letters) for s in order)
            out.append(replace(call, desc=f"pointer-array batched over {','.join(s.label for s in order)}: "
                                          f"{call.desc}", batch=count, pointers=dims,
                               scaled=call.scaled + (("batch",) if any(d.scaled for d in dims) else ())))
        return out

    return _fewest_moves(views, pointers)


def call_key(c: CublasCall) -> tuple:
    return tuple(v for name, v in vars(c).items() if name != "desc")


def run_time_letter(views: ProblemViews) -> str | None:
    """The letter sized at run time, if its size (its max here) is in the views at all: a max of 1 is
    dropped with the other size-1 letters, and then nothing scales."""
    letter = next(iter(views.spec.dynamic), None)
    if letter is None or letter not in views.roles["m"].letters:
        return None
    # views.py puts it outermost in the m role; scaling a segment by it needs it outermost there.
    seg = next(s for s in views.roles["m"].segments if letter in s.letters)
    assert seg.letters[0] == letter, f"run-time letter {letter} is inside segment {seg.label}, not its outermost"
    return letter
