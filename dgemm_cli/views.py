"""Stage 2: view analysis. Spec -> `ProblemViews` (pure).

Every letter of the contraction gets a role: batch (in A, B and C), m (A and C), n (B and C) or
k (not in C: summed). A summed letter in one input only is an ordinary k letter whose stride in the
other input is 0 (that input is broadcast over it), and a role no letter has is empty (size 1, no
segments): a full reduction `ab,ab->` is M = N = 1, a scalar input has no roles.

Within a role, adjacent letters whose strides chain in *every* operand that holds the role
(stride[outer] == stride[inner] * size[inner]) merge into one `ViewSegment`, so a kernel indexes
the role as a few (size, stride) pairs instead of one pair per letter: the 1x1 convolution's h and
w become one segment of 3136, a dense batched GEMM has one segment a role.
Letters of size 1 never move an address and are dropped. A letter sized at run time (`{min, max}`,
analysed at its max) is the outermost letter of its role, so its size enters no index math but the
role's extent.

The output view D and the epilogue's views (bias, scale, residual) are views over C's letters: they
hold C's roles (a letter a bias lacks is one it is broadcast over: stride 0) and take part in the
merging, so that one (size, stride) walk addresses every tensor the epilogue touches.

Per operand we record the facts the planner needs: which role is contiguous (stride 1 on its
innermost segment), how wide a vector load may be along it, and how far the view reaches.
"""

from __future__ import annotations

from dataclasses import dataclass

from dgemm_cli.errors import PlanError
from dgemm_cli.spec import DTYPE_BYTES, Spec

ROLES = ("batch", "m", "n", "k")
ROLE_HOLDERS = {"batch": ("A", "B", "C"), "m": ("A", "C"), "n": ("B", "C"), "k": ("A", "B")}
C_ROLES = ("batch", "m", "n")  # C's roles: the output view D and the epilogue's views hold them too
INT32_MAX = 2**31 - 1
VECTOR_BYTES = 16  # widest single load/store (cp.async.cg, ld.global.v4)


@dataclass(frozen=True)
class ViewSegment:
    """A run of adjacent letters of one role that address memory as one (size, stride) pair."""

    letters: tuple[str, ...]  # outer -> inner
    size: int
    strides: tuple[tuple[str, int], ...]  # (operand, element stride of one step) for each holder of the role

    def stride(self, operand: str) -> int:
        return dict(self.strides)[operand]

    @property
    def label(self) -> str:
        """e.g. "hw[3136]": the merged letters and the segment size."""
        return f"{''.join(self.letters)}[{self.size}]"


@dataclass(frozen=True)
class RoleView:
    role: str
    letters: tuple[str, ...]  # letters of size > 1, outer -> inner
    size: int  # product of the letter sizes (1 when the role is absent)
    segments: tuple[ViewSegment, ...]  # outer -> inner; empty when size == 1

    def inner(self) -> ViewSegment | None:
        return self.segments[-1] if self.segments else None


@dataclass(frozen=True)
class OperandFacts:
    name: str
    dtype: str
    elem_bytes: int
    roles: tuple[str, ...]  # roles this operand holds, of size > 1
    unit_role: str | None  # role whose innermost segment has stride 1
    vector_elems: int  # widest vector (elements, power of two, <= 16 bytes) along unit_role, as promised
    vector_limit: str  # the fact that capped vector_elems
    # The same if the base pointer turns out 16-byte aligned (cudaMalloc gives 256): the launcher
    # can check the pointer at run time and take the wider path when it is.
    vector_elems_aligned: int
    vector_limit_aligned: str
    span: int  # elements the buffer must hold
    offset: int
    align: int
    # Letters of size > 1 with stride 0 (inputs only), including summed letters only the other input has.
    broadcast: tuple[str, ...]

    @property
    def vector_bytes(self) -> int:
        return self.vector_elems * self.elem_bytes


@dataclass(frozen=True)
class ProblemViews:
    spec: Spec
    roles: dict[str, RoleView]
    operands: dict[str, OperandFacts]  # A, B, C, then D and the epilogue views the spec has
    needs_int64: bool  # some offset or role index can pass 2^31 - 1

    @property
    def batch(self) -> int:
        return self.roles["batch"].size

    @property
    def m(self) -> int:
        return self.roles["m"].size

    @property
    def n(self) -> int:
        return self.roles["n"].size

    @property
    def k(self) -> int:
        return self.roles["k"].size

    @property
    def flops(self) -> int:
        return 2 * self.batch * self.m * self.n * self.k


