"""Template context of the `tcgemv` family (templates/tcgemv/: the traits of dg/tcgemv.cuh's kernels)."""

from __future__ import annotations

import jinja2

from dgemm_cli.constraints import decision_lines
from dgemm_cli.families.tcgemv import SHARED_ALIGN, SHARED_GROUP_SEGMENTS, TcGemvPlan
from dgemm_cli.renderers import Body, dependent_launch_note
from dgemm_cli.spec import Spec
from dgemm_cli.views import ProblemViews

# Dynamic shared memory past this needs the kernel's opt-in attribute (dg/tcgemv.cuh's launch sets it).
DEFAULT_SMEM = 48 * 1024


def context(spec: Spec, views: ProblemViews, plan: TcGemvPlan, base: dict) -> dict:
    return {
        **base,
        "index_type": plan.index_type, "tokens": plan.tokens, "octets": plan.octets, "k_warps": plan.k_warps,
        "unroll": plan.unroll, "row_groups": plan.row_groups, "threads": plan.threads, "block_n": plan.block_n,
        "k_slice": plan.k_slice, "tiles_n": plan.tiles_n, "blocks": plan.blocks, "red_pitch": plan.red_pitch,
        "regs": plan.regs, "min_blocks": plan.min_blocks, "whole_segments": plan.whole_segments,
        "whole_blocks": plan.whole_blocks, "a_shared": plan.shared_act, "rounds": plan.rounds,
        "prefetch_rounds": plan.prefetch_rounds, "smem_bytes": plan.smem_bytes,
        **({"act_bytes": plan.act_bytes, "barriers": plan.barriers, "group_segments": SHARED_GROUP_SEGMENTS,
            "smem_align": SHARED_ALIGN} if plan.shared_act else {}),
    }


def render_body(env: jinja2.Environment, spec: Spec, views: ProblemViews, plan: TcGemvPlan, base: dict) -> Body:
    k = context(spec, views, plan, base)
    text = env.get_template("tcgemv/body.cu.j2").render(k=k)
    decisions = decision_lines(plan.decisions) + plan.detail_lines()
    deterministic = ("Deterministic: the warps' partial sums are added in a fixed order, so repeated calls on the same "
                     "data give bit-identical results. No workspace and no state between calls.")
    # The register-stream kernel is a dependent launch; the staged one (A through shared memory) a plain one, with A's
    # tensor map encoded on the host (cached by A's pointer and M) and, past 48 KB, the shared-memory opt-in.
    requirements = (deterministic,) if plan.shared_act else (dependent_launch_note(), deterministic)
    facts = set()
    if plan.shared_act:
        facts.add("tensor_maps")
        if plan.smem_bytes > DEFAULT_SMEM:
            facts.add("attributes")
    return Body("tcgemv", text, f"tcgemv: {plan.summary}", tuple(decisions), frozenset(), requirements,
                headers=("dg/tcgemv.cuh",), facts=frozenset(facts))
