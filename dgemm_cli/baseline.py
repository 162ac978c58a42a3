"""How cuBLAS computes the same product, for `bench` (pure).

cuBLAS takes one column-major GEMM a call, repeated over one batch dim; a *formulation*
(cublas_formulations.py) maps the views' segments onto such a call without copying anything.

`plan_baseline` lists every formulation that exists; the harness times each in the same run and
uses the fastest. Only when none exists do operands go through a dense temp (the `.contiguous()` a
user would do): A and B gathered before the GEMM, C computed into a temp and scattered back
(gathered first when beta != 0), the copies timed with the GEMM. The copy plan takes the fewest elements
through temps: an operand whose batch segments chain (in one order shared by all three) and whose matrix
roles are one segment each stays in place, and a temp keeps its operand's innermost role innermost, so that
the gather reads and writes along memory. When the views fit one GEMM but for a batch that does not chain
(several batch letters, `bshd,bthd->bhst`), the pointer-array calls (cublasGemmBatchedEx over the views as
they are: cublas_formulations.pointer_formulations) are timed beside the copy plan's call, and the fastest
of them all is the baseline (kind "multi-batch").

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

cuBLASLt with a fused epilogue (the second part of this module) is the alternative baseline of a spec whose whole
epilogue cuBLASLt has: `lt_epilogue` says, for one formulation, whether cuBLASLt runs it with the spec's steps
fused and with which leading dimensions, and `lt_alternative` gives the harness-side baseline that times them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from itertools import product

from dgemm_cli.cublas_formulations import (
    MATRIX_ROLES,
    SUPPORTED,
    CublasCall,
    Dim,
    StridedView,
    call_key,
    chain,
    fit,
    formulations,
    pointer_formulations,
    run_time_letter,
    seg_stride,
    single,
)
from dgemm_cli.spec import OperandView, Spec
from dgemm_cli.spec.model import INPUT_ONLY_DTYPES, ScaleView
from dgemm_cli.views import INT32_MAX, ProblemViews, ViewSegment, analyse

MAX_FORMULATIONS = 8  # the harness's DG_MAX_CALLS


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
    includes: tuple[str, ...] = ()  # other headers shipped beside it, which `header` includes


@dataclass(frozen=True)
class CublasPlan:
    available: bool
    # "cublas" (no-copy strided-batched calls), "copy+cublas" (one call over dense temps), "multi-batch" (the
    # copy plan's call and pointer-array calls, timed side by side), or "unavailable: <why>".
    kind: str
    why: str
    # The operands of the GEMM: A, B and its output (D when the spec has one, else C). The temps serve the
    # strided calls; a pointer-array call takes every operand in place.
    copy: tuple[bool, bool, bool] = (False, False, False)
    views: tuple[StridedView, StridedView, StridedView] = field(
        default=(StridedView((), ()), StridedView((), ()), StridedView((), ())))
    calls: tuple[CublasCall, ...] = ()  # the formulations the harness times; the fastest is the baseline
    # "elementwise": the harness's elementwise kernel follows each GEMM (the spec has steps, or D with beta != 0).
    epilogue: str | None = None
    alternative: EpilogueAlternative | None = None  # a fused-epilogue baseline timed beside it, where one applies


def _operand_view(views: ProblemViews, name: str, run_time: str | None, order: tuple[ViewSegment, ...] | None = None,
                  flip: bool = False) -> StridedView:
    """The operand's view in the order of its dense temp: the batch segments (in `order`, else as listed), then
    its two matrix roles (flipped: the second role outer)."""
    r1, r2 = MATRIX_ROLES[name]
    batch = views.roles["batch"].segments if order is None else order
    segs = [*batch, *(s for r in ((r2, r1) if flip else (r1, r2)) for s in views.roles[r].segments)]
    return StridedView(tuple(s.size for s in segs), tuple(s.stride(name) for s in segs),
                       tuple(d for d, s in enumerate(segs) if run_time in s.letters))


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
    if spec.inputs == "weight-only":  # no cuBLAS call takes packed integer weights with group scales
        why = f"cuBLAS has no {spec.B.dtype} weights with group scales"
        return CublasPlan(False, f"unavailable: {why}", why, alternative=dense_weights_alternative(spec))
    if spec.A.dtype in INPUT_ONLY_DTYPES:  # e4m3: cuBLAS's GemmEx has none; cuBLASLt's FP8 is the alternative
        fp8 = plan_fp8(views)
        why = f"cuBLAS's GemmEx has no {spec.A.dtype} inputs"
        return CublasPlan(False, f"unavailable: {why}", why,
                          alternative=fp8.alternative() if fp8.available else None)
    gemm = gemm_spec(spec)
    if gemm is spec:
        return _plan_gemm(views)
    # The epilogue's views take part in the kernel's segment merging; cuBLAS sees the product alone.
    plan = _plan_gemm(analyse(gemm))
    if spec.D is not None:  # the GEMM's output is D: say so in each formulation ("D=AB m=...")
        plan = replace(plan, calls=tuple(replace(c, desc=_output_named_d(c.desc)) for c in plan.calls))
    plan = replace(plan, epilogue="elementwise" if needs_elementwise(spec) else None)
    if plan.kind != "cublas":  # dense temps: no formulation cuBLASLt could take as it stands
        return plan
    # cuBLASLt with the epilogue fused, where it has it, is timed beside cuBLAS + the elementwise kernel.
    return replace(plan, alternative=lt_alternative(spec, plan.calls))


def _output_named_d(desc: str) -> str:
    """A formulation's desc with the GEMM's output called D: its "C=" or "C^T=", and a copy plan's "(dense .., C)"."""
    desc = re.sub(r"\(dense ([^)]*)\bC\)", r"(dense \1D)", desc, count=1)
    return re.sub(r"\bC(\^T)?=", r"D\1=", desc, count=1)


