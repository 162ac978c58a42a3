"""Template context of the `hopper` family (templates/hopper/)."""

from __future__ import annotations

import jinja2

from dgemm_cli.constraints import decision_lines
from dgemm_cli.families.hopper import (
    EPI_COL_PITCH,
    EPI_ROW_PITCH,
    PACK_PITCH,
    PRODUCER_REGS,
    HopperPlan,
)
from dgemm_cli.families.hopper.tma import tma_context
from dgemm_cli.renderers import TMA_DTYPE, Body, cluster_requirements, dependent_launch_note
from dgemm_cli.spec import DTYPE_BYTES, Spec
from dgemm_cli.views import ProblemViews, inner_stride

# The plan's L2 promotion (families/hopper.py: L2_PROMOTIONS) as the driver API names it.
PROMOTION_ENUM = {"256B": "CU_TENSOR_MAP_L2_PROMOTION_L2_256B", "none": "CU_TENSOR_MAP_L2_PROMOTION_NONE"}

RAW_VECTOR = {16: "uint4", 8: "uint2", 4: "unsigned", 2: "unsigned short"}

# The kernel variant by (K split, A multicast): dg/hopper_<variant>.cuh, launched by dg::hopper::launch_<variant>.
VARIANT = {(False, False): "persistent", (True, False): "split", (False, True): "multicast"}


