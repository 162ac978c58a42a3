"""For each log of an instrumented harness (chain_debug.py) given: one line per predecessor, when the kernel's
block 0 started and when the predecessor began restoring, both in µs after the predecessor's start. Device printf
lines come out in no set order, so each predecessor is paired with the first kernel start at or after its own
(less 1 µs of timer skew).   python3 tools/session20/chain_report.py LOG..."""
import re
import sys

for path in sys.argv[1:]:
    writers, kernels = [], []
    for line in open(path):
        if m := re.match(r"DBG writer start (\d+) restore (\d+)", line):
            writers.append((int(m.group(1)), int(m.group(2))))
        elif m := re.match(r"DBG kernel start (\d+)", line):
            kernels.append(int(m.group(1)))
    print(path.rsplit("/", 1)[-1])
    for start, restore in sorted(writers):
        after = [k for k in kernels if k >= start - 1000]
        when = f"{(min(after) - start) / 1e3:+9.1f} us" if after else "     none"
        print(f"  kernel at {when}, restore at {(restore - start) / 1e3:+7.1f} us")
