"""Template context of the `wqtc` family (templates/wqtc/body.cu.j2): dg/wqtc.cuh's traits (the plan, the dg layout's
chunks, the scales' and zero points' index maps as dg/wq.cuh's Roles) and launch()."""

from __future__ import annotations

import jinja2

from dgemm_cli.constraints import decision_lines
from dgemm_cli.families.wq.render import quant_context, weights_context
from dgemm_cli.families.wqtc import WqtcPlan
from dgemm_cli.renderers import Body
from dgemm_cli.spec import Spec
from dgemm_cli.views import ProblemViews


def context(spec: Spec, views: ProblemViews, plan: WqtcPlan, base: dict) -> dict:
    scales, zeros = quant_context(spec, views)
    return {**base, "index_type": plan.index_type, "wk": plan.wk, "min_blocks": plan.min_blocks, "ns": plan.ns,
            "mt": plan.mt, "depth": plan.depth, "strips": plan.strips, "blocks": plan.blocks, "group_k": plan.group_k,
            "qpc": plan.quant_loads, "layout": plan.layout,
            "a_pairs": plan.a_pairs, "a_vec16": plan.a_vec16,
            "a_pairs_why": plan.a_pairs_why, "weights": weights_context(spec, views), "scales": scales,
            "zeros": zeros}


def render_body(env: jinja2.Environment, spec: Spec, views: ProblemViews, plan: WqtcPlan, base: dict) -> Body:
    k = context(spec, views, plan, base)
    text = env.get_template("wqtc/body.cu.j2").render(k=k)
    decisions = decision_lines(plan.decisions) + plan.detail_lines()
    return Body("wqtc", text, f"wqtc: {plan.summary}", tuple(decisions), headers=("dg/wqtc.cuh",))
