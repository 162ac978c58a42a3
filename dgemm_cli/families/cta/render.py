"""Template context of the `cta` family (templates/cta/): the traits of dg/cta.cuh's kernel, its loader types and
launch()."""

from __future__ import annotations

from dataclasses import dataclass

import jinja2

from dgemm_cli.constraints import decision_lines
from dgemm_cli.families.cta import MMA, REGISTER_CAP, LoaderPlan, TilePlan
from dgemm_cli.renderers import Body
from dgemm_cli.spec import DTYPE_BYTES, Spec
from dgemm_cli.views import ProblemViews

# Loader kinds that keep the whole register file (a gather stages elements with their index math, and
# spills under REGISTER_CAP).
UNCAPPED = ("gather", "gather_direct")


@dataclass(frozen=True)
class LoaderView:
    op: object  # render.OperandCtx
    struct: str
    kind: str
    vec: int
    bytes: int
    operand: str  # "A" or "B"
    inner_role: str  # the shared tile's contiguous role
    rows_desc: str

    @property
    def template(self) -> str:
        """The loader's type in dg/cta.cuh, instantiated for the namespace's Traits."""
        operand = f"dg::cta::Operand::{self.operand}"
        if self.kind == "gather":
            return f"dg::cta::LoadGather<Traits, {operand}>"
        if self.kind == "gather_direct":
            return f"dg::cta::LoadGatherDirect<Traits, {operand}>"
        if self.kind == "transpose":
            return f"dg::cta::LoadTranspose<Traits, {operand}, {self.vec}>"
        return f"dg::cta::LoadCpAsync<Traits, {operand}, {self.vec}>"

    @property
    def summary(self) -> str:
        if self.kind == "gather":
            return "element loads staged in registers across the math (strided gather)"
        if self.kind == "gather_direct":
            return "element loads stored straight to shared memory (strided gather)"
        if self.kind == "transpose":
            return (f"{self.bytes}-byte loads along k ({self.vec} element{'s' if self.vec > 1 else ''} a load) staged "
                    "in registers across the math, stored transposed")
        return f"{self.bytes}-byte cp.async ({self.vec} element{'s' if self.vec > 1 else ''} a copy)"


def _loader_view(plan: TilePlan, ld: LoaderPlan, op) -> LoaderView:
    tile = plan.smem_tile(ld)
    width = ld.vector_elems * DTYPE_BYTES[op.dtype]
    kind_name = {"gather": "Gather", "gather_direct": "GatherDirect", "transpose": f"Transpose{width}"}.get(
        ld.kind, f"CpAsync{width}")
    struct = f"{ld.operand}Load{kind_name}"
    return LoaderView(op, struct, ld.kind, ld.vector_elems, width, ld.operand, ld.smem_inner,
                      f"{tile.rows} x {tile.inner}")


def context(spec: Spec, views: ProblemViews, plan: TilePlan, base: dict) -> dict:
    ops = {"A": base["a"], "B": base["b"]}
    loaders = [_loader_view(plan, plan.a, ops["A"]), _loader_view(plan, plan.b, ops["B"])]
    variants = list(loaders)
    fallback = [lv.struct for lv in loaders]
    conds = []
    for i, ld in enumerate((plan.a, plan.b)):
        if ld.runtime_align:
            assert ld.fallback is not None
            fb = _loader_view(plan, ld.fallback, ops[ld.operand])
            fallback[i] = fb.struct
            if fb.struct != loaders[i].struct:
                variants.append(fb)
            conds.append(f"aligned({ld.operand}, {ld.runtime_align})")
    registers = next((d for d in plan.decisions if d.node == "registers"), None)
    registers_why = registers.summary() if registers else ""
    return {
        **base,
        "mma": plan.instruction == MMA, "mma_shape": "m16n8k16", "ab_dtype": spec.A.dtype,
        "a_inner": plan.a.smem_inner, "b_inner": plan.b.smem_inner,
        "block_m": plan.block_m, "block_n": plan.block_n, "block_k": plan.block_k,
        "warps_m": plan.warps_m, "warps_n": plan.warps_n, "thread_m": plan.thread_m, "thread_n": plan.thread_n,
        "threads": plan.threads, "min_blocks": plan.min_blocks_per_sm, "reg_cap": REGISTER_CAP,
        "register_cap": plan.register_cap, "registers_why": registers_why,
        "is_fallback": plan.runtime_fallback, "bounds_why": "",
        "stages": plan.stages, "smem_bytes": plan.smem_bytes,
        # Rendered where a loader transposes (LoadTranspose reads it).
        "transpose_depth": plan.transpose_depth if any(v.kind == "transpose" for v in variants) else None,
        "tiles": plan.tiles, "index_type": plan.index_type,
        "smem_tiles": [plan.smem_tile(plan.a), plan.smem_tile(plan.b)],
        "loaders": variants,
        "dispatch": bool(conds), "dispatch_cond": " && ".join(conds),
        # The register cap depends on the instantiation only when a fallback gathers: MIN_BLOCKS then holds only for
        # the instantiation whose loaders are both cp.async.
        "min_blocks_needs_cp_async": plan.register_cap <= REGISTER_CAP and any(v.kind in UNCAPPED for v in variants),
        "fallback": fallback,
    }


def render_body(env: jinja2.Environment, spec: Spec, views: ProblemViews, plan: TilePlan, base: dict) -> Body:
    k = context(spec, views, plan, base)
    text = env.get_template("cta/body.cu.j2").render(k=k)
    decisions = decision_lines(plan.decisions) + plan.detail_lines()
    facts = {"attributes"} if plan.smem_bytes > 48 * 1024 else set()
    return Body("cta", text, f"cta: {plan.summary}", tuple(decisions), headers=("dg/cta.cuh",),
                facts=frozenset(facts))