def _plan_gemm(views: ProblemViews) -> CublasPlan:
    ab, c_dtype = views.operands["A"].dtype, views.operands["C"].dtype
    if (ab, c_dtype) not in SUPPORTED:
        return CublasPlan(False, f"unavailable: cuBLAS has no {ab} x {ab} -> {c_dtype} GEMM", "no such cuBLAS type mix")
    if max(views.m, views.n, views.k, views.batch) > INT32_MAX:
        return CublasPlan(False, "unavailable: a size exceeds cuBLAS's 32-bit int", "sizes beyond int")
    run_time = run_time_letter(views)
    calls = formulations(views)
    if calls:
        views_abc = tuple(_operand_view(views, x, run_time) for x in "ABC")
        # Cheapest-looking first (fewest batches, then as listed): the harness measures them all anyway.
        calls = sorted(calls, key=lambda c: c.batch)[:MAX_FORMULATIONS]
        return CublasPlan(True, "cublas", f"{len(calls)} no-copy formulation(s), the fastest in the same run wins",
                          views=views_abc, calls=tuple(calls))
    copy_plan = _copy_plan(views, run_time)
    pointers = pointer_formulations(views)
    if not pointers:
        return copy_plan
    copied = ", ".join(x for x, c in zip("ABC", copy_plan.copy) if c)
    why = (f"no strided-batched call covers the batch: {len(pointers)} pointer-array call(s) over the views as they "
           f"are, and one over dense temps of {copied}; the fastest in the same run wins")
    return replace(copy_plan, kind="multi-batch", why=why,
                   calls=(*copy_plan.calls, *pointers)[:MAX_FORMULATIONS])


@dataclass(frozen=True)
class _CopyOption:
    """One way to run the product through dense temps: which operands are copied, and the call."""

    cost: tuple[int, int]  # (elements through temps a product, operands copied)
    copy: dict[str, bool]
    views: tuple[StridedView, StridedView, StridedView]
    call: CublasCall


def _copy_plan(views: ProblemViews, run_time: str | None) -> CublasPlan:
    """No formulation exists: dense temps for the operands that make one call fit through the fewest elements."""
    best: _CopyOption | None = None
    for order in _batch_orders(views.roles["batch"].segments):
        for chosen in product((False, True), repeat=3):
            option = _copy_option(views, run_time, order, dict(zip("ABC", chosen)))
            if option is not None and (best is None or option.cost < best.cost):
                best = option
    assert best is not None, "dense temps always fit"  # all copied: dense C^T = B^T A^T
    copied = [x for x in "ABC" if best.copy[x]]
    call = best.call
    what = f"copy+{'strided-batched' if call.batch > 1 else 'gemm'} (dense {', '.join(copied)})"
    why = f"no no-copy formulation: dense temps for {', '.join(copied)} (what .contiguous() would do)"
    return CublasPlan(True, "copy+cublas", why, copy=(best.copy["A"], best.copy["B"], best.copy["C"]),
                      views=best.views, calls=(replace(call, desc=f"{what}: {call.desc}"),))


def _batch_orders(segs: tuple[ViewSegment, ...]) -> list[tuple[ViewSegment, ...]]:
    """The orders of the batch segments a copy plan tries: as listed, and outermost first by each operand's
    strides (an operand in place needs its own order: its strides must chain in it)."""
    orders = [tuple(segs)]
    for op in "CAB":
        order = tuple(sorted(segs, key=lambda s: -s.stride(op)))
        if order not in orders:
            orders.append(order)
    return orders


