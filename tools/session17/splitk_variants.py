"""Session 17: splitk tilings beside the model's pick, for the device call that checks the splitk cost model
(session 16's sweep measured splitk at N = 2048 1.4-1.8x over its estimate, at N = 4096 1.0-1.35x).

    python3 tools/session17/splitk_variants.py OUT SPEC...

Renders each spec once per variant below (OUT/<name>_<variant>/) and writes OUT/model.json: generated name ->
(variant, the model's estimate in µs, the assignment). A variant that the tiling graph refuses is skipped and said.
"""
from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from render_variant import render  # noqa: E402

from dgemm_cli.errors import DeepGemmError  # noqa: E402
from dgemm_cli.spec import load_spec  # noqa: E402

BASE = {"block_m": 16, "block_n": 128, "smem_inner_a": "k", "smem_inner_b": "k", "loader_a": "cp_async",
        "loader_b": "cp_async", "groups": 1, "warps_m": 1}
VARIANTS = {  # name -> the nodes that differ from BASE
    "k128s2x16": {"block_k": 128, "warps_n": 4, "stages": 2, "splits": 16},  # N = 2048's pick
    "k64s2x16": {"block_k": 64, "warps_n": 2, "stages": 2, "splits": 16},  # N = 4096's pick
    "k128s3x16": {"block_k": 128, "warps_n": 4, "stages": 3, "splits": 16},
    "k64s4x16": {"block_k": 64, "warps_n": 2, "stages": 4, "splits": 16},
    "k128s2x8": {"block_k": 128, "warps_n": 4, "stages": 2, "splits": 8},
    "k64s4x8": {"block_k": 64, "warps_n": 2, "stages": 4, "splits": 8},
    "n64k128s2x16": {"block_n": 64, "block_k": 128, "warps_n": 2, "stages": 2, "splits": 16},
    "n64k64s4x8": {"block_n": 64, "block_k": 64, "warps_n": 2, "stages": 4, "splits": 8},
}


def main(out: str, *spec_paths: str) -> None:
    table = {}
    for path in spec_paths:
        spec = load_spec(Path(path))
        for variant, nodes in VARIANTS.items():
            named = replace(spec, name=f"{spec.name}_{variant}")
            assignment = {**BASE, **nodes}
            try:
                plan = render(named, Path(out), "splitk", assignment)
            except DeepGemmError as err:
                print(f"{named.name}: refused: {str(err)[:160]}")
                continue
            table[named.name] = {"variant": variant, "model_us": round(plan.cost_us, 3), "assignment": assignment}
            print(f"{named.name}: model {plan.cost_us:.2f} µs: {plan.summary}")
    Path(out, "model.json").write_text(json.dumps(table, indent=1))


if __name__ == "__main__":
    main(*sys.argv[1:])
