"""How cuBLAS computes the same product, for `bench` (pure).

cuBLAS takes one column-major GEMM a call, repeated over one batch dim; a *formulation*
(cublas_formulations.py) maps the views' segments onto such a call without copying anything.

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

from dgemm_cli.baseline_lt import lt_alternative
from dgemm_cli.cublas_formulations import (
    MATRIX_ROLES,
    SUPPORTED,
    CublasCall,
    Dim,
    StridedView,
    fit,
    formulations,
    run_time_letter,
)
from dgemm_cli.spec import Spec
from dgemm_cli.views import INT32_MAX, ProblemViews, analyse

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


def _operand_view(views: ProblemViews, name: str, run_time: str | None) -> StridedView:
    roles = ("batch", *MATRIX_ROLES[name])
    segs = [s for r in roles for s in views.roles[r].segments]
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
    alternative = lt_alternative(spec, plan.calls)
    return replace(plan, alternative=EpilogueAlternative(**alternative) if alternative else None)


def _plan_gemm(views: ProblemViews) -> CublasPlan:
    ab, c_dtype = views.operands["A"].dtype, views.operands["C"].dtype
    if (ab, c_dtype) not in SUPPORTED:
        return CublasPlan(False, f"unavailable: cuBLAS has no {ab} x {ab} -> {c_dtype} GEMM", "no such cuBLAS type mix")
    if max(views.m, views.n, views.k, views.batch) > INT32_MAX:
        return CublasPlan(False, "unavailable: a size exceeds cuBLAS's 32-bit int", "sizes beyond int")
    run_time = run_time_letter(views)
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
        batch = Dim("batch", views.batch, {x: dims[x][0] for x in "ABC"}, scaled_strides=scaled_strides)
        role = {r: Dim(r, views.roles[r].size, {x: dims[x][1].get(r, 0) for x in "ABC"},
                        scaled=r == "m" and run_time is not None) for r in ("m", "n", "k")}
        call = fit(batch, role["m"], role["n"], role["k"], False) or fit(batch, role["m"], role["n"], role["k"], True)
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