def _copy_option(views: ProblemViews, run_time: str | None, order: tuple[ViewSegment, ...],
                 copy: dict[str, bool]) -> _CopyOption | None:
    """The call with these operands through temps and the batch in `order`, or None if it does not fit."""
    dims: dict[str, tuple[int, dict[str, int]]] = {}
    flips: dict[str, bool] = {}
    for x in "ABC":
        flips[x] = copy[x] and _inner_first(views, x, run_time)
        got = _dense(views, x, flips[x]) if copy[x] else _direct(views, x, order)
        if got is None:
            return None
        dims[x] = got
    # A dense temp of A or C holds (batch, m, cols): its batch stride is m * cols.
    scaled_strides = frozenset(x for x in "AC" if copy[x] and views.batch > 1 and run_time is not None)
    batch = Dim("".join(s.label for s in order) or "-", views.batch, {x: dims[x][0] for x in "ABC"},
                scaled_strides=scaled_strides)
    role = {r: Dim("".join(s.label for s in views.roles[r].segments) or "-", views.roles[r].size,
                   {x: dims[x][1].get(r, 0) for x in "ABC"}, scaled=r == "m" and run_time is not None)
            for r in ("m", "n", "k")}
    call = fit(batch, role["m"], role["n"], role["k"], False) or fit(batch, role["m"], role["n"], role["k"], True)
    if call is None:
        return None
    sizes = {"A": views.m * views.k, "B": views.k * views.n, "C": views.m * views.n * (1 + (views.spec.beta != 0))}
    cost = (sum(views.batch * sizes[x] for x in "ABC" if copy[x]), sum(copy.values()))
    return _CopyOption(cost, copy, tuple(_operand_view(views, x, run_time, order, flips[x]) for x in "ABC"), call)


def _direct(views: ProblemViews, name: str, order: tuple[ViewSegment, ...]) -> tuple[int, dict[str, int]] | None:
    """(batch stride, role -> stride) of the operand as it is, its batch segments in `order`, or None if it needs
    a copy: the batch segments do not chain in it, or a matrix role is several segments or broadcast."""
    strides = [s.stride(name) for s in order]
    if any(outer != inner * s.size for outer, inner, s in zip(strides, strides[1:], order[1:])):
        return None
    roles = {}
    for role in MATRIX_ROLES[name]:
        segs = views.roles[role].segments
        if len(segs) > 1 or (segs and segs[0].stride(name) == 0):
            return None
        roles[role] = segs[0].stride(name) if segs else 0
    return (strides[-1] if strides else 0), roles


def _dense(views: ProblemViews, name: str, flip: bool) -> tuple[int, dict[str, int]]:
    """(batch stride, role -> stride) of the operand's dense temp: batch, then its roles (flipped: the second
    outer), row-major."""
    r1, r2 = MATRIX_ROLES[name][::-1] if flip else MATRIX_ROLES[name]
    s1, s2 = views.roles[r1].size, views.roles[r2].size
    return (s1 * s2 if views.batch > 1 else 0), {r1: s2, r2: 1}


def _inner_first(views: ProblemViews, name: str, run_time: str | None) -> bool:
    """Whether the operand's temp puts its first role (m for A and C, k for B) innermost: where its smallest
    stride lies, so that the gather runs along memory. A and C keep m outer when m is sized at run time (a leading
    dimension never scales)."""
    if run_time is not None and name in "AC":
        return False
    r1, r2 = MATRIX_ROLES[name]

    def smallest(role: str) -> int | None:
        strides = [s.stride(name) for s in views.roles[role].segments if s.stride(name) != 0]
        return min(strides) if strides else None

    first, second = smallest(r1), smallest(r2)
    return first is not None and (second is None or first < second)


# ------------------------------------------------------------------------------------------------------------
# cuBLASLt with a fused epilogue: `bench`'s alternative baseline for a spec whose whole epilogue cuBLASLt has
# ------------------------------------------------------------------------------------------------------------
# Issue 8's baseline is the cheapest thing a user would run. cuBLASLt runs one column-major GEMM a call,
# D = epi(alpha * op(X) op(Y) + beta * C), with the epilogues
#
#     DEFAULT     nothing                      (still useful: C and D may be different views)
#     BIAS        t + bias                     RELU_BIAS   max(t + bias, 0)     GELU_BIAS   gelu(t + bias)
#     RELU        max(t, 0)                    GELU        gelu(t)
#
# where gelu is the tanh approximation (our `gelu_tanh`), and `bias` is ONE packed vector (stride 1)
# over the rows of cuBLASLt's column-major output, the same for every column; with a batch, the same
# for every matrix or moved by CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE (int64, elements). Its elements
# have D's type (cublasLt.h, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: "the same type as the elements of
# output matrix (Dtype)", the exceptions being int8 and fp8 kernels). C and D must have the same type and
# shape; their leading dimensions and batch strides may differ. C is not read when beta == 0.
#
# `lt_epilogue(spec, call)` says whether one cuBLAS formulation of the problem (cublas_formulations.py's
# `CublasCall`: the views' segments assigned to cuBLAS's rows, cols, batch and k without a copy) can run
# the spec's WHOLE epilogue through cuBLASLt, and with what: which of the spec's letters the call's rows,
# cols and batch are is recomputed here from the views (the same enumeration as
# `cublas_formulations.formulations`), then the bias view must be exactly the rows (dense, in the rows'
# letter order), broadcast over the cols (stride 0 or absent), and over the batch either broadcast or one
# chained stride; the output view (D, or C in place) must be column-major in the call's orientation.
# Everything else (scale, clamp, residual, another activation, a bias over the cols) is the other
# baseline's: cuBLAS and one elementwise kernel.
#
# A formulation may have been planned on the spec's own views or, as `plan_baseline` plans a spec with D or an
# epilogue, on the product written into the output view: `formulation_letters` recognises both, and the
# layouts of the output and of the C that beta reads are worked out here from their views, not taken from
# the call.
#
# The harness (templates/dg_cublaslt.cuh) gets each available formulation as a `DgLtCall` aggregate,
# `LtEpilogue.c_initializer()`; `lt_alternative` gives the whole `DgCublasLtAlternative` that a generated
# harness constructs (an `EpilogueAlternative`), which takes the base pointers by slot and applies the views'
# offsets itself.

