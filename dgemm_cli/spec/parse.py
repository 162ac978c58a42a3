"""An already-read YAML document -> a validated `Spec`: the top-level keys, the sizes, then each view."""

from __future__ import annotations

import keyword
import re
from dataclasses import replace
from typing import Any

from dgemm_cli.spec.dynamic import check_dynamic, check_dynamic_strides
from dgemm_cli.spec.einsum import parse_einsum
from dgemm_cli.spec.epilogue import read_epilogue
from dgemm_cli.spec.model import (
    ACCUM_TYPES,
    ACTIVATION_DTYPES,
    ARCHS,
    INPUT_ONLY_DTYPES,
    OPERANDS,
    OUTPUT_VIEW,
    WEIGHT_DTYPES,
    Spec,
)
from dgemm_cli.spec.operand import OPERAND_KEYS, check_c_not_aliased, read_operand
from dgemm_cli.spec.reader import SpecReader
from dgemm_cli.spec.scales import read_scales, read_zeros
from dgemm_cli.spec.spans import check_spans

TOP_KEYS = {"name", "arch", "dtype", "accum", "gemm", "contraction", "sizes", "operands", "alpha", "beta", "epilogue",
            "scales", "zeros", "plan"}
GEMM_KEYS = {"m", "n", "k", "batch"}
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


def parse_spec(data: Any, source: str = "<spec>") -> Spec:
    """Validate an already-parsed YAML document."""
    ctx = SpecReader(source)
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
        a_letters, b_letters, c_letters, implicit_output = parse_einsum(ctx, expr)
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
        packings = weight_packings(*letters) if op == "B" else None
        views.append(read_operand(ctx, op, op_letters, sizes, op_maps[op], default_dtype, shorthand,
                                  packings=packings))
    a, b, c = views
    check_dynamic(ctx, dynamic, sizes, (a, b, c), op_maps, shorthand)
    if a.dtype in WEIGHT_DTYPES:
        raise ctx.fail("operands.A.dtype" if "dtype" in op_maps["A"] else "dtype",
                       f"A is {a.dtype}: integer types are for the weights, B (docs/design/weight-only.md)",
                       "give A f16 or bf16 (the activations) and B the integer type")
    if b.dtype in WEIGHT_DTYPES:
        if a.dtype not in ACTIVATION_DTYPES:
            raise ctx.fail("operands.A.dtype" if "dtype" in op_maps["A"] else "dtype",
                           f"A is {a.dtype} beside {b.dtype} weights: the weights dequantize to f16 or bf16",
                           "give A f16 or bf16")
    elif a.dtype != b.dtype:
        given = next(op for op in ("B", "A") if "dtype" in op_maps[op])
        raise ctx.fail(f"operands.{given}.dtype", f"A is {a.dtype} but B is {b.dtype}: one kernel multiplies one "
                                                  "input type (the mma instructions take A and B of one type)",
                       "give A and B the same dtype (convert one before the call, or set the top-level `dtype:` "
                       "and drop the operands' own); C, D and the epilogue's views may differ")
    c_key = "operands.C.byte_strides" if "byte_strides" in op_maps["C"] else "operands.C.strides"
    check_c_not_aliased(ctx, c, c_key)
    d = None
    if OUTPUT_VIEW in operands:
        d = read_operand(ctx, OUTPUT_VIEW, c.letters, sizes, op_maps[OUTPUT_VIEW], c.dtype, shorthand)
        d_key = "operands.D.byte_strides" if "byte_strides" in op_maps[OUTPUT_VIEW] else "operands.D.strides"
        check_c_not_aliased(ctx, d, d_key)
    epilogue = read_epilogue(ctx, top.get("epilogue"), c, sizes, dynamic)
    if d is not None:
        check_dynamic_strides(ctx, dynamic, sizes, d, op_maps[OUTPUT_VIEW], f"operands.{OUTPUT_VIEW}", shorthand)
    outputs = [(c, "C"), (d, OUTPUT_VIEW), *((st.view, f"epilogue[{i}].{st.kind}") for i, st in enumerate(epilogue))]
    _check_input_only(ctx, outputs, op_maps)
    scales = read_scales(ctx, top.get("scales"), a, b, c.letters, sizes)
    zeros = read_zeros(ctx, top.get("zeros"), b, scales, weight_packings(*letters))
    if scales and dynamic and a.dtype == "e4m3":
        raise ctx.fail("scales", "e4m3 inputs with a size given at run time are not taken yet (docs/design/fp8.md)",
                       "give every size as a number")
    contraction = f"{letters[0]},{letters[1]}->{letters[2]}"
    pins = read_pins(ctx, top.get("plan"))
    spec = Spec(name=name, arch=arch, accum=accum, contraction=contraction, sizes=sizes,
                A=a, B=b, C=c, alpha=alpha, beta=beta, source=source, shorthand=shorthand, notes=tuple(ctx.notes),
                implicit_output=implicit_output, epilogue=epilogue, D=d, dynamic=dynamic, scales=scales,
                zeros=zeros, pins=pins)
    return replace(spec, warnings=check_spans(ctx, spec))


