"""Session 17 experiment: rewrite the packed (beta == 0) epilogue of every hopper kernel in generated .cu files.

  python3 tools/session17/epi_patch.py VARIANT FILE.cu...

VARIANT:
  whole   the staging tile holds the whole BN-wide tile (PACK_COLS = BN): one stmatrix pass, one barrier, one
          copy-out; warps whose 16 rows all lie past M skip their stmatrix and the copy skips rows past M.
  direct  no staging: each lane stores its accumulator pairs (rows g and g + 8, columns 8j + 2q, + 1) straight
          to C as 4-byte stores; warps past M store nothing. Needs C n-contiguous with even pitch (the bench specs).
  tmastore  the whole tile staged dense, one TMA bulk tensor store a warpgroup (a C tensor map passed in).
  nostore, onechunk  timing only: without the global stores; storing the first PACK_COLS columns only.
Exits non-zero when a file has no packed branch to patch.
"""
import re
import sys

BRANCH_OPEN = "      if (beta == 0.0f) {\n"
BRANCH_ELSE = "      } else {\n"


def _grow_staging(src: str, floats: int) -> str:
    """EPI_FLOATS raised to at least `floats` a consumer warpgroup, and the planner's shared-memory assert with it."""
    consumers = int(re.search(r"constexpr int CONSUMERS = (\d+);", src).group(1))
    old = int(re.search(r"EPI_FLOATS = (\d+);", src).group(1))
    new = max(old, floats)
    src, n1 = re.subn(r"(constexpr int EPI_COLS = \d+, EPI_PITCH = \d+, EPI_FLOATS = )(\d+);",
                      lambda m: f"{m.group(1)}{new};", src)
    src, n2 = re.subn(r"static_assert\(SMEM_BYTES == (\d+),",
                      lambda m: f"static_assert(SMEM_BYTES == {int(m.group(1)) + consumers * (new - old) * 4},", src)
    assert (n1, n2) == (1, 1), (n1, n2)
    return src


def patch_whole(src: str) -> str:
    bn = int(re.search(r"constexpr int BM = \d+, BN = (\d+), BK = \d+;", src).group(1))
    pitch = bn + 8
    floats = 64 * pitch * 2 // 4
    src, n1 = re.subn(r"constexpr int PACK_COLS = \d+, PACK_PITCH = \d+;",
                      f"constexpr int PACK_COLS = {bn}, PACK_PITCH = {pitch};", src)
    src = _grow_staging(src, floats)
    src, n3 = re.subn(r"( +)stmatrix_x4\(smem_u32", r"\1if (row0 + warp * 16 < M_INNER) stmatrix_x4(smem_u32", src)
    src, n4 = re.subn(r"( +)vals\[u\] = \*reinterpret_cast<const uint4\*>\(tile16 \+ \(v / \(PACK_COLS / 8\)\)",
                      r"\1if (row0 + v / (PACK_COLS / 8) < M_INNER) vals[u] = *reinterpret_cast<const uint4*>"
                      r"(tile16 + (v / (PACK_COLS / 8))", src)
    assert n1 == 1 and n3 >= 1 and n4 >= 1, (n1, n3, n4)
    return src


def patch_nostore(src: str) -> str:
    """Timing only (C is not written): the packed epilogue without its global stores (the copy-out's loads kept)."""
    src, n = re.subn(r"__stwb\(reinterpret_cast<uint4\*>\(p\), vals\[u\]\);",
                     'asm volatile("" ::"r"(vals[u].x), "r"(vals[u].y), "r"(vals[u].z), "r"(vals[u].w));', src)
    src, n2 = re.subn(r"if \(gn \+ x < N_INNER\) p\[x\] = e\[x\];",
                      'asm volatile("" ::"h"(*(const unsigned short*)&e[x]));', src)
    assert (n, n2) == (1, 1), (n, n2)
    return src


def patch_onechunk(src: str) -> str:
    """Timing only (C is partly written): the packed epilogue storing its first PACK_COLS columns only."""
    src, n = re.subn(r"if \(gm >= M_INNER \|\| gn >= N_INNER\) continue;\n(\s+C_t\* const p = C)",
                     r"if (nc > 0 || gm >= M_INNER || gn >= N_INNER) continue;\n\1", src)
    assert n == 2, n  # the packed branch and the f32 staging branch (beta != 0, not timed)
    return src