# cublasLtEpilogue_t (cublasLt.h; the CUDA 12 and 13 headers agree).
EPILOGUES = {"DEFAULT": 1, "RELU": 2, "BIAS": 4, "RELU_BIAS": 6, "GELU": 32, "GELU_BIAS": 36}
# Our step sequences that one cuBLASLt epilogue computes (it adds the bias, then applies the activation).
FUSED = {
    (): "DEFAULT",
    ("bias",): "BIAS",
    ("bias", "relu"): "RELU_BIAS",
    ("bias", "gelu_tanh"): "GELU_BIAS",
    ("relu",): "RELU",
    ("gelu_tanh",): "GELU",
}
LT_ACTIVATIONS = {"relu", "gelu_tanh"}
# The dtype ids of dg_harness.cuh (DG_F32, DG_F16, DG_BF16).
DTYPE_IDS = {"f32": 0, "f16": 1, "bf16": 2}
# Bias dtypes cuBLASLt takes for an output dtype (cublasLt.h: the output's, for these kernels).
BIAS_DTYPES = {"f32": ("f32",), "f16": ("f16",), "bf16": ("bf16",)}


@dataclass(frozen=True)
class CallLetters:
    """Which of C's letters make up one formulation's cuBLAS dims, each outer -> inner: the row index
    of cuBLAS's column-major output runs over `rows` (stride 1 innermost in C), its column index over
    `cols`, the batch index over `batch` (the chained segments, outermost by C's stride first)."""

    rows: tuple[str, ...]
    cols: tuple[str, ...]
    batch: tuple[str, ...]


@dataclass(frozen=True)
class LtEpilogue:
    """One formulation run by cuBLASLt with the spec's whole epilogue fused, or why it cannot be.

    Beyond `call` (X, Y, C as cuBLAS takes them): the output D's leading dimension and batch stride,
    whether C is the output itself (`c_is_d`: no D view, or beta == 0 so that C is not read; then the
    harness passes the output pointer for C too), the epilogue and the bias's batch stride."""

    available: bool
    why: str
    epilogue: str = ""  # a key of EPILOGUES
    call: CublasCall | None = None
    letters: CallLetters | None = None
    ldd: int = 0
    stride_d: int = 0
    c_is_d: bool = True
    ldc: int = 0  # the C that beta reads (= ldd, stride_d when c_is_d)
    stride_c: int = 0
    bias: bool = False
    bias_batch_stride: int = 0
    dtype_ab: str = ""
    dtype_out: str = ""
    dtype_bias: str = ""
    scaled: tuple[str, ...] = field(default=())  # as CublasCall.scaled (m, n, k, batch)

    @property
    def epilogue_id(self) -> int:
        return EPILOGUES[self.epilogue]

    @property
    def kind(self) -> str:
        """What the bench names as its baseline, e.g. "cublasLt GELU_BIAS"."""
        return f"cublasLt {self.epilogue}" if self.available else f"unavailable: {self.why}"

    def fields(self) -> dict:
        """The DgLtCall fields by name (dg_cublaslt.cuh), for a template."""
        assert self.available and self.call is not None
        c = self.call
        return {
            "desc": c.desc.replace('"', "'"), "swap": int(c.swap), "trans_x": int(c.trans_x),
            "trans_y": int(c.trans_y), "m": c.m, "n": c.n, "k": c.k, "ldx": c.ldx, "ldy": c.ldy,
            "ldc": self.ldc, "ldd": self.ldd, "stride_x": c.stride_x,
            "stride_y": c.stride_y, "stride_c": self.stride_c,
            "stride_d": self.stride_d, "batch": c.batch, "dtype_ab": DTYPE_IDS[self.dtype_ab],
            "dtype_out": DTYPE_IDS[self.dtype_out],
            "dtype_bias": DTYPE_IDS[self.dtype_bias] if self.bias else -1,
            "epilogue": f"DG_LT_EPILOGUE_{self.epilogue}", "bias_batch_stride": self.bias_batch_stride,
            "c_is_d": int(self.c_is_d), "scaled": list(self.scaled),
        }

    def c_initializer(self) -> str:
        """The DgLtCall aggregate initializer (field order as dg_cublaslt.cuh declares it)."""
        f = self.fields()
        ll = "LL, ".join(str(f[x]) for x in ("m", "n", "k", "ldx", "ldy", "ldc", "ldd", "stride_x", "stride_y",
                                               "stride_c", "stride_d", "batch")) + "LL"
        scaled = " | ".join(f"DG_LT_SCALE_{x.upper()}" for x in f["scaled"]) or "0u"
        return (f'{{"{f["desc"]}", {f["swap"]}, {f["trans_x"]}, {f["trans_y"]}, {ll}, {f["dtype_ab"]}, '
                f'{f["dtype_out"]}, {f["dtype_bias"]}, {f["epilogue"]}, {f["bias_batch_stride"]}LL, '
                f'{f["c_is_d"]}, {scaled}}}')


