"""Random specs that reach hopper's B prefetch ahead of a dependent launch's wait: one tile row that leaves at most
a sixteenth of the H200's SMs idle (tools/session19/launch_cover.py's dependent rule) with one tile a block (the
prefetch, tools/session20/prefetch_cover.py). Session 20's random specs reached that path only through issue 7's
four kernels. Sizes, strides, layouts, dtypes, alpha/beta and run-time rows vary; a candidate is kept only when
its plan (or its largest run-time bucket) takes the path.

    python3 tools/session21/pdl_prefetch_specs.py COUNT SEED OUT_DIR
"""
import random
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "session19"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "session20"))
from launch_cover import SM90, launch_path  # noqa: E402
from prefetch_cover import hopper_path  # noqa: E402

from dgemm_cli.plan import make_plan  # noqa: E402
from dgemm_cli.spec import load_spec  # noqa: E402
from dgemm_cli.views import analyse  # noqa: E402

WANT = ("hopper one row, at most 1/16 idle: dependent (new rule)", "hopper full grid: dependent (as before)")


def candidate(rng: random.Random, name: str, draw_n=None) -> dict:
    """One decode-like spec; `draw_n(rng, width)` draws N (default: 124..132 tiles of `width`, cut short by up to a
    tile)."""
    m = rng.randint(9, 64)
    width = rng.choice([64, 96, 112, 128, 160, 192, 224, 256])
    n = draw_n(rng, width) if draw_n else rng.randint(124, 132) * width - rng.randint(0, width - 1)
    k = 8 * rng.randint(32, 512)  # 16-byte strides for TMA; k tails past 64 included
    pad = lambda: 8 * rng.choice([0, 0, 1, 3, 16])  # noqa: E731
    b_nk = rng.random() < 0.6
    c_m_major = rng.random() < 0.2
    spec = {
        "name": name, "arch": "sm_90a", "dtype": rng.choice(["f16", "bf16"]),
        "contraction": "mk,nk->mn" if b_nk else "mk,kn->mn",
        "sizes": {"m": {"min": 1, "max": m} if rng.random() < 0.3 else m, "n": n, "k": k},
        "operands": {
            "A": {"strides": [k + pad(), 1], "align": 16},
            "B": {"strides": [k + pad(), 1] if b_nk else [n + pad(), 1], "align": 16},
            "C": {"strides": [1, 64 + rng.randint(0, 9)] if c_m_major else [n + rng.randint(0, 9), 1]},
        },
        "alpha": rng.choice([1.0, 0.5, -1.25]),
        "beta": rng.choice([0.0, 0.0, 1.0, 0.5]),
    }
    if c_m_major and isinstance(spec["sizes"]["m"], dict):
        spec["operands"]["C"] = {"strides": [n + 3, 1]}  # strides may not follow a run-time size
    return spec


def prefetch_hit(p) -> bool:
    """A hopper kernel that takes the B prefetch ahead of a dependent launch's wait."""
    return launch_path(p) in WANT and (hopper_path(p) or "").endswith("before the wait")


def main(count: int, seed: int, out: Path, prefix: str = "pdlpf", hit=prefetch_hit, draw_n=None) -> None:
    """Draw candidates until `count` are kept: a spec is kept when one of its kernels (a run-time spec's buckets)
    satisfies `hit`."""
    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    kept = tried = 0
    while kept < count and tried < 50 * count:
        name = f"{prefix}_{seed}_{kept:03d}"
        path = out / f"{name}.yaml"
        path.write_text(yaml.safe_dump(candidate(rng, name, draw_n), sort_keys=False))
        tried += 1
        plan = make_plan(analyse(load_spec(path)), SM90)
        kernels = [b.plan.primary for b in plan.buckets] if hasattr(plan, "buckets") else [plan.primary]
        hits = [p for p in kernels if hit(p)]
        if hits:
            p = hits[-1]
            print(f"{name}: {p.block_m}x{p.block_n}, {p.tiles} tiles, {launch_path(p)}")
            kept += 1
        else:
            path.unlink()
    print(f"kept {kept} of {tried}")


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]))
