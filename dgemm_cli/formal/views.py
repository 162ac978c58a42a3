"""The views' index maps as the kernels form them (pure): `dg::Role` offsets over merged segments (dg/view.cuh), the
roles an operand's traits give a Role, the reaches and pointer alignments, the epilogue's operands. Families build
their models from these; the traits' `dg::View` types are printed from the same segments (`role_type`), which
tests/test_formal.py compares with the rendered .cu."""

from __future__ import annotations

from dgemm_cli.formal.expr import INDEX, Const, Expr
from dgemm_cli.formal.model import Reach, reach_of
from dgemm_cli.views import ROLES, ProblemViews, role_holders


def view_roles(views: ProblemViews, operand: str) -> tuple[str, ...]:
    """The roles `operand`'s traits give a non-empty Role (templates/common/_traits.j2, render._operand_ctx): those it
    holds with segments; an epilogue view only those along which it moves (a bias is broadcast over the others)."""
    spec = views.spec
    roles = tuple(r for r in ROLES if operand in role_holders(r, spec) and views.roles[r].segments)
    if operand not in "ABC":
        roles = tuple(r for r in roles if any(seg.stride(operand) for seg in views.roles[r].segments))
    return roles


def segments(views: ProblemViews, operand: str, role: str) -> tuple[tuple[int, int], ...]:
    """(size, stride) of each segment of `role` in `operand`, innermost first: the Role's template arguments."""
    if role not in view_roles(views, operand):
        return ()
    return tuple((s.size, s.stride(operand)) for s in reversed(views.roles[role].segments))


def role_offset(segs: tuple[tuple[int, int], ...], i: Expr) -> Expr:
    """dg::Role<index_t, Seg...>::offset(i): (i % size) * stride + the next segments' offset of i / size, the
    outermost segment without a remainder; a single segment of stride 1 is i itself."""
    if not segs:
        return Const(0, ctype=INDEX)
    (size, stride), rest = segs[0], segs[1:]
    if not rest:
        return i if stride == 1 else i * Const(stride, ctype=INDEX)
    seg_size, seg_stride = Const(size, ctype=INDEX), Const(stride, ctype=INDEX)
    return (i % seg_size) * seg_stride + role_offset(rest, i // seg_size)


def role_type(segs: tuple[tuple[int, int], ...]) -> str:
    """The C++ type of a Role, as the traits spell it."""
    return "dg::Role<index_t" + "".join(f", dg::Seg<{size}, {stride}>" for size, stride in segs) + ">"


def view_type(views: ProblemViews, operand: str) -> str:
    """`operand`'s dg::View type, one Role per role, whitespace-free."""
    return (f"dg::View<{','.join(role_type(segments(views, operand, r)) for r in ROLES)}>").replace(" ", "")


def operand_reach(views: ProblemViews, operand: str, rows: Expr | None, checked_align: int = 0) -> Reach:
    """`operand`'s reach from its kernel pointer and what is known of that pointer's alignment: `checked_align` bytes
    where the launcher checks it at run time, else the spec's promise (`align:` bytes, with `offset:` elements past
    the aligned base)."""
    op = views.spec.operand(operand)
    elem = views.operands[operand].elem_bytes
    if checked_align:
        return reach_of(views, operand, rows, max(1, checked_align // elem), 0)
    align = max(1, op.align // elem)
    return reach_of(views, operand, rows, align, op.offset % align)