def _no(why: str, call: CublasCall | None = None) -> LtEpilogue:
    return LtEpilogue(False, why, call=call)


def fused_epilogue(spec: Spec) -> tuple[str | None, str]:
    """The cuBLASLt epilogue that computes the spec's whole step list, or (None, why not)."""
    names = []
    for i, st in enumerate(spec.epilogue):
        if st.kind == "activation":
            if st.activation not in LT_ACTIVATIONS:
                return None, (f"cuBLASLt has no {st.activation} epilogue (epilogue[{i}]; it has relu and GELU, "
                              "the tanh form: gelu_tanh)")
            names.append(st.activation)
        elif st.kind == "bias":
            names.append("bias")
        else:
            return None, f"cuBLASLt has no {st.kind} epilogue step (epilogue[{i}])"
    name = FUSED.get(tuple(names))
    if name is None:
        return None, (f"cuBLASLt's epilogue is a bias, then one activation; this spec's steps are "
                      f"{', '.join(names)}")
    return name, ""


def call_letters(views: ProblemViews, call: CublasCall) -> CallLetters | None:
    """Which letters form the rows, cols and batch of `call`, a no-copy formulation that
    `cublas_formulations.formulations` lists; None for any other call (a copy plan's, say). The same
    enumeration as `formulations`, over every number of moved segments, matched on the call's fields."""
    roles = views.roles
    run_time = run_time_letter(views)
    k = single(roles["k"].segments, run_time)
    if k is None:
        return None
    movable = [("m", s) for s in roles["m"].segments] + [("n", s) for s in roles["n"].segments]
    want = call_key(call)
    for moved in product((False, True), repeat=len(movable)):
        to_batch = [s for (_, s), mv in zip(movable, moved) if mv]
        left = {r: tuple(s for (rr, s), mv in zip(movable, moved) if rr == r and not mv) for r in ("m", "n")}
        batch_segs = list(roles["batch"].segments) + to_batch
        batch = chain(batch_segs, run_time)
        m, n = single(left["m"], run_time), single(left["n"], run_time)
        if batch is None or m is None or n is None:
            continue
        for swap in (False, True):
            fitted = fit(batch, m, n, k, swap)
            if fitted is None or call_key(fitted) != want:
                continue
            order: list[ViewSegment] = sorted(batch_segs, key=lambda s: -seg_stride(s, "C"))
            rows, cols = (left["n"], left["m"]) if swap else (left["m"], left["n"])
            return CallLetters(_letters(rows), _letters(cols), _letters(tuple(order)))
    return None


def formulation_letters(spec: Spec, call: CublasCall, views: ProblemViews | None = None) -> CallLetters | None:
    """`call_letters` for a formulation planned either on the product written into the output view (how
    `plan_baseline` plans a spec with D or an epilogue: cuBLAS sees no epilogue views, D as its C) or on the
    spec's own views."""
    found = call_letters(analyse(gemm_spec(spec)), call)
    if found is None and (spec.D is not None or spec.epilogue):
        found = call_letters(views if views is not None else analyse(spec), call)
    return found


def _layout(view: OperandView, letters: CallLetters, sizes: dict[str, int], rows: int, what: str,
            desc: str) -> tuple[int, int] | str:
    """(ld, batch stride) of `view` as cuBLAS's column-major m x n matrices of the call, or why not."""
    if letters.rows and _chained(view, letters.rows, sizes) != 1:
        return f"{what} is not column-major over {''.join(letters.rows)} (the rows of '{desc}')"
    col = _chained(view, letters.cols, sizes)
    ld = col if letters.cols else max(1, rows)
    if col is None or ld < max(1, rows):
        return f"{what}'s columns ({''.join(letters.cols)}) have no leading dimension >= the {rows} rows of '{desc}'"
    stride = _chained(view, letters.batch, sizes)
    if stride is None:
        return f"{what}'s batch letters ({''.join(letters.batch)}) do not chain into one stride"
    return ld, stride


def _letters(segs) -> tuple[str, ...]:
    return tuple(x for s in segs for x in s.letters)


def _chained(view: OperandView, letters: tuple[str, ...], sizes: dict[str, int]) -> int | None:
    """The element stride of one step of the index that runs over `letters` (outer -> inner) in
    `view`, if the letters chain there (stride[outer] == stride[inner] * size[inner]); a letter the view
    lacks has stride 0. 0 for no letters; None if they do not chain."""
    strides = [view.stride_of(x) if x in view.letters else 0 for x in letters]
    for i in range(len(letters) - 1):
        if strides[i] != strides[i + 1] * sizes[letters[i + 1]]:
            return None
    return strides[-1] if strides else 0


