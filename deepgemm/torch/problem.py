"""Tensors' metadata -> one contraction over their views, in the spec language's terms. Pure: no torch import, so
the rules are tested on plain shapes and strides.

What a call to `deepgemm.torch.einsum` becomes (`contraction_of`):
1. The equation, read as torch.einsum reads it: `...` expands to unnamed dims, broadcast right-aligned; without
   `->` the output is the ellipsis dims, then the letters used once, in ASCII order; an explicit output without
   `...` sums the unnamed dims.
2. Each letter's size; an input dim of size 1 against a larger one is broadcast (stride 0), as torch does.
   A letter twice in one input is that input's diagonal: one dim whose stride is the sum.
3. Canonical form, so that one kernel serves every call that indexes memory the same way:
   - letters of size 1 are dropped (they move no address);
   - letters that sit side by side in every view that has them, outer stride = inner stride x inner size, merge
     into one (a [b, t, k] activation whose b and t merge is the [b*t, k] matrix a GEMM wants);
   - the letters are renamed a, b, c, ... in order of first appearance.
4. Pointers are the tensors' data pointers (storage offset included), so a spec's views have offset 0 and promise
   the alignment the pointer has (up to 16 bytes, what vector loads and TMA ask).
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from typing import Any

from dgemm_cli.errors import DeepGemmError

MAX_ALIGN = 16  # bytes: the widest vector a kernel loads, and TMA's base alignment
ELLIPSIS = "..."
CANONICAL_LETTERS = string.ascii_lowercase + string.ascii_uppercase
EPILOGUE_VIEW_STEPS = ("bias", "scale", "residual")
EPILOGUE_VALUE_STEPS = ("activation", "clamp")
UNIT = "…unit"  # the one dim a product of size-1 tensors keeps
ELEMENT_BYTES = {"f32": 4, "f16": 2, "bf16": 2, "e4m3": 1}


class TensorArgumentError(DeepGemmError):
    """Tensors or an equation given to deepgemm.torch that the spec language cannot describe as one kernel; the
    message names the argument and the fix."""


@dataclass(frozen=True)
class TensorMeta:
    """What the kernel's spec needs of a tensor: no data."""

    shape: tuple[int, ...]
    strides: tuple[int, ...]  # elements
    dtype: str  # the spec's name: f32, f16, bf16, e4m3
    address: int  # the data pointer (bytes), storage offset included

    @property
    def align(self) -> int:
        """The largest power of two up to MAX_ALIGN that divides the address, and at least the element size."""
        elem = ELEMENT_BYTES[self.dtype]
        align = MAX_ALIGN
        while align > elem and self.address % align:
            align //= 2
        return align


@dataclass(frozen=True)
class ViewOf:
    """One operand in the canonical contraction: its letters in its own order and its element strides."""

    letters: str
    strides: tuple[int, ...]
    dtype: str
    align: int


@dataclass(frozen=True)
class EpilogueStepOf:
    """An epilogue step: a view step (bias, scale, residual) with its view over C's letters, or a value step
    (activation's name, clamp's bounds)."""

    kind: str
    view: ViewOf | None = None
    value: Any = None


@dataclass(frozen=True)
class Contraction:
    """The canonical contraction of one call: what its spec is built from, and its memo key (it is hashable)."""

    a: ViewOf
    b: ViewOf
    c: ViewOf
    sizes: tuple[tuple[str, int], ...]  # letter -> size, in order of first appearance
    epilogue: tuple[EpilogueStepOf, ...]

    @property
    def equation(self) -> str:
        return f"{self.a.letters},{self.b.letters}->{self.c.letters}"

    @property
    def row_letters(self) -> str:
        """Letters in A and C, not in B: the rows a run-time size may take."""
        return "".join(x for x in self.c.letters if x in self.a.letters and x not in self.b.letters)

    def size(self, letter: str) -> int:
        return dict(self.sizes)[letter]


