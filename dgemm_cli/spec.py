"""Stage 1: YAML spec -> typed, validated `Spec`.

Every error a user can make is a `SpecError` naming the file, the key and the fix. Nothing here
knows about tiles or CUDA: it only turns text into a checked description of the problem
C = alpha * contract(A, B) + beta * C over three strided views.
"""

from __future__ import annotations

import difflib
import keyword
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from dgemm_cli.errors import SpecError

DTYPE_BYTES = {"f32": 4, "f16": 2, "bf16": 2}
# Names users type anyway (numpy, torch, C) -> ours; read with a note, written back in our names.
DTYPE_ALIASES = {
    "fp16": "f16", "half": "f16", "float16": "f16",
    "bfloat16": "bf16",
    "fp32": "f32", "float": "f32", "float32": "f32",
}
ACCUM_TYPES = ("f32",)
ARCHS = ("sm_80", "sm_86", "sm_89", "sm_90a")
OPERANDS = ("A", "B", "C")
# The most memory of the arch table's reference parts (the H200-SXM's 141 GB). Views that together span more
# than MEMORY_WARNING_FACTOR times this fit no GPU deepgemm targets: more likely a size typed wrong than meant.
LARGEST_GPU_BYTES = 141 * 10**9
MEMORY_WARNING_FACTOR = 2
# A view's byte span must fit the kernels' signed 64-bit offsets.
INT64_MAX = 2**63 - 1

TOP_KEYS = {"name", "arch", "dtype", "accum", "gemm", "contraction", "sizes", "operands", "alpha", "beta", "epilogue"}
OUTPUT_VIEW = "D"  # the output view when it differs from the C that beta reads (cuBLASLt's C/D split)
# The operands after A, B, C, in the C API's order: the output view, then the epilogue's views.
EXTRA_OPERANDS = (OUTPUT_VIEW, "bias", "scale", "residual")
# Epilogue steps, applied in order to t = alpha * (A.B) + beta * C (cuBLASLt's order). docs/design/epilogue.md has
# the activations' formulas.
ACTIVATIONS = ("relu", "gelu_tanh", "gelu_erf", "silu", "sigmoid", "tanh")
# Names a user types that stand for more than one of ours: the fix offers each, saying what it is.
AMBIGUOUS_NAMES = {"gelu": ("gelu_tanh", "gelu_erf")}
MEANINGS = {
    "gelu_tanh": "GeLU's tanh approximation, torch's GELU(approximate='tanh') and cuBLASLt's GELU",
    "gelu_erf": "the exact GeLU with erf, torch's default nn.GELU()",
}
ACTIVATION_ALIASES = {"swish": "silu", "logistic": "sigmoid"}
EPILOGUE_STEPS = ("bias", "scale", "activation", "clamp", "residual")
EPILOGUE_VIEW_KEYS = {"letters", "layout", "strides", "byte_strides", "dtype", "offset", "align"}
GEMM_KEYS = {"m", "n", "k", "batch"}
OPERAND_KEYS = {"layout", "strides", "byte_strides", "dtype", "offset", "align"}
# Where the nested keys go, for a top-level key that belongs one level down ('m: 4', 'layuot: row').
NESTED_KEYS = {**{k: f"gemm: {{{k}: ...}}" for k in GEMM_KEYS},
               **{k: f"operands: {{A: {{{k}: ...}}}}" for k in OPERAND_KEYS}}

# C keywords and CUDA names an exported symbol must not take.
_RESERVED = {
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else", "enum",
    "extern", "float", "for", "goto", "if", "inline", "int", "long", "register", "restrict", "return",
    "short", "signed", "sizeof", "static", "struct", "switch", "typedef", "union", "unsigned", "void",
    "volatile", "while", "bool", "class", "template", "namespace", "new", "delete", "main",
    # C++ keywords: the name is emitted into a .cu (C++) file.
    "alignas", "alignof", "and", "asm", "catch", "char16_t", "char32_t", "char8_t", "concept", "consteval",
    "constexpr", "constinit", "const_cast", "co_await", "co_return", "co_yield", "decltype", "dynamic_cast",
    "explicit", "export", "false", "friend", "mutable", "noexcept", "not", "nullptr", "operator", "or",
    "private", "protected", "public", "reinterpret_cast", "requires", "static_assert", "static_cast", "this",
    "thread_local", "throw", "true", "try", "typeid", "typename", "using", "virtual", "wchar_t", "xor",
}
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_FLOAT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")
_OPERAND_LETTERS = re.compile(r"[A-Za-z]*")