def lt_epilogue(spec: Spec, call: CublasCall, views: ProblemViews | None = None) -> LtEpilogue:
    """Whether cuBLASLt runs formulation `call` of `spec` with the spec's whole epilogue fused, and how."""
    name, why = fused_epilogue(spec)
    if name is None:
        return _no(why, call)
    letters = formulation_letters(spec, call, views)
    if letters is None:
        return _no(f"'{call.desc}' is not a no-copy formulation of the views", call)
    out = spec.output
    ab = spec.A.dtype
    if (ab, out.dtype) not in SUPPORTED:
        return _no(f"cuBLASLt has no {ab} x {ab} -> {out.dtype} GEMM", call)
    sizes = spec.sizes

    # The output: D's view when the spec has one, else C (read for beta and written in place). C is read in its
    # own layout only with D and beta != 0; otherwise the output serves for it (beta == 0: C is not read).
    got = _layout(out, letters, sizes, call.m, "D" if spec.D is not None else "C", call.desc)
    if isinstance(got, str):
        return _no(got, call)
    ldd, stride_d = got
    c_is_d = spec.D is None or spec.beta == 0.0
    ldc, stride_c = ldd, stride_d
    if not c_is_d:
        if spec.C.dtype != out.dtype:
            return _no(f"cuBLASLt's C and D have one dtype; C is {spec.C.dtype}, D {out.dtype}", call)
        got = _layout(spec.C, letters, sizes, call.m, "C", call.desc)
        if isinstance(got, str):
            return _no(got, call)
        ldc, stride_c = got

    bias_view = next((st.view for st in spec.epilogue if st.kind == "bias"), None)
    bias_batch, bias_dtype = 0, ""
    if bias_view is not None:
        bias_dtype = bias_view.dtype
        if bias_dtype not in BIAS_DTYPES[out.dtype]:
            return _no(f"cuBLASLt's bias has the output's dtype ({out.dtype}); this bias is {bias_dtype}", call)
        live = {x for x, s, st in zip(bias_view.letters, bias_view.sizes, bias_view.strides) if s > 1 and st != 0}
        across = sorted(live & set(letters.cols))
        if across:
            return _no(f"cuBLASLt's bias is a vector over the rows ({''.join(letters.rows) or 'none'}) of "
                       f"'{call.desc}', broadcast over its columns; this bias varies along {''.join(across)}",
                       call)
        missing = [x for x in letters.rows if x not in live]
        if missing:
            return _no(f"cuBLASLt's bias is a vector over all the rows ({''.join(letters.rows)}) of '{call.desc}'; "
                       f"this bias is broadcast over {''.join(missing)}", call)
        if letters.rows and _chained(bias_view, letters.rows, sizes) != 1:
            return _no(f"cuBLASLt's bias is packed (stride 1) over the rows ({''.join(letters.rows)}) of "
                       f"'{call.desc}'; this bias's strides {list(bias_view.strides)} are not", call)
        batch_stride = _chained(bias_view, letters.batch, sizes) if live & set(letters.batch) else 0
        if batch_stride is None:
            return _no(f"the bias's batch letters ({''.join(letters.batch)}) do not chain into one batch stride",
                       call)
        bias_batch = batch_stride

    what = f"cuBLASLt {name} on '{call.desc}'"
    return LtEpilogue(True, what, name, call, letters, ldd, stride_d, c_is_d, ldc, stride_c, bias_view is not None,
                      bias_batch, ab, out.dtype, bias_dtype, call.scaled)


def lt_epilogues(spec: Spec, calls, views: ProblemViews | None = None) -> list[LtEpilogue]:
    """`lt_epilogue` for each formulation, in order (the harness times the available ones)."""
    views = views if views is not None else analyse(spec)
    return [lt_epilogue(spec, c, views) for c in calls]


ALTERNATIVE_HEADER = "dg_cublaslt.cuh"
ALTERNATIVE_CLASS = "DgCublasLtAlternative<DgAltBaseline, DgProblem>"


def lt_alternative(spec: Spec, calls, views: ProblemViews | None = None) -> EpilogueAlternative | None:
    """The harness-side cuBLASLt baseline for `spec`, over those of `calls` that cuBLASLt runs with the whole
    epilogue; None where it runs none (why: `lt_epilogues`). The class tries them all and keeps the fastest."""
    lts = [lt for lt in lt_epilogues(spec, calls, views) if lt.available]
    if not lts:
        return None
    rt = spec.run_time_letter
    hi = rt[2] if rt is not None else 0
    inits = ", ".join(lt.c_initializer() for lt in lts)
    return EpilogueAlternative(ALTERNATIVE_HEADER, ALTERNATIVE_CLASS, f"({{{inits}}}, {hi}LL)",
                               f"cuBLASLt with its fused {lts[0].epilogue} epilogue, {len(lts)} formulation(s)")