@dataclass(frozen=True)
class Equation:
    """An equation read as torch.einsum reads it, `...` expanded: each operand's dims as letters ("…0", "…1" for
    the unnamed dims of the ellipsis, innermost first)."""

    a: tuple[str, ...]
    b: tuple[str, ...]
    out: tuple[str, ...]


def parse_equation(equation: str, a_ndim: int, b_ndim: int) -> Equation:
    """`equation` for inputs of `a_ndim` and `b_ndim` dims, as torch.einsum reads it (two inputs)."""
    if not isinstance(equation, str):
        raise TensorArgumentError(f"equation: expected a string such as 'mk,kn->mn', got {type(equation).__name__}")
    text = equation.replace(" ", "")
    inputs, arrow, out = text.partition("->")
    if "->" in out:
        raise TensorArgumentError(f"equation {equation!r}: two arrows. Fix: write one '->' before the output")
    terms = inputs.split(",")
    if len(terms) != 2:
        raise TensorArgumentError(f"equation {equation!r}: {len(terms)} inputs; deepgemm.torch.einsum contracts "
                                  "two tensors. Fix: split it into pairwise einsums")
    for term in [*terms, out]:
        rest = term.replace(ELLIPSIS, "", 1)
        bad = next((ch for ch in rest if ch not in CANONICAL_LETTERS), None)
        if bad is not None:
            raise TensorArgumentError(f"equation {equation!r}: {bad!r} is neither a letter nor '...'. Fix: name "
                                      "each dim with a letter a-z or A-Z, and use '...' at most once an operand")
    dims = [_expand(t, n, equation, op) for t, n, op in ((terms[0], a_ndim, "a"), (terms[1], b_ndim, "b"))]
    width = max(sum(1 for d in ds if d.startswith("…")) for ds in dims)
    if arrow:
        out_dims = _expand_output(out, width, equation)
    else:
        named = [d for ds in dims for d in ds if not d.startswith("…")]
        once = sorted(x for x in set(named) if named.count(x) == 1)
        out_dims = tuple(f"…{i}" for i in reversed(range(width))) + tuple(once)
    twice = next((x for x in out_dims if out_dims.count(x) > 1), None)
    if twice is not None:
        raise TensorArgumentError(f"equation {equation!r}: letter {twice!r} twice in the output. Fix: write each "
                                  "output letter once")
    for x in out_dims:
        if x not in dims[0] and x not in dims[1]:
            raise TensorArgumentError(f"equation {equation!r}: output letter {x!r} is in no input. Fix: add it to "
                                      "an input or drop it from the output")
    return Equation(dims[0], dims[1], out_dims)


def _expand(term: str, ndim: int, equation: str, op: str) -> tuple[str, ...]:
    named = term.replace(ELLIPSIS, "")
    if ELLIPSIS not in term:
        if len(term) != ndim:
            raise TensorArgumentError(f"equation {equation!r}: '{term}' names {len(term)} dims but {op} has {ndim}. "
                                      f"Fix: give {op} one letter a dim, or '...' for the leading ones")
        return tuple(term)
    unnamed = ndim - len(named)
    if unnamed < 0:
        raise TensorArgumentError(f"equation {equation!r}: '{term}' names {len(named)} dims but {op} has {ndim}. "
                                  f"Fix: give {op} one letter a dim")
    head, _, tail = term.partition(ELLIPSIS)
    return (*head, *(f"…{i}" for i in reversed(range(unnamed))), *tail)


def _expand_output(term: str, width: int, equation: str) -> tuple[str, ...]:
    if ELLIPSIS not in term:  # the unnamed dims are summed, as torch.einsum sums them
        return tuple(term)
    head, _, tail = term.partition(ELLIPSIS)
    return (*head, *(f"…{i}" for i in reversed(range(width))), *tail)


def output_shape(eq: Equation, a: TensorMeta | tuple[int, ...], b: TensorMeta | tuple[int, ...]) -> tuple[int, ...]:
    """The shape einsum's output has (what a fake tensor of the op needs)."""
    sizes = letter_sizes(eq, _shape(a), _shape(b))
    return tuple(sizes[x] for x in eq.out)


