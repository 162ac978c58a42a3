"""Random specs that reach hopper's B-first load order in the K-split kernel (the one kernel where B first measured
faster, session 22 call 3): decode-like specs as tools/session21/pdl_prefetch_specs.py draws them, with N small
enough (16..64 tiles) that the tiles leave half the SMs idle and the plan splits K over a cluster. Session 22's
random specs reached B first only in unsplit kernels; the split one only through issue 7's N = 4096 kernels.

    python3 tools/session22/bfirst_split_specs.py COUNT SEED OUT_DIR
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "session21"))
from pdl_prefetch_specs import main  # noqa: E402


def split_b_first(p) -> bool:
    return getattr(p, "family", "") == "hopper" and p.b_first and p.k_splits > 1


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]), prefix="bfsplit", hit=split_b_first,
         draw_n=lambda rng, width: rng.randint(16, 64) * width - rng.randint(0, width - 1))
