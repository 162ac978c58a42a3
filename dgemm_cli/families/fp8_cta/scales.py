"""How the `fp8_cta` kernel reads the scales of A and B (pure): each scale view as a ScaleRole a role (batch, m or n,
k), one (size, block, stride) a letter of the role, innermost first, as dg/fp8_cta.cuh's ScaleRole walks the role's
flat index; whether the scale varies along k; and the k period over which it stays constant, which the kernel's
k-tile must divide.

A scale varying along k is applied at each promotion (every k-tile): every thread loads its rows' (columns') scales
once a k-tile. A scale constant along k multiplies the f32 accumulators once, before the store.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dgemm_cli.spec.model import ScaleView
from dgemm_cli.views import ProblemViews

SECTOR_BYTES = 32  # an L1/L2 sector: what one scattered 4-byte load costs
MN_ROLE = {"A": "m", "B": "n"}


@dataclass(frozen=True)
class ScaleLetter:
    """One letter of a role as a scale view sees it."""

    letter: str
    size: int  # the letter's size
    block: int  # indices one scale covers along it (the size: one scale for all of it)
    stride: int  # elements between neighbouring scales along it (0: the view lacks the letter)

    @property
    def varying(self) -> bool:
        return self.block < self.size and self.stride != 0


@dataclass(frozen=True)
class ScaleRoles:
    """The scale view of one input as the kernel indexes it."""

    operand: str  # "A" or "B"
    name: str  # the view's name (A_scales, B_scales)
    view_letters: str
    roles: tuple[tuple[str, tuple[ScaleLetter, ...]], ...]  # (role, letters innermost first) for batch, mn, k

    def role(self, role: str) -> tuple[ScaleLetter, ...]:
        return dict(self.roles)[role]

    @property
    def k_varying(self) -> bool:
        return any(x.varying for x in self.role("k"))

    @property
    def k_period(self) -> int:
        """The flat k indices over which the scale stays constant, from 0 on (0: all of k): the gcd of the indices
        where it changes. A varying letter changes it every `block` of its own indices, and where it wraps around
        (unless it is the role's outermost letter, whose wrap is the end of k)."""
        period, inner = 0, 1
        letters = self.role("k")
        for i, x in enumerate(letters):
            if x.varying:
                outermost = i == len(letters) - 1
                period = math.gcd(period, inner * x.block if outermost else math.gcd(inner * x.block, inner * x.size))
            inner *= x.size
        return period

    def mode(self) -> str:
        """The blocks one scale covers, e.g. "1 m x 128 k", "all of m, k (per tensor)"."""
        parts = [f"{x.block if x.block < x.size else 'all'} {x.letter}" for _, xs in self.roles for x in reversed(xs)
                 if x.size > 1]
        if not self.view_letters:
            return "one scale for all of " + self.operand + " (per tensor)"
        return "one scale a block of " + " x ".join(parts)

    def describe(self) -> str:
        when = ("each k-tile, at its promotion" if self.k_varying
                else "once a tile, onto the f32 accumulators before the store (constant along k)")
        return (f"{self.name}[{self.view_letters}] f32, {self.mode()}: each thread loads the scales of its "
                f"{'rows' if self.operand == 'A' else 'columns'} {when}")

    def layout_hint(self) -> str | None:
        """Where the layout makes the loads slower than another would, what layout would be faster."""
        mn = [x for x in self.role(MN_ROLE[self.operand]) if x.size > 1]
        if not self.k_varying or not mn or mn[0].stride in (0, 1) or mn[0].block > 1:
            return None
        if 8 * mn[0].stride * 4 <= SECTOR_BYTES:
            return None
        role = MN_ROLE[self.operand]
        return (f"{self.name} is not {role}-contiguous (stride {mn[0].stride} along {mn[0].letter}): a warp's 8 "
                f"{'rows' if role == 'm' else 'columns'} read 8 sectors a k-tile where a {role}-contiguous layout "
                f"reads one; `scales.{self.operand}.layout: {'col' if role == 'm' else 'row'}` would be faster")


def scale_roles(views: ProblemViews, scale: ScaleView) -> ScaleRoles:
    """The scale view of one input over the problem's roles (any number of letters a role)."""
    view, blocks = scale.view, dict(scale.blocks)
    sizes = views.spec.sizes
    roles = []
    for role in ("batch", MN_ROLE[scale.operand], "k"):
        letters = [x for seg in reversed(views.roles[role].segments) for x in reversed(seg.letters)]
        roles.append((role, tuple(
            ScaleLetter(x, sizes[x], blocks.get(x, sizes[x]), view.stride_of(x) if x in view.letters else 0)
            for x in letters)))
    return ScaleRoles(scale.operand, view.name, view.letters, tuple(roles))
