"""The checked description of one problem: `Spec` and its views (`OperandView`, `EpilogueStep`), and the
names the spec language accepts for dtypes, archs, operands and epilogue steps."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

# Bytes an element of a view. A packed 4-bit view's elements are its 32-bit words, eight values each (`Packing`).
DTYPE_BYTES = {"f32": 4, "f16": 2, "bf16": 2, "e4m3": 1, "int8": 1, "uint8": 1, "int4": 4, "uint4": 4}
# Integer weights (B only, with `scales:` and optional `zeros:`; docs/design/weight-only.md); the 4-bit ones packed.
WEIGHT_DTYPES = ("int4", "uint4", "int8", "uint8")
PACKED_DTYPES = ("int4", "uint4")
# Activations beside integer weights.
ACTIVATION_DTYPES = ("f16", "bf16")
# Input-only types: A and B may be e4m3 (with `scales:`), B an integer type; C, D and the epilogue's views may not.
INPUT_ONLY_DTYPES = ("e4m3", *WEIGHT_DTYPES)
# Names users type anyway (numpy, torch, C) -> ours; read with a note, written back in our names.
DTYPE_ALIASES = {
    "fp16": "f16", "half": "f16", "float16": "f16",
    "bfloat16": "bf16",
    "fp32": "f32", "float": "f32", "float32": "f32",
    "fp8": "e4m3", "fp8_e4m3": "e4m3", "float8_e4m3fn": "e4m3",
}
# The packed layouts (`packing:`): a word holds 8 values along one letter, in one of these orders; `dg` is the
# tiled layout `deepgemm pack` writes (a dense run of words, no strides; dgemm_cli/quant.py defines it).
PACKING_ORDERS = ("linear", "awq", "dg")
VALUES_PER_WORD = 8
ACCUM_TYPES = ("f32",)
ARCHS = ("sm_80", "sm_86", "sm_89", "sm_90a", "cpu")  # arch.TARGETS: "cpu" is the host (C++17)
OPERANDS = ("A", "B", "C")
OUTPUT_VIEW = "D"  # the output view when it differs from the C that beta reads (cuBLASLt's C/D split)
# The operands after A, B, C, in the C API's order: the output view, then the epilogue's views.
EXTRA_OPERANDS = (OUTPUT_VIEW, "bias", "scale", "residual")
# Epilogue steps, applied in order to t = alpha * (A.B) + beta * C (cuBLASLt's order). docs/design/epilogue.md has
# the activations' formulas.
ACTIVATIONS = ("relu", "gelu_tanh", "gelu_erf", "silu", "sigmoid", "tanh")
EPILOGUE_STEPS = ("bias", "scale", "activation", "clamp", "residual")


@dataclass(frozen=True)
class Packing:
    """How a 4-bit view's 32-bit words hold its values (docs/design/weight-only.md): eight consecutive indices of
    letter `along` a word, value j of a word in nibble ORDERS[order].index(j); or `dg`, the tiled layout of
    `deepgemm pack`, whose word and nibble follow from (k, n) alone."""

    along: str  # the packed letter
    order: str  # one of PACKING_ORDERS

    def words(self, letter: str, size: int) -> int:
        """The view's extent along `letter` in words."""
        return -(-size // VALUES_PER_WORD) if letter == self.along else size

    def describe(self, strides: tuple[int, ...]) -> str:
        """How the words hold the values, as `explain` and a kernel's traits comment say it."""
        if self.order == "dg":
            return "packed dg (deepgemm pack's tiled layout: one dense run of words)"
        return (f"packed eight values of '{self.along}' a 32-bit word ({self.order} order), word strides "
                f"{list(strides)}")

    def to_dict(self) -> dict[str, str] | str:
        """As the spec writes it: `dg` by name (its letter is the one k letter), the others as a mapping."""
        return "dg" if self.order == "dg" else {"along": self.along, "order": self.order}


@dataclass(frozen=True)
class OperandView:
    """One operand as the user described it: letters in the operand's own order, element strides. A packed view
    (`packing`, 4-bit B) keeps the logical sizes; its elements are 32-bit words, and along the packed letter its
    stride steps one word (eight values)."""

    name: str  # "A", "B" or "C"
    letters: str  # e.g. "nchw"
    sizes: tuple[int, ...]
    strides: tuple[int, ...]  # element strides, same order as letters
    offset: int  # elements from the base pointer to element [0, 0, ...]
    dtype: str
    align: int  # bytes the caller promises for the base pointer
    packing: Packing | None = None

    @property
    def elem_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    def stride_of(self, letter: str) -> int:
        return self.strides[self.letters.index(letter)]

    @property
    def word_sizes(self) -> tuple[int, ...]:
        """The extents in the view's elements: the sizes, but in words along a packed letter."""
        if self.packing is None:
            return self.sizes
        return tuple(self.packing.words(x, n) for x, n in zip(self.letters, self.sizes))

    @property
    def span(self) -> int:
        """Elements a buffer must hold: offset + largest reachable index + 1."""
        if self.packing is not None and self.packing.order == "dg":
            return self.offset + dg_words(*self.sizes)
        return self.offset + sum((s - 1) * st for s, st in zip(self.word_sizes, self.strides)) + 1


def dg_words(k: int, n: int) -> int:
    """Words of the `dg` packed layout of a K x N weight: 16 x 64 tiles of 128 words, K and N padded up."""
    return -(-k // 64) * -(-n // 16) * 128


@dataclass(frozen=True)
class ScaleView:
    """The f32 scales of an e4m3 input (`scales:`, docs/design/fp8.md): the block each scale covers along each of
    the input's letters (the letter's size for a block of the whole extent), and the view of the scales, over the
    input's letters whose blocks are not the whole extent, sized in blocks."""

    operand: str  # "A" or "B"
    blocks: tuple[tuple[str, int], ...]  # (letter, block size) for every letter of the operand, in its order
    view: OperandView

    def block(self, letter: str) -> int:
        return dict(self.blocks)[letter]


ZERO_FORMS = ("subtract", "prescaled")


@dataclass(frozen=True)
class ZeroView:
    """The zero points of integer weights (`zeros:`, docs/design/weight-only.md): the scales' blocks, a view of its
    own over the scale view's letters, and the form: `subtract` w = (q - z) * s, `prescaled` w = q * s - z."""

    operand: str  # "B"
    form: str  # one of ZERO_FORMS
    view: OperandView


@dataclass(frozen=True)
class EpilogueStep:
    """One step of the epilogue: `bias` / `scale` / `residual` carry a view over some of C's letters
    (all of them for `residual`), `activation` a name, `clamp` its bounds."""

    kind: str  # one of EPILOGUE_STEPS
    view: OperandView | None = None
    activation: str | None = None
    clamp: tuple[float, float] | None = None

    def describe(self) -> str:
        """The step as a line of arithmetic on t: "t += bias[n]", "t = gelu_tanh(t)", "t = clamp(t, -1.0, 1.0)"."""
        if self.view is not None:
            return f"t {'*' if self.kind == 'scale' else '+'}= {self.kind}[{self.view.letters}]"
        if self.kind == "activation":
            return f"t = {self.activation}(t)"
        assert self.clamp is not None
        return f"t = clamp(t, {self.clamp[0]}, {self.clamp[1]})"

    def to_dict(self) -> dict[str, Any]:
        if self.view is not None:
            v = self.view
            return {self.kind: {"letters": v.letters, "strides": list(v.strides), "offset": v.offset,
                                "dtype": v.dtype, "align": v.align}}
        if self.kind == "activation":
            return {"activation": self.activation}
        assert self.clamp is not None
        return {"clamp": list(self.clamp)}


@dataclass(frozen=True)
class Spec:
    name: str
    arch: str
    accum: str
    contraction: str  # normalised "ab,bc->ac"
    sizes: dict[str, int]  # every letter -> size
    A: OperandView
    B: OperandView
    C: OperandView
    alpha: float
    beta: float
    # Provenance, not part of the problem: two specs that describe the same product are equal.
    source: str = field(compare=False)  # file the spec came from (for messages)
    shorthand: str = field(default="contraction", compare=False)  # "gemm" when written with `gemm:`
    # What was read generously, e.g. "dtype 'half' read as f16"; `gen` prints them.
    notes: tuple[str, ...] = field(default=(), compare=False)
    implicit_output: bool = field(default=False, compare=False)  # written without `->`: numpy's rule gave C
    epilogue: tuple[EpilogueStep, ...] = ()  # applied in order to alpha * (A.B) + beta * C
    D: OperandView | None = None  # the output view when it is not C (C is then only read, for beta)
    # Letters whose size is known only at run time: letter -> (min, max); `sizes` holds the max.
    dynamic: dict[str, tuple[int, int]] = field(default_factory=dict)
    # The scales of e4m3 inputs (`scales:`), one an input, A's first; of integer weights, B's alone; empty for the
    # other dtypes.
    scales: tuple[ScaleView, ...] = ()
    zeros: tuple[ZeroView, ...] = ()  # integer weights' zero points (`zeros:`), B's; empty without
    # Decisions the spec fixes (`plan:`), node -> value, in the spec's order: the planner's choice within them.
    pins: tuple[tuple[str, Any], ...] = field(default=(), compare=False)
    # What is legal but likely wrong, e.g. views larger than any GPU's memory; `gen` prints them.
    warnings: tuple[str, ...] = field(default=(), compare=False)

    @property
    def operands(self) -> tuple[OperandView, OperandView, OperandView]:
        return (self.A, self.B, self.C)

    def operand(self, name: str) -> OperandView:
        if name in OPERANDS:
            return {"A": self.A, "B": self.B, "C": self.C}[name]
        return next(op for op in self.extra_operands if op.name == name)

    @property
    def extra_operands(self) -> tuple[OperandView, ...]:
        """D and the epilogue's views (each kind at most once), in the C API's order: D, bias, scale,
        residual. Each is a view over some of C's letters (all of them for D and residual)."""
        views = {st.kind: st.view for st in self.epilogue if st.view is not None}
        if self.D is not None:
            views[OUTPUT_VIEW] = self.D
        return tuple(views[x] for x in EXTRA_OPERANDS if x in views)

    @property
    def inputs(self) -> str:
        """The kind of inputs, which decides the families that may run them: "e4m3" (A and B with scales),
        "weight-only" (f16/bf16 A, integer B with scales), else "float"."""
        if self.A.dtype == "e4m3":
            return "e4m3"
        return "weight-only" if self.B.dtype in WEIGHT_DTYPES else "float"

    @property
    def quant_views(self) -> tuple[OperandView, ...]:
        """The views of the inputs' scales and zero points (`A_scales`, `B_scales`, `B_zeros`), in the C API's order:
        after the views of `extra_operands`, before the run-time size. Empty for 16- and 32-bit inputs."""
        return tuple(sc.view for sc in self.scales) + tuple(z.view for z in self.zeros)

    def size_key(self, letter: str) -> str:
        """The spec key that sizes `letter`, for messages: "gemm.m", "gemm.batch", "sizes.h"."""
        if self.shorthand == "gemm":
            return "gemm.batch" if letter == "b" else f"gemm.{letter}"
        return f"sizes.{letter}"

    @property
    def output(self) -> OperandView:
        """The view the kernel writes: D when the spec has one, else C (read for beta and written)."""
        return self.D if self.D is not None else self.C

    @property
    def run_time_letter(self) -> tuple[str, int, int] | None:
        """(letter, min, max) of the one letter sized at run time, or None."""
        if not self.dynamic:
            return None
        (x, (lo, hi)), = self.dynamic.items()
        return x, lo, hi

    def rows_bucket(self, lo: int, hi: int) -> Spec:
        """The problem one kernel of a run-time-sized spec serves: the run-time letter at most `hi`.
        With lo == hi it is an ordinary fixed-size spec; otherwise the letter stays run-time sized
        over [lo, hi] (its size here is hi). Strides never depend on the letter (parse_spec checks)."""
        rt = self.run_time_letter
        assert rt is not None and rt[1] <= lo <= hi <= rt[2], f"bucket {lo}..{hi} outside {rt}"
        x = rt[0]

        def resized(op: OperandView) -> OperandView:
            if x not in op.letters:
                return op
            return replace(op, sizes=tuple(hi if y == x else n for y, n in zip(op.letters, op.sizes)))

        epilogue = tuple(replace(st, view=resized(st.view)) if st.view is not None else st for st in self.epilogue)
        return replace(self, sizes={**self.sizes, x: hi}, A=resized(self.A), B=resized(self.B), C=resized(self.C),
                       D=resized(self.D) if self.D is not None else None, epilogue=epilogue,
                       dynamic={x: (lo, hi)} if lo < hi else {})

    def to_dict(self) -> dict[str, Any]:
        """The normalised spec in the contraction form, every default filled in; `parse_spec`
        reads it back to an equal Spec. Written into plan.json and the kernel's header comment."""
        return {
            "name": self.name,
            "arch": self.arch,
            "accum": self.accum,
            "contraction": self.contraction,
            "sizes": {x: ({"min": self.dynamic[x][0], "max": n} if x in self.dynamic else n)
                      for x, n in self.sizes.items()},
            "operands": {
                op.name: {
                    **({"strides": list(op.strides)} if op.packing is None or op.packing.order != "dg" else {}),
                    "offset": op.offset,
                    "dtype": op.dtype,
                    "align": op.align,
                    **({"packing": op.packing.to_dict()} if op.packing is not None else {}),
                }
                for op in (*self.operands, *((self.D,) if self.D is not None else ()))
            },
            "alpha": self.alpha,
            "beta": self.beta,
            # Only when present: a spec without an epilogue normalises (and hashes) as before.
            **({"epilogue": [st.to_dict() for st in self.epilogue]} if self.epilogue else {}),
            **({"scales": {sc.operand: _scale_dict(sc) for sc in self.scales}} if self.scales else {}),
            **({"zeros": {z.operand: _zero_dict(z) for z in self.zeros}} if self.zeros else {}),
            **({"plan": dict(self.pins)} if self.pins else {}),
        }


def _scale_dict(sc: ScaleView) -> dict[str, Any]:
    """A ScaleView in the spec's keys: every letter's block (`all` for the whole extent) and the view."""
    op = dict(zip(sc.view.letters, sc.view.sizes))
    return {"block": {x: ("all" if x not in op else b) for x, b in sc.blocks},
            "strides": list(sc.view.strides), "offset": sc.view.offset, "align": sc.view.align,
            **({"dtype": sc.view.dtype} if sc.view.dtype != "f32" else {})}


def _zero_dict(z: ZeroView) -> dict[str, Any]:
    """A ZeroView in the spec's keys: its view (with its packing) and its form."""
    v = z.view
    return {"strides": list(v.strides), "offset": v.offset, "align": v.align, "dtype": v.dtype, "form": z.form,
            **({"packing": v.packing.to_dict()} if v.packing is not None else {})}
