"""Template context of the `tcgemv` family (templates/tcgemv/)."""

from __future__ import annotations

import jinja2

from dgemm_cli.families.tcgemv import SHARED_ALIGN, SHARED_GROUP_SEGMENTS, TcGemvPlan
from dgemm_cli.renderers import TMA_DTYPE, Body, dependent_launch_note
from dgemm_cli.spec import Spec
from dgemm_cli.views import ProblemViews


def context(spec: Spec, views: ProblemViews, plan: TcGemvPlan, base: dict) -> dict:
    return {
        **base,
        "index_type": plan.index_type, "tokens": plan.tokens, "octets": plan.octets, "k_warps": plan.k_warps,
        "unroll": plan.unroll, "k_slice": plan.k_slice, "tiles_n": plan.tiles_n, "blocks": plan.blocks,
        "red_pitch": plan.red_pitch, "regs": plan.regs, "min_blocks": plan.min_blocks,
        "whole_segments": plan.whole_segments, "whole_blocks": plan.whole_blocks,
        "splits": 1,  # templates/common/_reduce.j2: no cluster, the block stores its tile
        "row_groups": plan.row_groups, "a_shared": plan.shared_act,
        "rounds": plan.rounds, "prefetch_rounds": plan.prefetch_rounds,
        **({"act_bytes": plan.act_bytes, "barriers": plan.barriers, "smem_bytes": plan.smem_bytes,
            "a_row_stride_bytes": plan.a_row_stride * views.operands["A"].elem_bytes,
            "tma_dtype": TMA_DTYPE[spec.A.dtype], "group_segments": SHARED_GROUP_SEGMENTS,
            "smem_align": SHARED_ALIGN} if plan.shared_act else {}),
    }


def render_body(env: jinja2.Environment, spec: Spec, views: ProblemViews, plan: TcGemvPlan, base: dict) -> Body:
    k = context(spec, views, plan, base)
    text = env.get_template("tcgemv/body.cu.j2").render(k=k)
    decisions = [d.summary() for d in plan.decisions] + plan.detail_lines()
    includes = frozenset({"atomic", "cuda.h", "mutex"} if plan.shared_act else ())
    deterministic = ("Deterministic: the warps' partial sums are added in a fixed order, so repeated calls on the same "
                     "data give bit-identical results. No workspace and no state between calls.")
    # The register-stream kernel is a dependent launch; the staged one (A through shared memory) a plain one.
    requirements = (deterministic,) if plan.shared_act else (dependent_launch_note(), deterministic)
    return Body("tcgemv", text, f"tcgemv: {plan.summary}", tuple(decisions), includes, requirements)
