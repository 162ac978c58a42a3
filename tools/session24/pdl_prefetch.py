"""Session 24's variants of tcgemv's register-stream kernel, rendered (at 240a3c6 and after) with the weight's L2
prefetch before the wait for the previous grid (PREFETCH_ROUNDS = 2, `prefetch.global.L2`) and the trigger after
the block's last load.

    python3 tools/session24/pdl_prefetch.py SRC DST NAME=VARIANT...

VARIANT: tokens joined by '_' (each copied to DST/<name>_<variant> by session 19's copy_renamed.py, then patched;
every tcgemv kernel of the file, the run-time buckets too):
  base    no prefetch, no trigger: the kernel as it was (the wait first thing: only pointer arithmetic before it)
  trig    no prefetch, the trigger after the last load
  pfN     N rounds prefetched, no trigger;  pfNt: and the trigger;  pfNtl: the prefetched lines evict_last
  co      the weight's loads coherent (`ld.global.L1::no_allocate`, not `.nc`)
  b16     the prefetch a bulk copy's (`cp.async.bulk.prefetch.L2.global`) of each lane's own 16 bytes
  b128    the same, one 128-byte line a row, by lane 0 of each eight (whole lines inside the slice only)
Call 1 (240a3c6): every kernel with `prefetch.global.L2` before the wait read the weight's NaN image that the
harness's predecessor replaces after its idle: the prefetched lines did not take its writes for the `.nc` loads.
Call 2 (3ce60e8): with coherent loads (co_pf2, co_pf2t, co_b128_pf2t) all three shapes passed; with `.nc` loads the
bulk prefetch of a line (b128) failed at 8 rows, of 16 bytes a lane (b16) passed and ran 40-130% slower. The run-time
artifacts and random specs were not patched in call 2 (the patch took one kernel a file, then): tools/session24/call5.sh
verifies the coherent candidate there (tools/session24/prefetch_coherent.patch)."""
import pathlib
import re
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "session19"))
from copy_renamed import patch_copies  # noqa: E402

ROUNDS = "constexpr int PREFETCH_ROUNDS = 2;"
TRIGGER = ("  // Every load of this block is done: the next kernel in the stream may be scheduled (it waits for this "
           "grid to\n  // complete before it touches memory, and prefetches its first rounds meanwhile).\n"
           '  asm volatile("griddepcontrol.launch_dependents;\\n" ::: "memory");\n')
PREFETCH = 'asm volatile("prefetch.global.L2 [%0];\\n" ::"l"(p));'
BULK = 'asm volatile("cp.async.bulk.prefetch.L2.global [%0], {};\\n" ::"l"(p) : "memory");'
NC_LOAD = '"ld.global.nc.L1::no_allocate.v4.u32 '
EVEN = re.compile(r"if \((even_in\[o\] && )?seg \+ even_chunk < k_len\) "
                  r"prefetch_l2\(even_row\[o\] \+ seg \+ even_chunk\);")
ODD = re.compile(r"\n *if \((odd_in\[o\] && )?seg \+ odd_chunk < k_len\) "
                 r"prefetch_l2\(odd_row\[o\] \+ seg \+ odd_chunk\);")


def patch(text: str, variant: str) -> str:
    kernels = text.count(ROUNDS)
    assert kernels >= 1 and text.count(PREFETCH) == text.count(NC_LOAD) == kernels, "the experiment's kernels"
    assert text.count(TRIGGER) == kernels, "one trigger a tcgemv kernel"
    tokens = variant.split("_")
    shape = tokens[-1]
    m = re.fullmatch(r"base|trig|pf(\d+)(t?)(l?)", shape)
    assert m, variant
    rounds = int(m.group(1)) if m.group(1) else 0
    text = text.replace(ROUNDS, f"constexpr int PREFETCH_ROUNDS = {rounds};")
    if not (shape == "trig" or m.group(2) == "t"):
        text = text.replace(TRIGGER, "")
    if m.group(3):
        text = text.replace(PREFETCH, PREFETCH.replace("L2 [", "L2::evict_last ["))
    for token in tokens[:-1]:
        if token == "co":
            text = text.replace(NC_LOAD, NC_LOAD.replace(".nc", ""))
        elif token == "b16":
            text = text.replace(PREFETCH, BULK.format(16))
        elif token == "b128":
            text = text.replace(PREFETCH, BULK.format(128))
            assert len(EVEN.findall(text)) == kernels and len(ODD.findall(text)) == kernels
            text = ODD.sub("", text)
            text = EVEN.sub(lambda e: f"if (e == 0 && {e.group(1) or ''}seg + 64 <= k_len) "
                            "prefetch_l2(even_row[o] + seg);\n"
                            f"        if (e == 0 && {(e.group(1) or '').replace('even', 'odd')}seg + 64 <= k_len) "
                            "prefetch_l2(odd_row[o] + seg);", text)
        else:
            raise AssertionError(token)
    return text


if __name__ == "__main__":
    patch_copies(pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3:], patch, lambda v: f"_{v}")