def _shape(t: TensorMeta | tuple[int, ...]) -> tuple[int, ...]:
    return t.shape if isinstance(t, TensorMeta) else tuple(t)


def letter_sizes(eq: Equation, a_shape: tuple[int, ...], b_shape: tuple[int, ...]) -> dict[str, int]:
    """Each letter's size, broadcasting 1 against n as torch does; a mismatch is the caller's error."""
    sizes: dict[str, int] = {}
    for op, dims, shape in (("a", eq.a, a_shape), ("b", eq.b, b_shape)):
        for x, n in zip(dims, shape):
            known = sizes.get(x)
            if known is None or known == 1:
                sizes[x] = n
            elif n not in (1, known):
                name = "an unnamed '...' dim" if x.startswith("…") else f"letter {x!r}"
                raise TensorArgumentError(f"{op}: {name} has size {n} here and {known} elsewhere. Fix: give the "
                                          "tensors matching sizes (1 broadcasts)")
    return sizes


def contraction_of(eq: Equation, a: TensorMeta, b: TensorMeta, out: TensorMeta,
                   epilogue: tuple[tuple[str, TensorMeta | Any], ...] = ()) -> Contraction:
    """The canonical contraction that computes `out` from `a` and `b` (and the epilogue's tensors, each broadcast
    to the output's shape). `out` must have the output's shape; its own dims may not overlap in memory."""
    sizes = letter_sizes(eq, a.shape, b.shape)
    want = tuple(sizes[x] for x in eq.out)
    if out.shape != want:
        raise TensorArgumentError(f"out: shape {list(out.shape)}, but the result is {list(want)}. Fix: pass an out "
                                  "of the result's shape, or none")
    views = {"A": _input_view("a", eq.a, a, sizes), "B": _input_view("b", eq.b, b, sizes)}
    for n, s in zip(out.shape, out.strides):
        if n > 1 and s == 0:
            raise TensorArgumentError(f"out: a dim of size {n} has stride 0, so its elements alias. Fix: pass an out "
                                      "whose elements are distinct (e.g. torch.empty)")
    for what, t in (("a", a), ("b", b), *((f"epilogue {k}", v) for k, v in epilogue if isinstance(v, TensorMeta))):
        if _overlap(t, out):
            raise TensorArgumentError(f"out overlaps {what} in memory: a kernel reads {what} while it writes out. "
                                      "Fix: pass an out of its own (or none)")
    views["C"] = (tuple(eq.out), tuple(out.strides), out.dtype, out.align)
    steps: list[tuple[str, Any]] = []
    for i, (kind, value) in enumerate(epilogue):
        if kind in EPILOGUE_VIEW_STEPS:
            views[f"E{i}"] = _epilogue_view(kind, value, eq.out, out.shape)
            steps.append((kind, f"E{i}"))
        else:
            steps.append((kind, value))
    letters, canonical = _canonical(views, sizes)
    if len(letters) > len(CANONICAL_LETTERS):
        raise TensorArgumentError(f"{len(letters)} distinct dims; a spec names at most {len(CANONICAL_LETTERS)}. Fix: "
                                  "merge dims (reshape) before the call")
    rename = {x: CANONICAL_LETTERS[i] for i, x in enumerate(letters)}
    final = {name: ViewOf("".join(rename[x] for x in ls), st, dt, al) for name, (ls, st, dt, al) in canonical.items()}
    ep = tuple(EpilogueStepOf(kind, view=final[value]) if kind in EPILOGUE_VIEW_STEPS
               else EpilogueStepOf(kind, value=value) for kind, value in steps)
    return Contraction(final["A"], final["B"], final["C"],
                       tuple((rename[x], canonical_size) for x, canonical_size in letters.items()), ep)


def _overlap(t: TensorMeta, u: TensorMeta) -> bool:
    """Whether the byte ranges the two views span meet."""
    return ranges_meet(t.address, byte_extent(t), u.address, byte_extent(u))


