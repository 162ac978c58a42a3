"""How cuBLAS computes the same product, for `bench` (pure).

cuBLAS takes column-major matrices with a leading dimension and one batch stride. A view that
fits (one segment a role, a unit stride in one matrix dim, ld >= rows, no broadcast in a matrix
dim) is passed as it is; any operand that does not fit goes through a dense temp, the
`.contiguous()` a user would do: A and B are gathered before the GEMM, C is computed into a temp
and scattered back (gathered first when beta != 0). The copies are timed with the GEMM.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dgemm_cli.views import INT32_MAX, ProblemViews

MATRIX_ROLES = {"A": ("m", "k"), "B": ("k", "n"), "C": ("m", "n")}
# cublasGemmEx type combinations with CUBLAS_COMPUTE_32F that deepgemm's dtypes can hit.
SUPPORTED = {("f16", "f16"), ("f16", "f32"), ("bf16", "bf16"), ("bf16", "f32"), ("f32", "f32")}


@dataclass(frozen=True)
class StridedView:
    size: tuple[int, ...]
    stride: tuple[int, ...]


@dataclass(frozen=True)
class CublasPlan:
    available: bool
    kind: str  # "cublas", "copy+cublas", or "unavailable: <why>"
    why: str
    copy: tuple[bool, bool, bool] = (False, False, False)
    views: tuple[StridedView, StridedView, StridedView] = field(
        default=(StridedView((), ()), StridedView((), ()), StridedView((), ())))
    swap: bool = False
    trans_x: bool = False
    trans_y: bool = False
    m: int = 0
    n: int = 0
    k: int = 0
    ldx: int = 0
    ldy: int = 0
    ldc: int = 0
    stride_x: int = 0
    stride_y: int = 0
    stride_c: int = 0
    batch: int = 0


@dataclass(frozen=True)
class _Mat:
    """One operand as (batch, rows, cols) with single strides, after an optional dense copy."""

    batch_stride: int
    sizes: dict[str, int]
    strides: dict[str, int]


def _col_major(rows: int, cols: int, s_rows: int, s_cols: int) -> int | None:
    """Leading dimension if (rows x cols) with these strides is column-major, else None."""
    if rows > 1 and s_rows != 1:
        return None
    ld = s_cols if cols > 1 else max(1, rows)
    return ld if ld >= max(1, rows) else None


def _operand_view(views: ProblemViews, name: str) -> StridedView:
    roles = ("batch", *MATRIX_ROLES[name])
    segs = [s for r in roles for s in views.roles[r].segments]
    return StridedView(tuple(s.size for s in segs), tuple(s.stride(name) for s in segs))


def _direct(views: ProblemViews, name: str) -> _Mat | None:
    """The operand as one (batch, rows, cols) matrix, or None if it needs a copy."""
    strides = {}
    for role in ("batch", *MATRIX_ROLES[name]):
        segs = views.roles[role].segments
        if len(segs) > 1:
            return None
        strides[role] = segs[0].stride(name) if segs else 0
        if role != "batch" and segs and strides[role] == 0:
            return None  # broadcast inside the matrix: cuBLAS has no stride-0 ld
    sizes = {r: views.roles[r].size for r in MATRIX_ROLES[name]}
    return _Mat(strides["batch"], sizes, strides)


def _dense(views: ProblemViews, name: str) -> _Mat:
    r1, r2 = MATRIX_ROLES[name]
    s1, s2 = views.roles[r1].size, views.roles[r2].size
    return _Mat(s1 * s2 if views.batch > 1 else 0, {r1: s1, r2: s2}, {r1: s2, r2: 1})


def plan_baseline(views: ProblemViews) -> CublasPlan:
    ab, c_dtype = views.operands["A"].dtype, views.operands["C"].dtype
    if (ab, c_dtype) not in SUPPORTED:
        return CublasPlan(False, f"unavailable: cuBLAS has no {ab} x {ab} -> {c_dtype} GEMM", "no such cuBLAS type mix")
    if max(views.m, views.n, views.k, views.batch) > INT32_MAX:
        return CublasPlan(False, "unavailable: a size exceeds cuBLAS's 32-bit int", "sizes beyond int")
    copy = {x: _direct(views, x) is None for x in "ABC"}
    while True:
        mats = {x: _dense(views, x) if copy[x] else _direct(views, x) for x in "ABC"}
        result = _map(views, mats)
        if isinstance(result, str):  # the operand that does not fit as it is
            assert not copy[result], "a dense temp always fits"
            copy[result] = True
            continue
        break
    kind = "copy+cublas" if any(copy.values()) else "cublas"
    why = ("views passed to cuBLAS as they are" if kind == "cublas"
           else "dense temps for " + ", ".join(x for x in "ABC" if copy[x]) + " (what .contiguous() would do)")
    return CublasPlan(
        True, kind, why,
        copy=(copy["A"], copy["B"], copy["C"]),
        views=tuple(_operand_view(views, x) for x in "ABC"),
        **result,
    )


def _map(views: ProblemViews, mats: dict[str, _Mat]) -> dict | str:
    """Fit C (or C^T) column-major, then A and B to it. Returns the call or the misfit operand."""
    m, n, k = views.m, views.n, views.k
    c = mats["C"]
    ldc = _col_major(m, n, c.strides["m"], c.strides["n"])
    swap = False
    if ldc is None:
        ldc, swap = _col_major(n, m, c.strides["n"], c.strides["m"]), True
        if ldc is None:
            return "C"
    # Column-major X (rows x inner) and Y (inner x cols) with C' = X Y. No swap: X = A, Y = B.
    # Swap (C^T = B^T A^T): X = B^T, Y = A^T.
    if not swap:
        xs = (mats["A"], "m", "k", m, k)
        ys = (mats["B"], "k", "n", k, n)
    else:
        xs = (mats["B"], "n", "k", n, k)
        ys = (mats["A"], "k", "m", k, m)
    fitted = []
    for (mat, r_rows, r_cols, rows, cols), name in ((xs, "B" if swap else "A"), (ys, "A" if swap else "B")):
        ld = _col_major(rows, cols, mat.strides[r_rows], mat.strides[r_cols])
        trans = False
        if ld is None:
            ld, trans = _col_major(cols, rows, mat.strides[r_cols], mat.strides[r_rows]), True
            if ld is None:
                return name
        if ld > INT32_MAX:
            return name
        fitted.append((ld, trans, mat.batch_stride))
    (ldx, tx, sx), (ldy, ty, sy) = fitted
    if ldc > INT32_MAX:
        return "C"
    return dict(swap=swap, trans_x=tx, trans_y=ty, m=n if swap else m, n=m if swap else n, k=k,
                ldx=ldx, ldy=ldy, ldc=ldc, stride_x=sx, stride_y=sy, stride_c=c.batch_stride, batch=views.batch)
