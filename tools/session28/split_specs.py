"""Random specs shaped for hopper's K split (few tiles, long K: decode-like, 17..64 rows, some sized at run time),
the plans that take two accumulator sets (session 27's `acc_chains`). The randomized suite reaches that path
rarely (1 of 150 TMA-heavy draws at seed 29). Usage: split_specs.py COUNT SEED OUT; prints each spec's pick."""
import random
import sys
from pathlib import Path

import yaml

from dgemm_cli.arch import get_arch
from dgemm_cli.plan import make_plan
from dgemm_cli.spec import parse_spec
from dgemm_cli.views import analyse


def draw(rng: random.Random, i: int, seed: int) -> dict:
    m = rng.randint(17, 64)
    n = rng.choice([rng.randrange(512, 4300, 8), rng.randint(500, 4300)])
    k = rng.choice([rng.randrange(2048, 8193, 64), rng.randrange(2048, 8193, 8)])
    doc = {"name": f"split_{seed}_{i:03d}", "arch": "sm_90a", "dtype": rng.choice(["f16", "bf16"]),
           "gemm": {"m": {"min": 1, "max": m} if rng.random() < 0.3 else m, "n": n, "k": k},
           "operands": {"B": {"layout": "col"}}}
    if rng.random() < 0.4:  # A's rows padded: a token batch with a row stride
        doc["operands"]["A"] = {"strides": [k + 8 * rng.randint(1, 8), 1]}
        doc["operands"]["C"] = {"strides": [n + rng.choice([0, 8, 64]), 1]}
    if rng.random() < 0.3:
        doc["beta"] = 0.5
    return doc


def main() -> None:
    count, seed, out = int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    for i in range(count):
        doc = draw(rng, i, seed)
        plan = make_plan(analyse(parse_spec(doc)), get_arch("sm_90a"))
        (out / f"{doc['name']}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
        plans = [b.plan for b in plan.buckets] if hasattr(plan, "buckets") else [plan]
        print(doc["name"], " ".join(f"{p.family}:split{getattr(p.primary, 'k_splits', '-')}"
                                    f":sets{getattr(p.primary, 'acc_chains', '-')}" for p in plans))


if __name__ == "__main__":
    main()
