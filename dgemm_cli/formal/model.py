"""A kernel's index maps as data, and the obligations that say it is right (pure).

A family describes each kernel it renders as a `KernelModel`: the quantities the kernel does not know at compile time
(block, thread, iteration, vector lane, the run-time rows) with their ranges, every global access (`Access`: its
address, how many elements it moves, under which guard, which logical element each lane is), and the maps that must
be one-to-one and onto (`Bijection`: blocks x threads x fragments onto the output, a loader's walk onto its
shared-memory tile, k-tiles x tile columns onto K). `obligations` turns a model into the statements the Coq script
proves and the enumerating check tests:

  in-bounds    every address inside its operand's reachable range, vectors aligned to their width;
  written-once the output's elements, each stored by exactly one (block, thread, fragment), nothing else stored;
  full-k       every element a load moves is the view's element at its logical index, nothing in the view is
               dropped (a zero stands only for an index past the view), the tiles cover K once;
  64-bit       no intermediate leaves its C++ type's range, no division meets a negative dividend.

The reference each load and store is compared with is `reference_offset`: the spec's own letters, sizes and strides,
not the merged segments the kernel indexes with.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from dgemm_cli.formal.expr import (
    INDEX,
    INT,
    INT_BITS,
    TRUE,
    Cmp,
    Const,
    Expr,
    Pred,
    Var,
    all_of,
    divisions,
    int_nodes,
    lift,
    readable,
    substitute,
)
from dgemm_cli.views import ProblemViews, letter_stride


@dataclass(frozen=True)
class Range:
    """lo <= var < hi (hi None: unbounded above). `size`: the variable is a size the kernel takes at run time (the
    rows of a run-time letter), not an index; a proof may take its values one at a time."""

    var: Var
    lo: Expr
    hi: Expr | None
    size: bool = False

    def pred(self) -> Pred:
        lo = Cmp("<=", self.lo, self.var)
        return lo if self.hi is None else all_of(lo, Cmp("<", self.var, self.hi))


@dataclass(frozen=True)
class Reach:
    """Where an operand's view lies, in elements from the kernel's pointer (the element at index 0), and what its
    pointer's alignment is known to be: the pointer is `align * j + phase` elements for some j >= 0."""

    operand: str
    lo: Expr
    hi: Expr
    align: int  # elements
    phase: int  # elements


@dataclass(frozen=True)
class Access:
    """One global load or store instruction of a kernel, over its ranges.

    `count` elements from `address` move (0 where the guard skips the access); lane e < count is the view's element at
    `logical(e)`, the role indices (batch, m, n or k) of that element. For loads that fill a shared tile, `width`
    lanes make a slot of the tile: a lane e >= count holds zero, which is right only where its logical index lies
    outside the view (`zero_fill`)."""

    ident: str  # a Coq identifier's stem
    text: str  # "A: 16-byte cp.async (8 elements)"
    operand: str
    kind: str  # "load" or "store"
    ranges: tuple[Range, ...]
    count: Expr
    address: Expr
    width: int  # lanes: the instruction's vector width in elements
    logical: Mapping[str, Expr]  # role -> the lane's role index (over the ranges and the lane variable LANE)
    extent: Mapping[str, Expr]  # role -> the view's size along it (a logical index is in the view when below)
    aligned: int = 1  # elements the address must be a multiple of (from the view's pointer alignment)
    align_always: bool = False  # the alignment holds even where count == 0 (cp.async's zero-byte copy still aligns)
    zero_fill: bool = False
    slot: Pred = TRUE  # the lanes are a slot of the shared tile (the walk's guard: threads past the tile move none)
    always: tuple[Expr, ...] = ()  # intermediates computed whatever the guard (their range is bounded everywhere)
    # The element offset lane e must be at (over the ranges and LANE), where the operand is no view of the spec (a
    # scratch buffer the launcher allocates: its layout is the one the kernel that reads it indexes); None: the
    # spec's `reference_offset` at `logical`.
    reference: Expr | None = None
    # Where given, the lanes' logical indices lie in the view exactly when this holds, in place of `extent`: a kernel
    # that indexes a role by its segments' digits (a tile never straddling a segment) has a lane past its segment
    # outside the view although the role's combined index may lie below the role's size.
    inside: Pred | None = None
    # Where the operand is a packed 4-bit view (its elements 32-bit words of eight values): the place (0..7) of the
    # value among its word's eight that the kernel selects for lane e; the address is then the word's. None: a view of
    # whole elements.
    place: Expr | None = None


