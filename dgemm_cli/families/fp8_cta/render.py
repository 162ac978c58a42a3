"""Template context of the `fp8_cta` family (templates/fp8_cta/): the cta family's traits, loaders and dispatch, the
scale views as dg/fp8_cta.cuh's ScaleRoles, and launch()."""

from __future__ import annotations

from dataclasses import dataclass, fields

import jinja2

from dgemm_cli.constraints import decision_lines
from dgemm_cli.families.cta.render import LoaderView
from dgemm_cli.families.cta.render import context as cta_context
from dgemm_cli.families.fp8_cta import Fp8CtaPlan
from dgemm_cli.families.fp8_cta.scales import MN_ROLE
from dgemm_cli.renderers import Body
from dgemm_cli.spec import Spec
from dgemm_cli.views import ProblemViews


@dataclass(frozen=True)
class RowGatherView(LoaderView):
    """The gather of a view contiguous along its row (column) role: dg/cta.cuh's gather with its lanes walking that
    role, so that a warp's loads share sectors."""

    @property
    def template(self) -> str:
        return f"dg::cta::LoadGather<Traits, dg::cta::Operand::{self.operand}, true>"

    @property
    def summary(self) -> str:
        return "element loads along the view's contiguous rows, staged in registers across the math (strided gather)"


def _loaders(k: dict, plan: Fp8CtaPlan) -> None:
    """The cta family's loader types, with the plan's gathers along rows (mn-contiguous views) walking them."""
    renamed = {}
    loaders = []
    for lv in k["loaders"]:
        if lv.kind == "gather" and lv.operand in plan.gathers_along_rows:
            values = {f.name: getattr(lv, f.name) for f in fields(LoaderView)}
            values["struct"] = f"{lv.operand}LoadGatherAlongRows"
            renamed[lv.struct] = values["struct"]
            lv = RowGatherView(**values)
        loaders.append(lv)
    k["loaders"] = loaders
    k["fallback"] = [renamed.get(x, x) for x in k["fallback"]]


def render_body(env: jinja2.Environment, spec: Spec, views: ProblemViews, plan: Fp8CtaPlan, base: dict) -> Body:
    k = cta_context(spec, views, plan, base)
    k["mma_shape"] = "m16n8k32"
    k["bounds_why"] = "a thread holds two accumulator sets, the k-tile's and the promoted"
    _loaders(k, plan)
    k["scales"] = [{
        "name": s.name, "desc": s.describe(), "k_varying": s.k_varying,
        "roles": [{"name": "mn" if role == MN_ROLE[s.operand] else role,
                   "segs": [(x.size, x.block, x.stride) for x in letters if x.size > 1]}
                  for role, letters in s.roles],
    } for s in plan.scales]
    text = env.get_template("fp8_cta/body.cu.j2").render(k=k)
    decisions = decision_lines(plan.decisions) + plan.detail_lines()
    facts = {"attributes"} if plan.smem_bytes > 48 * 1024 else set()
    return Body("fp8_cta", text, f"fp8_cta: {plan.summary}", tuple(decisions), headers=("dg/fp8_cta.cuh",),
                facts=frozenset(facts))
