"""The memory the views reach: refused past a 64-bit byte offset, warned of past any GPU's memory."""

from __future__ import annotations

from dgemm_cli.spec.model import OperandView, Spec
from dgemm_cli.spec.reader import SpecReader

# The most memory of the arch table's reference parts (the H200-SXM's 141 GB). Views that together span more
# than MEMORY_WARNING_FACTOR times this fit no GPU deepgemm targets: more likely a size typed wrong than meant.
LARGEST_GPU_BYTES = 141 * 10**9
MEMORY_WARNING_FACTOR = 2
# A view's byte span must fit the kernels' signed 64-bit offsets.
INT64_MAX = 2**63 - 1


def check_spans(ctx: SpecReader, spec: Spec) -> tuple[str, ...]:
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
