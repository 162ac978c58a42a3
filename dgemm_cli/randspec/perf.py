"""Random realistic problems for the performance suite (`deepgemm random-specs --perf`): what users run, drawn
across model sizes, token counts and layouts, to bench the model's untuned pick against cuBLAS. Each spec's name
starts with its class (`perf_<class>_<n>`), which the suite's summary groups by.

Classes (PERF_CLASSES, with their weights):
- llm: a transformer's projections (q/k/v with GQA, o, gate/up, down; MLA's low-rank ones) in nn.Linear's layout
  (A [tokens, in], B the weight [out, in], C [tokens, out]), hidden 2048..16384, ffn 8/3 .. 4x rounded to 256, tokens
  from decode (1..64) through prefill (up to 8192); bf16 or f16.
- llm_train: the same layers' backward: dX = dY W (B [out, in] n-contiguous) and dW = dY^T X (both operands
  mn-contiguous; K = the tokens).
- skinny: large M with N <= 256 (routers, small heads, LoRA's down projection).
- moe: a batch of experts, each [tokens_e, d] x [ffn_e, d]^T, experts 8..64, tokens per expert 16..512.
- attn: attention's two batched products over the heads in place: scores `bshd,bthd->bhst` and the values
  `bhst,bthd->bshd`, batch 1..8, heads 8..64, sequences 128..4096, head dim 64 or 128.
- conv: 1x1 convolutions, NCHW (`nchw,kc->nkhw`) and NHWC (`nhwc,kc->nhwk`), channels 64..1024, 7..56 pixels.
- f32: f32 GEMMs (no TF32) with A, B and C each row- or column-major.
- square: bf16 / f16 squares and near-squares of 1024..8192 with the layouts varied.

Sizes are redrawn until a problem is at most PERF_MAX_FLOPS (a few milliseconds on an H200) and moves at least a
megabyte (below that, launch time is what a bench measures)."""

from __future__ import annotations

import random
from typing import Any

PERF_MAX_FLOPS = 3e12
PERF_MIN_BYTES = 1 << 20
HIDDEN = (2048, 2560, 3072, 4096, 5120, 6144, 7168, 8192, 12288, 16384)
HEAD_DIMS = (64, 128)
PERF_CLASSES = {"llm": 0.30, "llm_train": 0.12, "skinny": 0.08, "moe": 0.10, "attn": 0.12, "conv": 0.10,
                "f32": 0.08, "square": 0.10}


def perf_specs(count: int, seed: int) -> list[dict[str, Any]]:
    """`count` realistic problems, the same for the same seed."""
    rng = random.Random(seed)
    names, weights = zip(*PERF_CLASSES.items())
    out = []
    for i in range(count):
        kind = rng.choices(names, weights)[0]
        while True:
            spec = DRAWS[kind](rng)
            if _flops(spec) <= PERF_MAX_FLOPS and _bytes(spec) >= PERF_MIN_BYTES:
                break
        out.append({"name": f"perf_{kind}_{i:04d}", **spec})
    return out


def _tokens(rng: random.Random) -> int:
    """Decode (1..64), a batch of requests (65..1024), or a prefill (1024..8192), each about a third."""
    band = rng.random()
    if band < 0.35:
        return rng.choice([1, 2, 4, 8, 16, 32, 64, rng.randint(1, 64)])
    if band < 0.65:
        return rng.choice([128, 256, 512, rng.randint(65, 1024)])
    return rng.choice([1024, 2048, 4096, 8192, rng.randint(1024, 8192)])


def _ffn(rng: random.Random, d: int) -> int:
    ratio = rng.choice([8 / 3, 3.5, 4.0])
    return int(round(d * ratio / 256)) * 256


