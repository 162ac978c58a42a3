"""Template context of the `splitk` family (templates/splitk/): the cta context of its block tile plus
the K split."""

from __future__ import annotations

import jinja2

from dgemm_cli.families.splitk import SplitKPlan
from dgemm_cli.renderers import Body, cluster_requirements, launch_attributes
from dgemm_cli.renderers import cta as cta_renderer
from dgemm_cli.spec import Spec
from dgemm_cli.views import ProblemViews


def context(spec: Spec, views: ProblemViews, plan: SplitKPlan, base: dict) -> dict:
    k = cta_renderer.context(spec, views, plan.tile, base)
    settings, why = launch_attributes(plan.smem_bytes, "LAUNCH_SMEM_BYTES", plan.splits)
    return {
        **k,
        "splits": plan.splits, "kt_per_split": plan.k_tiles_per_split, "blocks": plan.blocks,
        "red_pitch": plan.red_pitch, "launch_smem_bytes": plan.smem_bytes,
        "func_attributes": settings,
        "func_attributes_why": why,
    }


def render_body(env: jinja2.Environment, spec: Spec, views: ProblemViews, plan: SplitKPlan, base: dict) -> Body:
    k = context(spec, views, plan, base)
    text = env.get_template("splitk/body.cu.j2").render(k=k)
    decisions = [d.summary() for d in plan.decisions]
    decisions.append(f"=> {plan.threads} threads, {plan.smem_bytes} B shared memory, {plan.blocks} blocks in clusters "
                     f"of {plan.splits}, index math in {plan.tile.index_type}.")
    if k["dispatch"]:
        decisions.append(f"Run-time loader dispatch: {k['dispatch_desc']}")
    includes = {"cooperative_groups.h"} | ({"atomic"} if k["func_attributes"] else set())
    return Body("splitk", text, f"splitk: {plan.summary}", tuple(decisions), frozenset(includes),
                cluster_requirements(plan.splits))

