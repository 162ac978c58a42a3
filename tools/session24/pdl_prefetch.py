"""Session 24's variants of tcgemv's register-stream kernel, rendered with the weight's L2 prefetch before the wait
for the previous grid (PREFETCH_ROUNDS = 2) and the trigger after the block's last load (the experiment's template).

    python3 tools/session24/pdl_prefetch.py SRC DST NAME=VARIANT...

VARIANT (each copied to DST/<name>_<variant> by session 19's copy_renamed.py, then patched):
  base    no prefetch, no trigger: the kernel as it was (the wait first thing: only pointer arithmetic before it)
  trig    no prefetch, the trigger after the last load
  pfN     N rounds prefetched, no trigger
  pfNt    N rounds prefetched and the trigger
  pfNtl   the same, the prefetched lines marked evict_last in L2
As rendered, the kernel is pf2t."""
import pathlib
import re
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "session19"))
from copy_renamed import patch_copies  # noqa: E402

ROUNDS = "constexpr int PREFETCH_ROUNDS = 2;"
TRIGGER = '  asm volatile("griddepcontrol.launch_dependents;\\n" ::: "memory");\n'
PREFETCH = 'asm volatile("prefetch.global.L2 [%0];\\n" ::"l"(p));'


def patch(text: str, variant: str) -> str:
    assert text.count(ROUNDS) == 1 and text.count(PREFETCH) == 1, "the experiment's kernel"
    # The tcgemv kernel's trigger is the only one in the file (the cta fallback has none).
    assert text.count(TRIGGER) == 1, "one trigger"
    m = re.fullmatch(r"base|trig|pf(\d+)(t?)(l?)", variant)
    assert m, variant
    rounds = int(m.group(1)) if m.group(1) else 0
    trigger = variant == "trig" or m.group(2) == "t"
    text = text.replace(ROUNDS, f"constexpr int PREFETCH_ROUNDS = {rounds};")
    if not trigger:
        text = text.replace(TRIGGER, "")
    if m.group(3):
        text = text.replace(PREFETCH, PREFETCH.replace("L2 [", "L2::evict_last ["))
    return text


if __name__ == "__main__":
    patch_copies(pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3:], patch, lambda v: f"_{v}")