LANE = Var("lane_e")
PROPERTIES = ("in-bounds", "written-once", "full-k", "64-bit")  # what an obligation serves (issue 44's four)
# CUDA's own indices, as the kernels spell them.
THREAD = Var("thread", INT, "threadIdx.x")
BLOCK = Var("block", INT, "blockIdx.x")


@dataclass(frozen=True)
class Bijection:
    """`image` maps the domain (ranges where `guard` holds) one-to-one onto the target box; `inverse` gives each
    domain variable back from the target's variables (the witness of onto, and with it of one-to-one)."""

    ident: str
    text: str
    prop: str  # "written-once" or "full-k"
    ranges: tuple[Range, ...]
    guard: Pred
    image: tuple[Expr, ...]
    target: tuple[Range, ...]
    inverse: Mapping[str, Expr]  # domain variable -> its value over the target's variables
    params: tuple[Range, ...] = ()  # quantified on both sides (the run-time rows)


@dataclass(frozen=True)
class Fact:
    """A plain statement over its ranges."""

    ident: str
    prop: str  # the property it serves, as an Obligation's: in-bounds, written-once, full-k, 64-bit
    text: str
    ranges: tuple[Range, ...]
    hyps: Pred
    goal: Pred


@dataclass(frozen=True)
class KernelModel:
    kernel: str  # the kernel's namespace and variant, as reports name it
    family: str
    index_type: str  # the kernel's index_t: "int" or "long long"
    reach: Mapping[str, Reach]
    accesses: tuple[Access, ...]
    bijections: tuple[Bijection, ...]
    facts: tuple[Fact, ...] = ()
    trusted: tuple[str, ...] = ()  # what the proof takes as given, in words


@dataclass(frozen=True)
class Obligation:
    """One statement: for all `ranges` with `hyps`, `goal`."""

    ident: str
    prop: str  # one of PROPERTIES
    text: str
    ranges: tuple[Range, ...]
    hyps: Pred
    goal: Pred


def type_range(ctype: str, index_type: str) -> tuple[int, int]:
    bits = 32 if ctype == INT else INT_BITS[index_type]
    return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1


def _conj(ranges: tuple[Range, ...], *preds: Pred) -> Pred:
    return all_of(*(r.pred() for r in ranges), *preds)


def _lane_range(hi: Expr | int) -> Range:
    return Range(LANE, Const(0), lift(hi))


def _in_view(access: Access) -> Pred:
    if access.inside is not None:
        return access.inside
    return all_of(*(all_of(Cmp("<=", Const(0), i), Cmp("<", i, access.extent[r])) for r, i in access.logical.items()))


# An operand's reference offset at role indices (`reference_offset` bound to the views and the operand).
Reference = Callable[[Mapping[str, Expr]], Expr]
# A packed operand's statement that the place (0..7) a kernel selects in the reference word holds the value at the role
# indices (`formal.packed.value_place` bound to the views and the operand).
PlaceReference = Callable[[Mapping[str, Expr], Expr], Pred]