def ranges_meet(start: int, size: int, other_start: int, other_size: int) -> bool:
    """Whether two byte ranges [start, start + size) meet; an empty one meets nothing."""
    return size > 0 and other_size > 0 and start < other_start + other_size and other_start < start + size


def byte_extent(t: TensorMeta) -> int:
    """The bytes from the view's first element past its last (torch's strides are never negative); 0 when empty."""
    if 0 in t.shape:
        return 0
    return ELEMENT_BYTES[t.dtype] * (1 + sum((n - 1) * s for n, s in zip(t.shape, t.strides)))


View = tuple[tuple[str, ...], tuple[int, ...], str, int]  # letters, strides, dtype, align: a view being canonicalized


def _input_view(op: str, dims: tuple[str, ...], t: TensorMeta, sizes: dict[str, int]) -> View:
    """An input's view over its distinct letters: a broadcast dim takes stride 0, a repeated letter (a diagonal)
    one dim with the sum of the strides."""
    strides: dict[str, int] = {}
    for x, n, s in zip(dims, t.shape, t.strides):
        step = 0 if (n == 1 and sizes[x] != 1) else s
        if x in strides:
            if n != sizes[x]:
                raise TensorArgumentError(f"{op}: the diagonal over letter {x!r} takes dims of one size. Fix: give "
                                          "both dims the same size")
            strides[x] += step
        else:
            strides[x] = step
    return tuple(strides), tuple(strides.values()), t.dtype, t.align


def _epilogue_view(kind: str, t: Any, out_dims: tuple[str, ...], out_shape: tuple[int, ...]) -> View:
    """An epilogue tensor broadcast to the output's shape (numpy's rule, right-aligned): its dims of the output's
    size are its letters; its dims of size 1 are broadcast."""
    if not isinstance(t, TensorMeta):
        raise TensorArgumentError(f"epilogue: {kind} takes a tensor, got {type(t).__name__}. Fix: pass "
                                  f"{{'{kind}': tensor}}, broadcastable to the output")
    if len(t.shape) > len(out_shape):
        raise TensorArgumentError(f"epilogue: {kind} has {len(t.shape)} dims, the output {len(out_shape)}. Fix: give "
                                  f"{kind} a shape that broadcasts to {list(out_shape)}")
    lead = len(out_shape) - len(t.shape)
    letters, strides = [], []
    for x, want, n, s in zip(out_dims[lead:], out_shape[lead:], t.shape, t.strides):
        if n == want and n != 1:
            letters.append(x)
            strides.append(s)
        elif n != 1:
            raise TensorArgumentError(f"epilogue: {kind} has shape {list(t.shape)}, which does not broadcast to the "
                                      f"output's {list(out_shape)}. Fix: give it the output's sizes or 1")
    return tuple(letters), tuple(strides), t.dtype, t.align


def _canonical(views: dict[str, View], sizes: dict[str, int]) -> tuple[dict[str, int], dict[str, View]]:
    """Drop size-1 letters, merge letters that move through memory as one, in every view. Returns the letters
    kept (in order of first appearance, with their sizes) and the views over them."""
    sizes = dict(sizes)
    kept = {name: _drop_unit(v, sizes) for name, v in views.items()}
    if not kept["A"][0] and not kept["B"][0]:
        # Every letter has size 1: a product of two scalars, which no spec describes; keep one dim of size 1.
        kept = {name: _unit_dim(v, sizes) for name, v in views.items()}
        sizes[UNIT] = 1
    while (pair := _mergeable(kept, sizes)) is not None:
        outer, inner = pair
        sizes[outer + inner] = sizes[outer] * sizes[inner]
        kept = {name: _merge(v, outer, inner) for name, v in kept.items()}
    order: dict[str, int] = {}
    for name in ("A", "B", "C", *sorted(n for n in kept if n not in ("A", "B", "C"))):
        for x in kept[name][0]:
            order.setdefault(x, sizes[x])
    return order, kept


