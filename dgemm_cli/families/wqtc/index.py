"""The `wqtc` family's index maps as data (pure): dg/wqtc.cuh's kernel for one plan, one `KernelModel`.

Block b owns the NS strips of 16 columns from strip0 = b NS; warp w of its WK takes the chunks c = w + WK i of K's
K_CHUNKS (64 k each) while c < K_CHUNKS (the header's `i < mine`: `chunk_count`); lane (g, t) = (lane / 4, lane % 4).
Each value the kernel feeds an mma slot is stated as B's value at the slot's (k, n): lane (g, t)'s fragment register
i of 16-k tile kt holds, in its half h, row n = 16 strip + g + 8 (i % 2) and the chunk's k offset 16 t + 4 kt +
2 (i / 2) + h (the kernel's permutation of the chunk's k: lane t takes its 16 consecutive k), in each layout
  DG_WORDS  from word kt of the lane's 16-byte load at place i + 4 h (the dg layout packs that permutation);
  K_WORDS   from the word of k = 16 t + 8 (kt / 2) of that row at place 2 (2 (kt % 2) + i / 2) + h (byte 2 (kt % 2)
            + i / 2 of the word, low nibble in the low half);
  K_BYTES   (8-bit) from byte 4 kt + 2 (i / 2) + h of the lane's run of that row, k = 16 t .. 16 t + 15 (byte e its k
            16 t + e: `b_byte_slot_k`), one 16-byte load where the run lies below K, else a byte load of each k < K
            (zero past K: `b_byte_zero_fill`);
and the activations the mma's B fragment holds at the same slot (register j = i / 2, half h) are A's at the same k
(`a_*` accesses, `a_slot_k`), so each product is B(k, n) A(m, k) (the fragment layouts of mma.m16n8k16 are
trusted). The slots of a chunk cover its 64 k once (`k_slots`), the chunks of a strip are taken once
(`chunk_cover`): each k of K once. The loads read the layout's padding too (k up to 64 K_CHUNKS, or up to 8
ceil(K / 8) for K_WORDS; n up to 16 STRIPS): its values meet zero activations (A's lanes past K are zero:
`a_*_zero_fill`) or land in columns never stored; the element statements of B hold over that padded extent. K_BYTES
reads no padding: its element statements hold over K x N.

The scales and zero points are loaded at k_q = 64 c + 16 t (QPC 1: the lane's 16 k of the chunk) or 0 (QPC 0, one a
column) for columns 16 strip + g + 8 h, zero past N or K; `quant_group` proves k_q lies in the group of every k its
scale serves. A strip past the last (the grid's last block) reads strip 0 and stores nothing (`strip_clamp_unstored`).
The store: warp 0's lane (g, t), fragment j of strip s and row tile mt, at (m, n) = (8 mt + 2 t + j % 2, 16 (strip0 +
s) + g + 8 (j / 2)) through T::store, nothing past M or N.

Each intermediate is a `Let` named as the header declares it; `SPELLED` lists the header lines where the model
resolves a compile-time branch or a loop's variable."""

from __future__ import annotations

from dgemm_cli.families.cta.index import Rows, epilogue_accesses, rows_of
from dgemm_cli.families.wq.index import nibble_at, wq_role_offset, wq_role_slot, wq_segments
from dgemm_cli.families.wqtc import WqtcPlan
from dgemm_cli.formal.expr import INDEX, TRUE, Cmp, Expr, Ite, Let, Not, Or, Pred, Var, all_of
from dgemm_cli.formal.expr import const as _c
from dgemm_cli.formal.model import BLOCK, LANE, THREAD, Access, Bijection, Fact, KernelModel, Range, Reach
from dgemm_cli.formal.packed import QuantView, quant_reach_of, quant_views
from dgemm_cli.formal.views import operand_reach, role_offset, segments
from dgemm_cli.views import ProblemViews

HEADERS = ("dg/wqtc.cuh", "dg/wq.cuh")