def _projection(rng: random.Random) -> tuple[int, int]:
    """(in, out) of one of a transformer's linear layers."""
    d = rng.choice(HIDDEN)
    head = rng.choice(HEAD_DIMS)
    heads = d // head
    kv = rng.choice([heads, max(1, heads // 4), max(1, heads // 8)])
    ffn = _ffn(rng, d)
    layer = rng.choice(["qkv", "o", "gate_up", "down", "mla_q_a", "mla_kv_a", "mla_q_b", "mla_kv_b"])
    return {
        "qkv": (d, (heads + 2 * kv) * head),
        "o": (d, d),
        "gate_up": (d, rng.choice([ffn, 2 * ffn])),
        "down": (ffn, d),
        "mla_q_a": (d, 1536),
        "mla_kv_a": (d, 576),
        "mla_q_b": (1536, heads * 192),
        "mla_kv_b": (512, heads * 256),
    }[layer]


def _dtype(rng: random.Random) -> str:
    return rng.choice(["bf16", "bf16", "f16"])


def _gemm(m: int, n: int, k: int, dtype: str, a: str, b: str, c: str) -> dict[str, Any]:
    return {"dtype": dtype, "gemm": {"m": m, "n": n, "k": k},
            "operands": {"A": {"layout": a}, "B": {"layout": b}, "C": {"layout": c}}}


def _llm(rng: random.Random) -> dict[str, Any]:
    k, n = _projection(rng)
    return _gemm(_tokens(rng), n, k, _dtype(rng), "row", "col", "row")


def _llm_train(rng: random.Random) -> dict[str, Any]:
    k, n = _projection(rng)
    tokens = rng.choice([512, 1024, 2048, 4096, 8192])
    if rng.random() < 0.5:  # dX [tokens, in] = dY [tokens, out] W [out, in]
        return _gemm(tokens, k, n, _dtype(rng), "row", "row", "row")
    # dW [out, in] = dY^T X: dY^T is [out, tokens] with out contiguous, X [tokens, in] with in contiguous
    return _gemm(n, k, tokens, _dtype(rng), "col", "row", "row")


def _skinny(rng: random.Random) -> dict[str, Any]:
    m = rng.choice([2048, 4096, 8192, 16384, rng.randint(2048, 16384)])
    n = rng.choice([8, 16, 32, 64, 128, 160, 256, rng.randint(8, 256)])
    k = rng.choice(HIDDEN[:8])
    return _gemm(m, n, k, _dtype(rng), "row", rng.choice(["col", "row"]), "row")


def _moe(rng: random.Random) -> dict[str, Any]:
    experts = rng.choice([8, 16, 32, 64])
    tokens = rng.choice([16, 32, 64, 128, 256, 512])
    d = rng.choice([2048, 4096, 5120, 7168])
    ffn = rng.choice([1408, 1536, 2048, 2560, 4096])
    k, n = (d, ffn) if rng.random() < 0.6 else (ffn, d)
    return {"dtype": _dtype(rng), "contraction": "emk,enk->emn", "sizes": {"e": experts, "m": tokens, "n": n, "k": k},
            "operands": {"A": {}, "B": {}, "C": {}}}


def _attn(rng: random.Random) -> dict[str, Any]:
    b, h, d = rng.choice([1, 2, 4, 8]), rng.choice([8, 16, 32, 64]), rng.choice(HEAD_DIMS)
    s = rng.choice([128, 256, 512, 1024, 2048, 4096])
    t = s if rng.random() < 0.7 else rng.choice([1024, 2048, 4096])
    sizes = {"b": b, "s": s, "t": t, "h": h, "d": d}
    if rng.random() < 0.5:
        return {"dtype": _dtype(rng), "contraction": "bshd,bthd->bhst", "sizes": sizes,
                "operands": {"A": {}, "B": {}, "C": {}}}
    return {"dtype": _dtype(rng), "contraction": "bhst,bthd->bshd", "sizes": sizes,
            "operands": {"A": {}, "B": {}, "C": {}}}


def _conv(rng: random.Random) -> dict[str, Any]:
    n = rng.choice([1, 2, 4, 8, 16, 32])
    c, k = rng.choice([64, 128, 256, 512, 1024]), rng.choice([64, 128, 256, 512, 1024])
    hw = rng.choice([7, 14, 28, 56])
    sizes = {"n": n, "c": c, "h": hw, "w": hw, "k": k}
    equation = "nchw,kc->nkhw" if rng.random() < 0.5 else "nhwc,kc->nhwk"
    return {"dtype": _dtype(rng), "contraction": equation, "sizes": sizes, "operands": {"A": {}, "B": {}, "C": {}}}


def _f32(rng: random.Random) -> dict[str, Any]:
    m, n, k = (rng.choice([256, 512, 1024, 2048, 4096, rng.randint(256, 4096)]) for _ in range(3))
    return _gemm(m, n, k, "f32", *(rng.choice(["row", "col"]) for _ in range(3)))


def _square(rng: random.Random) -> dict[str, Any]:
    s = rng.choice([1024, 2048, 3072, 4096, 6144, 8192])
    m, n, k = (s if rng.random() < 0.6 else rng.choice([s // 2, s + 256, s - 128]) for _ in range(3))
    return _gemm(m, n, k, _dtype(rng), *(rng.choice(["row", "col"]) for _ in range(3)))


DRAWS = {"llm": _llm, "llm_train": _llm_train, "skinny": _skinny, "moe": _moe, "attn": _attn, "conv": _conv,
         "f32": _f32, "square": _square}


def _sizes(spec: dict[str, Any]) -> dict[str, int]:
    return spec["gemm"] if "gemm" in spec else spec["sizes"]


def _flops(spec: dict[str, Any]) -> float:
    total = 2.0
    for n in _sizes(spec).values():
        total *= n
    return total


def _bytes(spec: dict[str, Any]) -> int:
    """The bytes of A, B and C (each once): the least a kernel moves."""
    elem = 4 if spec["dtype"] == "f32" else 2
    sizes = _sizes(spec)
    if "gemm" in spec:
        m, n, k = sizes["m"], sizes["n"], sizes["k"]
        return elem * (m * k + k * n + m * n)
    a, rest = spec["contraction"].split(",")
    b, c = rest.split("->")
    total = 0
    for term in (a, b, c):
        count = 1
        for x in term:
            count *= sizes[x]
        total += count
    return elem * total
