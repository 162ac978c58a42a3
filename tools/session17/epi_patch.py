"""Session 17 experiment: rewrite the packed (beta == 0) epilogue of every hopper kernel in generated .cu files.

  python3 tools/session17/epi_patch.py VARIANT FILE.cu...

VARIANT:
  whole   the staging tile holds the whole BN-wide tile (PACK_COLS = BN): one stmatrix pass, one barrier, one
          copy-out; warps whose 16 rows all lie past M skip their stmatrix and the copy skips rows past M.
  direct  no staging: each lane stores its accumulator pairs (rows g and g + 8, columns 8j + 2q, + 1) straight
          to C as 4-byte stores; warps past M store nothing. Needs C n-contiguous with even pitch (the bench specs).
  nostore, onechunk  timing only: without the global stores; storing the first PACK_COLS columns only.
Exits non-zero when a file has no packed branch to patch.
"""
import re
import sys

BRANCH_OPEN = "      if (beta == 0.0f) {\n"
BRANCH_ELSE = "      } else {\n"


def patch_whole(src: str) -> str:
    bn = int(re.search(r"constexpr int BM = \d+, BN = (\d+), BK = \d+;", src).group(1))
    pitch = bn + 8
    floats = 64 * pitch * 2 // 4
    src, n1 = re.subn(r"constexpr int PACK_COLS = \d+, PACK_PITCH = \d+;",
                      f"constexpr int PACK_COLS = {bn}, PACK_PITCH = {pitch};", src)
    consumers = int(re.search(r"constexpr int CONSUMERS = (\d+);", src).group(1))
    old = int(re.search(r"EPI_FLOATS = (\d+);", src).group(1))
    new = max(old, floats)
    src, n2 = re.subn(r"(constexpr int EPI_COLS = \d+, EPI_PITCH = \d+, EPI_FLOATS = )(\d+);",
                      lambda m: f"{m.group(1)}{new};", src)
    src, n5 = re.subn(r"static_assert\(SMEM_BYTES == (\d+),",
                      lambda m: f"static_assert(SMEM_BYTES == {int(m.group(1)) + consumers * (new - old) * 4},", src)
    src, n3 = re.subn(r"( +)stmatrix_x4\(smem_u32", r"\1if (row0 + warp * 16 < M_INNER) stmatrix_x4(smem_u32", src)
    src, n4 = re.subn(r"( +)vals\[u\] = \*reinterpret_cast<const uint4\*>\(tile16 \+ \(v / \(PACK_COLS / 8\)\)",
                      r"\1if (row0 + v / (PACK_COLS / 8) < M_INNER) vals[u] = *reinterpret_cast<const uint4*>"
                      r"(tile16 + (v / (PACK_COLS / 8))", src)
    assert (n1, n2, n5) == (1, 1, 1) and n3 >= 1 and n4 >= 1, (n1, n2, n3, n4)
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
    fn = {"whole": patch_whole, "direct": patch_direct, "nostore": patch_nostore, "onechunk": patch_onechunk}[variant]
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
