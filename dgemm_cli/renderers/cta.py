"""Template context of the `cta` family (templates/cta/)."""

from __future__ import annotations

from dataclasses import dataclass

import jinja2

from dgemm_cli.families.cta import MMA, OTHER, REGISTER_CAP, LoaderPlan, TilePlan
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
    prefix: str  # "A" or "B": the shared-memory tile constants
    other: str  # "m" or "n"
    inner_role: str
    per_row: int  # vectors (or elements) per shared row
    guard: bool  # work items do not divide evenly among threads
    per_thread: int  # work items (vectors or elements) per thread and k-tile
    reason: str
    rows_desc: str
    extent_param: str  # ", index_t M" for A's loaders when M is a run-time argument, else ""
    k_tail: bool  # the last k-tile passes K (K is not a multiple of BK)

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

    @property
    def inner_left(self) -> str:
        return "(K - gk)" if self.inner_role == "k" else f"({self.other.upper()} - g{self.other})"


def _loader_view(plan: TilePlan, ld: LoaderPlan, op, rows_at_run_time: bool, k: int) -> LoaderView:
    tile = plan.smem_tile(ld)
    per_row = tile.inner // ld.vector_elems
    items = tile.rows * per_row
    width = ld.vector_elems * DTYPE_BYTES[op.dtype]
    kind_name = {"gather": "Gather", "gather_direct": "GatherDirect", "transpose": f"Transpose{width}"}.get(
        ld.kind, f"CpAsync{width}")
    struct = f"{ld.operand}Load{kind_name}"
    return LoaderView(op, struct, ld.kind, ld.vector_elems, width, ld.operand,
                      OTHER[ld.operand], ld.smem_inner, per_row, items % plan.threads != 0,
                      -(-items // plan.threads), ld.reason,
                      f"{tile.rows} x {tile.inner}", ", index_t M" if rows_at_run_time and ld.operand == "A" else "",
                      k % plan.block_k != 0)


def context(spec: Spec, views: ProblemViews, plan: TilePlan, base: dict) -> dict:
    ops = {"A": base["a"], "B": base["b"]}
    rows = base["rows_at_run_time"]
    loaders = [_loader_view(plan, plan.a, ops["A"], rows, views.k), _loader_view(plan, plan.b, ops["B"], rows, views.k)]
    variants = list(loaders)
    fallback = [lv.struct for lv in loaders]
    conds = []
    for i, ld in enumerate((plan.a, plan.b)):
        if ld.runtime_align:
            assert ld.fallback is not None
            fb = _loader_view(plan, ld.fallback, ops[ld.operand], rows, views.k)
            fallback[i] = fb.struct
            if fb.struct != loaders[i].struct:
                variants.append(fb)
            conds.append(f"aligned({ld.operand}, {ld.runtime_align})")
    copies = {"cp_async": "cp.async", "transpose": "loads along k"}
    dispatch_desc = "; ".join(
        f"{ld.operand} takes {ld.runtime_align}-byte {copies[ld.kind]} when its view is {ld.runtime_align}-byte "
        f"aligned (the spec promises {ops[ld.operand].align}), else {ld.fallback.kind}"
        + (f" of {ld.fallback.vector_elems}" if ld.fallback.kind in copies else "")
        for ld in (plan.a, plan.b) if ld.runtime_align and ld.fallback is not None)
    registers = next((d for d in plan.decisions if d.node == "registers"), None)
    registers_why = registers.summary() if registers else ""
    return {
        **base,
        "mma": plan.instruction == MMA, "ab_dtype": spec.A.dtype,
        "needs_trans": plan.a.smem_inner == "m" or plan.b.smem_inner == "n",
        "a_inner": plan.a.smem_inner, "b_inner": plan.b.smem_inner,
        "block_m": plan.block_m, "block_n": plan.block_n, "block_k": plan.block_k,
        "warps_m": plan.warps_m, "warps_n": plan.warps_n, "thread_m": plan.thread_m, "thread_n": plan.thread_n,
        "frag_m": plan.frag_m, "frag_n": plan.frag_n,
        "threads": plan.threads, "min_blocks": plan.min_blocks_per_sm, "reg_cap": REGISTER_CAP,
        "register_cap": plan.register_cap, "registers_why": registers_why,
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
        "async_trait": plan.register_cap <= REGISTER_CAP and any(v.kind in UNCAPPED for v in variants),
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
