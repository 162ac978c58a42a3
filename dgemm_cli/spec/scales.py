"""The `scales:` mapping -> a `ScaleView` for each e4m3 input (docs/design/fp8.md) or for integer weights
(docs/design/weight-only.md): the blocks one scale covers and the view of the scales. `{per: tensor}` and
`{per: channel}` are shorthands for blocks. The `zeros:` mapping -> integer weights' `ZeroView`."""

from __future__ import annotations

from typing import Any

from dgemm_cli.spec.model import (
    WEIGHT_DTYPES,
    ZERO_FORMS,
    OperandView,
    ScaleView,
    ZeroView,
)
from dgemm_cli.spec.operand import OPERAND_KEYS, read_operand
from dgemm_cli.spec.reader import SpecReader

SCALE_KEYS = {"per", "block"} | OPERAND_KEYS
ZERO_KEYS = {"form"} | OPERAND_KEYS
PER = ("tensor", "channel")
EXAMPLE = "`scales: {A: {block: {k: 128}}, B: {block: {n: 128, k: 128}}}` (DeepGEMM's 1x128 and 128x128 blocks)"
WEIGHT_EXAMPLE = "`scales: {B: {block: {k: 128}, layout: row}}` (one scale a group of 128 k and a column)"
WEIGHT_SCALE_DTYPES = ("f16", "bf16", "f32")
ZERO_DTYPES = ("uint4", "uint8", "f16", "bf16", "f32")


def read_scales(ctx: SpecReader, raw: Any, a: OperandView, b: OperandView, c_letters: str,
                sizes: dict[str, int]) -> tuple[ScaleView, ...]:
    """Each e4m3 input's scales, or integer weights' (B's alone); none for other inputs (then `scales:` is an
    error)."""
    if b.dtype in WEIGHT_DTYPES:
        if raw is None:
            raise ctx.fail("scales", f"missing: B is {b.dtype}, its values need their scales",
                           f"add e.g. {WEIGHT_EXAMPLE}")
        top = ctx.mapping(raw, "scales", {"A", "B"}, "scales")
        if "A" in top:
            raise ctx.fail("scales.A", f"A is {a.dtype}: the activations carry no scales beside integer weights",
                           "drop `scales.A` (scale the activations before the call, or fold it into `alpha:`)")
        if "B" not in top:
            raise ctx.fail("scales.B", "missing", f"add e.g. {WEIGHT_EXAMPLE}")
        body = ctx.mapping(top["B"], "scales.B", SCALE_KEYS, "the scales of B")
        return (_read_scale(ctx, "scales.B", body, b, c_letters, sizes, WEIGHT_SCALE_DTYPES, a.dtype),)
    fp8 = a.dtype == "e4m3"
    if not fp8:
        if raw is not None:
            raise ctx.fail("scales", f"scales go with e4m3 inputs or integer weights; A and B are {a.dtype}",
                           "drop `scales:`, or make A and B e4m3 (`dtype: e4m3`), or B an integer type")
        return ()
    if raw is None:
        raise ctx.fail("scales", "missing: A and B are e4m3, each needs its f32 scales", f"add e.g. {EXAMPLE}")
    top = ctx.mapping(raw, "scales", {"A", "B"}, "scales")
    out = []
    for op in (a, b):
        key = f"scales.{op.name}"
        if op.name not in top:
            raise ctx.fail(key, "missing", f"add e.g. {EXAMPLE}")
        out.append(_read_scale(ctx, key, ctx.mapping(top[op.name], key, SCALE_KEYS, f"the scales of {op.name}"), op,
                               c_letters, sizes))
    _check_k_blocks(ctx, *out, a, b, c_letters, sizes)
    return tuple(out)


