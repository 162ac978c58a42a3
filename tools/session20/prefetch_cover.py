"""How many kernels of a spec set reach session 20's hopper paths, as planned for the H200 (132 SMs): the persistent
kernel's B prefetch before the wait (run only where every block has one tile: tiles <= resident blocks), the
persistent kernel without it (several tiles a block), and the K-split kernel (its wait moved after the barriers).
A run-time bucket counts at its largest size.   python3 tools/session20/prefetch_cover.py SPEC_DIR_OR_FILE..."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "session19"))
from launch_cover import SM90, main  # noqa: E402


def hopper_path(p) -> str | None:
    if type(p).__name__ != "HopperPlan":
        return None
    if p.k_splits > 1:
        return "hopper K split: wait after the barriers"
    if p.tiles <= p.ctas_per_sm * SM90.sms:
        return "hopper persistent, one tile a block: B prefetched before the wait"
    return "hopper persistent, several tiles a block: no prefetch"


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        print(arg)
        main(arg, hopper_path)
