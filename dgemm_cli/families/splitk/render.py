"""Template context of the `splitk` family (templates/splitk/): the traits of dg/splitk.cuh's kernel, the cta
context of its block tile plus the K split (body.cu.j2), or of dg/dot.cuh's kernel, the block shape `dot` for
M = N = 1 (dot.cu.j2). A plan with groups > 1 adds the scratch buffer and the second kernel (in the headers)."""

from __future__ import annotations

import jinja2

from dgemm_cli.families.cta import render as cta_renderer
from dgemm_cli.families.splitk import DotPlan, SplitKPlan
from dgemm_cli.renderers import Body, cluster_requirements, dependent_launch_note, launch_attributes
from dgemm_cli.spec import Spec
from dgemm_cli.views import ProblemViews


def context(spec: Spec, views: ProblemViews, plan: SplitKPlan, base: dict) -> dict:
    k = cta_renderer.context(spec, views, plan.tile, base)
    settings, _ = launch_attributes(plan.smem_bytes, "LAUNCH_SMEM_BYTES", plan.splits)
    return {
        **k,
        "splits": plan.splits, "kt_per_split": plan.k_tiles_per_split, "blocks": plan.blocks,
        "red_pitch": plan.red_pitch, "launch_smem_bytes": plan.smem_bytes,
        "func_attributes": settings,  # dg/splitk.cuh's launcher sets them once per device
        "groups": plan.groups, "tile_elems": plan.tile_elems, "scratch_bytes": plan.scratch_bytes,
    }


def scratch_requirement(plan: SplitKPlan | DotPlan, what: str) -> str:
    return (f"Deterministic: {what}, so repeated calls on the same data give bit-identical results. "
            f"Scratch: {plan.scratch_bytes} bytes a call from cudaMallocAsync on the caller's stream (the device's "
            "current memory pool), freed with cudaFreeAsync after the second kernel: stream-ordered, so concurrent "
            "streams and graph capture (allocation nodes) are safe; no workspace argument and no state between "
            "calls.")


def render_body(env: jinja2.Environment, spec: Spec, views: ProblemViews, plan: SplitKPlan | DotPlan,
                base: dict) -> Body:
    if isinstance(plan, DotPlan):
        return render_dot(env, spec, views, plan, base)
    k = context(spec, views, plan, base)
    text = env.get_template("splitk/body.cu.j2").render(k=k)
    # With one group the header leaves the `groups` decision out (explain shows the node).
    decisions = [d.summary() for d in plan.decisions if not (d.node == "groups" and plan.groups == 1)]
    if plan.groups == 1:
        decisions.append(f"=> {plan.threads} threads, {plan.smem_bytes} B shared memory, {plan.blocks} blocks in "
                         f"clusters of {plan.splits}, index math in {plan.tile.index_type}.")
    else:
        decisions.append(f"=> {plan.threads} threads, {plan.smem_bytes} B shared memory, {plan.blocks} blocks in "
                         f"{plan.blocks // plan.splits} clusters of {plan.splits} ({plan.groups} a tile), then a "
                         f"second kernel of {plan.tile.tiles} blocks adds the groups' partials ({plan.scratch_bytes} B "
                         f"scratch), index math in {plan.tile.index_type}.")
    if k["dispatch"]:
        decisions.append(f"Run-time loader dispatch: {k['dispatch_desc']}")
    requirements = cluster_requirements(plan.splits)
    if plan.groups > 1:
        requirements = (*requirements[:-1], scratch_requirement(
            plan, f"K is summed across each cluster and then across its {plan.groups} groups in a fixed order"))
    facts = ({"attributes"} if k["func_attributes"] else set()) | ({"scratch"} if plan.groups > 1 else set())
    return Body("splitk", text, f"splitk: {plan.summary}", tuple(decisions), frozenset(), requirements,
                headers=("dg/splitk.cuh",), facts=frozenset(facts))


def dot_context(spec: Spec, views: ProblemViews, plan: DotPlan, base: dict) -> dict:
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


def render_dot(env: jinja2.Environment, spec: Spec, views: ProblemViews, plan: DotPlan, base: dict) -> Body:
    k = dot_context(spec, views, plan, base)
    text = env.get_template("splitk/dot.cu.j2").render(k=k)
    decisions = [d.summary() for d in plan.decisions] + plan.detail_lines()
    what = ("each block sums its K slice in a fixed order" if plan.groups == 1 else
            f"each block sums its K slice in a fixed order and the {plan.groups} slices' sums are added in order")
    arch = "Compute capability 9.0 or later (griddepcontrol: the dependent launch below)."
    if plan.groups == 1:
        requirements = (arch, dependent_launch_note(), f"Deterministic: {what}, so repeated calls on the same data "
                        "give bit-identical results. No workspace and no state between calls.")
    else:
        requirements = (arch, dependent_launch_note(), scratch_requirement(plan, what))
    return Body("splitk", text, f"splitk: {plan.summary}", tuple(decisions), frozenset(), requirements,
                headers=("dg/dot.cuh",), facts=frozenset({"scratch"} if plan.groups > 1 else set()))
