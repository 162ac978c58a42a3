"""Issue 43's model-level check: a Llama-style MLP block (y = down(silu(gate(x)) * up(x)), no biases) with every
nn.Linear swapped by deepgemm.torch.replace_linear, against the same block on torch's own nn.Linear (cuBLAS), in
one process on one GPU.

For each token count: the forward output and every gradient (x, the three weights) of both sides against an f32
copy of the block (relative Frobenius error), then the time of forward + backward and of the forward alone (no
grad: inference), each side captured in a CUDA graph and replayed, in the order ours, torch, torch, ours over
ROUNDS rounds (median of each side). The weights (3 x d x ffn, 352 MB in bf16 at d 4096, ffn 14336) exceed the
L2 (50 MB on an H200), so every replay streams them from HBM; no rotation of inputs is needed.

The kernels are built first, all at once on a thread pool (nvcc runs in parallel), then loaded from the cache.

    PYTHONPATH=. python3 tools/torch_mlp_bench.py [--d 4096] [--ffn 14336] [--tokens 1,16,4096] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import torch
from torch import nn

import deepgemm.torch as dgt
from deepgemm import KernelCallError
from deepgemm.torch.ops import GRAD_INPUT_EQUATION, GRAD_WEIGHT_EQUATION, LINEAR_EQUATION


class MLP(nn.Module):
    def __init__(self, d: int, ffn: int, dtype: torch.dtype, device: str) -> None:
        super().__init__()
        self.gate = nn.Linear(d, ffn, bias=False, dtype=dtype, device=device)
        self.up = nn.Linear(d, ffn, bias=False, dtype=dtype, device=device)
        self.down = nn.Linear(ffn, d, bias=False, dtype=dtype, device=device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.nn.functional.silu(self.gate(x)) * self.up(x))


def prebuild(d: int, ffn: int, tokens: list[int], dtype: torch.dtype, workers: int) -> float:
    """Every kernel the block's forward and backward take at these token counts, built in parallel: the products
    whose rows are the tokens with rows="dynamic" (a kernel a range of token counts, as "auto" takes once the
    count changes), dW (tokens are its K) at each count. Returns the seconds it took."""
    def r(*shape):
        return torch.randn(*shape, device="cuda", dtype=dtype)

    jobs = []
    for t in tokens:
        x, h, gy, g = r(t, d), r(t, ffn), r(t, d), r(t, ffn)
        wg, wd = r(ffn, d), r(d, ffn)
        jobs += [(LINEAR_EQUATION, x, wg, "dynamic"), (LINEAR_EQUATION, h, wd, "dynamic"),
                 (GRAD_INPUT_EQUATION, gy, wd, "dynamic"), (GRAD_INPUT_EQUATION, g, wg, "dynamic"),
                 (GRAD_WEIGHT_EQUATION, gy, h, "static"), (GRAD_WEIGHT_EQUATION, g, x, "static")]
    start = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        for f in [pool.submit(dgt.einsum, eq, a, b, rows=rows) for eq, a, b, rows in jobs]:
            f.result()
    torch.cuda.synchronize()
    return time.perf_counter() - start


def rel(got: torch.Tensor, want: torch.Tensor) -> float:
    if torch.isnan(got).any():
        return float("nan")
    return ((got.double() - want.double()).norm() / want.double().norm()).item()


def step(model: nn.Module, x: torch.Tensor, gy: torch.Tensor) -> torch.Tensor:
    y = model(x)
    y.backward(gy)
    return y


def grads(model: MLP, x: torch.Tensor) -> list[torch.Tensor]:
    return [x.grad, model.gate.weight.grad, model.up.weight.grad, model.down.weight.grad]


def check(ours: MLP, ref: MLP, f32: MLP, x: torch.Tensor, gy: torch.Tensor) -> dict:
    """Relative errors of both sides' output and gradients against the f32 block on the same data."""
    results = {}
    outs = {}
    for name, model, dtype in (("ours", ours, x.dtype), ("torch", ref, x.dtype), ("f32", f32, torch.float32)):
        model.zero_grad(set_to_none=True)
        xi = x.detach().to(dtype).requires_grad_()
        y = step(model, xi, gy.to(dtype))
        outs[name] = [y.detach()] + [g.detach() for g in grads(model, xi)]
    names = ["y", "dx", "dw_gate", "dw_up", "dw_down"]
    for side in ("ours", "torch"):
        results[side] = {n: rel(g, w) for n, g, w in zip(names, outs[side], outs["f32"])}
    return results