def _read_scale(ctx: SpecReader, key: str, raw: dict[str, Any], op: OperandView, c_letters: str,
                sizes: dict[str, int], dtypes: tuple[str, ...] = ("f32",), default: str = "f32") -> ScaleView:
    if ("per" in raw) == ("block" in raw):
        raise ctx.fail(key, "need exactly one of `per:` and `block:`",
                       "write `{per: tensor}`, `{per: channel}` or `{block: {k: 128}}`")
    if "per" in raw:
        per = ctx.choice(raw["per"], f"{key}.per", PER, "scale mode")
        # A channel is an output row of A (or column of B): the letters of op and C only, one scale an index, and
        # the batch letters (in A, B and C) one a product; the summed letters whole.
        blocks = {x: (1 if per == "channel" and x in c_letters else sizes[x]) for x in op.letters}
    else:
        given = raw["block"]
        if not isinstance(given, dict) or not given:
            raise ctx.fail(f"{key}.block", f"expected a mapping of letters to block sizes, got {given!r}",
                           "write e.g. `block: {k: 128}` (letters not named: one scale an index)")
        blocks = {x: 1 for x in op.letters}
        for x, v in given.items():
            if x not in op.letters:
                raise ctx.fail(f"{key}.block.{x}", f"{op.name} has no letter '{x}' (its letters: '{op.letters}')",
                               f"name letters of {op.name}")
            if isinstance(v, str) and v.strip().lower() == "all":
                blocks[x] = sizes[x]
            else:
                blocks[x] = ctx.integer(v, f"{key}.block.{x}", 1, "a block size or `all`",
                                        "write a whole number of elements, or `all` for the whole extent")
    letters = "".join(x for x in op.letters if blocks[x] < sizes[x])
    counts = {x: -(-sizes[x] // blocks[x]) for x in letters}
    view_keys = {k: v for k, v in raw.items() if k in OPERAND_KEYS}
    dtype = ctx.dtype(view_keys.pop("dtype"), f"{key}.dtype") if "dtype" in view_keys else default
    if dtype not in dtypes:
        if dtypes == ("f32",):
            raise ctx.fail(f"{key}.dtype", "scales are f32", "drop `dtype:` (f32 is the only scale type)")
        raise ctx.fail(f"{key}.dtype", f"scales are {', '.join(dtypes)}; got {dtype}", f"write `dtype: {default}`")
    # A scale view names its letters itself (the input's, in its order), so `layout:` reads over them in either
    # spec form, as an epilogue view's does.
    view = read_operand(ctx, f"{op.name}_scales", letters, counts, view_keys, dtype, "gemm", key)
    return ScaleView(op.name, tuple((x, min(blocks[x], sizes[x])) for x in op.letters), view)


def _check_k_blocks(ctx: SpecReader, sa: ScaleView, sb: ScaleView, a: OperandView, b: OperandView,
                    c_letters: str, sizes: dict[str, int]) -> None:
    """A's and B's blocks along each summed letter nest, so that a block of the product has one scale of each (a
    block of the whole extent nests with any)."""
    for x in a.letters:
        if x in b.letters and x not in c_letters:
            ka, kb = sa.block(x), sb.block(x)
            if max(ka, kb) < sizes[x] and max(ka, kb) % min(ka, kb):
                raise ctx.fail(f"scales.B.block.{x}", f"A's scales cover {ka} of '{x}' and B's {kb}: neither block "
                                                      "is a multiple of the other",
                               f"give both the same block along '{x}' (128 in DeepGEMM's format)")


def read_zeros(ctx: SpecReader, raw: Any, b: OperandView, scales: tuple[ScaleView, ...],
               packings: dict[str, str]) -> tuple[ZeroView, ...]:
    """Integer weights' zero points: the scales' blocks, a view over the scale view's letters (uint4 packed as
    GPTQ's and AWQ's qzeros are, along n; uint8; or a float), and the form."""
    if raw is None:
        return ()
    if b.dtype not in WEIGHT_DTYPES:
        raise ctx.fail("zeros", f"zero points go with integer weights; B is {b.dtype}",
                       "drop `zeros:`, or make B an integer type (int4, uint4, int8, uint8)")
    top = ctx.mapping(raw, "zeros", {"B"}, "zeros")
    if "B" not in top:
        raise ctx.fail("zeros.B", "missing", "write `zeros: {B: {dtype: uint4, packing: gptq, layout: row}}`")
    body = ctx.mapping(top["B"], "zeros.B", ZERO_KEYS, "the zero points of B")
    if "dtype" not in body:
        raise ctx.fail("zeros.B.dtype", "missing: zero points come as uint4 (packed), uint8 or a float",
                       "write e.g. `dtype: uint4, packing: gptq` (GPTQ's qzeros) or `dtype: f16`")
    dtype = ctx.dtype(body["dtype"], "zeros.B.dtype")
    if dtype not in ZERO_DTYPES:
        fix = f"write `dtype: u{dtype}`" if dtype in ("int4", "int8") else "write `dtype: uint4` (packed) or f16"
        raise ctx.fail("zeros.B.dtype", f"zero points are {', '.join(ZERO_DTYPES)}; got {dtype}", fix)
    form = ctx.choice(body.get("form", "subtract"), "zeros.B.form", ZERO_FORMS, "zero-point form")
    if form == "prescaled" and dtype in WEIGHT_DTYPES:
        raise ctx.fail("zeros.B.form", f"`prescaled` zeros hold z * s, a float; these are {dtype}",
                       "give the zeros a float dtype (f16, bf16, f32), or `form: subtract`")
    sc, = scales
    view = sc.view
    counts = dict(zip(view.letters, view.sizes))
    # GPTQ's and AWQ's qzeros both pack along n: `gptq` names n here (linear order), `awq` n in AWQ's order.
    n = packings.get("awq")
    zero_packings = {"gptq": n, "awq": n} if n is not None and n in view.letters else {}
    keys = {k: v for k, v in body.items() if k != "form"}
    zeros = read_operand(ctx, "B_zeros", view.letters, counts, keys, dtype, "gemm", "zeros.B", packings=zero_packings)
    return (ZeroView("B", form, zeros),)