def patch_tmastore(src: str) -> str:
    """The whole BN-wide tile staged dense (pitch BN) by stmatrix, then one TMA bulk tensor store a warpgroup
    (rows past M and columns past N clipped by the map); the kernel takes a third tensor map, of C, that the launch
    encodes each call. Needs C n-contiguous and 16-byte aligned rows (the bench specs)."""
    bn = int(re.search(r"constexpr int BM = \d+, BN = (\d+), BK = \d+;", src).group(1))
    src = _grow_staging(src, 64 * bn * 2 // 4)
    src, n3 = re.subn(r"const __grid_constant__ CUtensorMap tmap_b,",
                      "const __grid_constant__ CUtensorMap tmap_b, const __grid_constant__ CUtensorMap tmap_c,", src)
    start = src.index(BRANCH_OPEN) + len(BRANCH_OPEN)
    end = src.index(BRANCH_ELSE, start)
    ldc = int(re.search(r"static_cast<long long>\(gm\) \* (\d+) \+ static_cast<long long>\(gn\) \* 1;",
                        src[start:end]).group(1))
    body = """        // TMA store: the whole tile staged dense ([row][BN]) by stmatrix, then one bulk tensor store.
        C_t* const tile16 = reinterpret_cast<C_t*>(epi);
        const int line = lane % 8, half = (lane / 8) % 2, c8 = lane / 16;
        #pragma unroll
        for (int mi = 0; mi < MI; ++mi) {
          const int row0 = tile.m0 + wg * WG_M + mi * 64;
          if (row0 + warp * 16 < M_INNER) {
        #pragma unroll
            for (int j = 0; j < BN / 16; ++j) {
              const int i = 2 * j * 4;
              const int row = warp * 16 + 8 * half + line, col = 16 * j + 8 * c8;
              stmatrix_x4(smem_u32(tile16 + row * BN + col),
                          out_pair(acc[mi][i], acc[mi][i + 1], alpha),
                          out_pair(acc[mi][i + 2], acc[mi][i + 3], alpha),
                          out_pair(acc[mi][i + 4], acc[mi][i + 5], alpha),
                          out_pair(acc[mi][i + 6], acc[mi][i + 7], alpha));
            }
          }
          asm volatile("fence.proxy.async.shared::cta;\\n" ::: "memory");
          asm volatile("bar.sync %0, 128;\\n" ::"r"(1 + wg) : "memory");
          if (tid == 0) {
            asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\\n"
                         ::"l"(&tmap_c), "r"(smem_u32(tile16)), "r"(tile.n0), "r"(row0) : "memory");
            asm volatile("cp.async.bulk.commit_group;\\n" ::: "memory");
            asm volatile("cp.async.bulk.wait_group.read 0;\\n" ::: "memory");
          }
          asm volatile("bar.sync %0, 128;\\n" ::"r"(1 + wg) : "memory");
        }
"""
    src = src[:start] + body + src[end:]
    dtype = re.search(r"bool encode_b\(.*?(CU_TENSOR_MAP_DATA_TYPE_\w+)", src, flags=re.S).group(1)
    encode_c = f"""// C: 2-d tensor map (n, m), no swizzle, for the epilogue's bulk store (session 17 experiment).
bool encode_c(CUtensorMap* map, void* view, cuuint64_t m_inner) {{
  const cuuint64_t dims[2] = {{ {ldc}ull, m_inner }};
  const cuuint64_t strides[1] = {{ {ldc * 2}ull }};  // bytes
  const cuuint32_t box[2] = {{ {bn}, 64 }};
  const cuuint32_t unit[2] = {{ 1, 1 }};
  return encode_tiled()(map, {dtype}, 2, view, dims, strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE,
                        CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}}

"""
    src, n4 = re.subn(r"(// Tensor maps depend only on)", encode_c.replace("\\", "\\\\") + r"\1", src, count=1)
    launch = re.search(r"  return cudaLaunchKernelEx\(&config, (\w+), map_a, map_b, C, (m_inner, )?", src)
    rows = "m_inner" if launch.group(2) else "M_INNER"
    encode = f"  CUtensorMap map_c;\n  if (!encode_c(&map_c, C, {rows})) return cudaErrorInvalidValue;\n"
    call = src[launch.start():launch.end()].replace("map_a, map_b, C,", "map_a, map_b, map_c, C,")
    src = src[:launch.start()] + encode + call + src[launch.end():]
    assert (n3, n4) == (1, 1), (n3, n4)
    return src


def patch_direct(src: str) -> str:
    start = src.index(BRANCH_OPEN) + len(BRANCH_OPEN)
    end = src.index(BRANCH_ELSE, start)
    body = src[start:end]
    ptr = re.search(r"C_t\* const p = (.*);\n", body).group(1)
    new = f"""        // Direct store: each lane's accumulator pairs straight to C (4-byte stores); warps past M skip.
        #pragma unroll
        for (int mi = 0; mi < MI; ++mi) {{
          const int row0 = tile.m0 + wg * WG_M + mi * 64;
          if (row0 + warp * 16 < M_INNER) {{
        #pragma unroll
            for (int j = 0; j < BN / 8; ++j) {{
              const int gn = tile.n0 + 8 * j + 2 * q;
        #pragma unroll
              for (int h = 0; h < 2; ++h) {{
                const int gm = row0 + warp * 16 + g + 8 * h;
                if (gm >= M_INNER || gn >= N_INNER) continue;
                C_t* const p = {ptr};
                const uint32_t pair = out_pair(acc[mi][4 * j + 2 * h], acc[mi][4 * j + 2 * h + 1], alpha);
                if (gn + 2 <= N_INNER) __stwb(reinterpret_cast<unsigned int*>(p), pair);
                else p[0] = *reinterpret_cast<const C_t*>(&pair);
              }}
            }}
          }}
        }}
"""
    return src[:start] + new + src[end:]


def main() -> int:
    variant, files = sys.argv[1], sys.argv[2:]
    fn = {"whole": patch_whole, "direct": patch_direct, "nostore": patch_nostore, "onechunk": patch_onechunk,
          "tmastore": patch_tmastore}[variant]
    for path in files:
        src = open(path).read()
        parts = re.split(r"(?m)(^namespace \w*hopper \{\n.*?^\}  // namespace \w*hopper\n)", src, flags=re.S)
        hopper = [i for i in range(1, len(parts), 2) if BRANCH_OPEN in parts[i]]
        if not hopper:
            print(f"{path}: no hopper kernel with a packed branch", file=sys.stderr)
            return 1
        for i in hopper:
            parts[i] = fn(parts[i])
        open(path, "w").write("".join(parts))
        print(f"{path}: {variant} epilogue in {len(hopper)} hopper kernel(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
