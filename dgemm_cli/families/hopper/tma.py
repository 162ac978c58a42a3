"""The hopper family's tensor maps as its traits declare them (pure): each dim's size, byte stride, box and the
kernel's source of its coordinate. render.py renders them into the .cu; index.py (the formal model) reads the same
dims, so that the proof is about the maps the kernel encodes."""

from __future__ import annotations

from dgemm_cli.families.hopper import BOX_MN, TmaOperand


def _source(index: str) -> tuple[str, int]:
    """What a tensor-map dim's coordinate is in the kernel (dg::hopper::Source) and the loop's index: the k
    offset, the tile's origin in the tiled m or n segment, a tile loop's index ("loop<i>") or an outer k loop's
    ("kouter<i>")."""
    if index == "k":
        return "AT_K", 0
    if index == "mn":
        return "AT_MN", 0
    if index.startswith("loop"):
        return "AT_LOOP", int(index[4:])
    return "AT_K_LOOP", int(index[6:])


def tma_context(t: TmaOperand, rows_at_run_time: bool, rows_follow_m: bool = False) -> dict:
    """A tensor map's traits: its dims innermost first (with M a run-time argument, A's tiled m dim is sized by it
    when the map is encoded, size 0, and its box cut to the rows present for K-major A, box 0), its boxes a stage."""
    box_bytes = t.stage_bytes // t.boxes_per_stage
    run_time_rows = rows_at_run_time and t.operand == "A"
    dims = []
    for d in t.dims:
        source, index = _source(d.index)
        run_time_dim = run_time_rows and d.index == "mn"
        dims.append({"label": d.label, "size": 0 if run_time_dim else d.size, "stride": d.stride_bytes,
                     "box": 0 if run_time_dim and rows_follow_m else d.box, "source": source, "index": index})
    return {
        "name": t.operand, "major": t.major, "rank": len(t.dims), "dims": dims, "boxes": t.boxes_per_stage,
        "box_bytes": box_bytes,
        "desc": (f"K-major: [rows][{t.dims[0].box} k] 128-byte rows, 8-row swizzle atoms 1024 B apart (SBO)"
                 if t.major == "k" else
                 f"MN-major: {t.boxes_per_stage} box(es) of [64 k rows][{BOX_MN} mn], {box_bytes} B apart (LBO), "
                 "8-row swizzle atoms 1024 B apart (SBO); wgmma reads it transposed"),
    }
