"""`deepgemm random-specs`: random valid specs for a verification sweep."""

from __future__ import annotations

from pathlib import Path

import click

from dgemm_cli.randspec import (
    A_VECTORS_SHARE,
    DOT_SHARE,
    DYNAMIC_SHARE,
    EPILOGUE_SHARE,
    FP8_SHARE,
    FP8_VIEWS_SHARE,
    MULTICAST_SHARE,
    ROW_BLOCKS_SHARE,
    SMALL_M_SHARE,
    TMA_SHARE,
    WIDE_BATCH_SHARE,
    WIDE_DECODE_SHARE,
    WIDE_SHORT_K_SHARE,
    WIDE_STAGED_SHARE,
    WQ_SHARE,
)


@click.command(name="random-specs")
@click.argument("count", type=click.IntRange(1, 100000))
@click.option("-o", "--out", type=click.Path(path_type=Path), required=True, help="Folder for the YAML files.")
@click.option("--seed", type=int, default=0, show_default=True,
              help="The same seed writes the same specs (a failing sweep can be drawn again).")
@click.option("--tma-share", type=click.FloatRange(0.0, 1.0), default=TMA_SHARE, show_default=True,
              help="Share of 16-bit specs with TMA-friendly views (16-byte strides, sizes in the hundreds).")
@click.option("--small-m-share", type=click.FloatRange(0.0, 1.0), default=SMALL_M_SHARE, show_default=True,
              help="Share of decode-shaped specs (M = 1..64 rows, K in the hundreds to thousands), drawn first.")
@click.option("--dynamic-share", type=click.FloatRange(0.0, 1.0), default=DYNAMIC_SHARE, show_default=True,
              help="Share of specs with a row letter sized at run time ({min, max}: one kernel a bucket of sizes); "
                   "applies to specs whose A and C strides are explicit.")
@click.option("--epilogue-share", type=click.FloatRange(0.0, 1.0), default=EPILOGUE_SHARE, show_default=True,
              help="Share of specs with a fused epilogue (bias / scale / residual views, activations, clamps) and "
                   "sometimes an output view D. Drawn apart from the product: the other specs stay the same.")
@click.option("--row-blocks-share", type=click.FloatRange(0.0, 1.0), default=ROW_BLOCKS_SHARE, show_default=True,
              help="Share of TMA specs with two row letters, one sized in whole 64-row blocks: the hopper family's "
                   "tiles then run across the other (flat rows). Drawn apart: 0 leaves every spec as before.")
@click.option("--a-vectors-share", type=click.FloatRange(0.0, 1.0), default=A_VECTORS_SHARE, show_default=True,
              help="Share of decode-shaped specs whose A is redrawn k-contiguous, rows a whole number of 16-, 8- or "
                   "4-byte vectors apart (or not): reaches the small-M families' vector loads of A. Drawn apart.")
@click.option("--wide-decode-share", type=click.FloatRange(0.0, 1.0), default=WIDE_DECODE_SHARE, show_default=True,
              help="Share of decode-shaped specs redrawn wide (N = 2112..16384, K = 512..8192, tails included; f16 or "
                   "bf16, B mostly nn.Linear [N, K]): reaches the tcgemv family. Drawn apart.")
@click.option("--wide-batch-share", type=click.FloatRange(0.0, 1.0), default=WIDE_BATCH_SHARE, show_default=True,
              help="Share of the wide decode specs drawn over a batch of 2..8 products (attention heads over a KV "
                   "cache, MoE experts): reaches tcgemv over a batch. Drawn apart.")
@click.option("--wide-short-k-share", type=click.FloatRange(0.0, 1.0), default=WIDE_SHORT_K_SHARE, show_default=True,
              help="Share of the wide decode specs with a short K: 8..192 in whole 64s, 8s or not (split over two "
                   "letters, up to 256): reaches tcgemv's short-K path (2 warps a block, warps with no 64-k segment, "
                   "K tails), which K = 512..8192 never does. Drawn apart.")
@click.option("--wide-staged-share", type=click.FloatRange(0.0, 1.0), default=WIDE_STAGED_SHARE, show_default=True,
              help="Share of the wide decode specs shaped for tcgemv's staged activation: one product, M = 9..16, "
                   "N = 6..8 groups of 16 columns x 119..132 blocks (some with the last block's columns past N), K = "
                   "512..6656 in whole 512s, pinned to it (`plan:`) where its gates take the views. Drawn apart.")
@click.option("--multicast-share", type=click.FloatRange(0.0, 1.0), default=MULTICAST_SHARE, show_default=True,
              help="Share of specs redrawn for the hopper family's A-multicast kernel (the weight as A, N two tiles "
                   "wide), pinned to it (`plan:`). Drawn apart.")
