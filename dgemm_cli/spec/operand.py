"""One view's keys (layout / strides / byte_strides, offset, dtype, align) -> an `OperandView` in elements."""

from __future__ import annotations

from typing import Any

from dgemm_cli.spec.model import (
    DTYPE_BYTES,
    EPILOGUE_STEPS,
    PACKED_DTYPES,
    PACKING_ORDERS,
    OperandView,
    Packing,
)
from dgemm_cli.spec.reader import SpecReader

OPERAND_KEYS = {"layout", "strides", "byte_strides", "dtype", "offset", "align", "packing"}
PACKING_EXAMPLE = "`packing: gptq` (8 values a word along k), `packing: awq` (along n, AWQ's order) or `packing: dg`"
NAMED_PACKINGS = ("gptq", "awq", "dg")


def read_operand(ctx: SpecReader, op: str, letters: str, sizes: dict[str, int], raw: dict[str, Any],
             default_dtype: str, shorthand: str, key: str | None = None,
             packings: dict[str, str] | None = None) -> OperandView:
    """`packings`: where a packed 4-bit view may stand, the letter each named packing (`gptq`, `awq`) packs along;
    None where none may (every view but B and B's zero points)."""
    key = key or f"operands.{op}"
    dtype = ctx.dtype(raw.get("dtype", default_dtype), f"{key}.dtype")
    elem = DTYPE_BYTES[dtype]
    packing = _read_packing(ctx, key, raw, dtype, letters, packings)
    dims = tuple(packing.words(x, sizes[x]) if packing else sizes[x] for x in letters)
    given = [k for k in ("layout", "strides", "byte_strides") if k in raw]
    if packing is not None and packing.order == "dg" and given:
        raise ctx.fail(f"{key}.{given[0]}", "`packing: dg` is one dense run of words in the order `deepgemm pack` "
                                            "writes: it has no strides",
                       f"drop `{given[0]}` (give only `offset:` and `align:`)")
    if len(given) > 1:
        raise ctx.fail(f"{key}.{given[1]}", f"both `{given[0]}` and `{given[1]}` given",
                       "describe the layout one way only")
    if "strides" in raw:
        strides = ctx.int_list(raw["strides"], f"{key}.strides", len(letters), letters)
    elif "byte_strides" in raw:
        byte_strides = ctx.int_list(raw["byte_strides"], f"{key}.byte_strides", len(letters), letters)
        unit = f"{elem}-byte {dtype} element" if packing is None else f"{elem}-byte word of eight {dtype} values"
        counted = "elements" if packing is None else "words"
        for i, bs in enumerate(byte_strides):
            if bs % elem:
                raise ctx.fail(f"{key}.byte_strides[{i}]", f"{bs} bytes is not a multiple of the {unit}",
                               f"use a multiple of {elem}, or `strides:` in {counted}")
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
        strides = layout_strides(dims, layout)
    else:
        strides = layout_strides(dims, "row")
    offset = ctx.integer(raw.get("offset", 0), f"{key}.offset", 0)
    align = ctx.integer(raw.get("align", elem), f"{key}.align", 1)
    if align & (align - 1) or align < elem:
        raise ctx.fail(f"{key}.align", f"{align} is not a power of two >= the {elem}-byte element",
                       f"promise a power of two such as {max(elem, 16)}")
    if packing is not None:
        dims = tuple(sizes[x] for x in letters)  # the view keeps the logical sizes; its strides count words
    return OperandView(op, letters, dims, tuple(strides), offset, dtype, align, packing)


def _read_packing(ctx: SpecReader, key: str, raw: dict[str, Any], dtype: str, letters: str,
                  packings: dict[str, str] | None) -> Packing | None:
    """The `packing:` of a 4-bit view: required there, refused elsewhere."""
    given = raw.get("packing")
    if dtype not in PACKED_DTYPES:
        if given is not None:
            raise ctx.fail(f"{key}.packing", f"packing goes with 4-bit values; this view is {dtype}",
                           "drop `packing:`, or make the view int4 or uint4")
        return None
    if packings is None:
        raise ctx.fail(f"{key}.dtype", f"{dtype} is a weight type: B and its zero points only",
                       "give this view f16, bf16 or f32")
    if given is None:
        raise ctx.fail(f"{key}.packing", f"missing: {dtype} values are packed eight to a 32-bit word",
                       f"add {PACKING_EXAMPLE}")
    if isinstance(given, str):
        name = ctx.choice(given, f"{key}.packing", NAMED_PACKINGS, "packing")
        if name not in packings:
            where = {"gptq": "the one summed letter (k)", "awq": "the one output letter of B (n)",
                     "dg": "a K x N weight of one k and one n letter"}[name]
            if key.startswith("zeros") and name == "dg":
                where = "B's words only"
            raise ctx.fail(f"{key}.packing", f"`{name}` packs {where}; this view's letters are '{letters}'",
                           "write `packing: {along: <letter>, order: linear}` (or `order: awq`)")
        return Packing(packings[name], {"gptq": "linear", "awq": "awq", "dg": "dg"}[name])
    body = ctx.mapping(given, f"{key}.packing", {"along", "order"}, "packing")
    if "along" not in body:
        raise ctx.fail(f"{key}.packing.along", "missing", f"name the letter the words pack, one of '{letters}'")
    along = body["along"]
    if not isinstance(along, str) or len(along) != 1 or along not in letters:
        raise ctx.fail(f"{key}.packing.along", f"{along!r} is not a letter of this view ('{letters}')",
                       f"name one of '{letters}'")
    order = ctx.choice(body.get("order", "linear"), f"{key}.packing.order", PACKING_ORDERS[:2], "packing order")
    return Packing(along, order)


def layout_strides(dims: tuple[int, ...], layout: str) -> list[int]:
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


def check_c_not_aliased(ctx: SpecReader, c: OperandView, key: str) -> None:
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
