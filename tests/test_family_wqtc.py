"""The `wqtc` family (4-bit weights in the dg layout on the tensor cores, dg/wqtc.cuh): its gates, its plans (no more
registers than ptxas holds without spilling), and the layout fact its dequantization rests on, checked against the
PTX ISA's mma.m16n8k16 A-fragment table (pure; the GPU tests verify the built kernels)."""

from __future__ import annotations

import re

import pytest
import yaml
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from dgemm_cli import quant
from dgemm_cli.arch import get_arch
from dgemm_cli.families import wqtc
from dgemm_cli.families.solving import best
from dgemm_cli.plan import make_plan
from dgemm_cli.spec import parse_spec
from dgemm_cli.views import analyse

from .conftest import REPO


def _spec(doc: dict):
    return parse_spec(doc, "<test>")


def _dg(m=8, n=1024, k=4096, group=128, b_align=16, a=None, zeros=None, dtype="f16", b_dtype="int4", plan=None):
    doc = {"name": "t", "dtype": dtype, "gemm": {"m": m, "n": n, "k": k},
           "operands": {"A": a or {"layout": "row", "align": 16}, "B": {"dtype": b_dtype, "packing": "dg",
                                                                          "align": b_align},
                        "C": {"layout": "row"}},
           "scales": {"B": {"block": {"k": group}, "layout": "row"} if group else {"per": "channel"}}}
    if zeros:
        doc["zeros"] = {"B": zeros}
    if plan:
        doc["plan"] = plan
    return _spec(doc)


