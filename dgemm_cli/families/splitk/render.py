"""Template context of the `splitk` family (templates/splitk/): the traits of dg/splitk.cuh's kernel, the cta
context of its block tile plus the K split (body.cu.j2). A plan with groups > 1 adds the scratch buffer and the
second kernel (in the header)."""

from __future__ import annotations

import jinja2

from dgemm_cli.constraints import decision_lines
from dgemm_cli.families.cta import render as cta_renderer
from dgemm_cli.families.splitk import SplitKPlan
from dgemm_cli.renderers import Body, cluster_requirements, launch_attributes, scratch_requirement
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


def render_body(env: jinja2.Environment, spec: Spec, views: ProblemViews, plan: SplitKPlan, base: dict) -> Body:
    k = context(spec, views, plan, base)
    text = env.get_template("splitk/body.cu.j2").render(k=k)
    decisions = decision_lines(plan.decisions) + plan.detail_lines()
    requirements = cluster_requirements(plan.splits)
    if plan.groups > 1:
        requirements = (*requirements[:-1], scratch_requirement(
            plan.scratch_bytes, f"K is summed across each cluster and then across its {plan.groups} groups in a "
            "fixed order"))
    facts = ({"attributes"} if k["func_attributes"] else set()) | ({"scratch"} if plan.groups > 1 else set())
    return Body("splitk", text, f"splitk: {plan.summary}", tuple(decisions), frozenset(), requirements,
                headers=("dg/splitk.cuh",), facts=frozenset(facts))