@dataclass(frozen=True)
class OperandView:
    """One operand as the user described it: letters in the operand's own order, element strides."""

    name: str  # "A", "B" or "C"
    letters: str  # e.g. "nchw"
    sizes: tuple[int, ...]
    strides: tuple[int, ...]  # element strides, same order as letters
    offset: int  # elements from the base pointer to element [0, 0, ...]
    dtype: str
    align: int  # bytes the caller promises for the base pointer

    @property
    def elem_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    def stride_of(self, letter: str) -> int:
        return self.strides[self.letters.index(letter)]

    @property
    def span(self) -> int:
        """Elements a buffer must hold: offset + largest reachable index + 1."""
        return self.offset + sum((s - 1) * st for s, st in zip(self.sizes, self.strides)) + 1


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
                    "strides": list(op.strides),
                    "offset": op.offset,
                    "dtype": op.dtype,
                    "align": op.align,
                }
                for op in (*self.operands, *((self.D,) if self.D is not None else ()))
            },
            "alpha": self.alpha,
            "beta": self.beta,
            # Only when present: a spec without an epilogue normalises (and hashes) as before.
            **({"epilogue": [st.to_dict() for st in self.epilogue]} if self.epilogue else {}),
        }


class _Ctx:
    """Carries the file name so that every error can name it."""

    def __init__(self, path: str):
        self.path = path
        self.notes: list[str] = []

    def fail(self, key: str, problem: str, fix: str) -> SpecError:
        return SpecError(self.path, key, problem, fix)

    def mapping(self, value: Any, key: str, allowed: set[str], what: str,
                nested: Mapping[str, str] | None = None) -> dict[str, Any]:
        """`value` as a mapping of `allowed` keys; `nested` (key -> where it goes) only feeds the fix."""
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.fail(key or "(top)", f"expected a mapping for {what}, got {type(value).__name__}",
                            f"write {key or 'the spec'} as `key: value` lines")
        for k in value:
            if k not in allowed:
                raise self.fail(f"{key}.{k}" if key else str(k), f"unknown key '{k}'",
                                _fix_unknown_key(k, sorted(allowed), nested or {}))
        return value

    def integer(self, value: Any, key: str, minimum: int | None = None, what: str = "an integer",
                fix: str | None = None) -> int:
        """A whole number >= `minimum`; `what` names it in the problem ("an integer count of batches"), `fix`
        replaces the generic fix."""
        # bool is an int in Python; `m: true` is a typo, not 1.
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(key, f"expected {what}, got {value!r}", fix or "write a whole number")
        if minimum is not None and value < minimum:
            low = "negative" if value < 0 else f"less than {minimum}"
            raise self.fail(key, f"{value} is {low}", fix or f"use an integer >= {minimum}")
        return value

    def size(self, value: Any, key: str, letter: str, dynamic: dict[str, tuple[int, int]]) -> int:
        """A size, or a run-time range `{min: a, max: b}` (recorded in `dynamic`; the max is returned)."""
        if isinstance(value, dict):
            rng = self.mapping(value, key, {"min", "max"}, "a run-time size")
            for bound in ("min", "max"):
                if bound not in rng:
                    raise self.fail(f"{key}.{bound}", "missing", "write `{min: 1, max: 256}`")
            lo, hi = self.integer(rng["min"], f"{key}.min", 1), self.integer(rng["max"], f"{key}.max", 1)
            if lo > hi:
                raise self.fail(key, f"min {lo} > max {hi}", "give the smaller bound as min")
            dynamic[letter] = (lo, hi)
            return hi
        return self.integer(value, key, 1, "an integer size",
                            f"write the number of elements as a whole number >= 1, e.g. `{key.rpartition('.')[2]}: "
                            "128` (a dim of size 1 is dropped); only the rows may be a run-time range "
                            "`{min: 1, max: 256}`")

    def number(self, value: Any, key: str) -> float:
        # YAML 1.1 reads 1e-3 (no dot) as a string; accept what is plainly a number.
        if isinstance(value, str) and _FLOAT.fullmatch(value.strip()):
            value = float(value)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(key, f"expected a number, got {value!r}", "write a number such as 1.0")
        if value != value or value in (float("inf"), float("-inf")):
            raise self.fail(key, f"{value!r} is not finite", "use a finite number")
        return float(value)

    def int_list(self, value: Any, key: str, length: int, letters: str) -> list[int]:
        if not isinstance(value, list):
            raise self.fail(key, f"expected a list of {length} integers, got {value!r}",
                            f"write one stride per letter of '{letters}', e.g. [{', '.join(['1'] * length)}]")
        if len(value) != length:
            fix = (f"give exactly one stride per letter of '{letters}'" if letters else
                   "this operand has no letters (one element, e.g. the output of a full reduction): "
                   "give `strides: []` or leave strides out")
            raise self.fail(key, f"has {len(value)} entries but the operand has {length} dims ('{letters}')", fix)
        out = []
        for i, v in enumerate(value):
            if isinstance(v, int) and not isinstance(v, bool) and v < 0:
                raise self.fail(f"{key}[{i}]", f"{v} is negative: a view here walks forwards from its base pointer "
                                               "(the kernels' index math, the buffer span and TMA take strides >= 0)",
                                "use strides >= 0 and pass the lowest-addressed element as the base (`offset:` "
                                "from it); a dim that runs backwards needs a flipped copy (e.g. torch.flip)")
            out.append(self.integer(v, f"{key}[{i}]", 0))
        return out

    def choice(self, value: Any, key: str, choices: tuple[str, ...], what: str,
               aliases: Mapping[str, str] | None = None) -> str:
        """`value` if it is one of `choices` in any case ('Row', 'SM_90A': read as ours, with a note);
        `aliases` (other name -> choice) only feed the suggestion."""
        ours = {c.lower(): c for c in choices}.get(value.lower()) if isinstance(value, str) else None
        if ours is None:
            ambiguous = AMBIGUOUS_NAMES.get(value.lower()) if isinstance(value, str) else None
            fix = (_fix_ambiguous(value, ambiguous, choices) if ambiguous and set(ambiguous) <= set(choices)
                   else _fix_naming(value, choices, aliases))
            raise self.fail(key, f"unsupported {what} {value!r}", fix)
        if ours != value:
            self.notes.append(f"{key} '{value}' read as {ours}")
        return ours

    def dtype(self, value: Any, key: str, choices: tuple[str, ...] = tuple(DTYPE_BYTES), what: str = "dtype") -> str:
        """A dtype in our names, among `choices`; an alias (fp16, half, FP16, ...) is read as ours, with a note.
        Only `accum:` narrows `choices` (to ACCUM_TYPES): a dtype outside them is refused with that reason."""
        ours = DTYPE_ALIASES.get(value.lower(), value.lower()) if isinstance(value, str) else None
        if ours in DTYPE_BYTES and ours not in choices:
            raise self.fail(key, f"unsupported {what} {value!r}: the kernels accumulate in {' or '.join(choices)} "
                                 "only", f"write `{key}: {choices[0]}` or leave it out")
        if isinstance(value, str) and value.lower() in DTYPE_ALIASES:
            self.notes.append(f"{key} '{value}' read as {ours}")
            return ours
        return self.choice(value, key, choices, what, {a: n for a, n in DTYPE_ALIASES.items() if n in choices})


