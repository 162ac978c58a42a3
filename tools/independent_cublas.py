"""An independent check of `deepgemm bench`'s baseline, through PyTorch (its own cuBLAS calls),
timed the same way: many calls captured into one CUDA graph, inputs rotated past L2, replays timed
with CUDA events, median per call. Run on a GPU machine: `python3 tools/independent_cublas.py [--json F]`.

Cases: decode, square and 1x1-convolution problems of specs/bench (listed in main).
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch

L2_BYTES = 60 * 2**20


def graph_us(fn, sets: list, reps: int = 30) -> float:
    """Median µs per call of fn(*set) over graph replays that rotate through `sets`."""
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        for s in sets:  # warm-up outside capture (cuBLAS handle, workspace, heuristics)
            fn(*s)
    torch.cuda.synchronize()
    est_start, est_end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    est_start.record()
    for s in sets:
        fn(*s)
    est_end.record()
    torch.cuda.synchronize()
    per_call = max(est_start.elapsed_time(est_end) * 1000 / len(sets), 0.5)
    rotations = max(1, int(2000 / (per_call * len(sets))) + 1)
    launches = min(rotations * len(sets), max(4096 // len(sets), 1) * len(sets))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        for i in range(launches):
            fn(*sets[i % len(sets)])
    for _ in range(2):
        graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        graph.replay()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b) * 1000 / launches)
    return statistics.median(times)


def nsets(bytes_per_set: int) -> int:
    return max(1, min(64, -(-3 * L2_BYTES // bytes_per_set)))


def linear_case(m: int, n: int, k: int, dtype) -> dict:
    """y = x W^T with W in nn.Linear layout [n, k]: torch.nn.functional.linear -> one cuBLAS GEMM."""
    per = (m * k + n * k + m * n) * 2
    sets = [(torch.randn(m, k, device="cuda", dtype=dtype), torch.randn(n, k, device="cuda", dtype=dtype),
             torch.empty(m, n, device="cuda", dtype=dtype)) for _ in range(nsets(per))]
    us = graph_us(lambda x, w, y: torch.matmul(x, w.t(), out=y), sets)
    return {"case": f"[{m},{k}]x[{k},{n}] {str(dtype).split('.')[-1]} (B as nn.Linear [N,K])", "us": us}


def conv_case(n: int, c: int, hw: int, k: int, dtype) -> dict:
    """out[n] = W . X[n] over NCHW viewed as [n, c, hw]: a strided-batched cuBLAS call, no copy."""
    per = (n * c * hw + k * c + n * k * hw) * 2
    sets = [(torch.randn(n, c, hw, device="cuda", dtype=dtype), torch.randn(k, c, device="cuda", dtype=dtype),
             torch.empty(n, k, hw, device="cuda", dtype=dtype)) for _ in range(nsets(per))]
    us = graph_us(lambda x, w, y: torch.matmul(w, x, out=y), sets)
    return {"case": f"nchw,kc->nkhw n={n} c={c} hw={hw} k={k} {str(dtype).split('.')[-1]} (batched, no copy)",
            "us": us}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", help="also write the rows here")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    rows = [
        linear_case(1, 128, 4096, torch.float16),
        linear_case(1, 512, 2048, torch.float16),
        linear_case(1, 4096, 4096, torch.float16),
        linear_case(1, 14336, 4096, torch.float16),
        linear_case(16, 14336, 4096, torch.float16),
        conv_case(8, 256, 3136, 512, torch.bfloat16),
        conv_case(32, 64, 3136, 64, torch.bfloat16),
        linear_case(4096, 4096, 4096, torch.bfloat16),
    ]
    for r in rows:
        print(f"{r['us']:10.2f} us  {r['case']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