@click.option("--dot-share", type=click.FloatRange(0.0, 1.0), default=DOT_SHARE, show_default=True,
              help="Share of the full reductions (C one element) pinned to the dot family (`plan:`) where its gates "
                   "take them (K over 32). Drawn apart.")
@click.option("--fp8-share", type=click.FloatRange(0.0, 1.0), default=FP8_SHARE, show_default=True,
              help="Share of specs redrawn as e4m3 GEMMs with f32 scales (every scaling mode: 1x128 / 128x128 "
                   "blocks, per row and column along k, per channel, per tensor, coarser and mixed blocks; K of any "
                   "size, padded rows, scales in either layout) for the fp8_hopper family. Drawn apart.")
@click.option("--fp8-views-share", type=click.FloatRange(0.0, 1.0), default=FP8_VIEWS_SHARE, show_default=True,
              help="Share of specs redrawn as e4m3 products over the views fp8_hopper refuses, for the fp8_cta "
                   "family: either operand mn-contiguous, rows at any byte offset and pitch, batches (B sometimes "
                   "broadcast), NCHW / NHWC 1x1 convolutions, k blocks of 32..256. Drawn apart.")
@click.option("--wq-share", type=click.FloatRange(0.0, 1.0), default=WQ_SHARE, show_default=True,
              help="Share of specs redrawn as weight-only GEMMs for the wq family (docs/design/weight-only.md): int4 / "
                   "uint4 packed as GPTQ, AWQ, an explicit packing or dg, int8 / uint8; groups along k (tails "
                   "included), per channel or per tensor, f16/bf16/f32 scales in either layout; uint4, uint8 or "
                   "float zero points, subtracted or prescaled; padded rows; run-time M. Drawn apart.")
@click.option("--perf", is_flag=True,
              help="Write realistic problems for the performance suite instead (LLM projections from decode to "
                   "prefill and their backward, skinny outputs, MoE experts, attention over heads in place, 1x1 "
                   "convolutions, f32 in every layout, squares; randspec/perf.py), named perf_<class>_<n>; the "
                   "shares do not apply.")
def random_specs_cmd(count: int, out: Path, seed: int, tma_share: float, small_m_share: float,
                     dynamic_share: float, epilogue_share: float, row_blocks_share: float,
                     a_vectors_share: float, wide_decode_share: float, wide_batch_share: float,
                     wide_short_k_share: float, wide_staged_share: float, multicast_share: float,
                     dot_share: float, fp8_share: float, fp8_views_share: float, wq_share: float,
                     perf: bool) -> None:
    """Write COUNT random valid specs (sizes 1..300, permuted / padded / broadcast / offset views,
    all dtypes) for a verification sweep: `deepgemm gen OUT/*.yaml -o G && deepgemm build G && deepgemm verify G`."""
    import yaml

    from dgemm_cli.randspec import random_specs

    out.mkdir(parents=True, exist_ok=True)
    if perf:
        from dgemm_cli.randspec.perf import perf_specs

        for spec in perf_specs(count, seed):
            (out / f"{spec['name']}.yaml").write_text(yaml.safe_dump(spec, sort_keys=False, default_flow_style=None))
        click.echo(f"wrote {count} performance problems to {out}/")
        return
    pinned = unpinned = 0
    for spec in random_specs(count, seed, tma_share, small_m_share, dynamic_share, epilogue_share, row_blocks_share,
                             a_vectors_share, wide_decode_share, wide_batch_share, wide_short_k_share,
                             wide_staged_share, multicast_share, dot_share, fp8_share, fp8_views_share,
                             wq_share):
        if "plan" in spec:
            if _plans(spec):
                pinned += 1
            else:  # the pinned kernel's gates refuse the drawn views: the cost model picks instead
                del spec["plan"]
                unpinned += 1
        (out / f"{spec['name']}.yaml").write_text(yaml.safe_dump(spec, sort_keys=False, default_flow_style=None))
    pins = f" ({pinned} pinned by `plan:`, {unpinned} left to the cost model where the pinned kernel refuses)" \
        if pinned or unpinned else ""
    click.echo(f"wrote {count} specs to {out}/{pins}")


def _plans(spec: dict) -> bool:
    """Whether the spec, pins included, has a plan on its arch."""
    from dgemm_cli.arch import get_arch
    from dgemm_cli.errors import PlanError, SpecError
    from dgemm_cli.plan import make_plan
    from dgemm_cli.spec import parse_spec
    from dgemm_cli.views import analyse

    parsed = parse_spec(spec, spec["name"])
    try:
        make_plan(analyse(parsed), get_arch(parsed.arch))
    except (PlanError, SpecError):
        return False
    return True
