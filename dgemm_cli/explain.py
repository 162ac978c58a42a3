"""`deepgemm explain`: the view analysis, the family choice, each family's constraint graph and the
solved plan, as text (pure)."""

from __future__ import annotations

from dgemm_cli import disable
from dgemm_cli.arch import Arch
from dgemm_cli.baseline import plan_baseline
from dgemm_cli.constraints import ConstraintGraph
from dgemm_cli.families import FAMILIES
from dgemm_cli.plan import BucketPlan, Plan, PlanDetail, plan_buckets, plan_detail
from dgemm_cli.spec import Spec
from dgemm_cli.views import analyse, classify_letters


def _graph_lines(graph: ConstraintGraph, plan) -> list[str]:
    out = ["  nodes:"]
    for n in graph.nodes:
        out.append(f"    {n.name:<13} in {{{', '.join(map(str, n.domain))}}}  -- {n.doc}")
    out.append("  constraints (source: name -> nodes):")
    for c in graph.constraints:
        doc = f"  -- {c.doc}" if c.doc else ""
        out.append(f"    {c.source:<11} {c.name} -> {', '.join(c.nodes)}{doc}")
    out.append(f"  {plan.feasible} assignments satisfy every constraint; the cost model picks one "
               f"(estimate {plan.cost_us:.1f} µs, for ranking only)")
    out.append("  decisions:")
    for d in plan.decisions:
        out.append(f"    {d.summary()}")
        for r in d.rejected:
            out.append(f"        {str(r.value):<10} rejected: {r.why}")
    return out


def _epilogue_lines(spec: Spec) -> list[str]:
    """The fused epilogue: every family applies it to each output element (templates/common/_epilogue.j2)."""
    out = ["## Epilogue (fused: applied to each output element before its one store)",
           "  t = alpha * (A.B) + beta * C" + ("   (C read only when beta != 0)" if spec.beta
                                              else "   (beta 0: C not read)")]
    for i, st in enumerate(spec.epilogue):
        what = st.describe()
        if st.view is not None:
            lacks = [x for x in spec.C.letters if x not in st.view.letters]
            what += f"  (broadcast over {','.join(lacks)}: stride 0)" if lacks else ""
        elif st.kind == "clamp":
            what += "  (NaN stays NaN)"
        out.append(f"  {i + 1}. {what}")
    target = spec.output
    out.append(f"  -> {target.name}[{target.letters}] {target.dtype}"
               + ("  (the output view D: C is only read)" if spec.D is not None else "  (in place over C)"))
    out.append("")
    return out


def _view_line(op) -> str:
    """One view as `explain` lists it; a packed 4-bit view in words, with how its words hold the values."""
    if op.packing is None:
        return (f"  {op.name}[{op.letters}] {op.dtype}  sizes {list(op.sizes)}  strides {list(op.strides)}  "
                f"offset {op.offset}  align {op.align} B  span {op.span} elements")
    layout = op.packing.describe(op.strides)
    return (f"  {op.name}[{op.letters}] {op.dtype}  sizes {list(op.sizes)}  {layout}  offset {op.offset} words  "
            f"align {op.align} B  span {op.span} words")