def graph_of(fn, reset) -> torch.cuda.CUDAGraph:
    """`fn` captured after two runs outside the graph (kernels built and loaded); `reset()` drops the gradients
    those runs left, so that the captured backward writes fresh ones rather than adding into old ones.

    Each graph is captured on a stream of its own, with the thread's cuBLAS workspaces dropped first, so that
    cuBLAS allocates the workspace the graph records in the graph's own pool: torch 2.11 keys its cuBLAS
    workspaces by stream and frees a stream's when a graph captured on it is destroyed, which left the next graph
    captured on the shared capture stream replaying into freed memory (an illegal address in cuBLAS's kernels, with
    torch's own Linear on both sides too; pytorch/pytorch#193402)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    reset()
    torch.cuda.synchronize()
    torch._C._cuda_clearCublasWorkspaces()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        fn()
    return graph


def time_graph(graph: torch.cuda.CUDAGraph, replays: int) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(replays):
        graph.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1000 / replays


def settled(what: str) -> None:
    """Synchronize and say `what` finished: an asynchronous fault then stops at the graph that caused it."""
    torch.cuda.synchronize()
    print(f"  {what}: ok", file=sys.stderr, flush=True)


def bench(ours: MLP, ref: MLP, x: torch.Tensor, gy: torch.Tensor, rounds: int, replays: int,
          sync_each: bool = False) -> dict:
    out = {}
    for mode in ("fwd_bwd", "fwd"):
        graphs = {}
        for name, model in (("ours", ours), ("torch", ref)):
            print(f"tokens {x.shape[0]}, {mode}: capturing {name}", file=sys.stderr, flush=True)
            xi = x.detach().clone().requires_grad_(mode == "fwd_bwd")

            def reset(m=model, xi=xi):
                m.zero_grad(set_to_none=True)
                xi.grad = None

            if mode == "fwd_bwd":
                graphs[name] = graph_of(lambda m=model, xi=xi: step(m, xi, gy), reset)
            else:
                def forward(m=model, xi=xi):
                    with torch.no_grad():
                        m(xi)
                graphs[name] = graph_of(forward, reset)
            if sync_each:
                settled(f"{name}'s warm-up and capture")
        times = {"ours": [], "torch": []}
        print(f"tokens {x.shape[0]}, {mode}: replaying", file=sys.stderr, flush=True)
        for _ in range(rounds):
            for name in ("ours", "torch", "torch", "ours"):
                graphs[name].replay()  # one untimed replay: the clocks of this side's kernels
                times[name].append(time_graph(graphs[name], replays))
                if sync_each:
                    settled(f"{name}'s replays")
        ours_us, torch_us = statistics.median(times["ours"]), statistics.median(times["torch"])
        spread = {k: (max(v) - min(v)) / statistics.median(v) for k, v in times.items()}
        out[mode] = {"ours_us": ours_us, "torch_us": torch_us, "ratio": torch_us / ours_us, "spread": spread}
        del graphs
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--d", type=int, default=4096)
    p.add_argument("--ffn", type=int, default=14336)
    p.add_argument("--tokens", default="1,16,4096")
    p.add_argument("--dtype", default="bf16", choices=("bf16", "f16"))
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--replays", type=int, default=10)
    p.add_argument("--workers", type=int, default=16, help="parallel kernel builds")
    p.add_argument("--check-only", action="store_true",
                   help="errors only, no CUDA graphs or timing (e.g. under compute-sanitizer with "
                        "PYTORCH_NO_CUDA_MEMORY_CACHING=1, so that each tensor is an allocation of its own)")
    p.add_argument("--sync-each", action="store_true",
                   help="synchronize after each side's capture and replays, so that a fault names its graph")
    p.add_argument("--json", help="write the results here")
    args = p.parse_args()
    dtype = {"bf16": torch.bfloat16, "f16": torch.float16}[args.dtype]
    tokens = [int(t) for t in args.tokens.split(",")]
    torch.manual_seed(0)
    ref = MLP(args.d, args.ffn, dtype, "cuda")
    with torch.no_grad():
        for w in ref.parameters():
            w.copy_(torch.randn_like(w) / args.d ** 0.5)  # unit-variance outputs at each layer
    ours = dgt.replace_linear(copy.deepcopy(ref))
    f32 = copy.deepcopy(ref).float()
    built = prebuild(args.d, args.ffn, tokens, dtype, args.workers)
    print(f"kernels built in {built:.0f} s", file=sys.stderr)
    rows = []
    for t in tokens:
        x = torch.randn(t, args.d, device="cuda", dtype=dtype)
        gy = torch.randn(t, args.d, device="cuda", dtype=dtype)
        try:
            errors = check(ours, ref, f32, x, gy)
            timing = {} if args.check_only else bench(ours, ref, x, gy, args.rounds, args.replays, args.sync_each)
        except KernelCallError as err:  # a kernel refused its call: report it, go on with the next count
            rows.append({"tokens": t, "error": str(err)})
            continue
        rows.append({"tokens": t, "errors": errors, **timing})
    result = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "d": args.d, "ffn": args.ffn,
              "dtype": args.dtype, "build_s": built, "method": "CUDA graph of one fwd(+bwd), replayed "
              f"{args.replays}x between events, {args.rounds} rounds ours/torch/torch/ours, median", "rows": rows}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    print(f"{'tokens':>6} {'fwd+bwd ours us':>16} {'torch us':>9} {'ratio':>6} {'fwd ours us':>12} {'torch us':>9} "
          f"{'ratio':>6}  max rel err ours / torch (vs f32)")
    for r in rows:
        if "error" in r:
            print(f"{r['tokens']:>6} failed: {r['error']}")
            continue
        eo, et = max(r["errors"]["ours"].values()), max(r["errors"]["torch"].values())
        if args.check_only:
            print(f"{r['tokens']:>6} max rel err ours / torch (vs f32): {eo:.2e} / {et:.2e}")
            continue
        print(f"{r['tokens']:>6} {r['fwd_bwd']['ours_us']:>16.1f} {r['fwd_bwd']['torch_us']:>9.1f} "
              f"{r['fwd_bwd']['ratio']:>6.2f} {r['fwd']['ours_us']:>12.1f} {r['fwd']['torch_us']:>9.1f} "
              f"{r['fwd']['ratio']:>6.2f}  {eo:.2e} / {et:.2e}")
    measured = [r for r in rows if "error" not in r]
    worst = max((max(r["errors"]["ours"].values()) / max(max(r["errors"]["torch"].values()), 1e-3)
                 for r in measured), default=0.0)
    return 0 if worst <= 1.5 and len(measured) == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
