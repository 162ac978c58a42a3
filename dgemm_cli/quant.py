"""Packed 4-bit weights (issue 42; docs/design/weight-only.md, "Packed 4-bit views"): the executable definition of
the layouts a 4-bit B may take and the conversions between them. Pure numpy, no I/O.

Words are 32-bit (int32 or uint32 arrays: the bits are what count; results are uint32 unless a checkpoint format's
dtype is asked for). A word holds eight 4-bit values, nibble j in bits 4j .. 4j + 3. Which of the word's eight
values nibble j holds is the word's order:

- `linear` (GPTQ): nibble j holds value j, the value at index 8w + j of the packed letter.
- `awq`: nibble j holds value AWQ_ORDER[j] (AWQ's `order_map`).
- `dg` (deepgemm's own layout, `to_dg` / `from_dg`): a 16 (n) x 64 (k) chunk's values a lane of a warp holds as its
  mma.m16n8k16 A fragments of four 16-k tiles, lane t (= lane % 4) holding the chunk's 16 consecutive k 16t .. 16t +
  15; nibble j of its word kt holds the fragment slot DG_NIBBLES[j] relative to the lane's (g, 2t) of tile kt.

Nibble values are 0..15 (uint8). A signed int4 is its two's complement nibble (`unsigned`, and back: `signed`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dgemm_cli.errors import PackError
from dgemm_cli.spec.model import dg_words as spec_dg_words

Order = Literal["linear", "awq"]
Source = Literal["gptq", "awq", "int8", "uint8"]
Target = Literal["dg", "gptq", "awq"]
Form = Literal["subtract", "prescaled"]

ORDERS: tuple[str, ...] = ("linear", "awq")
SOURCES: tuple[str, ...] = ("gptq", "awq", "int8", "uint8")
TARGETS: tuple[str, ...] = ("dg", "gptq", "awq")
FORMS: tuple[str, ...] = ("subtract", "prescaled")

# AWQ's order_map: its packer ORs value AWQ_ORDER[j] of a word's eight into bits 4j.
AWQ_ORDER: tuple[int, ...] = (0, 2, 4, 6, 1, 3, 5, 7)

# The dg layout's in-word order: nibble j of lane l = 4g + t's word kt holds the mma slot (row, column) =
# (g + DG_NIBBLES[j][0], 2t + DG_NIBBLES[j][1]) of its 16 (n, rows) x 16 (k slots, columns) tile kt, the order the
# 0x6400 magic-exponent conversion unpacks a word in (nibbles 0 and 4 first: the fragment's first pair of halves).
# In mma.m16n8k16's A fragment a0..a7 = (g, 2t), (g, 2t + 1), (g + 8, 2t), (g + 8, 2t + 1), (g, 2t + 8), ...,
# nibble j holds a[AWQ_ORDER[j]]: the same interleave AWQ packs its words in.
DG_NIBBLES: tuple[tuple[int, int], ...] = ((0, 0), (8, 0), (0, 8), (8, 8), (0, 1), (8, 1), (0, 9), (8, 9))

# The k a slot takes: the sum over k does not depend on which k meets which mma k slot, so lane t's slots take its
# chunk's 16 consecutive k 16t .. 16t + 15 (a lane's activations are one run of a row): tile kt's slot columns 2t +
# DG_SLOT_COLUMN[r] take k = 64 (k // 64) + 16t + 4kt + r, r = 0..3. The slot pair (2t, 2t + 1) holds r = 0, 1 and
# (2t + 8, 2t + 9) r = 2, 3: a fragment register's pair is two consecutive k, as in the activations' B fragment.
DG_SLOT_COLUMN: tuple[int, ...] = (0, 1, 8, 9)

DG_TILE_N = 16  # a tile's rows: N is padded to a multiple of 16
DG_CHUNK_K = 64  # four 16-k tiles, one word each a lane: K is padded to a multiple of 64
DG_WORDS_PER_CHUNK = 128  # 32 lanes x 4 words: 512 contiguous bytes

_SHIFTS = (4 * np.arange(8)).astype(np.uint32)

# For each order, the value (0..7, within its word) that nibble j holds, and its inverse: the nibble value i is in.
_VALUE_OF_NIBBLE: dict[str, tuple[int, ...]] = {"linear": tuple(range(8)), "awq": AWQ_ORDER}
_NIBBLE_OF_VALUE: dict[str, tuple[int, ...]] = {
    order: tuple(values.index(i) for i in range(8)) for order, values in _VALUE_OF_NIBBLE.items()}


def _slot_nibbles() -> NDArray[np.intp]:
    """[2, 4]: the nibble that holds the row half (n % 16) // 8 at r = k % 4, read off DG_NIBBLES and DG_SLOT_COLUMN."""
    table = np.full((2, 4), -1, dtype=np.intp)
    for j, (row, column) in enumerate(DG_NIBBLES):
        table[row // 8, DG_SLOT_COLUMN.index(column)] = j
    assert (table >= 0).all(), "DG_NIBBLES covers every (row half, r) of a lane's word once"
    return table


_DG_SLOT_NIBBLE = _slot_nibbles()


# ------------------------------------------------------------------------------------------------ checks


def _choice(value: str, choices: Sequence[str], argument: str) -> str:
    if value not in choices:
        raise PackError(argument, f"unknown {argument} {value!r}", f"one of {', '.join(choices)}")
    return value


def _size(value: int, argument: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise PackError(argument, f"{value!r} is not a size", f"a positive integer: the weight's {argument}")
    return int(value)


def _integers(array: ArrayLike, argument: str) -> NDArray[np.integer]:
    a = np.asarray(array)
    if not np.issubdtype(a.dtype, np.integer):
        raise PackError(argument, f"dtype {a.dtype} is not an integer type",
                        "pass the quantized integers (int8, uint8, int32, ...), not floats or dequantized weights")
    return a


def _in_range(a: NDArray[np.integer], low: int, high: int, argument: str, fix: str) -> None:
    """Every value of `a` within low..high, else a PackError naming the first one outside."""
    bad = (a < low) | (a > high)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise PackError(argument, f"value {int(a[where])} at index {list(where)} is outside {low}..{high}", fix)


def _nibbles(values: ArrayLike, argument: str) -> NDArray[np.uint8]:
    a = _integers(values, argument)
    _in_range(a, 0, 15, argument, "4-bit values are 0..15: convert int4 values (-8..7) with unsigned() first")
    return a.astype(np.uint8)


def _words(words: ArrayLike, argument: str) -> NDArray[np.uint32]:
    a = np.asarray(words)
    if a.dtype not in (np.int32, np.uint32):
        raise PackError(argument, f"dtype {a.dtype} is not a 32-bit word",
                        "pass the packed words as int32 or uint32 (a checkpoint's qweight / qzeros as stored)")
    return a.view(np.uint32)


def _axis(axis: int, ndim: int, argument: str = "axis") -> int:
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)) or not -ndim <= axis < ndim:
        raise PackError(argument, f"{axis!r} is not an axis of a {ndim}-d array",
                        f"an integer in {-ndim}..{ndim - 1}" if ndim else "pass an array of at least one dimension")
    return int(axis) % ndim