_NEAR = 0.6  # difflib's default ratio: 'layuot' -> 'layout', 'rwo' -> 'row', 'column' -> 'col'


def _closest(word: Any, names: Iterable[str], aliases: Mapping[str, str] | None = None) -> str | None:
    """The name in `names` nearest to `word`, or None when none is near.

    Case is ignored, and an alias in other case ('Half') suggests the name it stands for. Otherwise difflib
    decides, among names with the same digits only: the digits are the meaning (bit width, compute
    capability), so 'f64' must not suggest 'f16'."""
    if isinstance(word, bool) or not isinstance(word, (str, int, float)):
        return None
    names = list(names)
    text = str(word).strip().lower()
    by_lower = {name.lower(): name for name in names}
    for alias, name in (aliases or {}).items():
        by_lower.setdefault(alias.lower(), name)
    if text in by_lower:
        return by_lower[text]
    if all(len(name) == 1 for name in names):
        return None  # one-letter names (einsum letters, operands) are near only by case: 'hw' is no typo of 'h'
    digits = re.sub(r"\D", "", text)
    same_digits = [name.lower() for name in names if re.sub(r"\D", "", name) == digits]
    hits = difflib.get_close_matches(text, same_digits, n=1, cutoff=_NEAR)
    return by_lower[hits[0]] if hits else None


def _fix_ambiguous(word: str, names: tuple[str, ...], valid: Iterable[str]) -> str:
    """The fix for a name that means more than one of ours ('gelu'): each candidate and what it is."""
    offers = " or ".join(f"'{n}' ({MEANINGS[n]})" for n in names)
    return f"'{word}' is ambiguous: write {offers} (valid: {', '.join(valid)})"


def _fix_unknown_key(word: Any, allowed: list[str], nested: Mapping[str, str]) -> str:
    """Like `_fix_naming`; but when the nearest key is one of the level below (`nested`: key -> example),
    the fix says where it goes."""
    near = _closest(word, [*allowed, *(k for k in sorted(nested) if k not in allowed)])
    if near is None or near in allowed:
        return _fix_naming(word, allowed)
    where = f"one level down: `{nested[near]}`"
    return f"'{near}' goes {where}" if near == word else f"did you mean '{near}'? It goes {where}"


def _fix_naming(word: Any, names: Iterable[str], aliases: Mapping[str, str] | None = None) -> str:
    """The fix for an unknown key or value: the nearest valid name when there is one, and all of them."""
    names = list(names)
    near = _closest(word, names, aliases)
    valid = ", ".join(names)
    return f"did you mean '{near}'? (valid: {valid})" if near is not None else f"use one of: {valid}"


