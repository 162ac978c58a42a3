"""Render each fixed-size spec given at the plan a pick survey recorded before a model change (for the device
calls that time moved picks new against old).

    python3 tools/render_before.py BEFORE.json OUT SPEC...

BEFORE.json maps a spec's stem to {"family", "assignment"} (tools/session16/specs/moved_before.json and
tools/session17/specs/moved_before.json); each spec with an entry is generated into OUT/<name>_old/ by
render_variant. A run-time spec has no entry (a survey keys its buckets by row range) and is skipped.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from render_variant import main as render_variant  # noqa: E402


def main(before_path: str, out: str, *specs: str) -> None:
    before = json.loads(Path(before_path).read_text())
    for spec in specs:
        entry = before.get(Path(spec).stem)
        if entry:
            render_variant(spec, out, entry["family"], json.dumps(entry["assignment"]), "_old")


if __name__ == "__main__":
    main(*sys.argv[1:])
