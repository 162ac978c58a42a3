"""Render hopper tilings with a K split of 4 (the planner's K_SPLITS is (1, 2)) for a device experiment.

    python3 tools/session22/split4.py SPEC OUT 'JSON ASSIGNMENT' [NAME_SUFFIX]

As tools/render_variant.py, with 4 added to the k_splits node's domain. The template's K split is written for any
cluster size (each block sums its share of the tile over every rank's parked partial, in rank order)."""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from render_variant import main  # noqa: E402

from dgemm_cli.families import hopper  # noqa: E402

hopper.K_SPLITS = (1, 2, 4)

if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], "hopper", *sys.argv[3:])