# ------------------------------------------------------------------------------------------------------------
# cuBLASLt FP8 (e4m3) with scales: `bench`'s baseline of an e4m3 spec (issue 41)
# ------------------------------------------------------------------------------------------------------------
# cuBLASLt runs e4m3 as the "TN" product with one scale tensor an input, in one of the modes of
# cublasLtMatmulMatrixScale_t (templates/dg_cublaslt_fp8.cuh gives their layouts and the pairs cuBLASLt 13.1 takes on
# sm_90: SCALAR x SCALAR, OUTER_VEC x OUTER_VEC, VEC128 x VEC128, VEC128 x BLK128x128 either way round, and OUTER_VEC
# x BLK128x128 in one orientation of cuBLASLt's operands, which the harness picks from the output). Each mode's scale
# covers a region of its input: SCALAR everything, OUTER_VEC one row of A (column of B) and all of K, VEC128 one row
# and 128 k, BLK128x128 128 rows and 128 k. The header copies the spec's scales into the mode's tensor, each taking
# the spec's scale at its region's first element: the same scaling where the spec's scales are constant over every
# region (`exact`), the nearest otherwise.
#
# `plan_fp8` lists the pairs to try, in order: the spec's own modes; then the pairs that hold the spec's scales
# exactly (the coarsest first); then the nearest, block -> outer vector -> tensorwise. The harness tries them until
# the installed cuBLASLt's heuristic takes one, and `baseline_formulation` names it with its label. The operands and
# the output are matrices as they are where their views let them, else dense copies (the header decides from the
# problem's strides, at each run-time size).

SCALAR, OUTER_VEC, VEC128, BLK128 = "SCALAR_32F", "OUTER_VEC_32F", "VEC128_32F", "BLK128x128_32F"
FP8_MODE_IDS = {SCALAR: "DG_LT_FP8_SCALAR", OUTER_VEC: "DG_LT_FP8_OUTER_VEC", VEC128: "DG_LT_FP8_VEC128",
                BLK128: "DG_LT_FP8_BLK128x128"}
FP8_MODE_WORDS = {SCALAR: "tensorwise", OUTER_VEC: "outer vector", VEC128: "1x128", BLK128: "128x128"}
# The pairs (A's mode, B's mode) cuBLASLt has for e4m3 on sm_90, coarsest first (the outer-vector-with-block ones in
# one orientation only: the harness's heuristic call refuses the other, and the next candidate runs).
FP8_PAIRS = ((SCALAR, SCALAR), (OUTER_VEC, OUTER_VEC), (OUTER_VEC, BLK128), (BLK128, OUTER_VEC), (VEC128, BLK128),
             (BLK128, VEC128), (VEC128, VEC128))
DENSE_WEIGHTS_CLASS = "DgCublasLtDenseWeights<DgAltBaseline, DgProblem>"


def dense_weights_alternative(spec: Spec) -> EpilogueAlternative:
    """The baseline of integer weights: the product with the weights dequantized once and held dense in A's dtype,
    one cuBLASLt GEMM as F.linear runs it (dg_cublaslt.cuh's DgCublasLtDenseWeights): a 16-bit model's speed."""
    return EpilogueAlternative(ALTERNATIVE_HEADER, DENSE_WEIGHTS_CLASS, "",
                               f"cuBLASLt {spec.A.dtype} with the weights dense (what a {spec.A.dtype} model runs)")


FP8_HEADER = "dg_cublaslt_fp8.cuh"
FP8_CLASS = "DgCublasLtFp8Alternative<DgAltBaseline, DgProblem>"


@dataclass(frozen=True)
class Fp8Scaling:
    """One input's scales as cuBLASLt's modes see them: the spec's mode in cuBLASLt's terms (None for other blocks),
    how to say it, and the modes that hold these scales exactly."""

    operand: str
    mode: str | None
    words: str  # e.g. "1x128", "per-channel", "blocks m:1 k:64"
    exact: frozenset[str]


@dataclass(frozen=True)
class Fp8Candidate:
    mode_a: str
    mode_b: str
    label: str

    def c_initializer(self) -> str:
        return f'{{{FP8_MODE_IDS[self.mode_a]}, {FP8_MODE_IDS[self.mode_b]}, "{self.label}"}}'


@dataclass(frozen=True)
class Fp8Plan:
    """cuBLASLt FP8 for an e4m3 spec: the mode pairs to try in order, and what the header needs of the scales."""

    available: bool
    why: str
    candidates: tuple[Fp8Candidate, ...] = ()
    # (letter, A's block, B's block, stride in A_scales, stride in B_scales); block 0: the input lacks the letter.
    letters: tuple[tuple[str, int, int, int, int], ...] = ()
    scale_offsets: tuple[int, int] = (0, 0)

    def alternative(self) -> EpilogueAlternative:
        assert self.available
        letters = ", ".join(f"{{'{x}', {ba}LL, {bb}LL, {sa}LL, {sb}LL}}" for x, ba, bb, sa, sb in self.letters)
        cands = ", ".join(c.c_initializer() for c in self.candidates)
        args = f"({{{letters}}}, {{{cands}}}, DgLtFp8Scales{{{self.scale_offsets[0]}LL, {self.scale_offsets[1]}LL}})"
        return EpilogueAlternative(FP8_HEADER, FP8_CLASS, args,
                                   f"cuBLASLt FP8 e4m3, first try: {self.candidates[0].label}",
                                   includes=(ALTERNATIVE_HEADER,))


