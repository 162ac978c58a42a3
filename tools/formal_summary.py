"""The formal suite's summary (tools/formal_suite.sh): per report, the kernels by family and status, the proof time
per kernel (median, max), and every failed kernel with its lemma, statement and counterexample."""

from __future__ import annotations

import json
import statistics
import sys
from collections import Counter
from pathlib import Path


def summary(path: Path) -> list[str]:
    rows = json.loads(path.read_text())
    lines = [f"{path.name}: {len(rows)} kernels of {len({r['spec'] for r in rows})} specs"]
    by = Counter((r["family"], r["status"]) for r in rows)
    for family in sorted({f for f, _ in by}):
        counts = ", ".join(f"{by[family, s]} {s}" for s in ("proved", "failed", "unmodeled") if by[family, s])
        lines.append(f"  {family:<11} {counts}")
    seconds = [r["seconds"] for r in rows if r["status"] == "proved"]
    if seconds:
        lines.append(f"  proof time a kernel: median {statistics.median(seconds):.1f} s, max {max(seconds):.1f} s, "
                     f"lemmas a kernel: median {statistics.median(r['lemmas'] for r in rows if r['lemmas']):.0f}")
    for r in rows:
        if r["status"] == "failed":
            lines.append(f"  FAILED {r['kernel']}: {r['failed']}: {r['obligation']}; "
                         f"counterexample: {r['counterexample'] or 'none found'}")
    return lines


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        print("\n".join(summary(Path(arg))))
