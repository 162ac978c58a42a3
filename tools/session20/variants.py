"""Variants of generated directories for session 20's device calls, each a renamed copy (copy_renamed.py) that
builds, verifies and benches beside the original:
  _old    hopper's L2 prefetch before the wait removed (the kernel as at 001ca3c)
  _deep   the prefetch over 2 * STAGES k-iterations instead of STAGES
  _bonly  the prefetch of B's boxes only (A's removed)
  _orig   _old with the K-split kernel's wait where it was before this session: first thing in the kernel
  _nowait griddepcontrol.wait removed: a negative control, whose verify must fail behind the harness's writer
python3 tools/session20/variants.py SRC DST [--nowait NAME,...] [--variants _old,_deep]: the variants (default
_old, _deep) of every directory of SRC whose kernel prefetches (_orig only of K-split kernels), _nowait of the
named ones."""
import pathlib
import re
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "session19"))
from copy_renamed import copy_renamed  # noqa: E402

PREFETCH = re.compile(r"\n    // Before the wait for the previous grid:.*?\n(    for \(int kt = kt0.*?\n    }\n|"
                      r"    if \(int\(blockIdx\.x\) < TILES( && TILES <= int\(gridDim\.x\))?\) \{.*?\n    }\n)", re.S)


def patch(cu: pathlib.Path, variant: str) -> int:
    text = cu.read_text()
    if variant == "_old":
        text, n = PREFETCH.subn("\n", text)
    elif variant == "_deep":
        text, a = re.subn(r"kt < \(STAGES < K_ITERS \? STAGES : K_ITERS\)",
                          "kt < (2 * STAGES < K_ITERS ? 2 * STAGES : K_ITERS)", text)
        text, b = re.subn(r"min\(kt_end, kt0 \+ STAGES\)", "min(kt_end, kt0 + 2 * STAGES)", text)
        n = a + b
    elif variant == "_bonly":
        text, n = re.subn(r"\n *tma_prefetch_\dd\(&tmap_a, [^\n]*\);", "", text)
        assert "a box a 64-row block\n          tma_prefetch" not in text
    elif variant == "_orig":
        text, a = PREFETCH.subn("\n", text)
        wait = '  asm volatile("griddepcontrol.wait;\\n" ::: "memory");\n'
        moved = r"  // Barriers are set up: [^\n]*\n(  // \(Waiting here[^\n]*\n)?"
        text, b = re.subn(moved + re.escape(wait), "", text)
        text, c = re.subn(r"(\n)(  // Blocks \[SPLITS \* t, SPLITS \* \(t \+ 1\)\) form the cluster of tile t;)",
                          lambda m: m.group(1) + wait + m.group(2), text)
        n = 1 if b == c == 1 else 0  # a: the prefetch, which the K-split kernel no longer has (6c9f1cf)
    else:
        text, n = re.subn(r'\n *asm volatile\("griddepcontrol\.wait;\\n" ::: "memory"\);', "", text)
    cu.write_text(text)
    return n


def make(src: pathlib.Path, dst: pathlib.Path, name: str, variant: str) -> None:
    tmp = dst / ".one"
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / name).symlink_to((src / name).resolve())
    for d in copy_renamed(tmp, dst, variant):
        n = patch(d / f"{d.name}.cu", variant)
        print(d.name, "patched", n)
        assert n > 0, d
    (tmp / name).unlink()
    tmp.rmdir()


if __name__ == "__main__":
    src, dst = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    nowait = sys.argv[sys.argv.index("--nowait") + 1].split(",") if "--nowait" in sys.argv else []
    variants = sys.argv[sys.argv.index("--variants") + 1].split(",") if "--variants" in sys.argv else ["_old", "_deep"]
    for d in sorted(p for p in src.iterdir() if p.is_dir()):
        text = (d / f"{d.name}.cu").read_text()
        for v in variants:
            split = "// Blocks [SPLITS * t, SPLITS * (t + 1)) form the cluster of tile t;" in text  # hopper's
            if v == "_orig" and split or v not in ("none", "_orig") and "tma_prefetch_" in text:
                make(src, dst, d.name, v)
    for name in nowait:
        make(src, dst, name, "_nowait")
