"""`deepgemm explain`: the view analysis, the constraint graph and the solved plan as text (pure)."""

from __future__ import annotations

from dgemm_cli.arch import Arch
from dgemm_cli.baseline import plan_baseline
from dgemm_cli.plan import plan_with_graph
from dgemm_cli.spec import Spec
from dgemm_cli.views import analyse, classify_letters


def explain_text(spec: Spec, arch: Arch) -> str:
    views = analyse(spec)
    plan, graph = plan_with_graph(views, arch)
    out = [f"# {spec.name}: {spec.contraction} on {arch.name} ({arch.part})", ""]
    out.append("## Letters")
    if spec.implicit_output:
        out.append(f"  no '->': the output is numpy's implicit one, the letters that appear once, in alphabetical "
                   f"order: C[{spec.C.letters}]" + (" (none: a full reduction, C is one element)"
                                                   if not spec.C.letters else ""))
    elif not spec.C.letters:
        out.append("  no output letters: a full reduction, C is one element")
    for lc in classify_letters(spec):
        out.append(f"  {lc.letter}  size {lc.size:<8} {lc.description}")
    out.append("")
    out.append("## Views")
    for op in spec.operands:
        out.append(f"  {op.name}[{op.letters}] {op.dtype}  sizes {list(op.sizes)}  strides {list(op.strides)}  "
                   f"offset {op.offset}  align {op.align} B  span {op.span} elements")
    out.append("")
    out.append("  role   size      letters  segments (size, stride per operand), outer -> inner")
    for r, rv in views.roles.items():
        segs = "; ".join(f"{s.label} " + ", ".join(f"{o}:{st}" for o, st in s.strides)
                         for s in rv.segments) or "-"
        out.append(f"  {r:<6} {rv.size:<9} {''.join(rv.letters) or '-':<8} {segs}")
    out.append("")
    for x, f in views.operands.items():
        out.append(f"  {x}: contiguous along {f.unit_role or 'nothing'}; vector {f.vector_elems} element(s) as "
                   f"promised ({f.vector_limit}); {f.vector_elems_aligned} if the pointer is 16-byte aligned "
                   f"({f.vector_limit_aligned})" + (f"; broadcast over {','.join(f.broadcast)}" if f.broadcast else ""))
    out.append(f"  index math: {'64-bit (a span or role passes 2^31-1)' if views.needs_int64 else '32-bit'}")
    out.append("")
    out.append("## Tiling constraint graph")
    out.append("  nodes:")
    for n in graph.nodes:
        out.append(f"    {n.name:<13} in {{{', '.join(map(str, n.domain))}}}  -- {n.doc}")
    out.append("  constraints (source: name -> nodes):")
    for c in graph.constraints:
        doc = f"  -- {c.doc}" if c.doc else ""
        out.append(f"    {c.source:<11} {c.name} -> {', '.join(c.nodes)}{doc}")
    out.append(f"  {plan.feasible} assignments satisfy every constraint; the cost model picks one "
               f"(estimate {plan.cost_us:.1f} µs, for ranking only)")
    out.append("")
    out.append("## Plan")
    for d in plan.decisions:
        out.append(f"  {d.summary()}")
        for r in d.rejected:
            out.append(f"      {str(r.value):<10} rejected: {r.why}")
    out.append("")
    out.append(f"  => {plan.threads} threads, {plan.smem_bytes} B shared memory, grid {plan.tiles} blocks "
               f"({views.batch} x {plan.tiles_m} x {plan.tiles_n}), index type {plan.index_type}")
    for ld in (plan.a, plan.b):
        line = f"  {ld.operand}: {ld.kind}" + (f" x{ld.vector_elems}" if ld.kind == "cp_async" else "")
        line += f", shared rows along {ld.smem_inner}"
        if ld.runtime_align and ld.fallback:
            line += (f"; needs a {ld.runtime_align}-byte aligned pointer at run time, else {ld.fallback.kind}"
                     + (f" x{ld.fallback.vector_elems}" if ld.fallback.kind == "cp_async" else ""))
        out.append(line)
    bl = plan_baseline(views)
    out.append("")
    out.append(f"## Baseline for bench: {bl.kind} ({bl.why})")
    return "\n".join(out)
