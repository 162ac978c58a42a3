"""Session 23's variants of hopper's decode kernels: L2 eviction priorities as TMA cache hints on the weight's loads
(evict_first: it streams once) and on A's (evict_last: every block reads it again), the prefetch left as it is.

    python3 tools/session23/cache_hints.py SRC DST NAME=VARIANT...

VARIANT (each copied to DST/<name>_<variant> by session 19's copy_renamed.py, then patched):
  hopper  bfirst (B's loads evict_first), alast (A's loads evict_last), both; nopf (no prefetch of the first
          stages' B boxes before the wait for the previous grid), bfirst_nopf (both changes)
          nohint, nohint_nopf: on kernels that mark B's lines evict_first themselves (the template does where the
          weight streams once, since session 23), the plain load back (and the prefetch removed)
  gemv    gfirst (the weight's 16-byte loads evict_first)
  tcgemv  tfirst (the weight's streamed loads evict_first)
tools/session23/l2_probe.cu asks the same of the loads alone: does either keep A's lines in the near L2 partition
(call 1: ours reads 1.3 M sectors of hits across the partition fabric, cuBLAS's kernel 90 K)?"""
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


GEMV_LOAD = "__ldg(reinterpret_cast<const R*>(p + v))"
GEMV_FIRST = r'''
// The weight's loads with L2 eviction priority evict_first (tools/session23/cache_hints.py): 16-byte vectors.
template <typename R>
__device__ __forceinline__ R ldg_evict_first(const R* p) {
  if constexpr (sizeof(R) == 16) {
    uint64_t policy;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p), "l"(policy));
    return *reinterpret_cast<R*>(&v);
  } else {
    return __ldg(p);
  }
}
'''
TC_LOAD = '''  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 { %0, %1, %2, %3}, [%4];\\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));'''
TC_FIRST = '''  uint64_t policy;  // L2 eviction priority evict_first (tools/session23/cache_hints.py)
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\\n" : "=l"(policy));
  asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 { %0, %1, %2, %3}, [%4], %5;\\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p), "l"(policy));'''
PREFETCH = "tma_prefetch_2d(&tmap_b, k0, tile.n0);"


def patch(text: str, variant: str) -> str:
    if variant == "gfirst":
        assert text.count(GEMV_LOAD) == 1, "gemv load"
        at = text.index("// One chunk of B:")
        text = text[:at] + GEMV_FIRST.lstrip("\n") + "\n" + text[at:]
        return text.replace(GEMV_LOAD, GEMV_LOAD.replace("__ldg(", "ldg_evict_first("))
    if variant == "tfirst":
        assert text.count(TC_LOAD) == 1, "tcgemv load"
        return text.replace(TC_LOAD, TC_FIRST)
    if variant.startswith("nohint"):
        hinted = "tma_load_2d_evict_first(smem + B_OFFSET"
        assert text.count(hinted) == 1, "hinted load"
        text = text.replace(hinted, "tma_load_2d(smem + B_OFFSET")
        if variant == "nohint":
            return text
        variant = "nopf"
    if variant.endswith("nopf"):
        assert text.count(PREFETCH) == 1, "prefetch"
        text = text.replace(PREFETCH, "(void)k0;  // no prefetch (tools/session23/cache_hints.py)")
        if variant == "nopf":
            return text
        variant = variant.removesuffix("_nopf")
    at = text.index("// ---- wgmma. A shared-memory matrix descriptor")
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