SPELLED = {
    "lane": "const int lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32;",
    "warp": "const int lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32;",
    "g": "const int g = lane / 4, t = lane % 4;",
    "t": "const int g = lane / 4, t = lane % 4;",
    "strip0": "const index_t strip0 = index_t(blockIdx.x) * T::NS;",
    "strip": "const index_t strip = strip0 + s < index_t(T::STRIPS) ? strip0 + s : index_t(0);",
    "base": "base[s] = B + (strip * index_t(T::K_CHUNKS)) * 128 + 4 * lane;",
    "B_offset": "slot.b[s].w = load_stream(base[s] + chunk * 128);",
    "chunk": "const index_t chunk = index_t(warp + T::WK * i);",
    "word_k": "const index_t k = chunk * 64 + 16 * t + 8 * j, n = (strip0 + s) * 16 + g + 8 * h;",
    "word_n": "const index_t k = chunk * 64 + 16 * t + 8 * j, n = (strip0 + s) * 16 + g + 8 * h;",
    "B_word_offset": "? __ldg(B + (T::Weights::k::offset(k) + T::Weights::n::offset(n))) : 0u;",
    "byte": "const uint32_t byte = uint32_t(byte0 + i / 2);",
    "byte_k": "const index_t k = chunk * 64 + 16 * t, n = (strip0 + s) * 16 + g + 8 * h;",
    "byte_n": "const index_t k = chunk * 64 + 16 * t, n = (strip0 + s) * 16 + g + 8 * h;",
    "B_byte_offset": "const typename T::B_t* p = B + (T::Weights::k::offset(k) + T::Weights::n::offset(n));",
    "quant_k": "auto quant_k = [&](index_t chunk) { return chunk * 64 + 16 * t; };",
    "quant_n": "if constexpr (QPC == 1) slot.q[s] = load_quant<T>(quant, quant_k(chunk), (strip0 + s) * 16 + g);",
    "col": "const typename T::index_t col = n + 8 * h;",
    "S_offset": "r.s[h] = in ? __ldg(quant.scales + (S::k::offset(k) + S::n::offset(col))) : typename T::S_t(0);",
    "Z_offset": "if constexpr (Z::HAS) r.z[h] = in ? __ldg(quant.zeros + (Z::k::offset(k) + Z::n::offset(col)))",
    "z_v": "return float(wq::nibble<Z::ORDER, false>(raw, Z::k::slot(k) + Z::n::slot(n)));",
    "z_at": "const int at = ORDER == AWQ ? (v & 1) * 4 + (v >> 1) : v;",
    "a_m": "activation_fragments<T, HOIST>(A, index_t(mt * 8 + g), chunk, 0, M, t, act[mt]);",
    "run_k0": "activation_run<T, 2 * TILES>(A, m, chunk * 64 + 16 * t + 4 * kt0, M, r);",
    "A_row_offset": "const E* row = A + Av::m::offset(m);",
    "m": "const index_t n = (strip0 + s) * 16 + g + 8 * (j / 2), m = index_t(mt * 8 + 2 * t + (j % 2));",
    "n": "const index_t n = (strip0 + s) * 16 + g + 8 * (j / 2), m = index_t(mt * 8 + 2 * t + (j % 2));",
    "M": "const index_t M = T::rows_at_run_time ? M_arg : T::M;",
}


def models(views: ProblemViews, plan: WqtcPlan, name: str) -> list[KernelModel]:
    assert views.batch == 1, "the wqtc family takes no batch (its gate)"
    rows = rows_of(views)
    a_path = ("16-byte" if plan.a_vec16 else "pairs") if plan.a_pairs else "elements"
    return [_Kernel(views, plan, rows).model(
        f"{name} [wqtc {plan.layout}: {plan.wk} warps x {plan.ns} strip(s), {plan.mt} row tile(s), A {a_path}]")]