def explain_text(spec: Spec, arch: Arch, tuned: dict | None = None,
                 tuned_buckets: dict[tuple[int, int], Plan] | None = None, disabled: tuple[str, ...] = ()) -> str:
    """`tuned`: the spec's tuning-database entry, if `deepgemm tune` measured it; `tuned_buckets`: for a
    spec sized at run time, the measured plans of its buckets; `disabled`: optimizations forced off (gen
    --disable)."""
    views = analyse(spec)
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
    for op in (*spec.operands, *spec.extra_operands):
        out.append(_view_line(op))
    for sc in spec.scales:
        blocks = ", ".join(f"{x}: {b}" for x, b in sc.blocks)
        v = sc.view
        out.append(f"  {v.name}[{v.letters}] {v.dtype}  sizes {list(v.sizes)}  strides {list(v.strides)}  offset "
                   f"{v.offset}  align {v.align} B: one scale a block of {sc.operand} ({blocks})")
    for z in spec.zeros:
        out.append(_view_line(z.view) + ": B's zero points, the scales' blocks, "
                   + ("w = (q - z) s" if z.form == "subtract" else "w = q s - z (z prescaled)"))
    out.append("")
    out.append("  role   size      letters  segments (size, stride per operand), outer -> inner")
    for r, rv in views.roles.items():
        segs = "; ".join(f"{s.label} " + ", ".join(f"{o}:{st}" for o, st in s.strides)
                         for s in rv.segments) or "-"
        out.append(f"  {r:<6} {rv.size:<9} {''.join(rv.letters) or '-':<8} {segs}")
    out.append("")
    for x, f in views.operands.items():
        packing = spec.operand(x).packing
        if packing is not None:  # words of eight values: no element vectors; the family says how it reads them
            out.append(f"  {x}: 32-bit words of eight 4-bit values ({packing.order} packing); the family below "
                       "says how its loads read them")
            continue
        out.append(f"  {x}: contiguous along {f.unit_role or 'nothing'}; vector {f.vector_elems} element(s) as "
                   f"promised ({f.vector_limit}); {f.vector_elems_aligned} if the pointer is 16-byte aligned "
                   f"({f.vector_limit_aligned})" + (f"; broadcast over {','.join(f.broadcast)}" if f.broadcast else ""))
    out.append(f"  index math: {'64-bit (a span or role passes 2^31-1)' if views.needs_int64 else '32-bit'}")
    out.append("")
    if spec.epilogue or spec.D is not None:
        out.extend(_epilogue_lines(spec))
    out.append("## Kernel family")
    for name, family in FAMILIES.items():
        if family.backend == arch.backend:  # another backend's families never run on this target
            out.append(f"  {name:<10} {family.summary}")
    if spec.dynamic:
        buckets = plan_buckets(views, arch, tuned=tuned_buckets, disabled=disabled)
        out.extend(_disabled_lines(disabled, [(b.sizes(buckets.letter), plan_detail(b.views, arch, disabled=disabled))
                                              for b in buckets.buckets]))
        out.extend(_bucket_lines(buckets))
        out.extend(_baseline_lines(views, arch))
        return "\n".join(out)
    detail = plan_detail(views, arch, disabled=disabled)
    out.extend(_disabled_lines(disabled, [("", detail)]))
    plan = detail.plan
    d = plan.family_decision
    out.append(f"  {d.summary()}")
    for r in d.rejected:
        out.append(f"      {str(r.value):<10} rejected: {r.why}")
    if plan.fallback is not None:
        checks = ", ".join(f"{x} {n}-byte aligned" for x, n in plan.primary.runtime_align.items())
        out.append(f"  run-time fallback: {plan.fallback.family} when a pointer fails the check ({checks}; "
                   "the spec promises less)")
    for name, solved in detail.family_plans.items():
        if solved is None:
            continue
        fplan, graph = solved
        if name == plan.family:
            tag = "chosen"
        elif plan.fallback is not None and name == plan.fallback.family:
            tag, fplan = "run-time fallback", plan.fallback  # with its fallback register budget
        else:
            tag = "not chosen"
        out.append("")
        out.append(f"## Family {name} ({tag}): {fplan.summary}")
        out.extend(_graph_lines(graph, fplan))
        out.extend(f"  {line}" for line in fplan.detail_lines())
    if tuned is not None:
        out.append("")
        out.extend(_tuned_lines(tuned))
    out.extend(_baseline_lines(views, arch))
    return "\n".join(out)


def _disabled_lines(disabled: tuple[str, ...], details: list[tuple[str, PlanDetail]]) -> list[str]:
    """What `--disable` did to each kernel's planning, a line an option; for a run-time spec, each line names the
    buckets (`details`' labels) it holds for where it does not hold for all."""
    if not disabled:
        return []
    held: dict[str, list[str]] = {}
    for label, detail in details:
        graphs = {name: solved[1] for name, solved in detail.family_plans.items() if solved is not None}
        for line in disable.effect_lines(disabled, detail.gated, graphs):
            held.setdefault(line, []).append(label)
    out = [f"  built with --disable {','.join(disabled)} (forced off in every family's graph):"]
    for line, labels in held.items():
        out.append(f"    {line}" + ("" if len(labels) == len(details) else f"  [{', '.join(labels)}]"))
    return out


