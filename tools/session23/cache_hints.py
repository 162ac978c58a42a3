"""Session 23's variants of hopper's decode kernels: L2 eviction priorities as TMA cache hints on the weight's loads
(evict_first: it streams once) and on A's (evict_last: every block reads it again), the prefetch left as it is.

    python3 tools/session23/cache_hints.py SRC DST NAME=VARIANT...

VARIANT: bfirst (B's loads evict_first), alast (A's loads evict_last), both. Each copied to DST/<name>_<variant>
(session 19's copy_renamed.py) and patched. tools/session23/l2_probe.cu asks the same of the loads alone: does
either keep A's lines in the near L2 partition (call 1: ours reads 1.3 M sectors of hits across the partition
fabric, cuBLAS's kernel 90 K)?"""
import pathlib
import re
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "session19"))
from copy_renamed import patch_copies  # noqa: E402

HINTED = r'''
// ---- TMA with an L2 eviction priority for the lines the box brings in (tools/session23/cache_hints.py).
template <bool LAST>
__device__ __forceinline__ void tma_load_2d_hinted(void* dst, const CUtensorMap* map, uint64_t* bar, int c0, int c1) {
  uint64_t policy;
  if (LAST)
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;\n" : "=l"(policy));
  else
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
               " [%0], [%1, {%3, %4}], [%2], %5;\n"
               ::"r"(smem_u32(dst)), "l"(map), "r"(smem_u32(bar)), "r"(c0), "r"(c1), "l"(policy) : "memory");
}
'''


def patch(text: str, variant: str) -> str:
    at = text.index("// ---- TMA: one box of a tensor map into L2 only.")
    text = text[:at] + HINTED.lstrip("\n") + "\n" + text[at:]
    loads = {"B": "tma_load_2d(smem + B_OFFSET + stage * B_STAGE_BYTES, &tmap_b,",
             "A": "tma_load_2d(smem + A_OFFSET + stage * A_STAGE_BYTES, &tmap_a,"}
    hint = {"bfirst": {"B": "false"}, "alast": {"A": "true"}, "both": {"B": "false", "A": "true"}}[variant]
    for t, last in hint.items():
        assert text.count(loads[t]) == 1, t
        text = text.replace(loads[t], loads[t].replace("tma_load_2d(", f"tma_load_2d_hinted<{last}>("))
    assert re.search(r"tma_load_2d_hinted<(true|false)>\(smem", text)
    return text


if __name__ == "__main__":
    patch_copies(pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3:], patch, lambda v: f"_{v}")