def role_of(letter: str, spec: Spec) -> str:
    in_a, in_b, in_c = (letter in op.letters for op in spec.operands)
    assert in_a or in_b, f"letter {letter} in no input passed spec validation"
    if in_a and in_b and in_c:
        return "batch"
    if in_a and in_c:
        return "m"
    if in_b and in_c:
        return "n"
    return "k"  # summed: in A and B, or in one input only (numpy sums it too)


def role_holders(role: str, spec: Spec) -> tuple[str, ...]:
    """The operands that hold `role`: A/B/C by the contraction, plus D and the epilogue's views for C's roles."""
    extra = tuple(op.name for op in spec.extra_operands) if role in C_ROLES else ()
    return ROLE_HOLDERS[role] + extra


def letter_stride(spec: Spec, operand: str, letter: str) -> int:
    """Element stride of `letter` in `operand`. A summed letter the operand lacks is one it is
    broadcast over: stride 0 (the only way a role holder can lack a letter of its role), and so is
    a letter of C that a bias or scale view does not name."""
    op = spec.operand(operand)
    if letter in op.letters:
        return op.stride_of(letter)
    assert role_of(letter, spec) == "k" or operand not in "ABC", f"{operand} lacks non-summed letter {letter}"
    return 0


@dataclass(frozen=True)
class LetterClass:
    """How one letter was classified, for `explain`."""

    letter: str
    size: int
    role: str
    holders: tuple[str, ...]  # the operands that name the letter

    @property
    def description(self) -> str:
        if self.role == "batch":
            text = "batch (in A, B and C)"
        elif self.role in ("m", "n"):
            text = f"{self.role.upper()} (in {self.holders[0]} and C)"
        elif len(self.holders) == 2:
            text = "summed (in A and B)"
        else:
            other = "B" if self.holders == ("A",) else "A"
            text = f"summed, in {self.holders[0]} only ({other} broadcast)"
        return text + ("; size 1: dropped" if self.size == 1 else "")


def classify_letters(spec: Spec) -> tuple[LetterClass, ...]:
    return tuple(LetterClass(x, size, role_of(x, spec), tuple(op.name for op in spec.operands if x in op.letters))
                 for x, size in spec.sizes.items())


def merge_segments(letters: list[str], sizes: dict[str, int],
                   strides: dict[str, dict[str, int]]) -> tuple[ViewSegment, ...]:
    """Merge adjacent letters (outer -> inner) whose strides chain in every operand of `strides`."""
    segments: list[tuple[list[str], int]] = []
    for letter in letters:
        if segments:
            prev_letters, prev_size = segments[-1]
            outer = prev_letters[-1]
            # The run [..., outer] merges with `letter` when one step of `outer` equals `size` steps of `letter`.
            if all(st[outer] == st[letter] * sizes[letter] for st in strides.values()):
                segments[-1] = (prev_letters + [letter], prev_size * sizes[letter])
                continue
        segments.append(([letter], sizes[letter]))
    return tuple(
        ViewSegment(tuple(ls), size, tuple((op, st[ls[-1]]) for op, st in strides.items()))
        for ls, size in segments
    )


def _role_view(role: str, spec: Spec) -> RoleView:
    holders = role_holders(role, spec)
    letters = [x for x in spec.sizes if spec.sizes[x] > 1 and role_of(x, spec) == role]
    if not letters:
        return RoleView(role, (), 1, ())
    strides = {h: {x: letter_stride(spec, h, x) for x in letters} for h in holders}
    # A letter sized at run time goes outermost: its size then enters no stride and no modulo of the
    # role's index math (only the role's extent), and nothing merges outside it.
    first = [x for x in letters if x in spec.dynamic]
    # Try the letter order of each holder (largest stride outermost) and keep the one that merges
    # most: a permuted view of one operand must not stop the others from merging.
    best: tuple[ViewSegment, ...] | None = None
    for h in holders:
        order = first + sorted((x for x in letters if x not in first), key=lambda x, h=h: -strides[h][x])
        segs = merge_segments(order, spec.sizes, strides)
        if best is None or len(segs) < len(best):
            best = segs
    assert best is not None
    size = 1
    for x in letters:
        size *= spec.sizes[x]
    return RoleView(role, tuple(x for s in best for x in s.letters), size, best)