def _shape(a: NDArray, expected: tuple[int, ...], argument: str, what: str, fix: str) -> None:
    if a.shape != expected:
        raise PackError(argument, f"shape {list(a.shape)} is not {what} = {list(expected)}", fix)


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


# ------------------------------------------------------------------------------------------------ words


def unpack(words: ArrayLike, axis: int, order: Order = "linear") -> NDArray[np.uint8]:
    """The nibble values of 32-bit words, `axis` 8x longer: the word at index w along `axis` gives the values at
    8w .. 8w + 7 there, value 8w + i from nibble i (`linear`) or from the nibble that holds AWQ_ORDER's value i
    (`awq`). Invariants: the result is uint8 in 0..15, `pack(unpack(w, a, o), a, o)` is w (as uint32)."""
    w = _words(words, "words")
    ax = _axis(axis, w.ndim)
    _choice(order, ORDERS, "order")
    nibbles = ((w[..., None] >> _SHIFTS) & 0xF).astype(np.uint8)  # [..., 8]: nibble j at [..., j]
    values = nibbles[..., list(_NIBBLE_OF_VALUE[order])]  # [..., 8]: the word's value i at [..., i]
    values = np.moveaxis(values, ax, -2)  # [..., words, 8] -> [..., 8 * words]
    values = values.reshape(*values.shape[:-2], 8 * values.shape[-2])
    return np.ascontiguousarray(np.moveaxis(values, -1, ax))


