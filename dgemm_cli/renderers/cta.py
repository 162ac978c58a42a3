"""Template context of the `cta` family (templates/cta/)."""

from __future__ import annotations

from dataclasses import dataclass

import jinja2

from dgemm_cli.families.cta import MMA, OTHER, REGISTER_CAP, LoaderPlan, TilePlan
from dgemm_cli.renderers import Body
from dgemm_cli.spec import DTYPE_BYTES, Spec
from dgemm_cli.views import ProblemViews


@dataclass(frozen=True)
class LoaderView:
    op: object  # render.OperandCtx
    struct: str
    kind: str
    vec: int
    bytes: int
    prefix: str  # "A" or "B": the shared-memory tile constants
    other: str  # "m" or "n"
    inner_role: str
    per_row: int  # vectors (or elements) per shared row
    guard: bool  # work items do not divide evenly among threads
    per_thread: int  # work items (vectors or elements) per thread and k-tile
    reason: str
    rows_desc: str
    extent_param: str  # ", index_t M" for A's loaders when M is a run-time argument, else ""

    @property
    def summary(self) -> str:
        if self.kind == "gather":
            return "element loads staged in registers across the math (strided gather)"
        if self.kind == "gather_direct":
            return "element loads stored straight to shared memory (strided gather)"
        return f"{self.bytes}-byte cp.async ({self.vec} element{'s' if self.vec > 1 else ''} a copy)"

    @property
    def inner_left(self) -> str:
        return "(K - gk)" if self.inner_role == "k" else f"({self.other.upper()} - g{self.other})"


def _loader_view(plan: TilePlan, ld: LoaderPlan, op, rows_at_run_time: bool) -> LoaderView:
    tile = plan.smem_tile(ld)
    per_row = tile.inner // ld.vector_elems
    items = tile.rows * per_row
    kind_name = {"gather": "Gather", "gather_direct": "GatherDirect"}.get(
        ld.kind, f"CpAsync{ld.vector_elems * DTYPE_BYTES[op.dtype]}")
    struct = f"{ld.operand}Load{kind_name}"
    return LoaderView(op, struct, ld.kind, ld.vector_elems, ld.vector_elems * DTYPE_BYTES[op.dtype], ld.operand,
                      OTHER[ld.operand], ld.smem_inner, per_row, items % plan.threads != 0,
                      -(-items // plan.threads), ld.reason,
                      f"{tile.rows} x {tile.inner}", ", index_t M" if rows_at_run_time and ld.operand == "A" else "")


def context(spec: Spec, views: ProblemViews, plan: TilePlan, base: dict) -> dict:
    ops = {"A": base["a"], "B": base["b"]}
    rows = base["rows_at_run_time"]
    loaders = [_loader_view(plan, plan.a, ops["A"], rows), _loader_view(plan, plan.b, ops["B"], rows)]
    variants = list(loaders)
    fallback = [lv.struct for lv in loaders]
    conds = []
    for i, ld in enumerate((plan.a, plan.b)):
        if ld.runtime_align:
            assert ld.fallback is not None
            fb = _loader_view(plan, ld.fallback, ops[ld.operand], rows)
            fallback[i] = fb.struct
            if fb.struct != loaders[i].struct:
                variants.append(fb)
            conds.append(f"aligned({ld.operand}, {ld.runtime_align})")
    dispatch_desc = "; ".join(
        f"{ld.operand} takes {ld.runtime_align}-byte cp.async when its view is {ld.runtime_align}-byte aligned "
        f"(the spec promises {ops[ld.operand].align}), else {ld.fallback.kind}"
        + (f" of {ld.fallback.vector_elems}" if ld.fallback.kind == "cp_async" else "")
        for ld in (plan.a, plan.b) if ld.runtime_align and ld.fallback is not None)
    return {
        **base,
        "mma": plan.instruction == MMA, "ab_dtype": spec.A.dtype,
        "needs_trans": plan.a.smem_inner == "m" or plan.b.smem_inner == "n",
        "a_inner": plan.a.smem_inner, "b_inner": plan.b.smem_inner,
        "block_m": plan.block_m, "block_n": plan.block_n, "block_k": plan.block_k,
        "warps_m": plan.warps_m, "warps_n": plan.warps_n, "thread_m": plan.thread_m, "thread_n": plan.thread_n,
        "threads": plan.threads, "min_blocks": plan.min_blocks_per_sm, "reg_cap": REGISTER_CAP,
        "is_fallback": plan.runtime_fallback,
        "stages": plan.stages, "smem_bytes": plan.smem_bytes,
        "tiles_m": plan.tiles_m, "tiles_n": plan.tiles_n, "tiles": plan.tiles,
        # With M a run-time argument the tile count along m is computed where it is needed.
        "tiles_m_name": "tiles_m" if rows else "TILES_M",
        "grid": f"unsigned((M + BM - 1) / BM) * {plan.tiles // plan.tiles_m}" if rows else str(plan.tiles),
        "k_tiles": -(-views.k // plan.block_k), "index_type": plan.index_type,
        "smem_tiles": [plan.smem_tile(plan.a), plan.smem_tile(plan.b)],
        "loaders": variants, "cp_async_widths": sorted({lv.bytes for lv in variants if lv.kind == "cp_async"}),
        "dispatch": bool(conds), "dispatch_cond": " && ".join(conds), "dispatch_desc": dispatch_desc,
        # The register cap depends on the instantiation only when a fallback gathers.
        "async_trait": plan.min_blocks_per_sm > 1 and any(v.kind != "cp_async" for v in variants),
        "fallback": fallback,
    }


def render_body(env: jinja2.Environment, spec: Spec, views: ProblemViews, plan: TilePlan, base: dict) -> Body:
    k = context(spec, views, plan, base)
    text = env.get_template("cta/body.cu.j2").render(k=k)
    decisions = [d.summary() for d in plan.decisions]
    decisions.append(f"=> {plan.threads} threads, {plan.smem_bytes} B shared memory, {plan.tiles} blocks, "
                     f"index math in {plan.index_type}.")
    if k["dispatch"]:
        decisions.append(f"Run-time loader dispatch: {k['dispatch_desc']}")
    includes = {"atomic"} if plan.smem_bytes > 48 * 1024 else set()
    return Body("cta", text, f"cta: {plan.summary}", tuple(decisions), frozenset(includes))
