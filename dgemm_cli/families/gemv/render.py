"""Template context of the `gemv` family (templates/gemv/)."""

from __future__ import annotations

import jinja2

from dgemm_cli.constraints import decision_lines
from dgemm_cli.families.gemv import GemvPlan
from dgemm_cli.renderers import Body, cluster_requirements, dependent_launch_note, launch_attributes
from dgemm_cli.spec import Spec
from dgemm_cli.views import ProblemViews


def context(spec: Spec, views: ProblemViews, plan: GemvPlan, base: dict) -> dict:
    settings, why = launch_attributes(plan.smem_bytes, "SMEM_BYTES", plan.splits)
    return {
        **base,
        "index_type": plan.index_type, "threads": plan.threads, "block_n": plan.block_n, "chunk": plan.chunk,
        "chunk_promised": plan.chunk_promised, "b_check": plan.b_check, "lanes_along": plan.lanes_along,
        "unroll": plan.unroll, "cols": plan.cols, "warps_n": plan.warps_n, "splits": plan.splits,
        "k_slice": plan.k_slice, "tiles_n": plan.tiles_n, "blocks": plan.blocks, "red_pitch": plan.red_pitch,
        "partial_offset": plan.partial_offset, "smem_bytes": plan.smem_bytes,
        "partial_slices": plan.partial_slices, "a_vec": plan.a_vec, "a_check": plan.a_check,
        "func_attributes": settings, "func_attributes_why": why,
        "dependent_launch": plan.dependent_launch,
    }


def render_body(env: jinja2.Environment, spec: Spec, views: ProblemViews, plan: GemvPlan, base: dict) -> Body:
    k = context(spec, views, plan, base)
    text = env.get_template("gemv/body.cu.j2").render(k=k)
    decisions = decision_lines(plan.decisions) + plan.detail_lines()
    requirements = cluster_requirements(plan.splits) or ((dependent_launch_note(),) if plan.dependent_launch else ())
    facts = {"attributes"} if k["func_attributes"] else set()
    if plan.b_check:
        facts.add("pointer_checks")
    return Body("gemv", text, f"gemv: {plan.summary}", tuple(decisions), frozenset(), requirements,
                headers=("dg/gemv.cuh",), facts=frozenset(facts))