def obligations(model: KernelModel, references: Mapping[str, Reference],
                places: Mapping[str, PlaceReference] | None = None) -> list[Obligation]:
    """Every obligation of `model`. `references[operand]` is a function role-indices -> the reference element offset
    (`reference_offset` bound to the views); `places[operand]`, for a packed operand, the statement of the place its
    accesses select (`Access.place`)."""
    out: list[Obligation] = []
    for a in model.accesses:
        reach = model.reach[a.operand]
        moving = Cmp("<", Const(0), a.count)
        # in-bounds: the elements moved lie inside the view's reach.
        out.append(Obligation(f"{a.ident}_in_bounds", "in-bounds",
                              f"{a.text}: every element it {'reads' if a.kind == 'load' else 'writes'} lies inside "
                              f"{a.operand}'s view ({readable(reach.lo)} .. {readable(reach.hi)} elements from its "
                              "pointer)",
                              a.ranges, _conj(a.ranges, moving),
                              all_of(Cmp("<=", reach.lo, a.address), Cmp("<=", a.address + a.count - 1, reach.hi))))
        if a.aligned > 1:
            j = Var("ptr_j")
            ranges = (*a.ranges, Range(j, Const(0), None))
            hyps = _conj(ranges) if a.align_always else _conj(ranges, moving)
            out.append(Obligation(f"{a.ident}_aligned", "in-bounds",
                                  f"{a.text}: its address is a multiple of {a.aligned} elements (the pointer is "
                                  f"{reach.align} x j + {reach.phase} elements)",
                                  ranges, hyps,
                                  Cmp("==", (j * reach.align + reach.phase + a.address) % a.aligned, Const(0))))
        # full-k: each lane moved is the view's element at its logical index.
        lane_ranges = (*a.ranges, _lane_range(a.count))
        expected = a.reference if a.reference is not None else references[a.operand](a.logical)
        element = all_of(_in_view(a), Cmp("==", a.address + LANE, expected))
        what = "element"
        if a.place is not None:
            assert places is not None and a.operand in places, f"{a.ident}: {a.operand} has no place reference"
            element = all_of(element, places[a.operand](a.logical, a.place))
            what = "word, and the place it selects holds the value,"
        out.append(Obligation(f"{a.ident}_element", "full-k" if a.kind == "load" else "written-once",
                              f"{a.text}: lane e of the access is {a.operand}'s {what} at its logical index, "
                              "inside the view",
                              lane_ranges, _conj(lane_ranges), element))
        if a.zero_fill:
            fill_ranges = (*a.ranges, _lane_range(a.width))
            out.append(Obligation(f"{a.ident}_zero_fill", "full-k",
                                  f"{a.text}: a lane of a tile slot left zero (e >= the count moved) has its logical "
                                  "index outside the view",
                                  fill_ranges, _conj(fill_ranges, a.slot, _in_view(a)), Cmp("<", LANE, a.count)))
        out.extend(_safety(model, a))
    for b in model.bijections:
        out.extend(bijection_obligations(b))
    for f in model.facts:
        assert f.prop in PROPERTIES, f"fact {f.ident}: {f.prop!r} is not one of {PROPERTIES}"
        out.append(Obligation(f.ident, f.prop, f.text, f.ranges, _conj(f.ranges, f.hyps), f.goal))
    return out


def _safety(model: KernelModel, a: Access) -> list[Obligation]:
    """64-bit: every intermediate of the access within its type, every division on a non-negative dividend; the
    guard's and count's intermediates everywhere, the address's where the access happens."""
    out = []
    lane_ranges = (*a.ranges, _lane_range(a.count))
    everywhere = [a.count, *a.always]
    guarded = [a.address, *a.logical.values(), *((a.place,) if a.place is not None else ())]
    for label, exprs, ranges, hyps in (("everywhere", everywhere, a.ranges, _conj(a.ranges)),
                                       ("moved", guarded, lane_ranges, _conj(lane_ranges))):
        goals = []
        for e in exprs:
            for node in int_nodes(e):
                lo, hi = type_range(node.ctype, model.index_type)
                goals += [Cmp("<=", Const(lo), node), Cmp("<=", node, Const(hi))]
            for d in divisions(e):
                goals.append(Cmp("<=", Const(0), d.a))
                goals.append(Cmp("<", Const(0), d.b))
        if goals:
            what = "its guard and count" if label == "everywhere" else "its address and indices"
            out.append(Obligation(f"{a.ident}_safe_{label}", "64-bit",
                                  f"{a.text}: every intermediate of {what} fits its C++ type "
                                  f"(int: 32 bits, index_t: {model.index_type}), no division of a negative value",
                                  ranges, hyps, all_of(*_dedupe(goals))))
    return out


