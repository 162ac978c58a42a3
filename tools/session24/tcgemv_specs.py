"""Random specs whose plan (or one of whose run-time buckets) is tcgemv's register-stream kernel, the one that
prefetches its first rounds of the weight before its wait (session 24): rows 2..16, N and K anywhere (tails of
a block and of a 64-k segment included), either weight layout, padded row strides, a batch now and then, f16 or
bf16, alpha and beta. With `prefetching` (session 25): only specs with a kernel that prefetches (a warp's 16 rounds).
With `prefetching16` (session 26): 9..16 rows and K up to 40000, so that the 16-token kernel streams 16 rounds.

    python3 tools/session24/tcgemv_specs.py COUNT SEED OUT_DIR [prefetching|prefetching16]
"""
import random
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "session19"))
from launch_cover import SM90  # noqa: E402

from dgemm_cli.families.tcgemv import TcGemvPlan  # noqa: E402
from dgemm_cli.plan import make_plan  # noqa: E402
from dgemm_cli.spec import load_spec  # noqa: E402
from dgemm_cli.views import analyse  # noqa: E402


def candidate(rng: random.Random, name: str, sixteen: bool = False) -> dict:
    m = rng.randint(9, 16) if sixteen else rng.randint(2, 16)
    n = rng.choice([rng.randint(8, 600), rng.randint(600, 20000), 8 * rng.randint(64, 2048)])
    k = rng.choice([8 * rng.randint(8, 1024), rng.randint(64, 6000)])
    if sixteen:
        k = rng.choice([8 * rng.randint(1024, 5000), rng.randint(8192, 40000)])
    pad = lambda: rng.choice([0, 0, 8, 24, 64])  # noqa: E731
    b_nk = rng.random() < 0.7
    batch = rng.random() < 0.15
    sizes = {"m": {"min": 1, "max": m} if rng.random() < 0.25 else m, "n": n, "k": k}
    a_strides, b_strides, c_strides = [k + pad(), 1], [k + pad(), 1] if b_nk else [n + pad(), 1], [n + pad(), 1]
    contraction = "mk,nk->mn" if b_nk else "mk,kn->mn"
    if batch:
        sizes = {"b": rng.randint(2, 4), **sizes}
        a_strides = [m * a_strides[0]] + a_strides
        b_strides = [(n if b_nk else k) * b_strides[0] + rng.choice([0, 64])] + b_strides
        c_strides = [m * c_strides[0]] + c_strides
        contraction = "bmk,bnk->bmn" if b_nk else "bmk,bkn->bmn"
        sizes["m"] = m  # a run-time letter's strides may not follow it: fixed rows with a batch
    return {
        "name": name, "arch": "sm_90a", "dtype": rng.choice(["f16", "bf16"]), "contraction": contraction,
        "sizes": sizes,
        "operands": {"A": {"strides": a_strides, "align": 16}, "B": {"strides": b_strides, "align": 16},
                     "C": {"strides": c_strides}},
        "alpha": rng.choice([1.0, 0.5, -1.25]), "beta": rng.choice([0.0, 0.0, 1.0, 0.5]),
    }


def streamed_tcgemv(p) -> bool:
    return isinstance(p, TcGemvPlan) and not p.shared_act


def prefetching_tcgemv(p) -> bool:
    return streamed_tcgemv(p) and p.prefetch_rounds > 0


def sixteen_token_prefetching(p) -> bool:
    return prefetching_tcgemv(p) and p.tokens == 16


def main(count: int, seed: int, out: Path, mode: str = "") -> None:
    wanted = {"": streamed_tcgemv, "prefetching": prefetching_tcgemv, "prefetching16": sixteen_token_prefetching}[mode]
    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    kept = tried = 0
    while kept < count and tried < 100 * count:
        name = f"tcgemv_{seed}_{kept:03d}"
        path = out / f"{name}.yaml"
        path.write_text(yaml.safe_dump(candidate(rng, name, mode == "prefetching16"), sort_keys=False))
        tried += 1
        plan = make_plan(analyse(load_spec(path)), SM90)
        kernels = [b.plan.primary for b in plan.buckets] if hasattr(plan, "buckets") else [plan.primary]
        if any(wanted(p) for p in kernels):
            print(f"{name}: {sum(map(streamed_tcgemv, kernels))} streamed tcgemv kernel(s), "
                  f"{sum(map(prefetching_tcgemv, kernels))} prefetching, "
                  f"{sum(map(sixteen_token_prefetching, kernels))} of 16 tokens")
            kept += 1
        else:
            path.unlink()
    print(f"kept {kept} of {tried}")


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]), sys.argv[4] if len(sys.argv) > 4 else "")
