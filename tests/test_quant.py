"""Packed 4-bit weights (issue 42, slice 1): dgemm_cli/quant.py and `deepgemm pack` against hand-computed words, the
checkpoints' own packing loops and an independent reading of docs/design/weight-only.md's dg table (no GPU)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import deepgemm
from dgemm_cli.cli import main
from dgemm_cli.errors import EXIT_USAGE, DeepGemmError, PackError
from dgemm_cli.quant import (
    AWQ_ORDER,
    DG_NIBBLES,
    dequantize,
    dg_words,
    from_dg,
    pack,
    repack,
    repack_zeros,
    signed,
    to_dg,
    unpack,
    unsigned,
)

FAST = settings(max_examples=40, deadline=None)


def ceil(a: int, b: int) -> int:
    return -(-a // b)


# ------------------------------------------------------------------------------------------------ references

def gptq_pack_reference(intweight: np.ndarray) -> np.ndarray:
    """GPTQ's packer (AutoGPTQ's QuantLinear.pack, 4 bits): rows of k, eight to a word, value j - i in bits 4(j - i)."""
    k, n = intweight.shape
    w = np.zeros((ceil(k, 8) * 8, n), np.uint32)
    w[:k] = intweight
    qweight = np.zeros((ceil(k, 8), n), np.uint32)
    i = row = 0
    while row < qweight.shape[0]:
        for j in range(i, i + 8):
            qweight[row] |= w[j] << np.uint32(4 * (j - i))
        i += 8
        row += 1
    return qweight.view(np.int32)


def awq_pack_reference(intweight: np.ndarray) -> np.ndarray:
    """AWQ's packer (AutoAWQ's WQLinear_GEMM.from_linear): columns of n, value order_map[i] of eight into bits 4i."""
    k, n = intweight.shape
    w = np.zeros((k, ceil(n, 8) * 8), np.uint32)
    w[:, :n] = intweight
    order_map = [0, 2, 4, 6, 1, 3, 5, 7]
    qweight = np.zeros((k, ceil(n, 8)), np.uint32)
    for col in range(ceil(n, 8)):
        for i in range(8):
            qweight[:, col] |= w[:, col * 8 + order_map[i]] << np.uint32(i * 4)
    return qweight.view(np.int32)


# The doc's table, typed from the page in its order: nibble -> (row, slot column) offset from (g, 2t).
DOC_TABLE = {0: (0, 0), 4: (0, 1), 1: (8, 0), 5: (8, 1), 2: (0, 8), 6: (0, 9), 3: (8, 8), 7: (8, 9)}
# The doc's k of a slot column offset c of tile kt of lane t: 16t + 4kt + r, r = 0, 1, 2, 3 for c = 0, 1, 8, 9.
DOC_SLOT_K = {0: 0, 1: 1, 8: 2, 9: 3}


def dg_reference_decode(words: np.ndarray, k: int, n: int) -> np.ndarray:
    """The [k, n] values of dg words, read word by word and nibble by nibble as the doc describes (no quant.py)."""
    k64, n16 = ceil(k, 64), ceil(n, 16)
    assert words.shape == (n16 * k64 * 128,)
    out = np.full((n16 * 16, k64 * 64), -1, np.int64)  # [n, k] with the padding
    for index, word in enumerate(words.tolist()):
        block, within = divmod(index, 128)
        n_tile, k_chunk = divmod(block, k64)
        lane, kt = divmod(within, 4)  # four words a lane: the 16-k tiles kt of the 64-k chunk
        g, t = divmod(lane, 4)  # lane = 4 g + t: the chunk's k 16t .. 16t + 15
        for nibble, (row, column) in DOC_TABLE.items():
            nn = 16 * n_tile + g + row
            kk = 64 * k_chunk + 16 * t + 4 * kt + DOC_SLOT_K[column]
            assert out[nn, kk] == -1, "each value lies in one nibble"
            out[nn, kk] = (word >> (4 * nibble)) & 0xF
    assert (out >= 0).all(), "the words hold every value of the padded tiles"
    padded = out.T
    assert not padded[k:].any() and not padded[:, n:].any(), "zero nibbles past K and N"
    return padded[:k, :n].astype(np.uint8)


# ------------------------------------------------------------------------------------------------ known words

def test_a_linear_word_reads_nibble_j_as_value_j():
    assert unpack(np.array([0x76543210], np.uint32), 0, "linear").tolist() == [0, 1, 2, 3, 4, 5, 6, 7]
    assert unpack(np.array([0x76543210], np.int32), 0).tolist() == [0, 1, 2, 3, 4, 5, 6, 7]
    assert unpack(np.array([0xFEDCBA98], np.uint32).view(np.int32), 0).tolist() == [8, 9, 10, 11, 12, 13, 14, 15]
    assert pack(np.arange(8), 0, "linear").tolist() == [0x76543210]


def test_an_awq_word_holds_value_awq_order_j_in_nibble_j():
    # nibble j = j: value AWQ_ORDER[j] is j, so values 0..7 read 0, 4, 1, 5, 2, 6, 3, 7 (AWQ's reverse order)
    assert unpack(np.array([0x76543210], np.uint32), 0, "awq").tolist() == [0, 4, 1, 5, 2, 6, 3, 7]
    # values 0..7: nibbles 0..7 hold 0, 2, 4, 6, 1, 3, 5, 7
    assert pack(np.arange(8), 0, "awq").tolist() == [0x75316420]
    assert AWQ_ORDER == (0, 2, 4, 6, 1, 3, 5, 7)


def test_every_nibble_value_in_every_nibble_position():
    for v in range(16):
        for j in range(8):
            word = np.array([v << (4 * j)], np.uint32)
            linear = [0] * 8
            linear[j] = v
            awq = [0] * 8
            awq[AWQ_ORDER[j]] = v
            assert unpack(word, 0, "linear").tolist() == linear
            assert unpack(word, 0, "awq").tolist() == awq
            assert pack(np.array(linear), 0, "linear").tolist() == word.tolist()
            assert pack(np.array(awq), 0, "awq").tolist() == word.tolist()


def test_a_word_of_32_bits_is_unsigned_whatever_its_array_dtype():
    word = np.array([[0x80000000, 0xFFFFFFFF]], np.uint32)
    assert unpack(word.view(np.int32), 1).tolist() == [[0] * 7 + [8] + [15] * 8]
    assert pack(unpack(word.view(np.int32), 1), 1).tolist() == word.tolist()


@pytest.mark.parametrize(("k", "n", "value", "word", "expected"), [
    # (k, n) = (37, 11) of a [64, 16] weight: g = 3, t = 37 // 16 = 2, lane 14, kt = (37 % 16) // 4 = 1 -> word
    # 4 * 14 + 1 = 57; row 11 = g + 8, r = 37 % 4 = 1 -> slot 2t + 1 -> nibble 5
    (37, 11, 0xB, 57, 0x00B00000),
    # (15, 8): g = 0, t = 0, lane 0, kt = 3 -> word 3; row 8 = g + 8, r = 3 -> slot 2t + 9 -> nibble 7
    (15, 8, 0xF, 3, 0xF0000000),
    # (0, 0): lane 0, word 0, nibble 0
    (0, 0, 0x1, 0, 0x00000001),
    # (63, 7): g = 7, t = 3, lane 31, kt = 3 -> word 127; row 7 = g, r = 3 -> slot 2t + 9 -> nibble 6
    (63, 7, 0x9, 127, 0x09000000),
    # (8, 0): t = 0, kt = 2 -> word 2; row 0, r = 0 -> slot 2t -> nibble 0
    (8, 0, 0x3, 2, 0x00000003),
    # (2, 0): t = 0, kt = 0 -> word 0; row 0, r = 2 -> slot 2t + 8 -> nibble 2
    (2, 0, 0x3, 0, 0x00000300),
    # (17, 0): g = 0, t = 1, lane 1, kt = 0 -> word 4; row 0, r = 1 -> slot 2t + 1 -> nibble 4
    (17, 0, 0x5, 4, 0x00050000),
    # (22, 9): g = 1, t = 1, lane 5, kt = 1 -> word 21; row 9 = g + 8, r = 2 -> slot 2t + 8 -> nibble 3
    (22, 9, 0x6, 21, 0x00006000),
])
def test_a_single_value_lands_where_the_docs_formula_puts_it(k, n, value, word, expected):
    q = np.zeros((64, 16), np.uint8)
    q[k, n] = value
    words = to_dg(q)
    assert words.shape == (128,) and words.dtype == np.uint32
    assert words[word] == expected and np.count_nonzero(words) == 1
    assert from_dg(words, 64, 16)[k, n] == value


def test_a_value_in_a_later_tile_and_chunk():
    # [128, 32]: K64 = 2. (k, n) = (70, 20): n // 16 = 1, k // 64 = 1 -> block 1 * 2 + 1 = 3 (word 384); g = 4,
    # t = (70 % 64) // 16 = 0 -> lane 16 (word 384 + 64); kt = (70 % 16) // 4 = 1 -> word 449; row 4 = g, r = 70 % 4
    # = 2 -> slot 2t + 8 -> nibble 2
    q = np.zeros((128, 32), np.uint8)
    q[70, 20] = 7
    words = to_dg(q)
    assert words.shape == (2 * 2 * 128,) and words[449] == 0x700 and np.count_nonzero(words) == 1


def test_a_lanes_word_holds_16_consecutive_k_of_its_two_columns():
    """Lane t of a chunk holds its k 16t .. 16t + 15, word kt the four k 16t + 4kt + r: with q = k % 16 on column 0
    and 15 - k % 16 on column 8, lane 1's word 2 holds k 24..27 (k % 16 = 8..11), nibble j column 8 (j % 2) at
    r = 2 ((j // 2) % 2) + j // 4."""
    q = np.zeros((64, 16), np.uint8)
    q[:, 0] = np.arange(64) % 16
    q[:, 8] = 15 - np.arange(64) % 16
    words = to_dg(q)
    # word 4 * 1 + 2 = 6: k 24, 25, 26, 27 (k % 16 = 8, 9, 10, 11) of column 0 and 15 - those of column 8
    # nibble 0 (col 0, r 0) = 8, 1 (col 8, r 0) = 7, 2 (col 0, r 2) = 10, 3 (col 8, r 2) = 5,
    # nibble 4 (col 0, r 1) = 9, 5 (col 8, r 1) = 6, 6 (col 0, r 3) = 11, 7 (col 8, r 3) = 4
    assert words[6] == 0x4B695A78


def test_dg_nibbles_is_the_docs_table_and_the_fragment_in_awq_order():
    assert {j: DG_NIBBLES[j] for j in range(8)} == DOC_TABLE
    fragment = [(0, 0), (0, 1), (8, 0), (8, 1), (0, 8), (0, 9), (8, 8), (8, 9)]  # mma.m16n8k16 A: a0..a7
    assert [fragment[AWQ_ORDER[j]] for j in range(8)] == list(DG_NIBBLES)


@given(st.integers(1, 150), st.integers(1, 50), st.integers(0, 2**32 - 1))
@FAST
def test_dg_against_the_docs_table_read_independently(k, n, seed):
    q = np.random.default_rng(seed).integers(0, 16, (k, n), dtype=np.uint8)
    words = to_dg(q)
    assert words.shape == (dg_words(k, n),) == (ceil(n, 16) * ceil(k, 64) * 128,)
    np.testing.assert_array_equal(dg_reference_decode(words, k, n), q)


def test_a_warps_lanes_load_512_contiguous_bytes_a_chunk():
    """Each 64-k x 16-n chunk is 128 consecutive words, a lane's four (its 16-byte load) at 4 lane .. 4 lane + 3."""
    q = np.zeros((128, 32), np.uint8)
    q[64:128, 16:32] = 15  # the chunk of block 3 only
    words = to_dg(q)
    assert (words[384:512] == 0xFFFFFFFF).all() and not words[:384].any()


# ------------------------------------------------------------------------------------------------ round trips

@given(st.integers(1, 3).flatmap(lambda nd: st.tuples(st.lists(st.integers(1, 21), min_size=nd, max_size=nd),
                                                      st.integers(0, nd - 1))),
       st.sampled_from(["linear", "awq"]), st.integers(0, 2**32 - 1))
@FAST
def test_pack_then_unpack_is_the_values_padded_with_zeros(shape_axis, order, seed):
    shape, axis = shape_axis
    v = np.random.default_rng(seed).integers(0, 16, shape)
    words = pack(v, axis, order)
    assert words.dtype == np.uint32 and words.shape[axis] == ceil(shape[axis], 8)
    back = unpack(words, axis, order)
    assert back.dtype == np.uint8 and back.shape[axis] == 8 * ceil(shape[axis], 8)
    np.testing.assert_array_equal(np.take(back, range(shape[axis]), axis=axis), v)
    assert not np.take(back, range(shape[axis], back.shape[axis]), axis=axis).any()
    assert pack(v, axis - len(shape), order).tolist() == words.tolist()  # a negative axis is the same axis


@given(st.lists(st.integers(1, 9), min_size=1, max_size=3), st.sampled_from(["linear", "awq"]),
       st.integers(0, 2**32 - 1))
@FAST
def test_unpack_then_pack_is_the_words(shape, order, seed):
    words = np.random.default_rng(seed).integers(0, 2**32, shape, dtype=np.uint32)
    for axis in range(len(shape)):
        np.testing.assert_array_equal(pack(unpack(words.view(np.int32), axis, order), axis, order), words)


@given(st.integers(1, 200), st.integers(1, 70), st.integers(0, 2**32 - 1))
@FAST
def test_to_dg_then_from_dg_is_the_weight(k, n, seed):
    q = np.random.default_rng(seed).integers(0, 16, (k, n))
    words = to_dg(q)
    np.testing.assert_array_equal(from_dg(words, k, n), q)
    np.testing.assert_array_equal(from_dg(words.view(np.int32), k, n), q)


# ------------------------------------------------------------------------------------------------ checkpoints

def decode(packed: np.ndarray, layout: str, k: int, n: int) -> np.ndarray:
    """[k, n] values of a layout, through unpack / from_dg."""
    if layout == "gptq":
        assert packed.shape == (ceil(k, 8), n) and packed.dtype == np.int32
        return unpack(packed, 0, "linear")[:k]
    if layout == "awq":
        assert packed.shape == (k, ceil(n, 8)) and packed.dtype == np.int32
        return unpack(packed, 1, "awq")[:, :n]
    assert packed.dtype == np.uint32
    return from_dg(packed, k, n)


@given(st.integers(1, 140), st.integers(1, 45), st.integers(0, 2**32 - 1))
@FAST
def test_repack_between_every_source_and_target_keeps_the_values(k, n, seed):
    q = np.random.default_rng(seed).integers(0, 16, (k, n), dtype=np.uint8)
    sources = {"gptq": gptq_pack_reference(q), "awq": awq_pack_reference(q), "uint8": q,
               "int8": signed(q)}
    outputs = {}
    for source, qweight in sources.items():
        for target in ("dg", "gptq", "awq"):
            out = repack(qweight, source, target, k, n)
            np.testing.assert_array_equal(decode(out, target, k, n), q)
            outputs.setdefault(target, out)
            np.testing.assert_array_equal(out, outputs[target])  # every source gives the same words
    np.testing.assert_array_equal(outputs["gptq"], sources["gptq"])  # the checkpoints' own packers, bit for bit
    np.testing.assert_array_equal(outputs["awq"], sources["awq"])
    chained = repack(repack(sources["gptq"], "gptq", "awq", k, n), "awq", "dg", k, n)
    np.testing.assert_array_equal(chained, outputs["dg"])


def test_spare_nibbles_of_a_source_are_not_read_and_a_targets_are_zero():
    q = np.arange(15 * 3).reshape(15, 3) % 16
    gptq = gptq_pack_reference(q).view(np.uint32).copy()
    gptq[-1] |= np.uint32(0xF0000000)  # value k = 15 of a 15-k weight: a spare nibble
    out = repack(gptq.view(np.int32), "gptq", "gptq", 15, 3)
    np.testing.assert_array_equal(out, gptq_pack_reference(q))
    awq = repack(q, "uint8", "awq", 15, 3)
    assert not (unpack(awq, 1, "awq")[:, 3:]).any()


def test_repack_zeros_unpacks_gptq_and_awq_qzeros():
    z = np.random.default_rng(3).integers(0, 16, (5, 19), dtype=np.uint8)
    gptq = pack(z, 1, "linear").view(np.int32)  # qzeros [groups, ceil(n/8)], packed along n
    awq = awq_pack_reference(z)
    for source, qzeros in (("gptq", gptq), ("awq", awq)):
        out = repack_zeros(qzeros, source, 5, 19)
        assert out.dtype == np.uint8 and out.shape == (5, 19)
        np.testing.assert_array_equal(out, z)


def test_gptq_v1_zeros_are_the_stored_value_plus_one_up_to_16():
    stored = np.arange(16, dtype=np.uint8).reshape(2, 8)
    out = repack_zeros(pack(stored, 1).view(np.int32), "gptq", 2, 8, gptq_v1=True)
    assert out.dtype == np.uint8 and out.tolist() == (stored.astype(int) + 1).tolist()
    assert out.max() == 16  # a stored 15 is 16: not wrapped to 0, not clipped to 15
    q = np.full((8, 8), 3)
    # the weights' bits are the same in v1 and v2
    np.testing.assert_array_equal(repack(pack(q, 0).view(np.int32), "gptq", "dg", 8, 8, gptq_v1=True), to_dg(q))
    w = dequantize(q, np.full((1, 8), 0.5), 8, out[:1])
    np.testing.assert_array_equal(w[0], (3 - (stored[0].astype(float) + 1)) * 0.5)


# ------------------------------------------------------------------------------------------------ values

def test_signed_and_unsigned_are_int4_twos_complement():
    assert signed(np.arange(16)).tolist() == [0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5, -4, -3, -2, -1]
    assert signed(np.arange(16)).dtype == np.int8
    assert unsigned(np.arange(-8, 8)).tolist() == [8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7]
    assert unsigned(signed(np.arange(16))).tolist() == list(range(16))
    with pytest.raises(PackError, match="value 16 at index"):
        signed(np.array([1, 16]))
    with pytest.raises(PackError, match="value -9 at index"):
        unsigned(np.array([-9]))


def dequantize_loop(q, s, g, z, form):
    k, n = q.shape
    w = np.zeros((k, n))
    for kk in range(k):
        for nn in range(n):
            scale = float(s[kk // g, nn])
            if z is None:
                w[kk, nn] = float(q[kk, nn]) * scale
            elif form == "subtract":
                w[kk, nn] = (float(q[kk, nn]) - float(z[kk // g, nn])) * scale
            else:
                w[kk, nn] = float(q[kk, nn]) * scale - float(z[kk // g, nn])
    return w


@pytest.mark.parametrize(("k", "n", "g"), [(64, 8, 32), (70, 5, 32), (37, 3, 37), (37, 3, 128), (9, 2, 1)])
@pytest.mark.parametrize("form", ["subtract", "prescaled", None])
def test_dequantize_is_the_formula_a_value_at_a_time(k, n, g, form):
    rng = np.random.default_rng(k * n * g)
    q = rng.integers(0, 16, (k, n))
    s = rng.random((ceil(k, g), n)).astype(np.float16)
    z = None if form is None else (rng.integers(0, 16, s.shape) if form == "subtract" else rng.random(s.shape))
    w = dequantize(q, s, g, z, form or "subtract")
    assert w.dtype == np.float64 and w.shape == (k, n)
    np.testing.assert_array_equal(w, dequantize_loop(q, s, g, z, form))


def test_dequantize_of_signed_int4_is_symmetric():
    q = signed(np.arange(16).reshape(16, 1))
    assert dequantize(q, np.array([[2.0]]), 16).ravel().tolist() == [2.0 * v for v in [*range(8), *range(-8, 0)]]


# ------------------------------------------------------------------------------------------------ errors

@pytest.mark.parametrize(("call", "words"), [
    (lambda: repack(np.zeros((63, 32), np.int32), "gptq", "dg", 512, 32),
     ["qweight: shape [63, 32] is not GPTQ's qweight [ceil(k/8), n] = [64, 32] for k=512, n=32", "Fix:"]),
    (lambda: repack(np.zeros((512, 4), np.int32), "gptq", "dg", 512, 32),
     ["qweight: shape [512, 4]", "this is the awq layout: --from awq"]),
    (lambda: repack(np.zeros((8, 8), np.int16), "uint8", "gtpq", 8, 8), ["target: unknown target 'gtpq'", "dg"]),
    (lambda: repack(np.zeros((8, 8), np.int16), "squeezellm", "dg", 8, 8), ["source: unknown source"]),
    (lambda: repack(np.full((8, 8), 16), "uint8", "dg", 8, 8), ["qweight: value 16 at index [0, 0] is outside 0..15"]),
    (lambda: repack(np.full((8, 8), -9), "int8", "dg", 8, 8), ["qweight: value -9", "outside -8..7"]),
    (lambda: repack(np.zeros((1, 8), np.float32), "gptq", "dg", 8, 8), ["qweight: dtype float32", "int32 or uint32"]),
    (lambda: repack(np.zeros((8, 8)), "uint8", "dg", 8, 8), ["qweight: dtype float64 is not an integer type"]),
    (lambda: repack(np.zeros((8, 8), np.int8), "uint8", "dg", 8, 8, bits=8), ["bits: 8-bit", "need no packing"]),
    (lambda: repack(np.zeros((8, 1), np.int32), "awq", "dg", 8, 8, gptq_v1=True), ["gptq_v1: is for a gptq source"]),
    (lambda: repack(np.zeros((8, 8), np.int8), "uint8", "dg", 0, 8), ["k: 0 is not a size"]),
    (lambda: from_dg(np.zeros(127, np.uint32), 64, 16), ["words: shape [127]", "[128]"]),
    (lambda: pack(np.zeros(8, np.int8), 1), ["axis: 1 is not an axis of a 1-d array"]),
    (lambda: pack(np.zeros(8, np.int8), 0, "gptq"), ["order: unknown order 'gptq'", "linear, awq"]),
    (lambda: to_dg(np.zeros(8, np.int8)), ["q: shape [8] is not a [K, N] matrix"]),
    (lambda: repack_zeros(np.zeros((2, 3), np.int32), "gptq", 2, 32), ["qzeros: shape [2, 3]", "[2, 4]"]),
    (lambda: repack_zeros(np.zeros((2, 4), np.int32), "uint8", 2, 32), ["source: unknown source 'uint8'"]),
    (lambda: dequantize(np.zeros((70, 4), np.int8), np.ones((2, 4)), 32), ["scales: shape [2, 4] is not",
                                                                            "[3, 4]"]),
    (lambda: dequantize(np.zeros((8, 4), np.int8), np.ones((1, 4)), 8, np.ones((2, 4))), ["zeros: shape [2, 4]"]),
    (lambda: dequantize(np.zeros((8, 4), np.int8), np.ones((1, 4)), 8, form="scaled"), ["form: unknown form"]),
])
def test_errors_name_the_argument_and_the_fix(call, words):
    with pytest.raises(PackError) as err:
        call()
    assert isinstance(err.value, DeepGemmError) and err.value.exit_code == EXIT_USAGE
    assert "Fix:" in str(err.value)
    for word in words:
        assert word in str(err.value)


def test_the_python_api_is_repack():
    assert deepgemm.pack is repack and "pack" in deepgemm.__all__ and deepgemm.PackError is PackError
    q = np.arange(32 * 16).reshape(32, 16) % 16
    words = deepgemm.pack(gptq_pack_reference(q), source="gptq", target="dg", k=32, n=16)
    np.testing.assert_array_equal(from_dg(words, 32, 16), q)


# ------------------------------------------------------------------------------------------------ the command

def run(*args):
    return CliRunner().invoke(main, ["pack", *map(str, args)])


def test_pack_command_writes_dg_and_zeros_and_prints_one_line(tmp_path):
    q = np.random.default_rng(5).integers(0, 16, (100, 40), dtype=np.uint8)
    z = np.random.default_rng(6).integers(0, 16, (4, 40), dtype=np.uint8)
    np.save(tmp_path / "qw.npy", gptq_pack_reference(q))
    np.save(tmp_path / "qz.npy", pack(z, 1).view(np.int32))
    res = run(tmp_path / "qw.npy", "--from", "gptq", "--to", "dg", "-k", 100, "-n", 40, "-o", tmp_path / "w.npy",
              "--zeros", tmp_path / "qz.npy", "--zeros-out", tmp_path / "z.npy", "--gptq-v1")
    assert res.exit_code == 0, res.output
    (line,) = res.output.strip().splitlines()
    assert "gptq [13, 40] int32 (2080 bytes)" in line and "dg [768] uint32 (3072 bytes)" in line
    assert "plain [4, 40] uint8 (160 bytes)" in line and "v1" in line
    np.testing.assert_array_equal(from_dg(np.load(tmp_path / "w.npy"), 100, 40), q)
    np.testing.assert_array_equal(np.load(tmp_path / "z.npy"), z + 1)


def test_pack_command_json_and_an_exact_output_name(tmp_path):
    q = np.random.default_rng(7).integers(-8, 8, (33, 9), dtype=np.int8)
    np.save(tmp_path / "w.npy", q)
    res = run(tmp_path / "w.npy", "--from", "int8", "--to", "awq", "-k", 33, "-n", 9, "-o", tmp_path / "awq.bin",
              "--json")
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    assert summary["input"] == {"path": str(tmp_path / "w.npy"), "layout": "int8", "shape": [33, 9], "dtype": "int8",
                                "bytes": 297}
    assert summary["output"]["shape"] == [33, 2] and summary["output"]["dtype"] == "int32"
    assert summary["zeros"] is None and (summary["k"], summary["n"]) == (33, 9)
    out = np.load(tmp_path / "awq.bin")  # written where -o says, no .npy appended
    np.testing.assert_array_equal(signed(unpack(out, 1, "awq")[:, :9]), q)


def test_pack_command_bad_shape_is_one_line_exit_2(tmp_path):
    np.save(tmp_path / "qw.npy", np.zeros((13, 40), np.int32))
    res = run(tmp_path / "qw.npy", "--from", "gptq", "--to", "dg", "-k", 128, "-n", 40, "-o", tmp_path / "w.npy")
    assert res.exit_code == 2 and "Traceback" not in res.output
    (line,) = res.output.strip().splitlines()
    assert line.startswith(f"error: {tmp_path / 'qw.npy'}: qweight: shape [13, 40] is not GPTQ's") and "Fix:" in line
    assert not (tmp_path / "w.npy").exists()


@pytest.mark.parametrize(("extra", "message"), [
    (["--zeros", "QZ"], "--zeros-out: is missing"),
    (["--gptq-v1"], "--gptq-v1: is for --from gptq, not awq"),
])
def test_pack_command_refuses_options_that_do_not_fit(tmp_path, extra, message):
    np.save(tmp_path / "qw.npy", np.zeros((16, 1), np.int32))
    np.save(tmp_path / "qz.npy", np.zeros((1, 1), np.int32))
    extra = [str(tmp_path / "qz.npy") if e == "QZ" else e for e in extra]
    res = run(tmp_path / "qw.npy", "--from", "awq", "--to", "dg", "-k", 16, "-n", 8, "-o", tmp_path / "w.npy", *extra)
    assert res.exit_code == 2 and message in res.output


def test_pack_help_teaches_the_layouts_and_the_spec_that_reads_the_output():
    res = CliRunner().invoke(main, ["pack", "--help"], terminal_width=200)
    assert res.exit_code == 0
    for word in ("gptq", "awq", "int8", "uint8", "dg", "--from awq", "--from int8", "--from uint8", "--from gptq",
                 "operands: {B: {dtype: uint4, packing: dg, align: 16}}", "wqtc"):
        assert word in res.output
    assert "pack" in CliRunner().invoke(main, ["--help"]).output