def _view_at(views: ProblemViews, plan: HopperPlan, name: str, ptr: str, tname: str) -> dict:
    """How the store phase addresses one view over C's letters: its offset at a tile's loop indices and
    (gm, gn), its step along the output's vector (c_unit), and its vector loads (plan.ep_vectors): `load`
    elements each (0: element by element), `loads` of them a vector. With flat rows the loop indices are the
    64-row block's (`blk`)."""
    blk = "blk" if plan.flat_rows else "tile"
    tile = "".join(f" + static_cast<long long>({blk}.loop[{i}]) * {x.stride.get(name, 0)}"
                   for i, x in enumerate(plan.tile_loops) if x.stride.get(name, 0))
    sm, sn = inner_stride(views, "m", name), inner_stride(views, "n", name)
    at = "".join(f" + static_cast<long long>({g}) * {st}" for g, st in (("gm", sm), ("gn", sn)) if st)
    load = dict((x, n) for x, n, _ in plan.ep_vectors).get(name, 0)
    elem = views.operands[name].elem_bytes
    return {"name": name, "ptr": ptr, "tname": tname, "at": (tile + at).removeprefix(" + ") or "0",
            "unit": inner_stride(views, plan.c_unit, name) if plan.c_unit else 0,
            "load": load, "loads": plan.c_vec // load if load else 0, "raw": RAW_VECTOR.get(load * elem, "")}


def context(spec: Spec, views: ProblemViews, plan: HopperPlan, base: dict) -> dict:
    out = spec.output.name  # the view the epilogue writes: C, or D
    c_elem = DTYPE_BYTES[spec.output.dtype]
    rows = base["rows_at_run_time"]
    ta = tma_context(plan.a, rows, plan.a_rows_follow_m)
    tb = tma_context(plan.b, rows)
    c_stride = {role: inner_stride(views, role, out) for role in ("m", "n")}
    loops = [{"label": x.label, "size": x.size, "c_stride": x.stride[out], "is_m": x.role == "m"}
             for x in plan.tile_loops]
    # The views the epilogue reads beside the output: C (for beta) when D is written, and the epilogue's.
    ep = base["ep"]
    reads = ([_view_at(views, plan, "C", "C", "C_t")] if ep and ep["has_d"] else []) + [
        _view_at(views, plan, o.name, o.ptr, o.tname) for o in (ep["ops"] if ep else []) if o.name != "D"]
    kloops = [{"label": x.label, "size": x.size} for x in plan.k_loops]
    return {
        **base,
        "variant": VARIANT[(plan.k_splits > 1, plan.a_multicast > 1)],
        "dtype": spec.A.dtype, "tma_dtype": TMA_DTYPE[spec.A.dtype],
        "block_m": plan.block_m, "block_n": plan.block_n, "block_k": plan.block_k, "stages": plan.stages,
        "l2_promotion": plan.l2_promotion, "l2_promotion_enum": PROMOTION_ENUM[plan.l2_promotion],
        "consumers": plan.consumers, "ctas_per_sm": plan.ctas_per_sm, "wg_m": plan.wg_m, "mi": plan.wg_m // 64,
        "threads": plan.threads,
        "producer_regs": PRODUCER_REGS, "consumer_regs": plan.consumer_regs, "raster": plan.raster_group,
        "m_inner": plan.m_inner, "n_inner": plan.n_inner, "k_inner": plan.k_inner,
        "m_inner_label": plan.m_inner_label, "n_inner_label": plan.n_inner_label, "k_inner_label": plan.k_inner_label,
        "tiles_m": plan.tiles_m, "tiles_n": plan.tiles_n, "tile_groups": plan.tile_groups, "tiles": plan.tiles,
        "k_inner_tiles": -(-plan.k_inner // plan.block_k), "k_iters": plan.k_iters,
        "loops": loops, "kloops": kloops, "ta": ta, "tb": tb,
        "csm": c_stride["m"], "csn": c_stride["n"], "c_unit": plan.c_unit, "c_vec": plan.c_vec,
        "out_ptr": "ep.D" if out == "D" else "C", "out_t": "D_t" if out == "D" else "C_t", "ep_reads": reads,
        "c_raw": RAW_VECTOR.get(plan.c_vec * c_elem, ""),
        "epi_cols": plan.epi_cols, "epi_pitch": EPI_COL_PITCH if plan.c_unit == "m" else EPI_ROW_PITCH,
        "epi_floats": plan.epi_bytes // 4, "smem_bytes": plan.smem_bytes,
        "splits": plan.k_splits, "kt_per_split": plan.kt_per_split, "red_pitch": plan.red_pitch,
        "a_rows_follow_m": plan.a_rows_follow_m, "a_box_rows": plan.a_box_rows, "b_first": plan.b_first,
        "b_evict_first": plan.b_evict_first, "a_evict_first": plan.a_evict_first,
        "a_multicast": plan.a_multicast, "grid_tiles": plan.grid_tiles, "acc_chains": plan.acc_chains,
        "flat": plan.flat_rows, "m_rows": plan.m_loop_rows,
        "packed": plan.packed_store, "pack_cols": plan.pack_cols,
        "pack_pitch": PACK_PITCH,
    }


def render_body(env: jinja2.Environment, spec: Spec, views: ProblemViews, plan: HopperPlan, base: dict) -> Body:
    k = context(spec, views, plan, base)
    text = env.get_template("hopper/body.cu.j2").render(k=k)
    decisions = decision_lines(plan.decisions) + plan.detail_lines()
    # The launcher's work beyond the launch (render.LAUNCH_FACTS), in dg/hopper_<variant>.cuh: tensor maps always, the
    # shared-memory opt-in past 48 KB, and the persistent grids' size from the SM count or the cluster occupancy.
    facts = {"tensor_maps"} | ({"attributes"} if plan.smem_bytes > 48 * 1024 else set())
    facts |= {"persistent": {"sm_count"}, "split": set(), "multicast": {"clusters"}}[k["variant"]]
    body = {"text": text, "title": f"hopper: {plan.summary}", "decisions": tuple(decisions),
            "headers": (f"dg/hopper_{k['variant']}.cuh",), "facts": frozenset(facts)}
    # The persistent kernel's launcher decides at run time, from the SM count (dg/hopper_persistent.cuh).
    if plan.a_multicast > 1:
        requirements = (f"Thread-block clusters of {plan.a_multicast} blocks: compute capability 9.0 or later.",
                        dependent_launch_note(" where the grid takes every cluster slot of the GPU, or all but a "
                                              "sixteenth of them over one cluster's tile columns (decided at run "
                                              "time)"))
        return Body("hopper", requirements=requirements, **body)
    requirements = cluster_requirements(plan.k_splits) or (dependent_launch_note(
        " where the grid takes every block slot of the GPU, or all but a sixteenth of them over one tile row "
        "(decided at run time from the SM count)"),)
    return Body("hopper", requirements=requirements, **body)