def test_the_dg_word_holds_the_mma_a_fragment_pairs_the_dequantization_extracts():
    """`(word >> 4 i) & 0x000F000F` is fragment register i: PTX's m16n8k16 A fragment puts a_{2i}, a_{2i+1} in
    register i at row g + 8 (i % 2), columns 2t + 8 (i // 2) and + 1. So nibble i must hold (row + 0, column + 0) of
    that pair and nibble i + 4 its (row, column + 1), relative to the lane's (g, 2t)."""
    for i in range(4):
        row, column = 8 * (i % 2), 8 * (i // 2)
        assert quant.DG_NIBBLES[i] == (row, column)
        assert quant.DG_NIBBLES[i + 4] == (row, column + 1)


def test_a_word_decodes_through_the_magic_exponent_as_the_kernel_does():
    """Each nibble ORed into 1024.0's f16 bits (0x6400) reads 1024 + q; with the word XOR 0x88888888 (int4) it
    reads 1024 + q + 8: the subtraction of 1024 (or 1032) leaves q exactly."""
    import numpy as np

    for q in range(16):
        bits = np.array([0x6400 | q], dtype=np.uint16).view(np.float16)[0]
        assert float(bits) - 1024.0 == q
        signed = q - 16 if q >= 8 else q
        flipped = np.array([0x6400 | (q ^ 8)], dtype=np.uint16).view(np.float16)[0]
        assert float(flipped) - 1032.0 == signed


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_decode_on_the_dg_layout_plans_wqtc(arch):
    views = analyse(_dg())
    plan = make_plan(views, get_arch(arch))
    assert [k.family for k in plan.kernels] == ["wqtc"]


@pytest.mark.parametrize("kwargs, gate", [
    ({"b_dtype": "uint4", "b_align": 4}, "16-byte loads"),  # the dg layout's 16-byte loads
    ({"m": 65}, "decode rows"),
    ({"group": 8}, "whole k tiles"),
])
def test_gates_say_why(kwargs, gate):
    blocked = dict(wqtc.gates(analyse(_dg(**kwargs)), get_arch("sm_90a")))
    assert gate in blocked


def test_awq_layout_is_not_the_family_s_and_gptq_s_is():
    doc = yaml.safe_load((REPO / "specs/weight_only/w4_awq_tails.yaml").read_text())
    blocked = dict(wqtc.gates(analyse(_spec(doc)), get_arch("sm_90a")))
    assert "weight layout" in blocked and "deepgemm pack --to dg" in blocked["weight layout"]
    gptq = analyse(_spec(yaml.safe_load((REPO / "specs/weight_only/w4_gptq_decode.yaml").read_text())))
    assert wqtc.layout_of(gptq) == "k_words" and not wqtc.gates(gptq, get_arch("sm_90a"))


def test_the_least_tiling_fits_the_register_budget_at_every_m():
    """One strip, one chunk in flight: within the budget for every M the family takes, in either layout, with zero
    points and a scale every 16 k (the most registers), so every problem past the gates has a plan."""
    for m in range(1, wqtc.MAX_M + 1):
        dg = analyse(_dg(m=m, group=16, b_dtype="uint4", zeros={"dtype": "f16", "layout": "row"},
                         plan={"family": "wqtc"}))
        gptq = analyse(_spec({"name": "t", "dtype": "f16", "gemm": {"m": m, "n": 256, "k": 4096},
                              "plan": {"family": "wqtc"},
                              "operands": {"A": {"layout": "row"}, "B": {"dtype": "uint4", "packing": "gptq",
                                                                         "layout": "row"}, "C": {"layout": "row"}},
                              "scales": {"B": {"block": {"k": 16}, "layout": "row"}},
                              "zeros": {"B": {"dtype": "f16", "form": "prescaled", "layout": "row"}}}))
        for v in (dg, gptq):
            assert wqtc.registers(v, 1, 1) <= wqtc.REGISTER_BUDGET, m
            assert make_plan(v, get_arch("sm_90a")).family == "wqtc", m


def test_gptq_lanes_take_16_consecutive_k_in_both_operands():
    """K_WORDS: the k a weight register's nibble holds (word kt / 2 of the lane's column, byte 2 (kt % 2) + i / 2)
    and the k an activation register holds (the lane's run of 16 k in pairs) meet at every mma k slot, and the
    chunk's 64 k each meet one slot: the sum is the chunk's, in another order."""
    seen = set()
    for t in range(4):
        for kt in range(4):
            for i in range(4):  # A register i: slots 2t + 8 (i // 2) + e of tile kt
                word, byte = kt // 2, 2 * (kt % 2) + i // 2
                for e in range(2):
                    weight_k = 16 * t + 8 * word + 2 * byte + e  # nibble 2 byte + e of the word of k 16 t + 8 word
                    pair = 2 * kt + i // 2  # b0 (slots 2t, 2t + 1) is r[2 kt], b1 (2t + 8, 2t + 9) is r[2 kt + 1]
                    activation_k = 16 * t + 2 * pair + e
                    assert weight_k == activation_k, (t, kt, i, e)
                    if i % 2 == 0:
                        seen.add((kt, 2 * t + 8 * (i // 2) + e, weight_k))
    assert len(seen) == 64 and {k for *_, k in seen} == set(range(64))


# PTX ISA, mma.m16n8k16 (f16/bf16): lane (g, t) = (lane // 4, lane % 4). A register i holds (row, k slot) =
# (g + 8 (i % 2), 2t + 8 (i // 2) + h) in its half h; B register j holds (k slot, column) = (2t + 8 j + h, g).
def _a_slot(g: int, t: int, i: int, h: int) -> tuple[int, int]:
    return g + 8 * (i % 2), 2 * t + 8 * (i // 2) + h


def _b_slot(g: int, t: int, j: int, h: int) -> tuple[int, int]:
    return 2 * t + 8 * j + h, g


@settings(max_examples=25, deadline=None)
@given(k=st.integers(1, 200), n=st.integers(1, 40), m=st.integers(1, 20), signed=st.booleans(),
       group=st.sampled_from([16, 32, 64, 128, None]), seed=st.integers(0, 2**32 - 1))
def test_dg_fragments_built_as_the_kernel_does_multiply_to_a_times_the_weights(k, n, m, signed, group, seed):
    """dg/wqtc.cuh's DG_WORDS path, in numpy: lane (g, t) takes word 4 lane + kt of its strip's chunk, register i's
    halves from nibbles i and i + 4 (`(word >> 4 i) & 0x000F000F`), scaled by the scale at quant_k = 64 chunk + 16 t of
    the register's column; its activations are activation_run's at k0 = 64 chunk + 16 t + 4 kt (b0 = (k0, k0 + 1),
    b1 = (k0 + 2, k0 + 3)), zero past M and K. Placed in the mma's slots by PTX's fragment table, the tiles' products
    add up to (A . dequant(B))^T: the weights' and the activations' k agree at every slot."""
    import numpy as np

    rng = np.random.default_rng(seed)
    g_k = group or k
    q = rng.integers(0, 16, (k, n), dtype=np.uint8)
    values = quant.signed(q) if signed else q
    scales = rng.integers(1, 5, (-(-k // g_k), n)).astype(np.float64) / 4
    a = rng.integers(-4, 5, (m, k)).astype(np.float64)
    words = quant.to_dg(q)
    k64, strips, mt = -(-k // 64), -(-n // 16), -(-m // 8)
    a_pad = np.zeros((8 * mt, 64 * k64))
    a_pad[:m, :k] = a
    ct = np.zeros((16 * strips, 8 * mt))  # C^T, the mma's tiles 16 n x 8 m
    for strip in range(strips):
        for chunk in range(k64):
            for kt in range(4):
                a_mma = np.full((16, 16), np.nan)  # the weights: 16 n x 16 k slots
                b_mma = np.full((16, 8 * mt), np.nan)  # the activations: 16 k slots x 8 mt rows
                for lane in range(32):
                    g, t = divmod(lane, 4)
                    word = int(words[(strip * k64 + chunk) * 128 + 4 * lane + kt])
                    quant_k = 64 * chunk + 16 * t
                    for i in range(4):
                        pair = (word >> (4 * i)) & 0x000F000F
                        for h, nibble in enumerate((pair & 0xF, pair >> 16)):
                            value = nibble - 16 if signed and nibble >= 8 else nibble
                            row, slot = _a_slot(g, t, i, h)
                            col = 16 * strip + row
                            s = scales[quant_k // g_k, col] if col < n and quant_k < k else 0.0
                            a_mma[row, slot] = value * s
                    k0 = 64 * chunk + 16 * t + 4 * kt
                    for tile in range(mt):
                        for j in range(2):
                            for h in range(2):
                                slot, column = _b_slot(g, t, j, h)
                                b_mma[slot, 8 * tile + column] = a_pad[8 * tile + g, k0 + 2 * j + h]
                assert not np.isnan(a_mma).any() and not np.isnan(b_mma).any(), "every slot filled once"
                ct[16 * strip:16 * strip + 16] += a_mma @ b_mma
    expected = a @ quant.dequantize(values, scales, g_k)
    np.testing.assert_allclose(ct[:n, :m], expected.T, rtol=0, atol=1e-9)


def test_the_k_word_byte_permute_puts_a_pair_where_the_magic_exponent_reads_it():
    """dequantize_words: byte b of a GPTQ word holds k = 2b (low nibble) and 2b + 1 (high nibble). Placed in bytes 0
    and 2 and masked with 0x00F0000F, the low half's bits hold k = 2b's nibble and the high half's bits 20..23 hold
    k = 2b + 1's: as f16 with 1024.0's bits ORed in, 1024 + q and 1024 + 16 q, so (1, 1/16) and (-1024, -64) give
    both exactly."""
    import numpy as np

    rng = np.random.default_rng(5)
    for word in [int(w) for w in rng.integers(0, 2**32, 64, dtype=np.uint64)] + [0x76543210, 0xFEDCBA98]:
        for t in range(4):
            b = (word >> (8 * t)) & 0xFF
            r = b | (b << 16)  # __byte_perm(word, 0, bytes b, 0, b, 0) with b = t
            h = (r & 0x00F0000F) | 0x64006400
            lo = float(np.array([h & 0xFFFF], dtype=np.uint16).view(np.float16)[0]) - 1024.0
            hi = float(np.array([h >> 16], dtype=np.uint16).view(np.float16)[0]) / 16.0 - 64.0
            assert (lo, hi) == ((word >> (8 * t)) & 0xF, (word >> (8 * t + 4)) & 0xF)


def test_group_sizes_set_the_quant_loads_a_chunk():
    assert wqtc.quant_loads_a_chunk(analyse(_dg(group=None))) == 0  # per channel: once
    assert wqtc.quant_loads_a_chunk(analyse(_dg(group=128))) == 1
    assert wqtc.quant_loads_a_chunk(analyse(_dg(group=16))) == 1  # a lane's k of a chunk are one 16-k tile
    assert wqtc.quant_loads_a_chunk(analyse(_dg(group=4096))) == 0  # one group: all of K
    gptq = _spec({"name": "t", "dtype": "f16", "gemm": {"m": 4, "n": 256, "k": 1024},
                  "operands": {"A": {"layout": "row"}, "B": {"dtype": "int4", "packing": "gptq", "layout": "row"},
                               "C": {"layout": "row"}}, "scales": {"B": {"block": {"k": 32}, "layout": "row"}}})
    assert wqtc.quant_loads_a_chunk(analyse(gptq)) == 1  # a lane's k of a chunk are one 16-k tile


def test_activation_loads_need_k_contiguous_rows_and_alignment():
    assert wqtc.a_loads(analyse(_dg()))[:2] == (True, True)  # a lane's 16 k of a chunk in two 16-byte loads
    assert wqtc.a_loads(analyse(_dg(a={"layout": "row", "align": 4})))[:2] == (True, False)
    odd = wqtc.a_loads(analyse(_dg(m=11, k=1000, a={"strides": [1003, 1], "align": 16})))
    assert not odd[0] and "not a multiple of 2" in odd[2]
    assert not wqtc.a_loads(analyse(_dg(a={"layout": "row", "align": 2})))[0]
    assert not wqtc.a_loads(analyse(_dg(a={"layout": "col", "align": 16})))[0]

    def gptq(a):
        return analyse(_spec({"name": "t", "dtype": "f16", "gemm": {"m": 4, "n": 256, "k": 1024},
                              "operands": {"A": a, "B": {"dtype": "int4", "packing": "gptq", "layout": "row"},
                                           "C": {"layout": "row"}},
                              "scales": {"B": {"block": {"k": 128}, "layout": "row"}}}))

    assert wqtc.a_loads(gptq({"layout": "row", "align": 16}))[:2] == (True, True)
    rows_apart = wqtc.a_loads(gptq({"strides": [1028, 1], "align": 16}))
    assert rows_apart[:2] == (True, False) and "not a multiple of 8" in rows_apart[2]
    assert wqtc.a_loads(gptq({"layout": "row", "align": 8}))[:2] == (True, False)


@settings(max_examples=60, deadline=None)
@given(m=st.integers(1, 64), n=st.integers(1, 3000), k=st.integers(16, 9000),
       group=st.sampled_from([None, 16, 32, 64, 128, 256]), zeros=st.booleans())
def test_every_plan_keeps_its_registers_and_covers_the_columns(m, n, k, group, zeros):
    spec = _dg(m=m, n=n, k=k, group=group, b_dtype="uint4" if zeros else "int4",
               zeros={"dtype": "uint8", "layout": "row"} if zeros else None)
    views = analyse(spec)
    assume(not wqtc.gates(views, get_arch("sm_90a")))  # n = 1 drops the n letter: wq's
    plan, _ = best(wqtc.problem(views, get_arch("sm_90a")))
    assert plan.ns * plan.mt * 4 <= wqtc.MAX_SUMS
    assert wqtc.registers(views, plan.ns, plan.depth) <= wqtc.REGISTER_BUDGET
    assert plan.blocks * plan.ns * 16 >= n > (plan.blocks - 1) * plan.ns * 16
    assert plan.mt * 8 >= m


def test_the_rendered_traits_carry_the_plan(tmp_path):
    from dgemm_cli.arch import get_arch as arch_of
    from dgemm_cli.pipeline import generate

    art = generate(_dg(m=5, n=300, k=1000, group=32, plan={"family": "wqtc"}), arch_of("sm_90a"), tmp_path)
    text = (art.directory / "t.cu").read_text()
    assert "dg::wqtc::launch<Traits>" in text
    assert re.search(r"GROUP_K = 32;", text) and re.search(r"K_CHUNKS = 16;", text)
    assert re.search(r"STRIPS = 19,", text)


def test_run_time_buckets_keep_their_row_tiles():
    """Ranges of the run-time rows planned alike but for their row tiles (ceil(M / 8)) keep kernels of their own:
    one made for 32 rows would do four times the mma work at 8."""
    spec = parse_spec(yaml.safe_load((REPO / "specs/bench/w4_gptq_dyn_1-64x4096x14336.yaml").read_text()),
                      "w4_gptq_dyn")
    plan = make_plan(analyse(spec), get_arch("sm_90a"))
    assert [b.plan.family for b in plan.buckets] == ["wqtc"] * len(plan.buckets)
    for b in plan.buckets:
        assert b.plan.primary.mt == -(-b.hi // 8), (b.lo, b.hi, b.plan.primary.mt)
        assert b.hi <= 8 or b.lo > b.hi // 2, (b.lo, b.hi)  # no range spans two row-tile counts' sizes


def _bytes_spec(m=8, n=1024, k=4096, b=None, dtype="bf16", zeros=None):
    doc = {"name": "t", "dtype": dtype, "gemm": {"m": m, "n": n, "k": k},
           "operands": {"A": {"layout": "row", "align": 16},
                        "B": b if b is not None else {"dtype": "int8", "layout": "col", "align": 16},
                        "C": {"layout": "row"}},
           "scales": {"B": {"per": "channel"}}}
    if zeros:
        doc["zeros"] = {"B": zeros}
    return analyse(_spec(doc))


def test_8_bit_weights_as_nn_linear_keeps_them_plan_wqtc_checked_at_run_time_where_not_promised():
    """int8 [n, k]: the k_bytes layout, planned over wq at decode sizes (issue 42's target shape). With `align: 16`
    nothing is checked at run time; without it the launcher checks B for 16 bytes and wq (not cta, which takes no
    integer weights) is the fallback."""
    for m in (1, 8, 16, 64):
        views = _bytes_spec(m=m, n=14336, k=4096)
        assert wqtc.layout_of(views) == "k_bytes" and not wqtc.gates(views, get_arch("sm_90a"))
        plan = make_plan(views, get_arch("sm_90a"))
        assert plan.family == "wqtc" and plan.fallback is None, m
    unaligned = _bytes_spec(b={"dtype": "int8", "layout": "col"})
    assert not wqtc.gates(unaligned, get_arch("sm_90a"))
    plan = make_plan(unaligned, get_arch("sm_90a"))
    assert plan.family == "wqtc" and plan.primary.runtime_align == {"B": 16}
    assert plan.fallback is not None and plan.fallback.family == "wq"


@pytest.mark.parametrize("b, gate, says", [
    ({"dtype": "uint8", "strides": [1, 1000], "align": 16}, "16-byte loads", "stride 1000 along n"),
    ({"dtype": "int8", "layout": "row", "align": 16}, "weight layout", "contiguous along k"),
])
def test_8_bit_gates_say_why(b, gate, says):
    blocked = dict(wqtc.gates(_bytes_spec(k=1000, b=b), get_arch("sm_90a")))
    assert says in blocked[gate]


def _byte_perm(x: int, y: int, selector: int) -> int:
    """PTX prmt (CUDA's __byte_perm) in its default mode: byte i of the result is byte (selector >> 4 i) & 7 of
    y:x."""
    both = (y << 32) | x
    return sum(((both >> (8 * ((selector >> (4 * i)) & 7))) & 0xFF) << (8 * i) for i in range(4))


def _bf16_exact(x: float) -> bool:
    """x survives a round trip through bf16 (its f32 bits' low 16 are zero)."""
    import numpy as np

    return int(np.array([x], dtype=np.float32).view(np.uint32)[0]) & 0xFFFF == 0


@pytest.mark.parametrize("signed", [False, True])
def test_the_byte_permutes_read_8_bit_weights_exactly(signed):
    """dequantize_bytes: register i's pair is bytes 2 (i / 2) and + 1 of its row's word, the lower k in the low
    half. f16: under 0x64 each half reads 1024 + q (q + 128 for int8, the word XOR 0x80808080), and subtracting
    1024 (+ 128) + z leaves q - z exactly for every byte and every 8-bit zero point (the fold). bf16: under
    0x4B000000 each byte reads 2^23 + q in f32, and q - z is exact in bf16 where |q - z| < 256 (uint8 weights and
    zero points; int8 with a zero point past 127 rounds once, relative to q - z)."""
    import numpy as np

    rng = np.random.default_rng(11)
    words = [int(w) for w in rng.integers(0, 2**32, 48, dtype=np.uint64)] + [0x03020100, 0xFFFEFD80, 0x7F80FF00]
    offset = 128 if signed else 0
    for word in words:
        flipped = word ^ 0x80808080 if signed else word
        for pair in range(2):
            values = [(word >> (8 * (2 * pair + e))) & 0xFF for e in range(2)]
            q = [v - 256 if signed and v >= 128 else v for v in values]
            x = _byte_perm(flipped, 0x64, 0x4342 if pair else 0x4140)
            halves = np.array([x & 0xFFFF, x >> 16], dtype=np.uint16).view(np.float16)
            for z in (0, 1, 8, 128, 255):
                bias = np.float16(-(1024 + offset + z))
                assert [float(h + bias) for h in halves] == [v - z for v in q], (hex(word), pair, z)
            for e in range(2):
                bits = _byte_perm(flipped, 0x4B, (0x4553 if pair else 0x4551) if e else (0x4552 if pair else 0x4550))
                f = float(np.array([bits], dtype=np.uint32).view(np.float32)[0]) - (8388608.0 + offset)
                assert f == q[e]
                assert all(_bf16_exact(f - z) for z in ((0, 7, 127) if signed else (0, 7, 200, 255)))


def test_byte_lanes_take_16_consecutive_k_in_both_operands():
    """K_BYTES: weight register i of tile kt holds bytes 4 kt + 2 (i / 2) + e of its row's 16 (k 16 t + that), the
    activations the lane's run of 16 k in pairs: they meet at every mma k slot, and the chunk's 64 k each meet one
    slot."""
    seen = set()
    for t in range(4):
        for kt in range(4):
            for i in range(4):
                for e in range(2):
                    weight_k = 16 * t + 4 * kt + 2 * (i // 2) + e
                    activation_k = 16 * t + 2 * (2 * kt + i // 2) + e
                    assert weight_k == activation_k
                    if i % 2 == 0:
                        seen.add(weight_k)
    assert seen == set(range(64))