def fp8_scaling(spec: Spec, scales: ScaleView) -> Fp8Scaling:
    """Which cuBLASLt modes hold one input's scales: the outer letters (A's rows, B's columns) and the summed ones,
    each cut into blocks; size-1 letters do not count."""
    op = spec.A if scales.operand == "A" else spec.B
    sizes = spec.sizes
    c_letters = set(spec.C.letters)
    other = spec.B if scales.operand == "A" else spec.A
    outer = [x for x in op.letters if x in c_letters and x not in other.letters and sizes[x] > 1]
    summed = [x for x in op.letters if x not in c_letters and sizes[x] > 1]
    whole = {x: scales.block(x) >= sizes[x] for x in op.letters}

    def covers(letters: list[str], extent: int) -> bool:
        """The spec's scales are constant over every run of `extent` along the letters' linear index: all whole,
        or one letter (the only one longer than 1) cut in multiples of the run."""
        if all(whole[x] for x in letters):
            return True
        return len(letters) == 1 and scales.block(letters[0]) % extent == 0

    exact = set()
    if all(whole[x] for x in op.letters):
        exact.add(SCALAR)
    if covers(summed, sizes_product(sizes, summed) or 1):
        exact.add(OUTER_VEC)
    if covers(summed, 128):
        exact.add(VEC128)
        if covers(outer, 128):
            exact.add(BLK128)
    one_outer = all(scales.block(x) == 1 for x in outer)
    k128 = len(summed) == 1 and scales.block(summed[0]) == 128
    if SCALAR in exact:
        mode, words = SCALAR, "per-tensor"
    elif one_outer and all(whole[x] for x in summed):
        mode, words = OUTER_VEC, "per-channel"
    elif one_outer and k128:
        mode, words = VEC128, "1x128"
    elif len(outer) == 1 and scales.block(outer[0]) == 128 and k128:
        mode, words = BLK128, "128x128"
    else:
        mode = None
        words = "blocks " + " ".join(f"{x}:{scales.block(x)}" for x in op.letters if not whole[x])
    return Fp8Scaling(scales.operand, mode, words, frozenset(exact))


def sizes_product(sizes: dict[str, int], letters: list[str]) -> int:
    n = 1
    for x in letters:
        n *= sizes[x]
    return n


def _mode_words(mode: str, operand: str) -> str:
    what = {SCALAR: "tensorwise", OUTER_VEC: f"one a {'row of A' if operand == 'A' else 'column of B'}",
            VEC128: "1x128", BLK128: "128x128"}[mode]
    return f"{operand} scales {mode} ({what})"


def fp8_candidates(a: Fp8Scaling, b: Fp8Scaling) -> tuple[Fp8Candidate, ...]:
    """The pairs to try, in order (see the section comment), each labelled with how it relates to the spec."""
    out: list[Fp8Candidate] = []

    def add(pair: tuple[str, str], how: str) -> None:
        if all(c.mode_a != pair[0] or c.mode_b != pair[1] for c in out):
            out.append(Fp8Candidate(*pair, f"{_mode_words(pair[0], 'A')}, {_mode_words(pair[1], 'B')}: {how}"))

    spec_words = f"A {a.words}, B {b.words}"
    if (a.mode, b.mode) in FP8_PAIRS:
        add((a.mode, b.mode), "the spec's scaling")
    for pair in FP8_PAIRS:
        if pair[0] in a.exact and pair[1] in b.exact:
            add(pair, f"the spec's scales ({spec_words}) exactly, in modes cuBLASLt has")
    nearest = f"nearest to the spec's scales ({spec_words}): each takes the spec's scale at its block's first element"
    block = (BLK128, VEC128) if a.mode == BLK128 and b.mode != BLK128 else \
        (VEC128, BLK128) if b.mode == BLK128 else (VEC128, VEC128)
    for pair in (block, (OUTER_VEC, OUTER_VEC), (SCALAR, SCALAR)):
        add(pair, nearest)
    return tuple(out)


def plan_fp8(views: ProblemViews) -> Fp8Plan:
    """cuBLASLt FP8 for an e4m3 spec (at the run-time letter's max), or why it cannot run it."""
    spec = views.spec
    if len(spec.scales) != 2:
        return Fp8Plan(False, "cuBLASLt's FP8 takes a scale for A and one for B")
    if views.batch > 1:
        return Fp8Plan(False, f"a batch of {views.batch}: cuBLASLt's FP8 scale tensors have no batch stride")
    if max(views.m, views.n, views.k) > INT32_MAX:
        return Fp8Plan(False, "a size exceeds cuBLASLt's 32-bit int")
    sa, sb = spec.scales
    a, b = fp8_scaling(spec, sa), fp8_scaling(spec, sb)
    letters = []
    for x in spec.sizes:
        blocks = [sc.block(x) if x in (spec.A if sc is sa else spec.B).letters else 0 for sc in (sa, sb)]
        strides = [sc.view.stride_of(x) if x in sc.view.letters else 0 for sc in (sa, sb)]
        letters.append((x, blocks[0], blocks[1], strides[0], strides[1]))
    return Fp8Plan(True, f"cuBLASLt FP8 e4m3 (A {a.words}, B {b.words})", fp8_candidates(a, b), tuple(letters),
                   (sa.view.offset, sb.view.offset))
