"""Template context of the `fp8_hopper` family (templates/fp8_hopper/): the hopper family's traits and the scale
views' constants."""

from __future__ import annotations

import jinja2

from dgemm_cli.constraints import decision_lines
from dgemm_cli.families.fp8_hopper import Fp8HopperPlan
from dgemm_cli.families.hopper.render import context as hopper_context
from dgemm_cli.renderers import Body, cluster_requirements, dependent_launch_note
from dgemm_cli.spec import Spec
from dgemm_cli.views import ProblemViews


def render_body(env: jinja2.Environment, spec: Spec, views: ProblemViews, plan: Fp8HopperPlan, base: dict) -> Body:
    k = hopper_context(spec, views, plan, base)
    tile = {"m": plan.block_m, "n": plan.block_n}
    k["scales"] = [{"name": s.name, "desc": s.describe(tile[s.role]), "mn_block": s.mn_block,
                    "mn_stride": s.mn_stride, "mn_last": s.mn_size - 1, "k_iters_per": s.k_iters_per,
                    "k_stride": s.k_stride} for s in plan.scales]
    text = env.get_template("fp8_hopper/body.cu.j2").render(k=k)
    decisions = decision_lines(plan.decisions) + plan.detail_lines()
    # The launcher's work beyond the launch (render.LAUNCH_FACTS), in dg/fp8_hopper.cuh: the persistent grid's size
    # from the SM count; the K split's grid is a cluster a tile.
    facts = {"tensor_maps"} | ({"attributes"} if plan.smem_bytes > 48 * 1024 else set())
    facts |= {"sm_count"} if plan.k_splits == 1 else set()
    requirements = cluster_requirements(plan.k_splits) or (dependent_launch_note(
        " where the grid takes every block slot of the GPU, or all but a sixteenth of them over one tile row (decided "
        "at run time from the SM count)"),)
    return Body("fp8_hopper", text=text, title=f"fp8_hopper: {plan.summary}", decisions=tuple(decisions),
                headers=("dg/fp8_hopper.cuh",), facts=frozenset(facts), requirements=requirements)
