"""Session 23's variants of hopper's one-tile-a-block kernels (the 128-row decode kernel first): where do the
2.5 µs between the kernel (32.5 µs, graph-timed) and its loads alone (30 µs, tools/session22/mcast_probe.cu mode 0
with the weight) go, and does a seventh stage pay?

    python3 tools/session23/epilogue_stages.py SRC DST NAME=VARIANT...

VARIANT (each copied to DST/<name>_<variant> by session 19's copy_renamed.py, then patched):
  stN      N stages (the 128-row kernel has 6, the 16- and 64-row ones 8 of the cost model's choosing)
  eN       N stages, the epilogue's staging tiles over the drained stages (a consumer-wide barrier first: every
           wgmma has read its stage and every load has landed, since each block has one tile), which frees their
           10 KB a warpgroup: 7 stages at 128 rows, 10 at 16 and 64
  eNw      eN, and each warpgroup stages its whole 64x112 tile at once (one stmatrix pass, one barrier, one copy
           out) instead of 16 columns at a time with two barriers each
  eNt      eNw, the tile stored by one bulk tensor copy (TMA) a warpgroup, as cuBLAS's kernel stores it
  nostore  timing only, not correct: the packed epilogue without its global stores (staged, read back, dropped);
           appended to the others as _nostore (e7w_nostore)
  noepi    timing only, not correct: the epilogue skipped (the accumulators still computed)
  nomath   timing only, not correct: no wgmma (the consumers wait for each stage and release it)

Valid only for kernels whose every block has one tile (TILES <= SMs): eN and eNw static_assert TILES <= 132."""
import pathlib
import re
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "session19"))
from copy_renamed import patch_copies  # noqa: E402


def sub1(text: str, pattern: str, repl: str) -> str:
    text, n = re.subn(pattern, repl, text, count=1)
    assert n == 1, pattern
    return text


def stages(text: str, n: int) -> str:
    text = sub1(text, r"constexpr int STAGES = \d+;", f"constexpr int STAGES = {n};")
    return sub1(text, r'static_assert\(SMEM_BYTES == \d+, "planner and kernel disagree on shared memory"\);\n', "")


def epi_over_stages(text: str) -> str:
    text = sub1(text, r"constexpr int EPI_OFFSET = B_OFFSET \+ STAGES \* B_STAGE_BYTES;",
                "constexpr int EPI_OFFSET = 0;  // over the drained stages (one tile a block)")
    text = sub1(text, r"constexpr int BAR_OFFSET = EPI_OFFSET \+ CONSUMERS \* EPI_FLOATS \* 4;",
                "constexpr int BAR_OFFSET = B_OFFSET + STAGES * B_STAGE_BYTES;\n"
                "static_assert(TILES <= 132, \"the staging over the stages: every block one tile on the H200\");\n"
                "static_assert(CONSUMERS * EPI_FLOATS * 4 <= B_OFFSET + STAGES * B_STAGE_BYTES, \"staging fits\");")
    # Both consumer warpgroups past their last wgmma (each waited for every stage's load) before either writes.
    fence = "acc_fence(acc[mi]);\n"
    barrier = ('      asm volatile("bar.sync 3, %0;\\n" ::"n"(CONSUMERS * 128) : "memory");  // every stage drained\n')
    assert text.count(fence) == 1, "fence"
    return text.replace(fence, fence + barrier)


def wide(text: str) -> str:
    text = sub1(text, r"constexpr int EPI_COLS = 16, EPI_PITCH = 40, EPI_FLOATS = \d+;",
                "constexpr int EPI_COLS = 16, EPI_PITCH = 40, EPI_FLOATS = 3840;")
    return sub1(text, r"constexpr int PACK_COLS = 16, PACK_PITCH = 72;",
                "constexpr int PACK_COLS = BN, PACK_PITCH = BN + 8;")


