"""Template context of the `dot` family (templates/dot/body.cu.j2): the traits of dg/dot.cuh's kernel and launch(),
which takes the wide loads when both view pointers pass the alignment check. A plan with groups > 1 adds the scratch
buffer and the second kernel (in the header)."""

from __future__ import annotations

import jinja2

from dgemm_cli.constraints import decision_lines
from dgemm_cli.families.dot import DotPlan
from dgemm_cli.renderers import Body, dependent_launch_note, scratch_requirement
from dgemm_cli.spec import Spec
from dgemm_cli.views import ProblemViews


def context(spec: Spec, views: ProblemViews, plan: DotPlan, base: dict) -> dict:
    conds = [f"aligned({x}, {plan.vec_aligned[x] * views.operands[x].elem_bytes})"
             for x in ("A", "B") if plan.vec_aligned[x] != plan.vec[x]]
    return {
        **base,
        "index_type": plan.index_type, "threads": plan.threads, "chunk": plan.chunk, "unroll": plan.unroll,
        "groups": plan.groups, "k_slice": plan.k_slice, "tiles": plan.tiles, "blocks": plan.blocks,
        "finish_threads": plan.finish_threads, "scratch_bytes": plan.scratch_bytes,
        "vec": plan.vec, "vec_aligned": plan.vec_aligned,
        "dispatch": bool(conds), "dispatch_cond": " && ".join(conds),
        "k_in": {x: "k" in views.operands[x].roles for x in ("A", "B")},
    }


def render_body(env: jinja2.Environment, spec: Spec, views: ProblemViews, plan: DotPlan, base: dict) -> Body:
    k = context(spec, views, plan, base)
    text = env.get_template("dot/body.cu.j2").render(k=k)
    decisions = decision_lines(plan.decisions) + plan.detail_lines()
    what = ("each block sums its K slice in a fixed order" if plan.groups == 1 else
            f"each block sums its K slice in a fixed order and the {plan.groups} slices' sums are added in order")
    arch = "Compute capability 9.0 or later (griddepcontrol: the dependent launch below)."
    if plan.groups == 1:
        requirements = (arch, dependent_launch_note(), f"Deterministic: {what}, so repeated calls on the same data "
                        "give bit-identical results. No workspace and no state between calls.")
    else:
        requirements = (arch, dependent_launch_note(), scratch_requirement(plan.scratch_bytes, what))
    return Body("dot", text, f"dot: {plan.summary}", tuple(decisions), frozenset(), requirements,
                headers=("dg/dot.cuh",), facts=frozenset({"scratch"} if plan.groups > 1 else set()))
