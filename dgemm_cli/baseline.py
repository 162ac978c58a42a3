"""How cuBLAS computes the same product, for `bench` (pure).

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

`plan_baseline` lists every formulation that exists; the harness times each in the same run and
uses the fastest. Only when none exists do operands go through a dense temp (the `.contiguous()` a
user would do): A and B gathered before the GEMM, C computed into a temp and scattered back
(gathered first when beta != 0), the copies timed with the GEMM.

A spec with an output view D or an epilogue is planned as the product alone written into the output
view (D when the spec has one: cuBLAS has no separate output view, so it writes alpha * A.B into D with
beta 0); the harness follows each GEMM with one elementwise kernel of its own (`epilogue =
"elementwise"`) that adds beta * C (with D) and applies the steps, reading the epilogue's views through
their strides: the cheapest thing a user without a fused epilogue runs. Where a library has the epilogue
fused (cuBLASLt's BIAS / RELU_BIAS / GELU_BIAS), `alternative` names a harness-side baseline that is
timed beside it, and the faster wins.

A spec whose row letter is sized at run time (`Spec.dynamic`) is planned at the letter's max. The
views put that letter outermost in the m role, so it is the outermost letter of the first m segment
and that segment's size is m times a constant: a count (m, n, k, batch), a dense temp's batch stride
or a copied view's size that holds the segment is proportional to m, and nothing else depends on m
(no stride does). Each call and view records which of its fields are (`scaled`); the harness runs
size m with field = value / max * m. Formulations that hold only at the max are left out: the
segment chained into the batch anywhere but outermost (the chain's stride test uses its size).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from itertools import product

from dgemm_cli.spec import Spec
from dgemm_cli.views import INT32_MAX, ProblemViews, ViewSegment, analyse

MATRIX_ROLES = {"A": ("m", "k"), "B": ("k", "n"), "C": ("m", "n")}
# cublasGemmEx type combinations with CUBLAS_COMPUTE_32F that deepgemm's dtypes can hit.
SUPPORTED = {("f16", "f16"), ("f16", "f32"), ("bf16", "bf16"), ("bf16", "f32"), ("f32", "f32")}
MAX_FORMULATIONS = 8  # the harness's DG_MAX_CALLS


@dataclass(frozen=True)
class StridedView:
    size: tuple[int, ...]
    stride: tuple[int, ...]
    scaled: tuple[int, ...] = ()  # dims whose size is proportional to the run-time letter's size

    def at_size(self, m: int, hi: int) -> StridedView:
        """The view when the run-time letter planned at `hi` is `m`."""
        return replace(self, size=tuple(n // hi * m if d in self.scaled else n for d, n in enumerate(self.size)))


@dataclass(frozen=True)
class CublasCall:
    """One cublasGemmStridedBatchedEx call. X is A and Y is B, or with `swap` X is B and Y is A."""

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

    def at_size(self, m: int, hi: int) -> CublasCall:
        """The call when the run-time letter planned at `hi` is `m`."""
        return replace(self, **{f: getattr(self, f) // hi * m for f in self.scaled})


@dataclass(frozen=True)
class EpilogueAlternative:
    """Another baseline for a spec with an epilogue, timed beside cuBLAS + the harness's elementwise kernel
    (the faster is the baseline): a header shipped next to the harness (e.g. "dg_cublaslt.cuh") that
    defines a class derived from dg_harness.cuh's DgAltBaseline; the generated harness constructs one as
    `cls ctor_args` (e.g. `DgCublasLtBaseline` and `(kProblem)`) and hands it to dg_harness_main."""

    header: str
    cls: str
    ctor_args: str
    why: str  # one line for the harness's comment


@dataclass(frozen=True)
class CublasPlan:
    available: bool
    kind: str  # "cublas", "copy+cublas", or "unavailable: <why>"
    why: str
    # The operands of the GEMM: A, B and its output (D when the spec has one, else C).
    copy: tuple[bool, bool, bool] = (False, False, False)
    views: tuple[StridedView, StridedView, StridedView] = field(
        default=(StridedView((), ()), StridedView((), ()), StridedView((), ())))
    calls: tuple[CublasCall, ...] = ()  # the formulations the harness times; the fastest is the baseline
    # "elementwise": the harness's elementwise kernel follows each GEMM (the spec has steps, or D with beta != 0).
    epilogue: str | None = None
    alternative: EpilogueAlternative | None = None  # a fused-epilogue baseline timed beside it, where one applies


@dataclass(frozen=True)
class _Dim:
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


def _operand_view(views: ProblemViews, name: str, run_time: str | None) -> StridedView:
    roles = ("batch", *MATRIX_ROLES[name])
    segs = [s for r in roles for s in views.roles[r].segments]
    return StridedView(tuple(s.size for s in segs), tuple(s.stride(name) for s in segs),
                       tuple(d for d, s in enumerate(segs) if run_time in s.letters))


def _seg_stride(seg: ViewSegment, op: str) -> int:
    return dict(seg.strides).get(op, 0)


def _chain(segs: list[ViewSegment], run_time: str | None) -> _Dim | None:
    """Segments as one batch dim, if they chain in A, B and C (outermost by C's stride first) for every
    size of the run-time letter: its segment's size enters the test unless it is the outermost."""
    if len(segs) <= 1:
        return _single(tuple(segs), run_time)
    order = sorted(segs, key=lambda s: -_seg_stride(s, "C"))
    for outer, inner in zip(order, order[1:]):
        if run_time in inner.letters or any(_seg_stride(outer, op) != _seg_stride(inner, op) * inner.size
                                            for op in "ABC"):
            return None
    inner = order[-1]
    size = 1
    for s in order:
        size *= s.size
    return _Dim("".join(s.label for s in order), size, {op: _seg_stride(inner, op) for op in "ABC"},
                scaled=run_time in order[0].letters)


def _single(segs: tuple[ViewSegment, ...], run_time: str | None) -> _Dim | None:
    """The segments of one role left for one cuBLAS dim: none (size 1) or exactly one."""
    if len(segs) > 1:
        return None
    if not segs:
        return _Dim("-", 1, {"A": 0, "B": 0, "C": 0})
    s = segs[0]
    return _Dim(s.label, s.size, {op: _seg_stride(s, op) for op in "ABC"}, scaled=run_time in s.letters)


def _fit(batch: _Dim, m: _Dim, n: _Dim, k: _Dim, swap: bool) -> CublasCall | None:
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


def formulations(views: ProblemViews) -> list[CublasCall]:
    """The no-copy cuBLAS formulations of the problem that move the fewest segments into the batch,
    without duplicates."""
    roles = views.roles
    run_time = _run_time_letter(views)
    k = _single(roles["k"].segments, run_time)
    if k is None:
        return []
    movable = [("m", s) for s in roles["m"].segments] + [("n", s) for s in roles["n"].segments]
    calls: list[CublasCall] = []
    min_moves = 0
    # Fewest segments moved into the batch first: moving one that need not move turns a GEMM into a
    # batch of GEMVs (valid, and far slower), so only the smallest number of moves that fits is kept.
    for moved in sorted(product((False, True), repeat=len(movable)), key=sum):
        if calls and sum(moved) > min_moves:
            break
        to_batch = [s for (_, s), mv in zip(movable, moved) if mv]
        left = {r: tuple(s for (rr, s), mv in zip(movable, moved) if rr == r and not mv) for r in ("m", "n")}
        batch = _chain(list(roles["batch"].segments) + to_batch, run_time)
        m, n = _single(left["m"], run_time), _single(left["n"], run_time)
        if batch is None or m is None or n is None or batch.size > INT32_MAX:
            continue
        if batch.size > 1 and batch.stride["C"] == 0:
            continue
        for swap in (False, True):
            call = _fit(batch, m, n, k, swap)
            if call is not None and all(_key(call) != _key(c) for c in calls):
                calls.append(call)
                min_moves = sum(moved)
    return calls


def _key(c: CublasCall) -> tuple:
    return tuple(v for name, v in vars(c).items() if name != "desc")


def _run_time_letter(views: ProblemViews) -> str | None:
    """The letter sized at run time, if its size (its max here) is in the views at all: a max of 1 is
    dropped with the other size-1 letters, and then nothing scales."""
    letter = next(iter(views.spec.dynamic), None)
    if letter is None or letter not in views.roles["m"].letters:
        return None
    # views.py puts it outermost in the m role; scaling a segment by it needs it outermost there.
    seg = next(s for s in views.roles["m"].segments if letter in s.letters)
    assert seg.letters[0] == letter, f"run-time letter {letter} is inside segment {seg.label}, not its outermost"
    return letter


def gemm_spec(spec: Spec) -> Spec:
    """The product alone, written into the spec's output view (D renamed C): what cuBLAS computes. A spec
    without D or an epilogue is returned as it is."""
    if spec.D is None and not spec.epilogue:
        return spec
    return replace(spec, C=replace(spec.output, name="C"), D=None, epilogue=())


def needs_elementwise(spec: Spec) -> bool:
    """Whether the baseline follows the GEMM with the harness's elementwise kernel: for the steps, or for
    beta * C when the GEMM wrote D (dg_harness.cuh's dg_needs_elementwise says the same)."""
    return bool(spec.epilogue) or (spec.D is not None and spec.beta != 0)


def plan_baseline(views: ProblemViews) -> CublasPlan:
    """cuBLAS's formulations of the problem (at the run-time letter's max; see the module comment); for a
    spec with D or an epilogue, those of the product into the output view, then the elementwise kernel."""
    spec = views.spec
    gemm = gemm_spec(spec)
    if gemm is spec:
        return _plan_gemm(views)
    # The epilogue's views take part in the kernel's segment merging; cuBLAS sees the product alone.
    plan = _plan_gemm(analyse(gemm))
    if spec.D is not None:  # the GEMM's output is D: say so in each formulation ("D=AB m=...")
        plan = replace(plan, calls=tuple(replace(c, desc="D" + c.desc[1:]) for c in plan.calls))
    plan = replace(plan, epilogue="elementwise" if needs_elementwise(spec) else None)
    if plan.kind != "cublas":  # dense temps: no formulation cuBLASLt could take as it stands
        return plan
    # cuBLASLt with the epilogue fused, where it has it, is timed beside cuBLAS + the elementwise kernel.
    from dgemm_cli.baseline_lt import lt_alternative  # it builds on this module's formulations

    alternative = lt_alternative(spec, plan.calls)
    return replace(plan, alternative=EpilogueAlternative(**alternative) if alternative else None)


def _plan_gemm(views: ProblemViews) -> CublasPlan:
    ab, c_dtype = views.operands["A"].dtype, views.operands["C"].dtype
    if (ab, c_dtype) not in SUPPORTED:
        return CublasPlan(False, f"unavailable: cuBLAS has no {ab} x {ab} -> {c_dtype} GEMM", "no such cuBLAS type mix")
    if max(views.m, views.n, views.k, views.batch) > INT32_MAX:
        return CublasPlan(False, "unavailable: a size exceeds cuBLAS's 32-bit int", "sizes beyond int")
    run_time = _run_time_letter(views)
    views_abc = tuple(_operand_view(views, x, run_time) for x in "ABC")
    calls = formulations(views)
    if calls:
        # Cheapest-looking first (fewest batches, then as listed): the harness measures them all anyway.
        calls = sorted(calls, key=lambda c: c.batch)[:MAX_FORMULATIONS]
        return CublasPlan(True, "cublas", f"{len(calls)} no-copy formulation(s), the fastest in the same run wins",
                          views=views_abc, calls=tuple(calls))
    return _copy_plan(views, views_abc, run_time)


def _copy_plan(views: ProblemViews, views_abc: tuple[StridedView, ...], run_time: str | None) -> CublasPlan:
    """No formulation exists: dense temps for the fewest operands that make one call fit."""
    forced = [x for x in "ABC" if _direct(views, x) is None]
    optional = [x for x in "ABC" if x not in forced]
    choices = sorted(product((False, True), repeat=len(optional)), key=sum)
    for extra in choices:  # all copied always fits: dense C^T = B^T A^T
        copy = {x: x in forced or (x in optional and extra[optional.index(x)]) for x in "ABC"}
        dims = {x: _dense(views, x) if copy[x] else _direct(views, x) for x in "ABC"}
        # A dense temp of A or C holds (batch, m, cols): its batch stride is m * cols.
        scaled_strides = frozenset(x for x in "AC" if copy[x] and views.batch > 1 and run_time is not None)
        batch = _Dim("batch", views.batch, {x: dims[x][0] for x in "ABC"}, scaled_strides=scaled_strides)
        role = {r: _Dim(r, views.roles[r].size, {x: dims[x][1].get(r, 0) for x in "ABC"},
                        scaled=r == "m" and run_time is not None) for r in ("m", "n", "k")}
        call = _fit(batch, role["m"], role["n"], role["k"], False) or _fit(batch, role["m"], role["n"], role["k"], True)
        if call is not None:
            break
    assert call is not None, "dense temps always fit"
    why = "no no-copy formulation: dense temps for " + ", ".join(x for x in "ABC" if copy[x]) + \
        " (what .contiguous() would do)"
    return CublasPlan(True, "copy+cublas", why, copy=(copy["A"], copy["B"], copy["C"]), views=views_abc,
                      calls=(call,))


def _direct(views: ProblemViews, name: str) -> tuple[int, dict[str, int]] | None:
    """(batch stride, role -> stride) of the operand as it is, or None if it needs a copy."""
    strides = {}
    for role in ("batch", *MATRIX_ROLES[name]):
        segs = views.roles[role].segments
        if len(segs) > 1:
            return None
        strides[role] = segs[0].stride(name) if segs else 0
        if role != "batch" and segs and strides[role] == 0:
            return None
    return strides.pop("batch"), strides


def _dense(views: ProblemViews, name: str) -> tuple[int, dict[str, int]]:
    r1, r2 = MATRIX_ROLES[name]
    s1, s2 = views.roles[r1].size, views.roles[r2].size
    return (s1 * s2 if views.batch > 1 else 0), {r1: s2, r2: 1}