def pack(values: ArrayLike, axis: int, order: Order = "linear") -> NDArray[np.uint32]:
    """The inverse of `unpack`: values 0..15 (any integer dtype) eight to a uint32 word along `axis`, whose length
    is padded up to a multiple of 8 with zero values. Invariants: the result has `ceil(len / 8)` words along `axis`;
    `unpack(pack(v, a, o), a, o)` is v followed by the zero padding."""
    v = _nibbles(values, "values")
    ax = _axis(axis, v.ndim)
    _choice(order, ORDERS, "order")
    v = np.moveaxis(v, ax, -1).astype(np.uint32)
    v = np.pad(v, [(0, 0)] * (v.ndim - 1) + [(0, -v.shape[-1] % 8)])
    v = v.reshape(*v.shape[:-1], v.shape[-1] // 8, 8)  # [..., words, 8]: the word's value i at [..., i]
    nibbles = v[..., list(_VALUE_OF_NIBBLE[order])]  # [..., words, 8]: what nibble j holds at [..., j]
    words = np.bitwise_or.reduce(nibbles << _SHIFTS, axis=-1).astype(np.uint32)
    return np.ascontiguousarray(np.moveaxis(words, -1, ax))


# ------------------------------------------------------------------------------------------------ the dg layout


def dg_words(k: int, n: int) -> int:
    """How many words the dg layout of a [k, n] weight takes: ceil(n / 16) * ceil(k / 64) * 128 (the spec's count,
    spec.model.dg_words, for checked sizes)."""
    return spec_dg_words(_size(k, "k"), _size(n, "n"))


def dg_position(k: int, n: int) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """([k, n] word index, [k, n] nibble index) of every value of a [k, n] weight in the dg layout:

        K64 = ceil(K / 64)
        word   = ((n // 16) * K64 + k // 64) * 128 + 4 * lane + (k % 16) // 4,  lane = 4 * (n % 8) + (k % 64) // 16
        nibble = the j with DG_NIBBLES[j] = (n % 16 - n % 8, DG_SLOT_COLUMN[k % 4])
               = (n % 16) // 8 + 2 * ((k % 4) // 2) + 4 * (k % 2)

    Invariant: the (word, nibble) pairs are distinct and lie below dg_words(k, n) words."""
    k64 = _ceil(_size(k, "k"), DG_CHUNK_K)
    kk = np.arange(k, dtype=np.intp)[:, None]
    nn = np.arange(_size(n, "n"), dtype=np.intp)[None, :]
    g, t = nn % 8, (kk % 64) // 16
    lane = 4 * g + t
    word = ((nn // 16) * k64 + kk // 64) * 128 + 4 * lane + (kk % 16) // 4
    nibble = _DG_SLOT_NIBBLE[(nn % 16) // 8, kk % 4]
    return word, nibble


def to_dg(q: ArrayLike) -> NDArray[np.uint32]:
    """A [K, N] weight's nibble values (0..15) in the dg layout: one dense 1-D run of dg_words(K, N) uint32 words,
    zero nibbles past K and N. Invariant: `from_dg(to_dg(q), K, N)` is q."""
    values = _nibbles(q, "q")
    if values.ndim != 2:
        raise PackError("q", f"shape {list(values.shape)} is not a [K, N] matrix", "pass the weight as [K, N]")
    k, n = values.shape
    word, nibble = dg_position(k, n)
    flat = np.zeros(8 * dg_words(k, n), dtype=np.uint8)  # every nibble of every word, in order
    flat[8 * word + nibble] = values
    return pack(flat, 0, "linear")


def from_dg(words: ArrayLike, k: int, n: int) -> NDArray[np.uint8]:
    """The [k, n] nibble values (uint8, 0..15) that `words`, a dg layout of a [k, n] weight, holds; the padding past
    k and n is not read. Invariant: `to_dg(from_dg(w, k, n))` is w where w's padding is zero."""
    w = _words(words, "words")
    _shape(w, (dg_words(k, n),), "words", f"the dg layout's [ceil(n/16) * ceil(k/64) * 128] for k={k}, n={n}",
           "pass the 1-D words `deepgemm pack --to dg` wrote, with the k and n it was packed for")
    word, nibble = dg_position(k, n)
    return unpack(w, 0, "linear")[8 * word + nibble]


# ------------------------------------------------------------------------------------------------ values


def signed(nibbles: ArrayLike) -> NDArray[np.int8]:
    """int4 values (-8..7, int8) from their two's complement nibbles (0..15): 8..15 are -8..-1."""
    v = _nibbles(nibbles, "nibbles").astype(np.int8)
    return np.where(v >= 8, v - 16, v).astype(np.int8)


def unsigned(values: ArrayLike) -> NDArray[np.uint8]:
    """The two's complement nibbles (0..15, uint8) of int4 values (-8..7): -8..-1 are 8..15. `signed`'s inverse."""
    v = _integers(values, "values")
    _in_range(v, -8, 7, "values", "int4 values are -8..7; values 0..15 are nibbles already")
    return (v.astype(np.int16) & 0xF).astype(np.uint8)


def dequantize(q: ArrayLike, scales: ArrayLike, group: int, zeros: ArrayLike | None = None,
               form: Form = "subtract") -> NDArray[np.float64]:
    """The float64 [K, N] weight w of the quantized integers q [K, N], one scale and zero a group of `group` k and a
    column: row k reads group k // group of scales and zeros, each [ceil(K / group), N] (group >= K: one per column).

        subtract (default):  w = (q - z) * s     GPTQ's and AWQ's convention
        prescaled:           w = q * s - z       z holds z * s already
        zeros=None:          w = q * s           symmetric
    """
    qv = _integers(q, "q")
    if qv.ndim != 2:
        raise PackError("q", f"shape {list(qv.shape)} is not a [K, N] matrix", "pass the weight as [K, N]")
    k, n = qv.shape
    g = _size(group, "group")
    _choice(form, FORMS, "form")
    groups = _ceil(k, g)
    s = np.asarray(scales, dtype=np.float64)
    _shape(s, (groups, n), "scales", f"[ceil(K/group), N] for K={k}, N={n}, group={g}",
           "one scale a group of k and a column (a per-channel scale: group = K, scales [1, N])")
    row_group = np.arange(k) // g
    w = qv.astype(np.float64)
    if zeros is None:
        return w * s[row_group]
    z = np.asarray(zeros, dtype=np.float64)
    _shape(z, (groups, n), "zeros", f"[ceil(K/group), N] for K={k}, N={n}, group={g}",
           "zeros have the scales' shape: unpack packed qzeros with repack_zeros first")
    if form == "subtract":
        return (w - z[row_group]) * s[row_group]
    return w * s[row_group] - z[row_group]


# ------------------------------------------------------------------------------------------------ checkpoints


def _source_nibbles(qweight: ArrayLike, source: str, k: int, n: int) -> NDArray[np.uint8]:
    """The [k, n] nibble values of a weight as stored in `source`'s layout."""
    expected = {"gptq": (_ceil(k, 8), n), "awq": (k, _ceil(n, 8)), "int8": (k, n), "uint8": (k, n)}
    what = {"gptq": "GPTQ's qweight [ceil(k/8), n]", "awq": "AWQ's qweight [k, ceil(n/8)]",
            "int8": "a plain [k, n]", "uint8": "a plain [k, n]"}
    a = np.asarray(qweight)
    if a.shape != expected[source]:
        others = [s for s in SOURCES if s != source and expected[s] == a.shape]
        hint = f"; or this is the {others[0]} layout: --from {others[0]}" if others else ""
        raise PackError("qweight", f"shape {list(a.shape)} is not {what[source]} = {list(expected[source])} for "
                                   f"k={k}, n={n}",
                        f"pass the k (in_features) and n (out_features) the weight was quantized with{hint}")
    if source == "gptq":
        return unpack(_words(a, "qweight"), 0, "linear")[:k]
    if source == "awq":
        return unpack(_words(a, "qweight"), 1, "awq")[:, :n]
    v = _integers(a, "qweight")
    if source == "int8":
        _in_range(v, -8, 7, "qweight", "an int8 source packs to 4 bits: its values must be -8..7 (8-bit weights "
                                       "need no packing: an int8 B is an ordinary view)")
        return unsigned(v)
    _in_range(v, 0, 15, "qweight", "a uint8 source packs to 4 bits: its values must be 0..15 (8-bit weights "
                                   "need no packing: a uint8 B is an ordinary view)")
    return v.astype(np.uint8)


def repack(qweight: ArrayLike, source: Source, target: Target, k: int, n: int, *, bits: int = 4,
           gptq_v1: bool = False) -> NDArray[np.uint32] | NDArray[np.int32]:
    """A [k, n] 4-bit weight from `source`'s layout in `target`'s.

    Sources: `gptq` (qweight [ceil(k/8), n], int32/uint32, packed along k, linear order), `awq` ([k, ceil(n/8)],
    packed along n, AWQ's order), `int8` (plain [k, n], values -8..7: int4 as two's complement nibbles) and `uint8`
    (plain [k, n], values 0..15). Targets: `dg` (1-D uint32, `to_dg`), `gptq` and `awq` (int32, the checkpoints'
    dtype, in their shapes). Spare nibbles past k (gptq) or n (awq) in a source are not read; in a target they
    are zero. `bits` must be 4. `gptq_v1` is for a gptq source only and changes no weight bit (v1 and v2 differ in
    their qzeros alone: `repack_zeros`). Invariant: the values (`unpack`/`from_dg` of the result) are the source's.
    """
    _choice(source, SOURCES, "source")
    _choice(target, TARGETS, "target")
    k, n = _size(k, "k"), _size(n, "n")
    if bits != 4:
        raise PackError("bits", f"{bits}-bit weights are not packed", "bits=4; 8-bit weights (int8, uint8) need no "
                                                                      "packing: B is an ordinary int8/uint8 view")
    if gptq_v1 and source != "gptq":
        raise PackError("gptq_v1", f"is for a gptq source, not {source}",
                        "drop it (only GPTQ v1 checkpoints store zero - 1)")
    q = _source_nibbles(qweight, source, k, n)
    if target == "dg":
        return to_dg(q)
    if target == "gptq":
        return pack(q, 0, "linear").view(np.int32)
    return pack(q, 1, "awq").view(np.int32)


def repack_zeros(qzeros: ArrayLike, source: Source, groups: int, n: int, gptq_v1: bool = False) -> NDArray[np.uint8]:
    """The [groups, n] zero points (uint8) of GPTQ's or AWQ's packed qzeros [groups, ceil(n/8)] (int32/uint32, packed
    along n: gptq in linear order, awq in AWQ's). Values 0..15; with `gptq_v1` (a v1 checkpoint stores z - 1), the
    stored value + 1, 1..16: a stored 15 is a true zero of 16 (what v1's own kernels compute), neither wrapped to 0
    nor clipped to 15, so the result does not fit a nibble and is a uint8 view (`zeros: {B: {dtype: uint8}}`)."""
    _choice(source, ("gptq", "awq"), "source")
    groups, n = _size(groups, "groups"), _size(n, "n")
    if gptq_v1 and source != "gptq":
        raise PackError("gptq_v1", f"is for a gptq source, not {source}",
                        "drop it (only GPTQ v1 checkpoints store zero - 1)")
    z = np.asarray(qzeros)
    _shape(z, (groups, _ceil(n, 8)), "qzeros", f"{source.upper()}'s qzeros [groups, ceil(n/8)] for groups={groups}, "
           f"n={n}", "pass the checkpoint's qzeros for this weight (one row a group of k, packed along n)")
    values = unpack(_words(z, "qzeros"), 1, "linear" if source == "gptq" else "awq")[:, :n]
    return values + np.uint8(1) if gptq_v1 else values
