"""The references of the weight-only operands (pure): an integer B (4-bit values packed eight to a 32-bit word, or
int8/uint8 bytes), its scales and its zero points (packed too where uint4), from the spec's own letters, sizes,
strides, blocks and packing (docs/design/weight-only.md), not from the Roles a kernel indexes with.

A packed view's elements are words. A load of one moves a word (its address is the word's, which the in-bounds
statement is about) and the kernel then selects one value of the eight by its place in the word; the element
statement says both: the word is the reference word of the value's logical index, and the place the kernel selects
holds that value (`value_place`). For a view over blocks (the scales, the zero points) the logical index is B's
(k, n): the element is the one of the block that holds (k, n), which is what "the right scale group" means.

The layouts, as dgemm_cli/quant.py defines them (tests/test_formal_weight_only.py checks these formulas against its
tables):
  along a letter, order linear  value 8w + j of the letter in word w, nibble j;
  order awq                     nibble j holds value AWQ_ORDER[j] = 2 (j % 4) + j / 4 of its word's eight;
  dg                            word ((n / 16) K64 + k / 64) 128 + 4 (4 (n % 8) + (k % 64) / 16) + (k % 16) / 4
                                (lane t = (k % 64) / 16 holds the chunk's k 16 t .. 16 t + 15, its word kt = (k % 16)
                                / 4 four of them), and nibble j holds the mma slot (row, column) = DG_NIBBLES[j] =
                                (8 (j % 2), 8 ((j / 2) % 2) + j / 4) past (n % 8, 2 t): row n % 16 - n % 8, column
                                DG_SLOT_COLUMN[k % 4] = 8 ((k % 4) / 2) + k % 2.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from dgemm_cli.formal.expr import INDEX, Cmp, Const, Expr, Pred, all_of
from dgemm_cli.formal.model import Reach, letter_digits
from dgemm_cli.spec.model import VALUES_PER_WORD, OperandView
from dgemm_cli.views import ProblemViews

DG_TILE_N, DG_CHUNK_K, DG_WORDS_PER_CHUNK = 16, 64, 128


@dataclass(frozen=True)
class QuantView:
    """One view of the integer weights' side: B itself (blocks of 1), its scales or its zero points (the scales'
    blocks: one element per `blocks[x]` indices of letter x of B)."""

    name: str  # "B", "B_scales", "B_zeros" (and "A_scales" for e4m3 inputs)
    view: OperandView
    blocks: Mapping[str, int]

    @property
    def packing(self) -> str | None:
        """"linear", "awq", "dg" or None (a view of whole elements)."""
        return self.view.packing.order if self.view.packing is not None else None


def quant_views(views: ProblemViews) -> dict[str, QuantView]:
    """The weight-only views of the spec by name: B where it is an integer type, every scale view and zero-point view
    (empty for float inputs)."""
    spec = views.spec
    out: dict[str, QuantView] = {}
    if spec.inputs == "weight-only":
        out["B"] = QuantView("B", spec.B, {})
    for sc in spec.scales:
        out[sc.view.name] = QuantView(sc.view.name, sc.view, dict(sc.blocks))
    for z in spec.zeros:
        blocks = dict(next(sc.blocks for sc in spec.scales if sc.operand == z.operand))
        out[z.view.name] = QuantView(z.view.name, z.view, blocks)
    return out


def _group(q: QuantView, letter: str, digit: Expr) -> Expr:
    block = q.blocks.get(letter, 1)
    return digit // block if block > 1 else digit


def _kn(views: ProblemViews, index: Mapping[str, Expr]) -> tuple[Expr, Expr]:
    return index["k"], index["n"]


def quant_reference(views: ProblemViews, q: QuantView, index: Mapping[str, Expr]) -> Expr:
    """The element (word) offset of `q` that holds the value at role indices `index` (B's k and n)."""
    if q.packing == "dg":
        k, n = _kn(views, index)
        k64 = -(-views.k // DG_CHUNK_K)
        lane = (n % 8) * 4 + (k % DG_CHUNK_K) // 16
        return ((n // DG_TILE_N) * k64 + k // DG_CHUNK_K) * DG_WORDS_PER_CHUNK + lane * 4 + (k % 16) // 4
    total: Expr = Const(0, ctype=INDEX)
    for letter, digit in letter_digits(views, index).items():
        if letter not in q.view.letters:
            continue  # broadcast: one element covers the letter
        group = _group(q, letter, digit)
        stride = q.view.stride_of(letter)
        packed = q.view.packing is not None and q.view.packing.along == letter
        word = group // VALUES_PER_WORD if packed else group
        if stride:
            total = total + word * stride
    return total


def value_place(views: ProblemViews, q: QuantView, index: Mapping[str, Expr], place: Expr) -> Pred:
    """That nibble `place` of the reference word holds the value at `index`: 0 <= place < 8 and the layout's value at
    that place is the index's."""
    bounded = all_of(Cmp("<=", Const(0), place), Cmp("<", place, Const(VALUES_PER_WORD)))
    if q.packing == "dg":
        k, n = _kn(views, index)
        row, column = n % 16 - n % 8, ((k % 4) // 2) * 8 + k % 2
        return all_of(bounded, Cmp("==", (place % 2) * 8, row), Cmp("==", ((place // 2) % 2) * 8 + place // 4, column))
    assert q.view.packing is not None, f"{q.name} is no packed view"
    along = q.view.packing.along
    value = _group(q, along, letter_digits(views, index)[along]) % VALUES_PER_WORD
    if q.packing == "awq":
        return all_of(bounded, Cmp("==", (place % 4) * 2 + place // 4, value))
    return all_of(bounded, Cmp("==", place, value))


def quant_reach(views: ProblemViews, q: QuantView, align_elems: int, phase: int) -> Reach:
    """`q`'s reachable words (elements) from its kernel pointer: the sum of (extent - 1) x stride over its letters,
    the extent in words along a packed letter; the dg layout's dense run of K64 x N16 x 128 words."""
    view = q.view
    lo: Expr = Const(0, ctype=INDEX)
    hi: Expr = Const(0, ctype=INDEX)
    if q.packing == "dg":
        words = -(-views.k // DG_CHUNK_K) * -(-views.n // DG_TILE_N) * DG_WORDS_PER_CHUNK
        return Reach(q.name, lo, Const(words - 1, ctype=INDEX), align_elems, phase)
    for extent, stride in zip(view.word_sizes, view.strides):
        if stride > 0:
            hi = hi + Const(extent - 1) * stride
        elif stride < 0:
            lo = lo + Const(extent - 1) * stride
    return Reach(q.name, lo, hi, align_elems, phase)


def quant_reach_of(views: ProblemViews, name: str, checked_align: int = 0) -> Reach:
    """The reach of the weight-only view `name` with what is known of its pointer's alignment: `checked_align` bytes
    where the launcher checks it at run time, else the spec's promise (`align:` bytes, `offset:` elements past the
    aligned base)."""
    q = quant_views(views)[name]
    if checked_align:
        return quant_reach(views, q, max(1, checked_align // q.view.elem_bytes), 0)
    align = max(1, q.view.align // q.view.elem_bytes)
    return quant_reach(views, q, align, q.view.offset % align)
