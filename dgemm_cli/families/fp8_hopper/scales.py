"""How the `fp8_hopper` kernel reads the scales of A and B (pure): for each scale view, the rows of A (columns of B)
and the k one scale covers, its strides along them, and what that costs the consumers, in the words `explain` and the
kernel's header comment use.

The consumers read the scales themselves, with plain loads from global memory (L1 and L2 hold them: a scale serves
a 128-wide block of k for a whole row or tile): a scale uniform over a tile's rows (columns) is one load a
k-iteration; one a row of A is two loads an m64 block a thread (rows g and g + 8), one a column of B two an 8-column
group. Scales constant along k multiply the f32 accumulators once a tile instead of at every promotion.
"""

from __future__ import annotations

from dataclasses import dataclass

from dgemm_cli.families.hopper.views import block_k
from dgemm_cli.spec import DTYPE_BYTES
from dgemm_cli.spec.model import ScaleView
from dgemm_cli.views import ProblemViews

# k summed on the tensor core between promotions: one k-iteration, a 128-byte swizzle row of e4m3.
PROMOTION_K = block_k(DTYPE_BYTES["e4m3"])
SECTOR_BYTES = 32  # an L1/L2 sector: what one scattered 4-byte load costs


@dataclass(frozen=True)
class ScaleLoad:
    """The scale view of one input as the kernel reads it."""

    operand: str  # "A" or "B"
    name: str  # the view's name (A_scales, B_scales)
    role: str  # "m" (A's rows) or "n" (B's columns)
    letters: str  # the scale view's letters
    mn_block: int  # rows (columns) one scale covers; 0: one scale for all of them
    mn_stride: int  # elements between neighbouring scales along them
    mn_size: int  # rows of A (columns of B)
    k_block: int  # k one scale covers, a multiple of PROMOTION_K; 0: one scale for all of k
    k_stride: int

    @property
    def along_k(self) -> bool:
        return self.k_block != 0

    @property
    def k_iters_per(self) -> int:
        """k-iterations one scale covers (0: all of them)."""
        return self.k_block // PROMOTION_K

    def uniform(self, tile: int) -> bool:
        """Whether every row (column) of a tile `tile` wide shares one scale: tiles start at multiples of `tile`."""
        return self.mn_block == 0 or self.mn_block % tile == 0

    def held(self, tile: int, wg_m: int) -> int:
        """The scales a consumer thread loads of this view at once (ScaleOf<T, IsA>::COUNT): the tile's one, or
        its rows' (2 an m64 block of its `wg_m` rows: g and g + 8) or its columns' (2 an 8-column group)."""
        if self.uniform(tile):
            return 1
        return 2 * (wg_m // 64) if self.operand == "A" else tile // 4

    def mode(self) -> str:
        """The scaling mode in the words users know it by: "1 x 128 blocks (rows x k)", "per channel", ..."""
        which = "row" if self.role == "m" else "column"
        if self.mn_block == 0 and self.k_block == 0:
            return f"one scale for all of {self.operand} (per tensor)"
        if self.k_block == 0:
            return f"one scale a {which}" + ("" if self.mn_block == 1 else f" block of {self.mn_block}") + \
                " (per channel)"
        mn = str(self.mn_block) if self.mn_block else "all"
        return f"{mn} x {self.k_block} blocks ({which}s x k)"

    def describe(self, tile: int) -> str:
        """What the consumers load of this view, for a tile `tile` wide along its role."""
        when = "a k-iteration" if self.along_k else "once a tile (constant along k)"
        if self.uniform(tile):
            loads = f"one load {when}, shared by the tile's {'rows' if self.role == 'm' else 'columns'}"
        elif self.role == "m":
            loads = f"2 loads an m64 block a consumer thread (its rows g and g + 8), {when}"
        else:
            loads = f"{tile // 4} loads a consumer thread (its 2 columns of each 8-column group), {when}"
        return f"{self.name}[{self.letters}] f32, {self.mode()}: {loads}"

    def layout_hint(self, tile: int) -> str | None:
        """Where the layout makes the loads slower than another would, what layout would be faster."""
        if self.uniform(tile) or not self.along_k or self.mn_stride in (0, 1):
            return None
        span = 8 * self.mn_stride * 4
        which = "rows" if self.role == "m" else "columns"
        if span <= SECTOR_BYTES:
            return None
        return (f"{self.name} is not {self.role}-contiguous (stride {self.mn_stride} along {self.role}): a warp's 8 "
                f"{which} a k-iteration read 8 sectors where an {self.role}-contiguous layout reads one; "
                f"`scales.{self.operand}.layout: {'col' if self.role == 'm' else 'row'}` over [{self.letters}] "
                "would be faster")


def scale_load(views: ProblemViews, scale: ScaleView) -> ScaleLoad:
    """The scale view of one input, for a problem with one letter a role (the fp8_hopper gates)."""
    role = "m" if scale.operand == "A" else "n"
    view = scale.view
    mn_letters, k_letters = views.roles[role].letters, views.roles["k"].letters
    mn = mn_letters[0] if mn_letters and mn_letters[0] in view.letters else None
    k = k_letters[0] if k_letters and k_letters[0] in view.letters else None
    return ScaleLoad(
        operand=scale.operand, name=view.name, role=role, letters=view.letters,
        mn_block=scale.block(mn) if mn else 0, mn_stride=view.stride_of(mn) if mn else 0,
        mn_size=views.roles[role].size,
        k_block=scale.block(k) if k else 0, k_stride=view.stride_of(k) if k else 0)


def k_block_refusal(views: ProblemViews, scale: ScaleView) -> str | None:
    """Why the kernel cannot apply this view's scales at its promotions (None: it can): a scale must cover whole
    k-iterations."""
    k_letters = views.roles["k"].letters
    if not k_letters or k_letters[0] not in scale.view.letters:
        return None
    block = scale.block(k_letters[0])
    if block % PROMOTION_K:
        return (f"{scale.view.name} covers {block} of k: the kernel promotes every {PROMOTION_K} k, so a scale must "
                f"cover a multiple of {PROMOTION_K} (or all of k)")
    return None