def load_spec(path: str | Path) -> Spec:
    """Read and validate one YAML spec file."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise SpecError(str(path), "(file)", "no such file", "check the path") from None
    except IsADirectoryError:
        raise SpecError(str(path), "(file)", "is a directory", "pass a .yaml spec file") from None
    except UnicodeDecodeError as exc:
        raise SpecError(str(path), f"byte {exc.start}", "not UTF-8 text", "save the spec as UTF-8") from None
    loader = _SpecLoader(text)
    try:
        data = loader.get_single_data()
    except _DuplicateKey as dup:
        lines = f"on line {dup.first}" if dup.first == dup.second else f"on lines {dup.first} and {dup.second}"
        raise SpecError(str(path), dup.key, f"'{dup.key.rpartition('.')[2]}' is given twice {lines} (YAML would "
                        "silently keep the last)", "keep one of the two and delete the other") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else "(yaml)"
        raise SpecError(str(path), where, f"not valid YAML ({getattr(exc, 'problem', exc)})",
                        "fix the YAML syntax") from None
    finally:
        loader.dispose()
    return parse_spec(data, str(path))


class _DuplicateKey(Exception):
    """A mapping of the document gives one key twice: `key` is its dotted path, the lines are 1-based."""

    def __init__(self, key: str, first: int, second: int):
        super().__init__(key)
        self.key, self.first, self.second = key, first, second


class _SpecLoader(yaml.SafeLoader):
    """pyyaml's safe loader, except that a key given twice in one mapping is an error, at any depth
    (pyyaml keeps the last one silently)."""

    def construct_document(self, node: yaml.Node) -> Any:
        _check_unique_keys(node, "", set())
        return super().construct_document(node)


def _check_unique_keys(node: yaml.Node, where: str, seen: set[int]) -> None:
    """Raise `_DuplicateKey` for the first key given twice in a mapping under `node` (`where`: its path)."""
    if id(node) in seen:  # an alias: checked where its anchor is
        return
    seen.add(id(node))
    if isinstance(node, yaml.MappingNode):
        lines: dict[tuple[str, str], int] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *base`: later keys override merged ones by design
                continue
            name = str(key_node.value) if isinstance(key_node, yaml.ScalarNode) else "(key)"
            path = f"{where}.{name}" if where else name
            ident = (key_node.tag, name)
            if ident in lines:
                raise _DuplicateKey(path, lines[ident], key_node.start_mark.line + 1)
            lines[ident] = key_node.start_mark.line + 1
            _check_unique_keys(value_node, path, seen)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _check_unique_keys(item, f"{where}[{i}]", seen)


def parse_spec(data: Any, source: str = "<spec>") -> Spec:
    """Validate an already-parsed YAML document."""
    ctx = _Ctx(source)
    top = ctx.mapping(data, "", TOP_KEYS, "the spec", NESTED_KEYS)
    if not top:
        raise ctx.fail("(top)", "the spec is empty", "write at least `name:`, `gemm:` or `contraction:`")

    if "name" not in top:
        raise ctx.fail("name", "missing", "add `name: my_kernel` (a C identifier)")
    name = top["name"]
    if not isinstance(name, str) or not _IDENT.fullmatch(name):
        raise ctx.fail("name", f"{name!r} is not a C identifier",
                       "use letters, digits and '_' only, not starting with a digit")
    if name in _RESERVED or keyword.iskeyword(name):
        raise ctx.fail("name", f"'{name}' is a reserved word", "pick another name, e.g. 'gemm_" + name + "'")

    arch = ctx.choice(top.get("arch", "sm_90a"), "arch", ARCHS, "arch")
    default_dtype = ctx.dtype(top.get("dtype", "f16"), "dtype")
    accum = ctx.dtype(top.get("accum", "f32"), "accum", ACCUM_TYPES, "accumulator type")
    alpha = ctx.number(top.get("alpha", 1.0), "alpha")
    beta = ctx.number(top.get("beta", 0.0), "beta")

    if ("gemm" in top) == ("contraction" in top):
        raise ctx.fail("gemm/contraction", "need exactly one of `gemm:` and `contraction:`",
                       "write either `gemm: {m: .., n: .., k: ..}` or `contraction: \"mk,kn->mn\"` with `sizes:`")
    operands = ctx.mapping(top.get("operands"), "operands", {*OPERANDS, OUTPUT_VIEW}, "operands")
    op_maps = {op: ctx.mapping(operands.get(op), f"operands.{op}", OPERAND_KEYS, f"operand {op}")
               for op in (*OPERANDS, OUTPUT_VIEW)}

    dynamic: dict[str, tuple[int, int]] = {}  # filled by ctx.size
    if "gemm" in top:
        if "sizes" in top:
            raise ctx.fail("sizes", "`sizes:` goes with `contraction:`, not with `gemm:`",
                           "put m, n, k (and batch) inside `gemm:`")
        gemm = ctx.mapping(top["gemm"], "gemm", GEMM_KEYS, "gemm")
        for k in ("m", "n", "k"):
            if k not in gemm:
                raise ctx.fail(f"gemm.{k}", "missing", f"add `{k}: <size>` to `gemm:`")
        sizes = {k: ctx.size(gemm[k], f"gemm.{k}", k, dynamic) for k in ("m", "n", "k")}
        if "batch" in gemm:
            sizes = {"b": ctx.integer(gemm["batch"], "gemm.batch", 1, "an integer count of batches",
                                      "write how many matrices the batch holds, e.g. `batch: 8` (its letter is "
                                      "always b: A[b,m,k], B[b,k,n], C[b,m,n])"), **sizes}
            letters = ("bmk", "bkn", "bmn")
        else:
            letters = ("mk", "kn", "mn")
        shorthand, implicit_output = "gemm", False
    else:
        expr = top["contraction"]
        a_letters, b_letters, c_letters, implicit_output = _parse_einsum(ctx, expr)
        letters = (a_letters, b_letters, c_letters)
        if "sizes" not in top:
            raise ctx.fail("sizes", "missing", "add `sizes: {letter: size, ...}` for every letter")
        raw = ctx.mapping(top["sizes"], "sizes", set("".join(letters)), "sizes")
        sizes = {}
        for letter in dict.fromkeys("".join(letters)):
            if letter not in raw:
                raise ctx.fail(f"sizes.{letter}", "missing", f"add `{letter}: <size>` to `sizes:`")
            sizes[letter] = ctx.size(raw[letter], f"sizes.{letter}", letter, dynamic)
        shorthand = "contraction"

    views = []
    for op, op_letters in zip(OPERANDS, letters):
        views.append(_operand(ctx, op, op_letters, sizes, op_maps[op], default_dtype, shorthand))
    a, b, c = views
    _check_dynamic(ctx, dynamic, sizes, (a, b, c), op_maps, shorthand)
    if a.dtype != b.dtype:
        given = next(op for op in ("B", "A") if "dtype" in op_maps[op])
        raise ctx.fail(f"operands.{given}.dtype", f"A is {a.dtype} but B is {b.dtype}: one kernel multiplies one "
                                                  "input type (the mma instructions take A and B of one type)",
                       "give A and B the same dtype (convert one before the call, or set the top-level `dtype:` "
                       "and drop the operands' own); C, D and the epilogue's views may differ")
    c_key = "operands.C.byte_strides" if "byte_strides" in op_maps["C"] else "operands.C.strides"
    _check_c_not_aliased(ctx, c, c_key)
    d = None
    if OUTPUT_VIEW in operands:
        d = _operand(ctx, OUTPUT_VIEW, c.letters, sizes, op_maps[OUTPUT_VIEW], c.dtype, shorthand)
        d_key = "operands.D.byte_strides" if "byte_strides" in op_maps[OUTPUT_VIEW] else "operands.D.strides"
        _check_c_not_aliased(ctx, d, d_key)
    epilogue = _epilogue(ctx, top.get("epilogue"), c, sizes, dynamic)
    if d is not None:
        _check_dynamic_strides(ctx, dynamic, sizes, d, op_maps[OUTPUT_VIEW], f"operands.{OUTPUT_VIEW}", shorthand)
    contraction = f"{letters[0]},{letters[1]}->{letters[2]}"
    spec = Spec(name=name, arch=arch, accum=accum, contraction=contraction, sizes=sizes,
                A=a, B=b, C=c, alpha=alpha, beta=beta, source=source, shorthand=shorthand, notes=tuple(ctx.notes),
                implicit_output=implicit_output, epilogue=epilogue, D=d, dynamic=dynamic)
    return replace(spec, warnings=_check_spans(ctx, spec))


def _check_spans(ctx: _Ctx, spec: Spec) -> tuple[str, ...]:
    """Refuse a view whose byte span passes a signed 64-bit offset; warn when the views together span more
    than MEMORY_WARNING_FACTOR times the largest GPU memory (each view's span: offset and padding included)."""
    views = (*spec.operands, *spec.extra_operands)
    spans = {v.name: v.span * v.elem_bytes for v in views}

    def keys(v: OperandView) -> str:
        big = sorted((x for x in v.letters if spec.sizes[x] > 1), key=lambda x: -spec.sizes[x])
        return ", ".join(f"{spec.size_key(x)} = {spec.sizes[x]}" for x in big) or "its offset"

    for v in views:
        if spans[v.name] > INT64_MAX:
            big = max(v.letters, key=lambda x: spec.sizes[x], default=None)
            raise ctx.fail(spec.size_key(big) if big else f"operands.{v.name}.offset",
                           f"{v.name} spans {spans[v.name]} bytes ({keys(v)}), past a 64-bit byte offset",
                           "check the sizes: no buffer is that large; split the problem into several specs")
    total = sum(spans.values())
    if total <= MEMORY_WARNING_FACTOR * LARGEST_GPU_BYTES:
        return ()
    largest = max(views, key=lambda v: spans[v.name])
    each = ", ".join(f"{v.name} {_bytes(spans[v.name])}" for v in views)
    return (f"the views span {_bytes(total)} ({each}), more than {MEMORY_WARNING_FACTOR}x the "
            f"{_bytes(LARGEST_GPU_BYTES)} of the largest GPU deepgemm targets (H200): no GPU holds them. Check the "
            f"sizes of {largest.name} ({keys(largest)})",)


def _bytes(n: int) -> str:
    """A byte count in decimal units, as GPU memory is quoted: "141 GB", "2.2 TB"."""
    for unit, scale in (("PB", 10**15), ("TB", 10**12), ("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n} B"


def _check_dynamic(ctx: _Ctx, dynamic: dict[str, tuple[int, int]], sizes: dict[str, int],
                   views: tuple[OperandView, ...], op_maps: dict[str, dict[str, Any]], shorthand: str) -> None:
    """A run-time size is a row letter (in A and C, not in B: the tokens of a decode batch), one per
    spec, and no stride may depend on it: the strides worked out for its largest size must hold for
    every size (explicit strides, or layouts where the letter is outermost)."""
    if not dynamic:
        return
    if len(dynamic) > 1:
        second = list(dynamic)[1]
        raise ctx.fail(f"sizes.{second}", f"{len(dynamic)} letters have run-time sizes ({', '.join(dynamic)})",
                       "give one letter (the rows, e.g. the tokens of a decode batch) a range, the others sizes")
    (x, (lo, _)), = dynamic.items()
    where = f"gemm.{x}" if shorthand == "gemm" else f"sizes.{x}"
    a, b, c = views
    if x in b.letters or x not in a.letters or x not in c.letters:
        raise ctx.fail(where, f"'{x}' has a run-time size but is not a row letter (in A and C, not in B)",
                       "only the rows of A and C (M) may be sized at run time; give the other letters sizes")
    for view in views:
        _check_dynamic_strides(ctx, dynamic, sizes, view, op_maps[view.name], f"operands.{view.name}", shorthand)


def _check_dynamic_strides(ctx: _Ctx, dynamic: dict[str, tuple[int, int]], sizes: dict[str, int],
                           view: OperandView, raw: dict[str, Any], key: str, shorthand: str) -> None:
    """The strides worked out for the run-time letter's largest size must hold at its smallest."""
    if not dynamic:
        return
    (x, (lo, _)), = dynamic.items()
    quiet = _Ctx(ctx.path)  # the view was read once already: no second round of notes
    again = _operand(quiet, view.name, view.letters, dict(sizes, **{x: lo}), raw, view.dtype, shorthand, key=key)
    if again.strides != view.strides:
        given = next((k for k in ("layout", "strides", "byte_strides") if k in raw),
                     "layout" if shorthand == "gemm" else "strides")
        raise ctx.fail(f"{key}.{given}",
                       f"{view.name}'s strides {list(view.strides)} depend on the run-time size of '{x}' "
                       f"({list(again.strides)} when it is {lo})",
                       f"give explicit strides (elements) that hold for every size, or a layout where '{x}' "
                       "is the outermost dim")


def _epilogue(ctx: _Ctx, raw: Any, c: OperandView, sizes: dict[str, int],
              dynamic: dict[str, tuple[int, int]]) -> tuple[EpilogueStep, ...]:
    """The `epilogue:` list: each item one step, `{bias: {letters: n, ...}}`, `{activation: gelu_tanh}`,
    `{clamp: [lo, hi]}`, ... The views of bias / scale / residual take the operand keys (strides or
    byte_strides in their letters' order, offset, dtype (default C's), align); dense by default."""
    if raw is None:
        return ()
    example = "`epilogue: [{bias: {letters: n}}, {activation: gelu_tanh}]`"
    if not isinstance(raw, list):
        raise ctx.fail("epilogue", f"expected a list of steps, got {type(raw).__name__}", f"write e.g. {example}")
    steps = []
    for i, item in enumerate(raw):
        key = f"epilogue[{i}]"
        if isinstance(item, str) and item in ACTIVATIONS:
            raise ctx.fail(key, f"'{item}' is an activation, written as a step of its own",
                           f"write `{{activation: {item}}}`")
        if not isinstance(item, dict) or len(item) != 1:
            raise ctx.fail(key, f"each step is a mapping with one key, got {item!r}",
                           f"use one of {', '.join(EPILOGUE_STEPS)}, e.g. {example}")
        (kind, value), = item.items()
        if kind not in EPILOGUE_STEPS:
            raise ctx.fail(f"{key}.{kind}", f"unknown epilogue step '{kind}'", _fix_naming(kind, EPILOGUE_STEPS))
        key = f"{key}.{kind}"
        if kind == "activation":
            steps.append(EpilogueStep(kind, activation=ctx.choice(value, key, ACTIVATIONS, "activation",
                                                                  ACTIVATION_ALIASES)))
        elif kind == "clamp":
            if not isinstance(value, list) or len(value) != 2:
                raise ctx.fail(key, f"expected [lo, hi], got {value!r}", "write e.g. `clamp: [-1.0, 1.0]`")
            lo, hi = ctx.number(value[0], f"{key}[0]"), ctx.number(value[1], f"{key}[1]")
            if lo > hi:
                raise ctx.fail(key, f"lo {lo} > hi {hi}", "give the lower bound first")
            steps.append(EpilogueStep(kind, clamp=(lo, hi)))
        else:
            earlier = next((j for j, st in enumerate(steps) if st.kind == kind), None)
            if earlier is not None:
                raise ctx.fail(key, f"a second {kind} step (the first is epilogue[{earlier}])",
                               f"give one {kind} view (the C API takes one {kind} pointer); fold two into one "
                               f"tensor over the union of their letters")
            view = _epilogue_view(ctx, key, kind, value, c, sizes)
            _check_dynamic_strides(ctx, dynamic, sizes, view, _view_keys(value), key, "contraction")
            steps.append(EpilogueStep(kind, view=view))
    return tuple(steps)


def _view_keys(value: dict[str, Any]) -> dict[str, Any]:
    """An epilogue view's operand keys, without `letters:`."""
    return {k: v for k, v in value.items() if k != "letters"}


def _epilogue_view(ctx: _Ctx, key: str, kind: str, value: Any, c: OperandView,
                   sizes: dict[str, int]) -> OperandView:
    raw = dict(ctx.mapping(value, key, EPILOGUE_VIEW_KEYS, f"the {kind} view"))
    if kind == "residual":
        letters = raw.pop("letters", c.letters)
        if not isinstance(letters, str) or sorted(letters) != sorted(c.letters):
            raise ctx.fail(f"{key}.letters", f"a residual has C's letters ('{c.letters}'), got {letters!r}",
                           "leave `letters:` out (C's order), or list C's letters in the residual's memory order")
    else:
        if "letters" not in raw:
            raise ctx.fail(f"{key}.letters", "missing",
                           f"say which of C's letters ('{c.letters}') the {kind} runs over, e.g. `letters: "
                           f"{c.letters[-1:] or 'n'}`, or `letters: \"\"` for one scalar")
        letters = raw.pop("letters")
        # No letters ("") is one element for every element of C: a scalar bias or scale read from memory.
        if not isinstance(letters, str) or not _OPERAND_LETTERS.fullmatch(letters):
            raise ctx.fail(f"{key}.letters", f"{letters!r} is not a string of letters",
                           f"write some of C's letters ('{c.letters}'), or \"\" for one scalar")
        stray = [x for x in letters if x not in c.letters]
        if stray:
            raise ctx.fail(f"{key}.letters", f"letter '{stray[0]}' is not one of C's ('{c.letters}')",
                           f"a {kind} runs over C's letters only: use some of '{c.letters}'")
        twice = next((x for x in letters if letters.count(x) > 1), None)
        if twice is not None:
            raise ctx.fail(f"{key}.letters", f"letter '{twice}' appears twice", "write each letter once")
    return _operand(ctx, kind, letters, sizes, raw, c.dtype, "contraction", key=key)


def _parse_einsum(ctx: _Ctx, expr: Any) -> tuple[str, str, str, bool]:
    """The letters of A, B and C, read the way numpy.einsum reads the string: two inputs, then the
    output after `->`, or, without `->`, the letters that appear once, in alphabetical order (then
    the last value, `implicit`, is True).

    An output may be empty (a full reduction: C is one element), an input may be empty (a scalar),
    and a letter in one input only and not in the output is summed like any other (the other input
    is broadcast over it). What einsum itself rejects, and what one kernel cannot do, is an error:
    not two inputs, a letter twice in one operand (a diagonal), `...`, an output letter no input has.
    """
    key = "contraction"
    if not isinstance(expr, str) or not expr.strip():
        raise ctx.fail(key, f"{expr!r} is not of the form 'ab,bc->ac'",
                       "write two inputs and the output, e.g. \"nchw,kc->nkhw\" (or \"ab,bc\", numpy's implicit "
                       "output)")
    if "..." in expr:
        raise ctx.fail(key, f"{expr!r} uses '...' (numpy's ellipsis: dims left unnamed and broadcast)",
                       "name every dim with a letter of its own; a kernel needs each dim's size and stride")
    if expr.count("->") > 1:
        raise ctx.fail(key, f"{expr!r} has {expr.count('->')} arrows", "write one '->' before the output, or none")
    inputs, arrow, output = expr.partition("->")
    terms = [t.strip() for t in inputs.split(",")]
    output = output.strip()
    for term in [*terms, output]:
        if not _OPERAND_LETTERS.fullmatch(term):
            bad = next(ch for ch in term if not ch.isascii() or not ch.isalpha())
            raise ctx.fail(key, f"{expr!r} is not of the form 'ab,bc->ac': {bad!r} in operand '{term}'",
                           "use letters a-z and A-Z for dims, ',' between the two inputs and '->' before the output")
    if len(terms) != 2:
        if len(terms) == 1:
            raise ctx.fail(key, f"{expr!r} has one input; a kernel here multiplies two (A and B)",
                           "write two inputs, e.g. \"ab,bc->ac\" (a transpose or a sum of one tensor is not a "
                           "product)")
        # The first step of a split, concrete: the first pair keeps the letters used later.
        everything = "".join(terms)
        final = output if arrow else "".join(sorted(x for x in everything if everything.count(x) == 1))
        later = "".join(terms[2:]) + final
        kept = "".join(x for x in dict.fromkeys(terms[0] + terms[1]) if x in later)
        raise ctx.fail(key, f"{expr!r} has {len(terms)} inputs; one kernel contracts two",
                       f"split it into pairwise contractions, one spec each: e.g. '{terms[0]},{terms[1]}->{kept}' "
                       "first, then its result with the next input (opt_einsum.contract_path finds a cheap order)")
    a, b = terms
    for op, term in (("A", a), ("B", b), ("C", output)):
        twice = next((x for x in term if term.count(x) > 1), None)
        if twice is None:
            continue
        if op == "C":
            raise ctx.fail(key, f"letter '{twice}' appears twice in C ('{term}')",
                           "write each output letter once (numpy.einsum rejects a repeated output letter too)")
        raise ctx.fail(key, f"letter '{twice}' appears twice in {op} ('{term}'): numpy takes the diagonal, "
                            "which is a strided view, not a contraction",
                       "write the letter once, with the sum of the repeated dims' strides as its stride "
                       "(the diagonal of a dense [n, n] is one letter of stride n + 1)")
    if not arrow:
        output = "".join(sorted(x for x in a + b if (a + b).count(x) == 1))
    for x in output:
        if x not in a and x not in b:
            raise ctx.fail(key, f"letter '{x}' appears in C only",
                           "every output letter must come from A or B (numpy.einsum rejects it too): "
                           "add it to an input or drop it from the output")
    if not (a or b):
        raise ctx.fail(key, f"{expr!r} has no letters: a product of two scalars",
                       "give at least one operand a letter; there is no tensor to generate a kernel for")
    return a, b, output, not arrow


def _operand(ctx: _Ctx, op: str, letters: str, sizes: dict[str, int], raw: dict[str, Any],
             default_dtype: str, shorthand: str, key: str | None = None) -> OperandView:
    key = key or f"operands.{op}"
    dtype = ctx.dtype(raw.get("dtype", default_dtype), f"{key}.dtype")
    elem = DTYPE_BYTES[dtype]
    dims = tuple(sizes[x] for x in letters)
    given = [k for k in ("layout", "strides", "byte_strides") if k in raw]
    if len(given) > 1:
        raise ctx.fail(f"{key}.{given[1]}", f"both `{given[0]}` and `{given[1]}` given",
                       "describe the layout one way only")
    if "strides" in raw:
        strides = ctx.int_list(raw["strides"], f"{key}.strides", len(letters), letters)
    elif "byte_strides" in raw:
        byte_strides = ctx.int_list(raw["byte_strides"], f"{key}.byte_strides", len(letters), letters)
        for i, bs in enumerate(byte_strides):
            if bs % elem:
                raise ctx.fail(f"{key}.byte_strides[{i}]",
                               f"{bs} bytes is not a multiple of the {elem}-byte {dtype} element",
                               f"use a multiple of {elem}, or `strides:` in elements")
        strides = [bs // elem for bs in byte_strides]
    elif "layout" in raw:
        # An epilogue view names its letters in its own order, so row/col mean the same in either form.
        if shorthand != "gemm" and op not in EPILOGUE_STEPS:
            raise ctx.fail(f"{key}.layout", "`layout:` only works with the `gemm:` shorthand",
                           "give `strides:` (elements) or `byte_strides:` in the operand's letter order")
        layout = ctx.choice(raw["layout"], f"{key}.layout", ("row", "col"), "layout")
        if layout == "col" and len(letters) < 2:
            raise ctx.fail(f"{key}.layout", f"`col` swaps the last two letters and '{letters}' has "
                                            f"{len(letters) or 'no'} letter{'s' * (len(letters) != 1)}",
                           "leave `layout:` out (one letter is dense either way), or give `strides:`")
        strides = _layout_strides(dims, layout)
    else:
        strides = _layout_strides(dims, "row")
    offset = ctx.integer(raw.get("offset", 0), f"{key}.offset", 0)
    align = ctx.integer(raw.get("align", elem), f"{key}.align", 1)
    if align & (align - 1) or align < elem:
        raise ctx.fail(f"{key}.align", f"{align} is not a power of two >= the {elem}-byte element",
                       f"promise a power of two such as {max(elem, 16)}")
    return OperandView(op, letters, dims, tuple(strides), offset, dtype, align)


def _layout_strides(dims: tuple[int, ...], layout: str) -> list[int]:
    """Dense strides. `row`: the last of the two matrix dims is contiguous; `col`: the first one.
    A leading batch dim (3-D) is always outermost."""
    order = list(range(len(dims)))
    if layout == "col":
        order[-2], order[-1] = order[-1], order[-2]
    strides = [0] * len(dims)
    step = 1
    for i in reversed(order):
        strides[i] = step
        step *= dims[i]
    return strides


def _check_c_not_aliased(ctx: _Ctx, c: OperandView, key: str) -> None:
    for letter, size, stride in zip(c.letters, c.sizes, c.strides):
        if size > 1 and stride == 0:
            raise ctx.fail(key, f"C has stride 0 on '{letter}' (size {size}): aliased writes",
                           "give every C dim of size > 1 a non-zero stride")
    # Sufficient non-overlap test: sorted by stride, each dim must step past everything the smaller ones reach.
    reach = 0
    dims = sorted(((st, s) for s, st in zip(c.sizes, c.strides) if s > 1))
    for stride, size in dims:
        if stride <= reach:
            raise ctx.fail(key, f"C's element strides {list(c.strides)} may make different elements share an "
                                "address (each dim must step past everything the smaller-stride dims reach)",
                           "use non-interleaved strides, e.g. dense")
        reach += (size - 1) * stride