def _baseline_lines(views, arch) -> list[str]:
    if arch.backend == "cpu":
        return ["", "## Baseline for bench: numpy in the host harness's process, the faster of the views copied to "
                    "dense arrays + numpy.matmul and numpy.einsum(..., optimize=True) on the views (16-bit inputs "
                    "converted to f32, the epilogue applied elementwise after)"]
    bl = plan_baseline(views)
    why = "" if bl.why in bl.kind else f" ({bl.why})"  # an unavailable baseline's kind holds its reason
    out = ["", f"## Baseline for bench: {bl.kind}{why}"]
    if bl.alternative is not None:
        lead = "timed beside it, the faster is the baseline" if bl.available else "the baseline instead"
        out.append(f"  {lead}: {bl.alternative.why}")
    for call in bl.calls:
        if call.pointers:  # a pointer-array call: each batch segment's strides in X, Y and C
            batch = "  pointers " + ", ".join(f"{d.label} {d.stride_x}/{d.stride_y}/{d.stride_c}"
                                              for d in call.pointers)
        else:
            batch = f"  batch strides {call.stride_x}/{call.stride_y}/{call.stride_c}" if call.batch > 1 else ""
        out.append(f"  {call.desc}  ld {call.ldx}/{call.ldy}/{call.ldc}{batch}")
    return out


def _bucket_lines(plan: BucketPlan) -> list[str]:
    """A spec sized at run time: each bucket's family decision and plan (`explain` of a fixed-size spec
    with the letter at the bucket's largest size shows a bucket's graphs in full)."""
    out = ["", f"## Buckets of the run-time size: {plan.why}"]
    for b in plan.buckets:
        p = b.plan
        out.append("")
        out.append(f"### {b.sizes(plan.letter)}: {p.family}: {p.primary.summary}")
        if p.tuned:
            t = p.tuned
            out.append(f"  measured (deepgemm tune level {t['level']}, {t['gpu']}, {t['date']}): {t['us']:.4g} µs, "
                       f"the fastest of {t.get('timed', t['measured'])} timed of {t['measured']} candidates")
        out.append(f"  {p.family_decision.summary()}")
        for r in p.family_decision.rejected:
            out.append(f"      {str(r.value):<10} rejected: {r.why}")
        out.extend(f"  {d.summary()}" for d in p.primary.decisions)
        if p.fallback is not None:
            checks = ", ".join(f"{x} {n}-byte aligned" for x, n in p.primary.runtime_align.items())
            out.append(f"  run-time fallback: {p.fallback.family} when a pointer fails the check ({checks})")
    return out


def _tuned_lines(entry: dict) -> list[str]:
    """The measured ranking next to the model's: `gen` renders the measured winner."""
    w = entry["winner"]
    out = [f"## Tuned (deepgemm tune level {entry['level']}, {entry['gpu']}, driver {entry['driver']}, "
           f"{entry['date']}): gen renders {w['id']}"]
    out.append(f"  {'candidate':<11} {'measured µs':>12} {'model µs':>10}  model rank  assignment")
    ranked = sorted(entry["measured"], key=lambda m: (m["us"] is None, m["us"] or 0.0))
    for m in ranked:
        us = f"{m['us']:.4g}" if m.get("us") else ("failed verify" if not m.get("skipped") else m["skipped"])
        values = " ".join(f"{k}={v}" for k, v in m["assignment"].items())
        out.append(f"  {m['id']:<11} {us:>12} {m['model_us']:>10.4g}  {m['model_rank']:>10}  {values}")
    if w.get("ratio") is not None:
        bench = f"{w['bench_us']:.4g} µs against " if w.get("bench_us") is not None else ""
        out.append(f"  winner vs cuBLAS in its final bench: ratio {w['ratio']:.3g} ({bench}"
                   f"{w.get('baseline_us'):.4g} µs, {w.get('baseline')})")
    return out