def weight_packings(a_letters: str, b_letters: str, c_letters: str) -> dict[str, str]:
    """The named packings of B's views and the letter each packs along: `gptq` (and `dg`) along the one k letter,
    `awq` along the one n letter; a name whose letter is not unique is not offered."""
    k = [x for x in b_letters if x in a_letters and x not in c_letters]
    n = [x for x in b_letters if x in c_letters and x not in a_letters]
    named = {}
    if len(k) == 1:
        named["gptq"] = named["dg"] = k[0]
    if len(n) == 1:
        named["awq"] = n[0]
    if len(k) != 1 or len(n) != 1 or len(b_letters) != 2:
        named.pop("dg", None)
    return named


def read_pins(ctx: SpecReader, raw: Any) -> tuple[tuple[str, Any], ...]:
    """`plan: {family: hopper, a_multicast: 2}`: decisions of the tiling graph the spec fixes, node -> value. Which
    nodes exist depends on the family, so planning checks the names and values (dgemm_cli/plan.py)."""
    if raw is None:
        return ()
    if not isinstance(raw, dict) or not raw:
        raise ctx.fail("plan", f"expected a mapping of decisions, got {raw!r}",
                       "write e.g. `plan: {family: hopper, stages: 4}` (`deepgemm explain SPEC` lists the decisions)")
    pins = []
    for node, value in raw.items():
        if not isinstance(value, (int, str)) or isinstance(value, bool):
            raise ctx.fail(f"plan.{node}", f"expected a number or a name, got {value!r}",
                           "write one value of the decision, as `deepgemm explain SPEC` prints it")
        pins.append((str(node), value))
    return tuple(pins)


def _check_input_only(ctx: SpecReader, views: list[tuple[Any, str]], op_maps: dict[str, dict[str, Any]]) -> None:
    """C, D and the epilogue's views (view, where the spec gives it) are not of an input-only type (e4m3): the
    kernels write bf16, f16 or f32."""
    for view, where in views:
        if view is None or view.dtype not in INPUT_ONLY_DTYPES:
            continue
        if where in op_maps:  # C or D: its own dtype, or the top-level one it defaults to
            key = f"operands.{where}.dtype" if "dtype" in op_maps[where] else "dtype"
            fix = f"give {where} its own dtype, e.g. `operands: {{{where}: {{dtype: bf16}}}}`"
        else:
            key, fix = f"{where}.dtype", "give the view `dtype: bf16` (or f16, f32)"
        raise ctx.fail(key, f"{view.name} is {view.dtype}: an input type only (A and B); the output and the "
                            "epilogue's views are bf16, f16 or f32", fix)