def _dedupe(preds: list[Pred]) -> list[Pred]:
    return list(dict.fromkeys(preds))


def bijection_obligations(b: Bijection) -> list[Obligation]:
    """Into, left inverse, and onto (the inverse lands in the guarded domain and maps back)."""
    domain = (*b.params, *b.ranges)
    # A target range's bounds may name the target variables before it (the valid elements of an output tile).
    back = {t.var.name: e for t, e in zip(b.target, b.image)}
    out = [Obligation(f"{b.ident}_into", b.prop, f"{b.text}: every image lies in the target",
                      domain, _conj(domain, b.guard), all_of(*(substitute(t.pred(), back) for t in b.target)))]
    for r in b.ranges:
        out.append(Obligation(f"{b.ident}_one_to_one_{r.var.name}", b.prop,
                              f"{b.text}: the image determines {r.var.name} (no two reach one target)",
                              domain, _conj(domain, b.guard),
                              Cmp("==", substitute(b.inverse[r.var.name], back), r.var)))
    target = (*b.params, *b.target)
    inv = dict(b.inverse)
    out.append(Obligation(f"{b.ident}_onto_domain", b.prop,
                          f"{b.text}: every target element has a preimage in the domain",
                          target, _conj(target),
                          all_of(*(substitute(r.pred(), inv) for r in b.ranges), substitute(b.guard, inv))))
    for t, e in zip(b.target, b.image):
        out.append(Obligation(f"{b.ident}_onto_{t.var.name}", b.prop,
                              f"{b.text}: the preimage maps back to {t.var.name}",
                              target, _conj(target), Cmp("==", substitute(e, inv), t.var)))
    return out


# ---- the reference: the spec's own letters


def letter_digits(views: ProblemViews, index: Mapping[str, Expr]) -> dict[str, Expr]:
    """Each letter's index from the roles' indices `index`: a role's index is its letters' mixed-radix number (the
    role's letter order, outer first). The outermost letter's index takes no remainder: a letter sized at run time is
    outermost, so its size enters no digit. Letters come role by role, innermost first."""
    spec = views.spec
    out: dict[str, Expr] = {}
    for role, i in index.items():
        letters = views.roles[role].letters
        inner = 1
        for pos, letter in enumerate(reversed(letters)):
            digit = i // inner if inner > 1 else i
            if pos != len(letters) - 1:
                digit = digit % spec.sizes[letter]
            out[letter] = digit
            inner *= spec.sizes[letter]
    return out


def reference_offset(views: ProblemViews, operand: str, index: Mapping[str, Expr]) -> Expr:
    """The element offset of `operand` at role indices `index`, from the spec's letters: each letter's index
    (`letter_digits`) times the operand's stride of it (0 where the operand is broadcast over it)."""
    total: Expr = Const(0, ctype=INDEX)
    for letter, digit in letter_digits(views, index).items():
        stride = letter_stride(views.spec, operand, letter)
        if stride:
            total = total + digit * stride
    return total


def reach_of(views: ProblemViews, operand: str, rows: Expr | None, align_elems: int, phase: int) -> Reach:
    """`operand`'s reachable elements from its kernel pointer, from the spec's letters: the sum of (size - 1) x stride
    over its letters, negative strides below 0. `rows`: the run-time letter's size where one is (its letter's size)."""
    spec = views.spec
    op = spec.operand(operand)
    lo: Expr = Const(0, ctype=INDEX)
    hi: Expr = Const(0, ctype=INDEX)
    dyn = spec.run_time_letter[0] if spec.run_time_letter else None
    for letter, size, stride in zip(op.letters, op.sizes, op.strides):
        extent: Expr = (rows - 1) if (letter == dyn and rows is not None) else Const(size - 1)
        if stride > 0:
            hi = hi + extent * stride
        elif stride < 0:
            lo = lo + extent * stride
    return Reach(operand, lo, hi, align_elems, phase)
