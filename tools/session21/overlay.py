"""Session 21's variant of hopper kernels with one tile a block: the epilogue's staging over the pipeline stages
(idle once the tile's last wgmma has read them) instead of beside them, and the shared memory it frees spent on
more stages (cuBLAS's kernel for [128,4096]x[4096,14336] runs 7 stages of the same 128x112 tile, call 4).

    python3 tools/session21/overlay.py SRC DST NAME=STAGES...

Each named directory of SRC is copied to DST/<name>_s<STAGES> (copy_renamed.py) and patched; a consumer barrier
keeps the staging's first write behind every consumer's last wgmma. Valid only where every block has one tile
(the kernel's loads all land before the consumers' last wait)."""
import pathlib
import re
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "session19"))
from copy_renamed import copy_renamed  # noqa: E402

BARRIER = ('      asm volatile("bar.sync 3, %0;\\n" ::"n"(CONSUMERS * 128) : "memory");  // every wgmma has read its '
           'stage: the staging may overwrite them\n')


def patch(text: str, stages: int) -> str:
    subs = [
        (r"constexpr int STAGES = \d+;", f"constexpr int STAGES = {stages};"),
        (r"constexpr int EPI_OFFSET = B_OFFSET \+ STAGES \* B_STAGE_BYTES;",
         "constexpr int EPI_OFFSET = 0;  // over the stages: every block has one tile"),
        (r"constexpr int BAR_OFFSET = EPI_OFFSET \+ CONSUMERS \* EPI_FLOATS \* 4;",
         "constexpr int BAR_OFFSET = B_OFFSET + STAGES * B_STAGE_BYTES;"),
        (r'static_assert\(SMEM_BYTES == \d+, "planner and kernel disagree on shared memory"\);\n', ""),
        (r"(      for \(int mi = 0; mi < MI; \+\+mi\) acc_fence\(acc\[mi\]\);\n)",
         r"\1" + BARRIER.replace("\\", "\\\\")),
    ]
    for pattern, repl in subs:
        text, n = re.subn(pattern, repl, text, count=1)
        assert n == 1, pattern
    return text


if __name__ == "__main__":
    src, dst = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    for arg in sys.argv[3:]:
        name, stages = arg.split("=")
        tmp = dst / ".one"
        tmp.mkdir(parents=True, exist_ok=True)
        (tmp / name).symlink_to((src / name).resolve())
        for d in copy_renamed(tmp, dst, f"_s{stages}"):
            cu = d / f"{d.name}.cu"
            cu.write_text(patch(cu.read_text(), int(stages)))
        (tmp / name).unlink()
        tmp.rmdir()
