# ruff: noqa: E501 -- an experiment script: the C++ it splices in stays one line a statement
"""Session 9 experiment: two hand edits of a generated gemv kernel (lanes along k, M = 1, A k-contiguous), to
time what staging A costs before the template changes.

    python tools/session9/patch_gemv.py DIR vec|direct

vec:    A's K slice staged with 16-byte loads (all in flight at once) instead of 2-byte ones, 4 a round trip.
direct: no staging; each lane reads its 8 elements of A straight from global memory (L1/L2) beside B's chunk.
Writes DIR + '_' + mode (the kernel renamed after the new directory). Applies to kernels rendered at 040c9bc:
since e7e68f7 the template stages vectors itself (call 4 rendered the A/B kernels in a worktree at 040c9bc)."""
import re
import shutil
import sys
from pathlib import Path

src, mode = Path(sys.argv[1]), sys.argv[2]
name = src.name
dst = src.with_name(f"{name}_{mode}")
shutil.rmtree(dst, ignore_errors=True)
shutil.copytree(src, dst)
for p in list(dst.iterdir()):
    if p.is_file():
        text = p.read_text().replace(name, dst.name)
        p.write_text(text)
        if name in p.name:
            p.rename(p.with_name(p.name.replace(name, dst.name)))
cu = dst / f"{dst.name}.cu"
text = cu.read_text()
stage_old = re.search(r"  for \(int i = threadIdx.x; i < M \* K_SLICE; i \+= THREADS\) \{\n.*?\n  \}\n  __syncthreads\(\);\n", text, re.S)
assert stage_old, "staging loop not found"
if mode == "vec":
    new = """  if ((reinterpret_cast<unsigned long long>(A) & 15) == 0) {
    constexpr int AV = M * K_SLICE / 8, PER = (AV + THREADS - 1) / THREADS;
    uint4 v[PER];
#pragma unroll
    for (int p = 0; p < PER; ++p) {
      const int i = threadIdx.x + p * THREADS, kk = (i % (K_SLICE / 8)) * 8;
      v[p] = i < AV && kk + 8 <= k_len ? __ldg(reinterpret_cast<const uint4*>(A + a_k_offset(k0 + kk))) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int p = 0; p < PER; ++p)
      if (threadIdx.x + p * THREADS < AV) reinterpret_cast<uint4*>(xs)[threadIdx.x + p * THREADS] = v[p];
  } else {
""" + stage_old.group(0).replace("__syncthreads();\n", "").replace("\n  ", "\n    ").replace("  for (int i", "    for (int i", 1) + "  }\n  __syncthreads();\n"
    text = text.replace(stage_old.group(0), new)
elif mode == "direct":
    # the wide path (VEC == CH, taken when A and B are both 16-byte aligned) reads A from global; the narrow
    # fallback stages it as before
    text = text.replace(stage_old.group(0), "  if (VEC != CH) {\n" + stage_old.group(0) + "  }\n")
    text = text.replace("*reinterpret_cast<const typename Raw<CH * int(sizeof(A_t))>::type*>(xs + r * K_SLICE + kk);",
                        "VEC == CH ? __ldg(reinterpret_cast<const typename Raw<CH * int(sizeof(A_t))>::type*>(A + a_k_offset(k0 + kk)))"
                        " : *reinterpret_cast<const typename Raw<CH * int(sizeof(A_t))>::type*>(xs + r * K_SLICE + kk);")
    assert "if (aligned(B, 16)) return" in text
    text = text.replace("if (aligned(B, 16)) return", "if (aligned(B, 16) && aligned(A, 16)) return")
else:
    raise SystemExit(f"mode {mode}?")
cu.write_text(text)
print(dst)