def _drop_unit(v: View, sizes: dict[str, int]) -> View:
    letters, strides, dtype, align = v
    keep = [i for i, x in enumerate(letters) if sizes[x] != 1]
    return tuple(letters[i] for i in keep), tuple(strides[i] for i in keep), dtype, align


def _unit_dim(v: View, sizes: dict[str, int]) -> View:
    """One dim of size 1 and stride 1 in every view that had a letter, so that the spec has a letter to name."""
    letters, _, dtype, align = v
    return ((UNIT,), (1,), dtype, align) if letters else ((), (), dtype, align)


def _mergeable(views: dict[str, View], sizes: dict[str, int]) -> tuple[str, str] | None:
    """Two letters (outer, inner) that are adjacent in that order in every view that has either, each view having
    both or neither, with outer's stride = inner's stride x inner's size in each."""
    for letters, _, _, _ in views.values():
        for outer, inner in zip(letters, letters[1:]):
            if all(_adjacent(v, outer, inner, sizes) for v in views.values()):
                return outer, inner
    return None


def _adjacent(v: View, outer: str, inner: str, sizes: dict[str, int]) -> bool:
    letters, strides, _, _ = v
    if outer not in letters and inner not in letters:
        return True
    if outer not in letters or inner not in letters:
        return False
    i = letters.index(outer)
    return i + 1 < len(letters) and letters[i + 1] == inner and strides[i] == strides[i + 1] * sizes[inner]


def _merge(v: View, outer: str, inner: str) -> View:
    letters, strides, dtype, align = v
    if outer not in letters:
        return v
    i = letters.index(outer)
    return (letters[:i] + (outer + inner,) + letters[i + 2:], strides[:i] + (strides[i + 1],) + strides[i + 2:],
            dtype, align)


# A run-time row size is served by one kernel a range, each a power of 8 wide: a decode batch, a short prefill, a
# long one. Beyond the last, a size gets a kernel of its own.
ROW_RANGES = ((1, 64), (65, 512), (513, 4096), (4097, 32768), (32769, 262144))


def row_range(m: int) -> tuple[int, int] | None:
    """The run-time range that holds `m` rows, or None past the last."""
    return next((r for r in ROW_RANGES if r[0] <= m <= r[1]), None)


def run_time_span(c: Contraction) -> tuple[str, tuple[int, int]] | None:
    """The row letter a kernel of `c` may size at run time and the range of ROW_RANGES that holds its size; None
    where `c` has not exactly one row letter, or its size is past the ranges."""
    if len(c.row_letters) != 1:
        return None
    span = row_range(c.size(c.row_letters))
    return (c.row_letters, span) if span is not None else None


def spec_document(c: Contraction, arch: str, *, rows: tuple[int, int] | None = None, reads_c: bool = False
                  ) -> dict[str, Any]:
    """The spec (a dict in the YAML's schema) of `c` for `arch`. `rows`: the run-time range of its one row letter;
    `reads_c`: beta may be non-zero, so C is read (alpha and beta are the call's, passed at run time)."""
    sizes: dict[str, Any] = dict(c.sizes)
    if rows is not None:
        (row,) = c.row_letters
        sizes[row] = {"min": rows[0], "max": rows[1]}
    doc: dict[str, Any] = {
        "arch": arch, "dtype": c.c.dtype, "accum": "f32", "contraction": c.equation, "sizes": sizes,
        "operands": {name: _view_keys(v) for name, v in (("A", c.a), ("B", c.b), ("C", c.c))},
        "alpha": 1.0, "beta": 1.0 if reads_c else 0.0,
    }
    if c.epilogue:
        doc["epilogue"] = [{s.kind: {"letters": s.view.letters, **_view_keys(s.view)}} if s.view is not None
                           else {s.kind: s.value} for s in c.epilogue]
    return doc


def _view_keys(v: ViewOf) -> dict[str, Any]:
    return {"strides": list(v.strides), "offset": 0, "dtype": v.dtype, "align": v.align}