class _Kernel:
    """The kernel's shared intermediates for one plan."""

    def __init__(self, views: ProblemViews, plan: WqtcPlan, rows: Rows) -> None:
        self.views, self.plan, self.rows = views, plan, rows
        self.dg = plan.layout == "dg"
        self.N, self.K = _c(views.n, "T::N", INDEX), _c(views.k, "T::K", INDEX)
        self.lane, self.warp = Let("lane", THREAD % _c(32)), Let("warp", THREAD // _c(32))
        self.g, self.t = Let("g", self.lane // _c(4)), Let("t", self.lane % _c(4))
        self.strip0 = Let("strip0", BLOCK.as_(INDEX) * _c(plan.ns, "T::NS", INDEX), INDEX)
        self.block_range = Range(BLOCK, _c(0), _c(plan.blocks, "T::BLOCKS"))
        self.thread_range = Range(THREAD, _c(0), _c(plan.threads, "T::WK * 32"))
        self.i, self.s = Var("i"), Var("s")
        self.chunk = Let("chunk", (self.warp + _c(plan.wk, "T::WK") * self.i).as_(INDEX), INDEX)
        self.chunks = _c(plan.k_chunks, "T::K_CHUNKS", INDEX)
        self.has_chunk = Cmp("<", self.chunk, self.chunks)
        self.loop = (self.block_range, self.thread_range, Range(self.i, _c(0), _c(-(-plan.k_chunks // plan.wk))))
        self.strips = (Range(self.s, _c(0), _c(plan.ns, "T::NS")),)
        self.quant = quant_views(views)

    # ---- the mma slots: (kt, register pair jp = i / 2, half h) of lane (g, t), the chunk's k offset they take

    @staticmethod
    def slot_k(t: Expr, kt: Expr, jp: Expr, half: Expr) -> Expr:
        return _c(16) * t + _c(4) * kt + _c(2) * jp + half

    def model(self, kernel: str) -> KernelModel:
        a_side, b_side = self.a_loads(), self.b_loads()
        accesses = [*(x for x in b_side if isinstance(x, Access)), *self.quant_loads(),
                    *(x for x in a_side if isinstance(x, Access))]
        stores, once = self.store()
        accesses += stores
        reach: dict[str, Reach] = {a.operand: operand_reach(self.views, a.operand, self.rows.rows) for a in accesses
                                   if a.operand not in self.quant}
        # A pointer the launcher checks (B of 8-bit weights without the spec's 16 bytes) is known that aligned here:
        # the fallback kernel takes the others.
        checked = self.plan.runtime_align
        reach.update({name: quant_reach_of(self.views, name, checked.get(name, 0)) for name in self.quant})
        bijections = [once, self.k_slots(), self.chunk_cover()]
        if self.plan.wk > 1:
            bijections.append(self.parked_slots())
        facts = [self.chunk_count(), *self.quant_group(), *(x for x in (*b_side, *a_side) if isinstance(x, Fact)),
                 self.a_slot_k()]
        if self.plan.layout == "k_bytes":
            facts.append(self.byte_slot_k())
        if self.plan.blocks * self.plan.ns > self.plan.strips:  # the grid's last block has a strip past the last
            facts.append(self.strip_clamp())
        return KernelModel(kernel, "wqtc", self.plan.index_type, reach, tuple(accesses), tuple(bijections),
                           tuple(facts), trusted=TRUSTED)

    # ---- B

    def b_loads(self) -> list[Access | Fact]:
        plan, views = self.plan, self.views
        reg, half = Var("reg"), Var("half")
        jp, row_h = reg // _c(2), reg % _c(2)
        usage = (Range(reg, _c(0), _c(4)), Range(half, _c(0), _c(2)))
        padded_n = _c(16 * plan.strips, "16 * T::STRIPS", INDEX)
        if self.dg:
            strip = Let("strip", Ite(Cmp("<", self.strip0 + self.s, _c(plan.strips, "T::STRIPS", INDEX)),
                                     self.strip0 + self.s, _c(0, ctype=INDEX)), INDEX)
            base = Let("base", (strip * self.chunks) * _c(128, ctype=INDEX) + (_c(4) * self.lane).as_(INDEX), INDEX)
            address = Let("B_offset", base + self.chunk * _c(128, ctype=INDEX), INDEX)
            # Word kt of the 16-byte load is lane LANE of the access; register reg's half `half` is its place
            # reg + 4 half.
            k = self.chunk * _c(64, ctype=INDEX) + self.slot_k(self.t, LANE, jp, half).as_(INDEX)
            n = strip * _c(16, ctype=INDEX) + (self.g + _c(8) * row_h).as_(INDEX)
            return [Access("b_chunk", "B: the lane's 16 bytes of a dg chunk (4 words: its mma A fragments of the "
                           "chunk's four 16-k tiles), each register's pair of places", "B", "load",
                           (*self.loop, *self.strips, *usage), Ite(self.has_chunk, _c(4), _c(0)), address, 4,
                           {"k": k, "n": n}, {"k": _c(64 * plan.k_chunks, "64 * T::K_CHUNKS", INDEX), "n": padded_n},
                           aligned=4, place=reg + _c(4) * half)]
        if plan.layout == "k_bytes":
            return self.byte_loads()
        h, j, kt2 = Var("h"), Var("j"), Var("kt2")
        word_k = Let("word_k", self.chunk * _c(64, ctype=INDEX) + (_c(16) * self.t + _c(8) * j).as_(INDEX), INDEX)
        word_n = Let("word_n", (self.strip0 + self.s) * _c(16, ctype=INDEX) + (self.g + _c(8) * h).as_(INDEX), INDEX)
        q = self.quant["B"]
        address = Let("B_word_offset", wq_role_offset(wq_segments(views, "k", q), word_k)
                      + wq_role_offset(wq_segments(views, "n", q), word_n), INDEX)
        # Tile kt = 2 j + kt2 reads word w[h][j]; register reg = 2 jp + h, byte 2 kt2 + jp, its half `half`.
        byte = Let("byte", _c(2) * kt2 + Var("jp"))
        kt_of = _c(2) * j + kt2
        k = self.chunk * _c(64, ctype=INDEX) + self.slot_k(self.t, kt_of, Var("jp"), half).as_(INDEX)
        moved = all_of(self.has_chunk, Cmp("<", word_k, self.K), Cmp("<", word_n, self.N))
        return [Access("b_word", "B: a word of eight k of one column (GPTQ's), the byte of each mma slot's pair",
                       "B", "load", (*self.loop, *self.strips, Range(h, _c(0), _c(2)), Range(j, _c(0), _c(2)),
                                     Range(kt2, _c(0), _c(2)), Range(Var("jp"), _c(0), _c(2)),
                                     Range(half, _c(0), _c(2))),
                       Ite(moved, _c(1), _c(0)), address, 1, {"k": k, "n": word_n},
                       {"k": _c(8 * -(-views.k // 8), "8 * ceil(K / 8)", INDEX), "n": self.N},
                       place=_c(2) * byte + half)]

    def byte_loads(self) -> list[Access | Fact]:
        """K_BYTES: byte_run<T>(B, k, n) of k = 64 chunk + 16 t, n = 16 (strip0 + s) + g + 8 h, n < N: one 16-byte
        load of k .. k + 15 where k + 16 <= K, else a byte load of each k + j < K (zero past K). K whole runs of 16:
        the byte loads move nothing (a run below K is whole, one past it has no k < K), stated as `b_runs_whole`
        in their place (their obligations would hold vacuously)."""
        views = self.views
        h, j = Var("h"), Var("j")
        byte_k = Let("byte_k", self.chunk * _c(64, ctype=INDEX) + (_c(16) * self.t).as_(INDEX), INDEX)
        byte_n = Let("byte_n", (self.strip0 + self.s) * _c(16, ctype=INDEX) + (self.g + _c(8) * h).as_(INDEX), INDEX)
        q = self.quant["B"]
        address = Let("B_byte_offset", wq_role_offset(wq_segments(views, "k", q), byte_k)
                      + wq_role_offset(wq_segments(views, "n", q), byte_n), INDEX)
        ranges = (*self.loop, *self.strips, Range(h, _c(0), _c(2)))
        column = all_of(self.has_chunk, Cmp("<", byte_n, self.N))
        whole = Cmp("<=", byte_k + _c(16, ctype=INDEX), self.K)
        extent = {"k": self.K, "n": self.N}
        # Byte e of the run is k + e: word kt's byte 2 jp + half, the k of mma slot (kt, jp, half) (`b_byte_slot_k`).
        run = Access("b_bytes16", "B: the lane's 16 k of a column of 8-bit weights in one 16-byte load (word kt: tile "
                     "kt's bytes)", "B", "load", ranges, Ite(all_of(column, whole), _c(16), _c(0)), address, 16,
                     {"k": byte_k + LANE, "n": byte_n}, extent, aligned=16)
        if views.k % 16 == 0:
            return [run, Fact("b_runs_whole", "full-k", "K is whole runs of 16: each run of B's bytes that starts "
                              "below K is one 16-byte load (the byte loads past it move nothing)", self.loop,
                              all_of(self.has_chunk, Cmp("<", byte_k, self.K)), whole)]
        kj = byte_k + j.as_(INDEX)
        tail = Access("b_byte", "B: a byte of the run where it crosses K, zero past K", "B", "load",
                      (*ranges, Range(j, _c(0), _c(16))),
                      Ite(all_of(column, Not(whole), Cmp("<", kj, self.K)), _c(1), _c(0)), address + j.as_(INDEX), 1,
                      {"k": kj, "n": byte_n}, extent, zero_fill=True, slot=all_of(self.has_chunk, Not(whole)))
        return [run, tail]

    def byte_slot_k(self) -> Fact:
        """K_BYTES: mma slot (kt, jp, half) of register 2 jp + h takes byte 2 jp + half of word kt of the run of row
        g + 8 h (dequantize_bytes), the run's byte 4 kt + 2 jp + half: k offset 16 t + that, the slot's k."""
        t, kt, jp, half = Var("t"), Var("kt"), Var("jp"), Var("half")
        run = _c(16) * t + (_c(4) * kt + (_c(2) * jp + half))
        return Fact("b_byte_slot_k", "full-k", "the weights of mma slot (kt, jp, half) are byte 2 jp + half of word kt "
                    "of the lane's run (its byte 4 kt + 2 jp + half): the slot's k",
                    (Range(t, _c(0), _c(4)), Range(kt, _c(0), _c(4)), Range(jp, _c(0), _c(2)),
                     Range(half, _c(0), _c(2))), TRUE, Cmp("==", run, self.slot_k(t, kt, jp, half)))

    # ---- the scales and zero points

    def quant_k(self, chunk: Expr, t: Expr) -> Expr:
        """quant_k(chunk): the k the lane's scales of a chunk are read at (0: one a column, read once)."""
        if self.plan.quant_loads == 0:
            return _c(0, ctype=INDEX)
        return Let("quant_k", chunk * _c(64, ctype=INDEX) + (_c(16) * t).as_(INDEX), INDEX)

    def quant_loads(self) -> list[Access]:
        plan = self.plan
        h = Var("h")
        k_q = self.quant_k(self.chunk, self.t)
        col = Let("col", (self.strip0 + self.s) * _c(16, ctype=INDEX) + (self.g + _c(8) * h).as_(INDEX), INDEX)
        if plan.quant_loads == 0:
            ranges = (self.block_range, self.thread_range, *self.strips, Range(h, _c(0), _c(2)))
            live: Pred = TRUE
        else:
            ranges = (*self.loop, *self.strips, Range(h, _c(0), _c(2)))
            live = self.has_chunk
        moved = Ite(all_of(live, Cmp("<", col, self.N), Cmp("<", k_q, self.K)), _c(1), _c(0))
        out = [self._quant_element("scale", "B_scales", "the scale of (k_q, col)'s group", ranges, moved, k_q, col,
                                   "S_offset")]
        zeros = self.quant.get("B_zeros")
        if zeros is not None:
            if zeros.packing is None:
                out.append(self._quant_element("zero", "B_zeros", "the zero point of (k_q, col)'s group", ranges,
                                               moved, k_q, col, "Z_offset"))
            else:
                out.append(self._packed_zero(zeros, ranges, moved, k_q, col))
        return out

    def _quant_element(self, ident: str, name: str, text: str, ranges: tuple[Range, ...], moved: Expr, k: Expr,
                       n: Expr, offset: str) -> Access:
        q = self.quant[name]
        address = Let(offset, wq_role_offset(wq_segments(self.views, "k", q), k)
                      + wq_role_offset(wq_segments(self.views, "n", q), n), INDEX)
        return Access(ident, f"{name}: {text}, zero past N or K", name, "load", ranges, moved, address, 1,
                      {"k": k, "n": n}, {"k": self.K, "n": self.N})

    def _packed_zero(self, q: QuantView, ranges: tuple[Range, ...], moved: Expr, k: Expr, n: Expr) -> Access:
        address = Let("Z_offset", wq_role_offset(wq_segments(self.views, "k", q), k)
                      + wq_role_offset(wq_segments(self.views, "n", q), n), INDEX)
        v = Let("z_v", wq_role_slot(wq_segments(self.views, "k", q), k) + wq_role_slot(wq_segments(self.views, "n", q),
                                                                                        n))
        return Access("zero", f"B_zeros: the zero point of (k_q, col)'s group (a word of eight along "
                      f"'{q.view.packing.along}', {q.packing} order), zero past N or K",  # type: ignore[union-attr]
                      q.name, "load", ranges, moved, address, 1, {"k": k, "n": n}, {"k": self.K, "n": self.N},
                      place=nibble_at(q.packing or "linear", v, "z_at"))

    def quant_group(self) -> list[Fact]:
        """The scale (and zero point) loaded at k_q serves every k of its slots: k_q and k lie in one group of the
        spec's k block."""
        plan = self.plan
        block = dict(next(sc.blocks for sc in self.views.spec.scales if sc.operand == "B"))
        k_letter = self.views.roles["k"].letters[0]
        group = block.get(k_letter, 1)
        chunk, t, kt, jp, half = Var("chunk"), Var("t"), Var("kt"), Var("jp"), Var("half")
        slot = self.slot_k(t, kt, jp, half)
        k = chunk.as_(INDEX) * _c(64, ctype=INDEX) + slot.as_(INDEX)
        # The scale pair every tile's slots use: cur.q[s].
        k_q = self.quant_k(chunk.as_(INDEX), t)
        ranges = (Range(chunk, _c(0), _c(plan.k_chunks)), Range(t, _c(0), _c(4)), Range(kt, _c(0), _c(4)),
                  Range(jp, _c(0), _c(2)), Range(half, _c(0), _c(2)))
        goal = Cmp("==", k_q // group, k // group) if group > 1 else Cmp("==", k_q, k)
        return [Fact("quant_group", "full-k", f"the scale and zero point loaded at k_q (QPC {plan.quant_loads}) are "
                     f"those of every k < K its slots take: one group of {group} k", ranges,
                     Cmp("<", k, _c(self.views.k)), goal)]

    # ---- A

    def a_loads(self) -> list[Access | Fact]:
        plan = self.plan
        mt = Var("mt")
        a_m = Let("a_m", (mt * _c(8) + self.g).as_(INDEX), INDEX)
        row = Let("A_row_offset", role_offset(segments(self.views, "A", "m"), a_m), INDEX)
        base = (*self.loop, Range(mt, _c(0), _c(plan.mt, "T::MT")))
        in_rows = all_of(self.has_chunk, Cmp("<", a_m, self.rows.M))
        M = self.rows.M
        # activation_run<T, PAIRS> at k0 = 64 chunk + 16 t + 4 kt0, r[q] = (k0 + 2q, k0 + 2q + 1).
        hoist = 4 if plan.mt <= 2 else 1
        pairs = 2 * hoist
        kt0 = Var("kt0")
        k0 = Let("run_k0", self.chunk * _c(64, ctype=INDEX) + (_c(16) * self.t + _c(4) * kt0).as_(INDEX), INDEX)
        ranges = (*self.rows.param, *base, Range(kt0, _c(0), _c(1 if hoist == 4 else 4)))
        whole = Cmp("<=", k0 + _c(2 * pairs, ctype=INDEX), self.K)
        vec = 8 if plan.a_pairs and plan.a_vec16 and pairs % 4 == 0 else \
            4 if plan.a_pairs and plan.a_vec16 and pairs == 2 else 2 if plan.a_pairs else 0
        out: list[Access | Fact] = []
        a_k = segments(self.views, "A", "k")
        if vec:
            v = Var("v")
            kv = k0 + (v * _c(vec)).as_(INDEX)
            out.append(Access(f"a_run{vec}", f"A: {vec} consecutive k of row 8 mt + g in one {2 * vec}-byte load",
                              "A", "load", (*ranges, Range(v, _c(0), _c(2 * pairs // vec))),
                              Ite(all_of(in_rows, whole), _c(vec), _c(0)), row + role_offset(a_k, kv), vec,
                              {"m": a_m, "k": kv + LANE}, {"m": M, "k": self.K}, aligned=vec))
        if vec and self.views.k % 64 == 0:
            out.append(self.always_whole(ranges, whole))
            return out
        fast: Pred = whole if vec else Cmp("<", _c(1), _c(0))
        qv, e = Var("q"), Var("e")
        ke = k0 + (_c(2) * qv + e).as_(INDEX)
        out.append(Access("a_elem", "A: an element of the run, zero past M and K", "A", "load",
                          (*ranges, Range(qv, _c(0), _c(pairs)), Range(e, _c(0), _c(2))),
                          Ite(all_of(in_rows, Not(fast), Cmp("<", ke, self.K)), _c(1), _c(0)),
                          row + role_offset(a_k, ke), 1, {"m": a_m, "k": ke}, {"m": M, "k": self.K},
                          zero_fill=True, slot=all_of(self.has_chunk, Not(fast))))
        return out

    def always_whole(self, ranges: tuple[Range, ...], whole: Pred) -> Fact:
        """K whole chunks: every run of a chunk below K_CHUNKS lies below K, so the element loads after the wide
        ones are never reached (their obligations would hold vacuously)."""
        return Fact("a_runs_whole", "full-k", "K is whole chunks: each activation load of a chunk takes the wide "
                    "path (the element fallback is never reached)", ranges, self.has_chunk, whole)

    def a_slot_k(self) -> Fact:
        """The mma's b[kt][jp] is r[2 (kt - kt0) + jp] of the run at kt0, whose half `half` has k offset 16 t + 4 kt0
        + 2 (2 (kt - kt0) + jp) + half: the weights' slot k."""
        hoist = 4 if self.plan.mt <= 2 else 1
        t, kt0, kk, jp, half = Var("t"), Var("kt0"), Var("ktr"), Var("jp"), Var("half")
        kt = kt0 + kk
        run = _c(16) * t + _c(4) * kt0 + _c(2) * (_c(2) * kk + jp) + half
        weights = _c(16) * t + _c(4) * kt + _c(2) * jp + half
        return Fact("a_slot_k", "full-k", "the activations of mma slot (kt, jp, half) are the run's pair 2 (kt - kt0) "
                    "+ jp: the k of the weights' slot", (Range(t, _c(0), _c(4)),
                                                           Range(kt0, _c(0), _c(1 if hoist == 4 else 4)),
                                                           Range(kk, _c(0), _c(hoist)), Range(jp, _c(0), _c(2)),
                                                           Range(half, _c(0), _c(2))),
                    TRUE, Cmp("==", run, weights))

    # ---- the sums

    def store(self) -> tuple[tuple[Access, ...], Bijection]:
        plan, views = self.plan, self.views
        mt, j = Var("mt"), Var("j")
        warp0 = Range(THREAD, _c(0), _c(32))  # warp 0 stores (`if (warp != 0) return;`)
        ranges = (*self.rows.param, self.block_range, warp0, *self.strips, Range(mt, _c(0), _c(plan.mt, "T::MT")),
                  Range(j, _c(0), _c(4)))
        n = Let("n", (self.strip0 + self.s) * _c(16, ctype=INDEX) + (self.g + _c(8) * (j // _c(2))).as_(INDEX), INDEX)
        m = Let("m", (mt * _c(8) + _c(2) * self.t + j % _c(2)).as_(INDEX), INDEX)
        stored = all_of(Cmp("<", m, self.rows.M), Cmp("<", n, self.N))
        accesses = epilogue_accesses(views, self.rows, _c(0, ctype=INDEX), ranges, m, n, Ite(stored, _c(1), _c(0)))
        y_m, y_n = Var("out_m", INDEX), Var("out_n", INDEX)
        strip = y_n // 16
        inverse = {"block": strip // plan.ns, "s": strip % plan.ns, "thread": (y_n % 8) * 4 + (y_m % 8) // 2,
                   "mt": y_m // 8, "j": ((y_n % 16) // 8) * 2 + y_m % 2}
        once = Bijection("store_once", f"the store: (block, lane of warp 0, strip, row tile, fragment) onto "
                         f"{views.spec.output.name}'s {views.m} x {views.n} elements, each once (none past M or N)",
                         "written-once", ranges[len(self.rows.param):], stored, (m, n),
                         (Range(y_m, _c(0), self.rows.M), Range(y_n, _c(0), self.N)), inverse,
                         params=self.rows.param)
        return accesses, once

    def parked_slots(self) -> Bijection:
        """Warps 1 .. WK-1 park acc[s][mt][j] at parked[warp - 1][(s MT + mt) 4 + j][lane], each slot once; warp 0
        reads the same (s, mt, j, lane) of each."""
        plan = self.plan
        w, s, mt, j, lane = Var("pw"), Var("s"), Var("mt"), Var("j"), Var("lane")
        sums = plan.ns * plan.mt * 4
        a, b, c = Var("slot_w"), Var("slot_sum"), Var("slot_lane")
        return Bijection("parked_slots", "the parked sums: (warp 1.., strip, row tile, fragment, lane) fill each slot "
                         "once", "full-k",
                         (Range(w, _c(1), _c(plan.wk)), Range(s, _c(0), _c(plan.ns)), Range(mt, _c(0), _c(plan.mt)),
                          Range(j, _c(0), _c(4)), Range(lane, _c(0), _c(32))), TRUE,
                         (w - 1, (s * plan.mt + mt) * 4 + j, lane),
                         (Range(a, _c(0), _c(plan.wk - 1)), Range(b, _c(0), _c(sums)), Range(c, _c(0), _c(32))),
                         {"pw": a + 1, "s": b // (4 * plan.mt), "mt": (b // 4) % plan.mt, "j": b % 4, "lane": c})

    def k_slots(self) -> Bijection:
        """A chunk's mma slots (t, kt, jp, half) take each of its 64 k once."""
        t, kt, jp, half, y = Var("t"), Var("kt"), Var("jp"), Var("half"), Var("chunk_k")
        image = t * 16 + kt * 4 + jp * 2 + half
        inverse = {"t": y // 16, "kt": (y % 16) // 4, "jp": (y % 4) // 2, "half": y % 2}
        return Bijection("k_slots", f"a chunk's mma slots (lane t, tile, register pair, half) cover its 64 k once "
                         f"({self.plan.layout})", "full-k",
                         (Range(t, _c(0), _c(4)), Range(kt, _c(0), _c(4)), Range(jp, _c(0), _c(2)),
                          Range(half, _c(0), _c(2))), TRUE, (image,), (Range(y, _c(0), _c(64)),), inverse)

    def chunk_cover(self) -> Bijection:
        """(warp, i) with chunk = warp + WK i < K_CHUNKS take each chunk of a strip once."""
        plan = self.plan
        w, i, y = Var("w"), Var("i"), Var("chunk_out")
        return Bijection("chunk_cover", f"(warp, i) take each of the {plan.k_chunks} chunks of a strip once",
                         "full-k", (Range(w, _c(0), _c(plan.wk)), Range(i, _c(0), _c(-(-plan.k_chunks // plan.wk)))),
                         Cmp("<", w + i * plan.wk, _c(plan.k_chunks)), (w + i * plan.wk,),
                         (Range(y, _c(0), _c(plan.k_chunks)),), {"w": y % plan.wk, "i": y // plan.wk})

    def chunk_count(self) -> Fact:
        """The header's `i < mine`, mine = warp < CHUNKS ? (CHUNKS - 1 - warp) / WK + 1 : 0, is chunk < CHUNKS."""
        plan = self.plan
        w, i = Var("w"), Var("i")
        chunks = plan.k_chunks
        mine = Ite(Cmp("<", w, _c(chunks)), (_c(chunks - 1) - w) // _c(plan.wk) + _c(1), _c(0))
        below = Cmp("<", w + i * plan.wk, _c(chunks))
        taken = Cmp("<", i, mine)
        return Fact("chunk_count", "full-k", "i < mine exactly where the chunk warp + WK i lies below K_CHUNKS",
                    (Range(w, _c(0), _c(plan.wk)), Range(i, _c(0), _c(-(-chunks // plan.wk) + 1))), TRUE,
                    all_of(Or((Not(taken), below)), Or((taken, Not(below)))))

    def strip_clamp(self) -> Fact:
        """A strip past the last reads strip 0; its sums' columns lie past N (never stored)."""
        plan = self.plan
        b, s, g, h = Var("block"), Var("s"), Var("g"), Var("h")
        strip = b * plan.ns + s
        return Fact("strip_clamp_unstored", "full-k", "a strip past the last (read as strip 0) holds columns past N "
                    "only: the store writes none of its sums", (Range(b, _c(0), _c(plan.blocks)),
                                                                Range(s, _c(0), _c(plan.ns)), Range(g, _c(0), _c(8)),
                                                                Range(h, _c(0), _c(2))),
                    Cmp("<=", _c(plan.strips), strip), Cmp("<=", _c(self.views.n), strip * 16 + g + h * 8))


TRUSTED = ("the PTX semantics of ld.global.nc.L1::no_allocate.v4, __ldg, mma.sync.m16n8k16 and its fragment layouts "
           "(lane (g, t)'s A registers i hold rows g + 8 (i % 2), k slots 2 t + 8 (i / 2) + (0, 1); its B registers j "
           "k slots 2 t + 8 j + (0, 1) of column g; its C registers j row g + 8 (j / 2), column 2 t + j % 2), and "
           "nvcc and ptxas",
           "the bit-level dequantization: lop3 with the magic exponent, __byte_perm(word, 0, byte | 0x4000 | (byte << "
           "8) | 0x40) putting byte `byte` in bytes 0 and 2, the XOR with 0x88888888 for int4: a place p is bits 4p .. "
           "4p + 3 of its word, pairs as the comments say; for 8-bit weights (K_BYTES) __byte_perm(word, 0x64, 0x4140 "
           "or 0x4342) putting bytes 2 jp and 2 jp + 1 of word kt under 0x64 (1024 + q in each f16 half), for bf16 "
           "__byte_perm(word, 0x4B, 0x4550 + b) putting byte b (0..3) of the word under 0x4B000000 (2^23 + q in f32) "
           "before one f32 subtraction and one conversion a pair, the XOR with 0x80808080 for int8 (q + 128): byte e "
           "of the lane's 16-byte run (byte e % 4 of word e / 4, little-endian) is its k 16 t + e",
           "the register ring: chunk i of a warp is filled into slot i % DEPTH before its use at iteration i",
           "the padding of the dg layout (zero nibbles past K and N, `deepgemm pack`'s) and the spare nibbles of "
           "GPTQ's last word: their products meet zero activations (k >= K) or land in columns never stored",
           "the shared-memory side beyond its indices: __syncthreads orders the parked sums' writes before warp 0 "
           "reads them")