TMA_STORE = """\
            // stmatrix's writes, seen by the TMA store (the async proxy)
            asm volatile("fence.proxy.async.shared::cta;\\n" ::: "memory");
            asm volatile("bar.sync %0, 128;\\n" ::"r"(1 + wg) : "memory");
            if (tid == 0) {  // the warpgroup's 64 x BN tile in one bulk store (clipped at C's edges)
              asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\\n"
                           ::"l"(&tmap_c), "r"(tile.n0), "r"(row0), "r"(smem_u32(tile16)) : "memory");
              asm volatile("cp.async.bulk.commit_group;\\n" ::: "memory");
              // the tile read out before the block leaves
              asm volatile("cp.async.bulk.wait_group.read 0;\\n" ::: "memory");
            }
"""
COPY_OUT = 'asm volatile("bar.sync %0, 128;\\n" ::"r"(1 + wg) : "memory");\n            // Copy out:'
COPY_END = "// staging free for the next columns\n"


def tma_store(text: str) -> str:
    """The whole tile (wide) stored by one bulk tensor copy a warpgroup: C's map passed as a fourth kernel argument,
    encoded at each launch (a graph captures it once); the tile dense ([64][BN]) as the map's box lays it out."""
    text = sub1(text, r"PACK_PITCH = BN \+ 8;", "PACK_PITCH = BN;  // dense: the TMA store's box")
    text = sub1(text, r"(C_t\* __restrict__ C, float alpha, float beta)\) \{",
                r"\1, const __grid_constant__ CUtensorMap tmap_c) {")
    start = text.index(COPY_OUT)
    start = text.rindex("\n", 0, start) + 1
    end = text.index(COPY_END, start) + len(COPY_END)
    text = text[:start] + TMA_STORE + text[end:]
    c_stride = re.search(r"\(gm\) \* (\d+) \+ static_cast<long long>\(gn\) \* 1;", text).group(1)
    dtype = re.search(r"CU_TENSOR_MAP_DATA_TYPE_\w+", text).group(0)
    encode = ("  CUtensorMap map_c;\n  {\n    const cuuint64_t dims[2] = { N_INNER, M_INNER };\n"
              f"    const cuuint64_t strides[1] = {{ {c_stride}ull * sizeof(C_t) }};\n"
              "    const cuuint32_t box[2] = { BN, 64 }, unit[2] = { 1, 1 };\n"
              f"    if (encode_tiled()(&map_c, {dtype}, 2, C, dims, strides, box, unit,\n"
              "                       CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,\n"
              "                       CU_TENSOR_MAP_L2_PROMOTION_NONE,\n"
              "                       CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS)\n"
              "      return cudaErrorInvalidValue;\n  }\n")
    launch = "  return cudaLaunchKernelEx(&config, "
    at = text.index(launch, text.index("tmap_c"))
    end = text.index("alpha, beta);", at)
    return text[:at] + encode + text[at:end] + "alpha, beta, map_c);" + text[end + len("alpha, beta);"):]


def no_store(text: str) -> str:
    return sub1(text, r"(                __stwb\(reinterpret_cast<uint4\*>\(p\), vals\[u\]\);)",
                r"                if (alpha == 1234.5f)\n  \1")


def patch(text: str, variant: str) -> str:
    m = re.fullmatch(r"(st|e)(\d+)(w|t)?(_nostore)?", variant)
    if m:
        text = stages(text, int(m.group(2)))
        if m.group(1) == "e":
            text = epi_over_stages(text)
        text = wide(text) if m.group(3) else text
        text = tma_store(text) if m.group(3) == "t" else text
        return no_store(text) if m.group(4) else text
    if variant == "nostore":
        return no_store(text)
    if variant == "noepi":
        return sub1(text, r"      if \(beta == 0\.0f\) \{\n",
                    "      if (alpha != 1234.5f) {\n      } else if (beta == 0.0f) {\n")
    if variant == "nomath":
        return sub1(text, r"            wgmma_m64n\d+k16\(acc\[mi\], [^\n]*\n", "            ;  // nomath\n")
    raise SystemExit(f"unknown variant {variant}")


if __name__ == "__main__":
    patch_copies(pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3:], patch, lambda v: f"_{v}")