def _operand_facts(name: str, spec: Spec, roles: dict[str, RoleView]) -> OperandFacts:
    op = spec.operand(name)
    held = tuple(r for r in ROLES if name in role_holders(r, spec) and roles[r].size > 1)
    unit = [r for r in held if roles[r].inner().stride(name) == 1]
    # Prefer k for the inputs (the reduction dim is what a tile streams along), n for C and C's kin.
    is_input = name in ("A", "B")
    preference = ("k", "m", "n", "batch") if is_input else ("n", "m", "batch")
    unit_role = next((r for r in preference if r in unit), None)
    elem = DTYPE_BYTES[op.dtype]
    vec, limit = _vector_width(name, op.offset, op.align, elem, unit_role, held, roles)
    vec16, limit16 = _vector_width(name, op.offset, max(op.align, VECTOR_BYTES), elem, unit_role, held, roles)
    broadcast = tuple(x for x, s, st in zip(op.letters, op.sizes, op.strides) if s > 1 and st == 0)
    if is_input:
        broadcast += tuple(x for x in roles["k"].letters if x not in op.letters)
    return OperandFacts(name, op.dtype, elem, held, unit_role, vec, limit, vec16, limit16, op.span, op.offset,
                        op.align, broadcast)


def _vector_width(name: str, offset: int, align: int, elem: int, unit_role: str | None,
                  held: tuple[str, ...], roles: dict[str, RoleView]) -> tuple[int, str]:
    """Widest power-of-two vector of elements along `unit_role` such that every vector a tile can ask
    for is aligned and lies inside one segment. Returns (elements, the fact that capped it)."""
    widest = VECTOR_BYTES // elem
    if unit_role is None:
        return 1, "no dim of this operand has stride 1"
    vec = widest
    limit = f"{VECTOR_BYTES}-byte vector limit"
    while vec > 1:
        problem = None
        inner = roles[unit_role].segments[-1]
        if len(roles[unit_role].segments) > 1 and inner.size % vec:
            problem = (f"innermost {unit_role} segment ({''.join(inner.letters)}) has {inner.size} elements, "
                       f"not a multiple of {vec}")
        for r in held:
            for seg in roles[r].segments:
                st = seg.stride(name)
                if not (r == unit_role and seg is inner) and st % vec:
                    problem = problem or f"stride {st} of {''.join(seg.letters)} is not a multiple of {vec}"
        if offset % vec:
            problem = problem or f"offset {offset} is not a multiple of {vec}"
        if align % (vec * elem):
            problem = problem or f"base pointer promised {align}-byte aligned only (align:)"
        if problem is None:
            return vec, limit
        limit = problem
        vec //= 2
    return 1, limit


def inner_stride(views: ProblemViews, role: str, operand: str) -> int:
    """`operand`'s element stride along the innermost segment of `role` (0 for an empty role or one the
    operand is broadcast over)."""
    seg = views.roles[role].inner()
    return dict(seg.strides).get(operand, 0) if seg is not None else 0


def output_unit_role(views: ProblemViews) -> str | None:
    """The tiled role ("n" preferred, else "m") along which the view the kernel writes (D, or C) is
    contiguous: element-wise and vector stores walk it so that they coalesce. None if neither is."""
    out = views.spec.output.name
    return next((r for r in ("n", "m") if views.roles[r].segments and inner_stride(views, r, out) == 1), None)


def analyse(spec: Spec) -> ProblemViews:
    roles = {r: _role_view(r, spec) for r in ROLES}
    # A, B, C, then D and the epilogue's views (which hold C's roles), in the C API's order.
    names = ("A", "B", "C", *(op.name for op in spec.extra_operands))
    operands = {name: _operand_facts(name, spec, roles) for name in names}
    spans = [o.span for o in operands.values()]
    biggest = max(spans + [r.size for r in roles.values()])
    return ProblemViews(spec, roles, operands, needs_int64=biggest > INT32_MAX)


def grid_too_large(views: ProblemViews, count: int, what: str) -> PlanError:
    """The error for a plan whose `count` blocks or tiles exceed a 32-bit launch index: it names the size keys of the
    output's letters and how to split the problem."""
    spec = views.spec
    keys = ", ".join(spec.size_key(x) for x in spec.output.letters if spec.sizes[x] > 1) or "the output's sizes"
    return PlanError(f"{spec.source}: {keys}: {count} {what} exceed a 32-bit launch index (2^31 - 1). Fix: split the "
                     f"problem into several specs, each a slice of {keys} with fewer {what}")

