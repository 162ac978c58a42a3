"""Session 19 experiment: launch the primary kernel of a generated .cu (the first __global__ and the first <<<...>>>
launch: the chosen family's, ahead of the cta fallback) as a programmatic dependent launch.

    python3 tools/session19/pdl_patch.py MODE FILE.cu...

MODE:
  start  griddepcontrol.wait as the kernel's first statement, then griddepcontrol.launch_dependents at once
  exit   the wait only: the next grid is let in as each block exits (the implicit trigger)
  after  the wait first; the trigger before the marked line given by --after REGEX's first match in the kernel
The launch becomes cudaLaunchKernelEx with cudaLaunchAttributeProgrammaticStreamSerialization. Exits non-zero
when a file has no plain launch or kernel to patch.
"""
import re
import sys

WAIT = '  asm volatile("griddepcontrol.wait;\\n" ::: "memory");  // session 19 PDL patch\n'
TRIGGER = '  asm volatile("griddepcontrol.launch_dependents;\\n" ::: "memory");  // session 19 PDL patch\n'


def body_start(src: str) -> int:
    """Index just past the '{' that opens the first __global__ function's body."""
    g = src.index("__global__")
    paren = src.index("(", src.index("_kernel", g))
    depth = 0
    for i in range(paren, len(src)):
        if src[i] == "(":
            depth += 1
        elif src[i] == ")":
            depth -= 1
            if depth == 0:
                return src.index("{", i) + 1
    raise ValueError("no kernel body")


def patch_launch(src: str) -> str:
    m = re.search(r"^( *)([\w:<>, ]+?)<<<([^,]+), ([^,]+), ([^,]+), stream>>>\((.*)\);\n"
                  r"( *return cudaGetLastError\(\);\n)?", src, re.M)
    if not m:
        raise ValueError("no plain launch")
    if "namespace cta {" in src and m.start() > src.index("namespace cta {") and not src.startswith("namespace cta {"):
        raise ValueError("the first plain launch is the cta fallback's (the primary family launches otherwise)")
    ind, fn, grid, threads, smem, args = m.group(1, 2, 3, 4, 5, 6)
    new = (f"{ind}{{  // session 19 PDL patch\n"
           f"{ind}  cudaLaunchConfig_t cfg = {{}};\n"
           f"{ind}  cfg.gridDim = dim3({grid});\n{ind}  cfg.blockDim = dim3({threads});\n"
           f"{ind}  cfg.dynamicSmemBytes = {smem};\n{ind}  cfg.stream = stream;\n"
           f"{ind}  cudaLaunchAttribute at[1];\n"
           f"{ind}  at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;\n"
           f"{ind}  at[0].val.programmaticStreamSerializationAllowed = 1;\n"
           f"{ind}  cfg.attrs = at;\n{ind}  cfg.numAttrs = 1;\n"
           f"{ind}  return cudaLaunchKernelEx(&cfg, {fn}, {args});\n{ind}}}\n")
    return src[:m.start()] + new + src[m.end():]


def patch(src: str, mode: str, after: str | None) -> str:
    if "session 19 PDL patch" in src:
        raise ValueError("already patched")
    b = body_start(src)
    if "namespace cta {" in src and b > src.index("namespace cta {"):
        raise ValueError("the first kernel is the cta fallback's")
    head = WAIT + (TRIGGER if mode == "start" else "")
    src = src[:b] + "\n" + head + src[b:]
    if mode == "after":
        m = re.compile(after, re.M).search(src, b)
        if not m:
            raise ValueError(f"no match for {after!r}")
        line = src.rindex("\n", 0, m.start()) + 1
        src = src[:line] + TRIGGER + src[line:]
    return patch_launch(src)


def main(argv: list[str]) -> int:
    mode, files = argv[0], argv[1:]
    after = None
    if files and files[0] == "--after":
        after, files = files[1], files[2:]
    rc = 0
    for f in files:
        try:
            text = open(f).read()
            open(f, "w").write(patch(text, mode, after))
            print(f"{f}: PDL {mode}")
        except ValueError as e:
            print(f"{f}: {e}")
            rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
