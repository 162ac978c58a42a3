"""How many kernels of a spec set take each of session 19's launch paths, as planned for the H200 (132 SMs): gemv
without a split and tcgemv's register-stream kernel (dependent, no trigger), tcgemv's staged kernel (plain), and
hopper's persistent grid (full: dependent as before; one tile row leaving at most a sixteenth of the SMs idle:
dependent by the new rule; otherwise plain). A run-time bucket counts at its largest size.

    python3 tools/session19/launch_cover.py SPEC_DIR
"""
import collections
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # this checkout's deepgemm

from dgemm_cli.arch import get_arch  # noqa: E402
from dgemm_cli.plan import make_plan  # noqa: E402
from dgemm_cli.spec import load_spec  # noqa: E402
from dgemm_cli.views import analyse  # noqa: E402

SM90 = get_arch("sm_90a")


def launch_path(p) -> str | None:
    family = type(p).__name__
    if family == "GemvPlan" and p.splits == 1:
        return "gemv unsplit: dependent, no trigger"
    if family == "TcGemvPlan":
        return "tcgemv staged: plain" if p.a_stage == "shared" else "tcgemv register stream: dependent, no trigger"
    if family == "HopperPlan" and p.k_splits == 1:
        resident = p.ctas_per_sm * SM90.sms
        grid = min(p.tiles, resident)
        if grid == resident:
            return "hopper full grid: dependent (as before)"
        if p.tiles == p.tiles_n and 16 * (resident - grid) <= resident:
            return "hopper one row, at most 1/16 idle: dependent (new rule)"
        return "hopper underfilled: plain"
    return None


def main(spec_dir: str, classify=launch_path) -> None:
    """Counts the kernels of the specs in SPEC_DIR (or the one spec file) by `classify`'s label (None: not counted)."""
    counts, specs = collections.Counter(), collections.defaultdict(set)
    root = Path(spec_dir)
    for path in sorted(root.glob("*.yaml") if root.is_dir() else [root]):
        spec = load_spec(path)
        plan = make_plan(analyse(spec), SM90)
        for p in [b.plan.primary for b in plan.buckets] if hasattr(plan, "buckets") else [plan.primary]:
            path_name = classify(p)
            if path_name:
                counts[path_name] += 1
                specs[path_name].add(spec.name)
    for name, n in sorted(counts.items()):
        print(f"{n:5d} kernels, {len(specs[name]):4d} specs  {name}")


if __name__ == "__main__":
    main(sys.argv[1])
