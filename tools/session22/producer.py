"""Session 22's variants of hopper's producer for device experiments.

    python3 tools/session22/producer.py SRC DST NAME=VARIANT...

VARIANT is `bfirst` (each stage's B box issued before its A box: B comes from DRAM, A from L2, so the long load
enters the TMA unit's queue first), `bnone` (B's map without L2 promotion, A's keeping 256 bytes: session 15
flipped both maps together at 128 rows, never one), or `bfirst_bnone` (both). Each named directory of SRC is copied
to DST/<name>_<VARIANT> (session 19's copy_renamed.py) and patched."""
import pathlib
import re
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "session19"))
from copy_renamed import patch_copies  # noqa: E402

A_LOAD = r"( *)(tma_load_2d\(smem \+ A_OFFSET \+ stage \* A_STAGE_BYTES, &tmap_a, &full\[stage\], k0, tile\.m0\);\n)"
B_LOAD = r"( *)(tma_load_2d\(smem \+ B_OFFSET \+ stage \* B_STAGE_BYTES, &tmap_b, &full\[stage\], k0, tile\.n0\);\n)"


def patch(text: str, variant: str) -> str:
    if "bfirst" in variant:
        text, n = re.subn(A_LOAD + B_LOAD, r"\3\4\1\2", text, count=1)
        assert n == 1, "load order"
    if "bnone" in variant:
        text, n = re.subn(r"(bool encode_b\(CUtensorMap\* map, const void\* view\) \{\n(?:[^\n]*\n){5}[^\n]*)"
                          r"CU_TENSOR_MAP_L2_PROMOTION_L2_256B", r"\1CU_TENSOR_MAP_L2_PROMOTION_NONE", text, count=1)
        assert n == 1, "B promotion"
    return text


if __name__ == "__main__":
    patch_copies(pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3:], patch, lambda v: f"_{v}")
