"""`--disable OPT[,OPT...]`: optimizations forced off in the constraint graphs (pure).

An option names an optimization as a user thinks of it (vector loads, TMA, a K split, ...) and says which
decisions of which families realise it: a node whose other values it forbids (`NodeOff`: the cta family's
`loader_a` keeps `gather`, the hopper family's `k_splits` keeps 1), or a family that cannot run without it
(`FamilyOff`: the hopper family has no loads but TMA). `constrained` adds the first as constraints to a family's
graph, ahead of its own (as `families.solving.pinned` adds a spec's pins), so that a decision reads
"loader_a = gather (forced by --disable vector-loads)"; `family_refusals` gives the second as gates, so that
`explain` says why the family lost. Planning then re-plans around them: another value of the node, another
family. An option no family of a problem uses changes nothing, and `explain` says so.

Some optimizations are no node here; asking to disable one is an error that says why (`REFUSED`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from dgemm_cli.arch import Arch
from dgemm_cli.constraints import ConstraintGraph
from dgemm_cli.errors import DeepGemmError
from dgemm_cli.families.solving import Problem
from dgemm_cli.spec.suggest import closest
from dgemm_cli.views import ProblemViews


@dataclass(frozen=True)
class NodeOff:
    """A node of some families' graphs whose values but `keep` the option forbids (`keep` empty: the least value of
    the node's domain, e.g. the shallowest pipeline)."""

    families: tuple[str, ...]
    node: str
    keep: tuple[Any, ...]
    why: str  # what the forbidden values are: "a cp.async or transposing load is a vector load"

    def kept(self, domain: tuple[Any, ...]) -> tuple[Any, ...]:
        """The values of `domain` the option leaves."""
        if not self.keep:
            return (min(domain),)
        return tuple(v for v in domain if v in self.keep)


@dataclass(frozen=True)
class FamilyOff:
    """A family that cannot run without the optimization: ruled out where `uses(views, arch)` says it would use it."""

    family: str
    why: str
    uses: Callable[[ProblemViews, Arch], bool] = lambda views, arch: True


@dataclass(frozen=True)
class DisableOption:
    name: str
    help: str  # one line, for --help
    nodes: tuple[NodeOff, ...] = ()
    families: tuple[FamilyOff, ...] = ()

    @property
    def constraint(self) -> str:
        """The name of its constraints and gates: what a decision it forces says it was forced by."""
        return f"--disable {self.name}"


_PIPELINED = ("cta", "splitk", "fp8_cta", "hopper", "fp8_hopper")
OPTIONS: dict[str, DisableOption] = {o.name: o for o in (
    DisableOption(
        "vector-loads", "vector loads of A and B (cp.async of 4-16 bytes, FFMA's transposing loads) -> element loads",
        nodes=(NodeOff(("cta", "splitk", "fp8_cta"), "loader_a", ("gather",),
                       "a cp.async or transposing load moves a vector; a gather loads elements"),
               NodeOff(("cta", "splitk", "fp8_cta"), "loader_b", ("gather",),
                       "a cp.async or transposing load moves a vector; a gather loads elements")),
        families=(FamilyOff("gemv", "B streams in the widest vectors its view allows (16-byte chunks): no element "
                                    "variant in its graph"),
                  FamilyOff("tcgemv", "B streams in whole 128-byte lines of 16-byte chunks: no element variant"),
                  FamilyOff("dot", "both inputs stream in the widest vectors their views allow: no element variant "
                                   "in its graph"))),
    DisableOption(
        "tma", "TMA tensor copies (cp.async.bulk.tensor) -> the families that load without them",
        nodes=(NodeOff(("tcgemv",), "a_stage", ("l1",), "the staged activation is loaded by TMA"),),
        families=(FamilyOff("hopper", "its producer loads every A and B box with TMA"),
                  FamilyOff("fp8_hopper", "its producer loads every A and B box with TMA"))),
    DisableOption(
        "wgmma", "the sm_90a warpgroup MMA (wgmma.mma_async) -> mma.sync or FFMA families",
        families=(FamilyOff("hopper", "its math is wgmma"), FamilyOff("fp8_hopper", "its math is e4m3 wgmma"))),
    DisableOption(
        "multicast", "TMA multicast of A's box over a cluster -> each block loads its own box",
        nodes=(NodeOff(("hopper", "fp8_hopper"), "a_multicast", (1,), "A's box is shared over a cluster"),)),
    DisableOption(
        "ksplit", "K split over blocks (split-K: clusters, groups, the splitk family) -> one block a tile sums all K",
        nodes=(NodeOff(("hopper", "fp8_hopper"), "k_splits", (1,), "blocks of a cluster split K"),
               NodeOff(("gemv",), "splits", (1,), "blocks of a cluster split K"),
               NodeOff(("dot",), "groups", (1,), "blocks split K, summed by a second kernel")),
        families=(FamilyOff("splitk", "every plan splits K over a cluster"),)),
    DisableOption(
        "dependent-launch", "programmatic dependent launch (PDL, griddepcontrol) -> plain launches",
        nodes=(NodeOff(("tcgemv",), "a_stage", ("shared",),
                       "the kernel that loads the activation through L1 is a dependent launch"),),
        families=(FamilyOff("hopper", "its launches are dependent where the grid fills the GPU, its split and "
                                      "multicast ones always"),
                  FamilyOff("fp8_hopper", "its launch is dependent where the grid fills the GPU"),
                  FamilyOff("splitk", "its clusters and its groups' second kernel are dependent launches"),
                  FamilyOff("dot", "both of its kernels are dependent launches"),
                  FamilyOff("gemv", "its launch is dependent wherever the arch has griddepcontrol (a plan fact, "
                                    "not a node)", lambda views, arch: arch.grid_dependency))),
    DisableOption(
        "pipeline",
        "multi-stage shared-memory pipelines -> the fewest stages a family allows (2; hopper's TMA ring: 3)",
        nodes=(NodeOff(_PIPELINED, "stages", (), "deeper than the family's shallowest ring"),)),
    DisableOption(
        "unroll", "several chunks in flight a thread (gemv, dot) -> one",
        nodes=(NodeOff(("gemv", "dot"), "unroll", (1,), "more than one chunk in flight a thread"),)),
)}

# Optimizations asked for by name that no node realises here, and why.
REFUSED = {
    "swizzle": "no node: the 128-byte TMA swizzle is the shared-memory layout wgmma reads (hopper, fp8_hopper, "
               "tcgemv's staged activation) and the tile raster order is a constant; --disable tma or wgmma rules "
               "those kernels out instead",
    "fp8-promotion": "e4m3 products are promoted to f32 every k-tile because the tensor core's FP8 accumulation keeps "
                     "fewer mantissa bits than f32: without it the kernels miss the verify tolerance, so it is no "
                     "optimization to turn off",
    "packed-store": "no node: the hopper family packs its store wherever the output allows (16-bit, vectors of 8 or "
                    "more, no view read by the epilogue, no K split) and takes it only when beta == 0 at run time; "
                    "--disable ksplit or tma changes the store with the plan",
}


class DisableError(DeepGemmError):
    """A `--disable` option that is not one, or one no node realises. The message names the option and the fix."""


def parse_disable(text: str | Iterable[str] | None, where: str = "--disable") -> tuple[str, ...]:
    """The options of `--disable a,b` (or a list of names), in OPTIONS's order; DisableError for an unknown or a
    refused one."""
    if text is None:
        return ()
    words = text.split(",") if isinstance(text, str) else list(text)
    names = [w.strip().lower() for w in words if w.strip()]
    for name in names:
        if name in OPTIONS:
            continue
        if name in REFUSED:
            raise DisableError(f"{where} {name}: cannot be disabled ({REFUSED[name]}). Fix: leave it out "
                               f"(options: {', '.join(OPTIONS)})")
        near = closest(name, [*OPTIONS, *REFUSED])
        hint = ("" if near is None else f"did you mean '{near}'? Else " if near in OPTIONS else
                f"'{near}' cannot be disabled ({REFUSED[near]}); ")
        raise DisableError(f"{where} {name}: no such option. Fix: {hint}use one of: {', '.join(OPTIONS)}")
    return tuple(o for o in OPTIONS if o in names)


def help_text() -> str:
    """--help's list: each option and what it turns off, then those refused."""
    lines = [f"{o.name}: {o.help}" for o in OPTIONS.values()]
    return "; ".join(lines) + ". Not disableable: " + ", ".join(REFUSED) + "."


def overriding(pins: dict[str, Any], disabled: tuple[str, ...]) -> dict[str, Any]:
    """A spec's `plan:` pins without those the disabled options decide instead: a pinned node an option restricts;
    all of them where an option rules out the pinned family (they tune that family). The command line overrides the
    spec, as `--family` overrides its family."""
    nodes = {off.node for name in disabled for off in OPTIONS[name].nodes}
    families = {off.family for name in disabled for off in OPTIONS[name].families}
    if str(pins.get("family", "")).lower() in families:
        return {}
    return {node: value for node, value in pins.items() if node not in nodes}


def family_refusals(family: str, views: ProblemViews, arch: Arch, disabled: tuple[str, ...]) -> list[tuple[str, str]]:
    """The (gate, reason) pairs that rule `family` out of a problem: the disabled optimizations it cannot run
    without."""
    return [(OPTIONS[name].constraint, off.why) for name in disabled for off in OPTIONS[name].families
            if off.family == family and off.uses(views, arch)]


def node_offs(family: str, graph: ConstraintGraph, name: str) -> list[tuple[NodeOff, tuple[Any, ...]]]:
    """The nodes of `graph` (family `family`'s) that option `name` restricts, each with the values it keeps; only
    those with a value to forbid."""
    domains = {n.name: n.domain for n in graph.nodes}
    out = []
    for off in OPTIONS[name].nodes:
        if family in off.families and off.node in domains and off.kept(domains[off.node]) != domains[off.node]:
            out.append((off, off.kept(domains[off.node])))
    return out


def constrained(p: Problem, disabled: tuple[str, ...]) -> Problem:
    """`p` with the values the disabled options forbid ruled out, ahead of its own constraints (so the decisions
    name the switch)."""
    graph = ConstraintGraph(list(p.graph.nodes), [])
    for name in disabled:
        for off, keep in node_offs(p.family, p.graph, name):
            graph.constrain(OPTIONS[name].constraint, "problem", [off.node],
                            lambda a, node=off.node, keep=keep, why=off.why: (
                                None if a[node] in keep else
                                f"{node} = {a[node]}: {why} ({node} keeps {', '.join(map(str, keep))})"))
    if not graph.constraints:
        return p
    graph.constraints.extend(p.graph.constraints)
    return replace(p, graph=graph)


def gate_name(family: str, graph: ConstraintGraph, disabled: tuple[str, ...]) -> str:
    """The gate of a family whose graph (`graph`, without the switches) the disabled options leave no plan, naming
    those that restrict it: "--disable ksplit,pipeline"."""
    return "--disable " + ",".join(name for name in disabled if node_offs(family, graph, name))


def switches(gate: str) -> tuple[str, ...]:
    """The options a gate or constraint name (gate_name, DisableOption.constraint) stands for; () for any other."""
    return tuple(gate.removeprefix("--disable ").split(",")) if gate.startswith("--disable ") else ()


def effect_lines(disabled: tuple[str, ...], gated: dict[str, list[tuple[str, str]]],
                 graphs: dict[str, ConstraintGraph]) -> list[str]:
    """What each disabled option does to a problem, a line an option (explain): the families it rules out and the
    nodes it restricts, or that no family here uses it. `gated`: each family's gates, the switches' among them;
    `graphs`: the tiling graph of each family that still runs the problem."""
    out = []
    for name in disabled:
        did = []
        for family, reasons in gated.items():
            own = [why for gate, why in reasons if name in switches(gate)]
            if own and all(switches(gate) for gate, _ in reasons):
                did.append(f"{family} ruled out ({own[0]})")
        for family, graph in graphs.items():
            for off, keep in node_offs(family, graph, name):
                did.append(f"{family}: {off.node} = {', '.join(map(str, keep))}")
        out.append(f"--disable {name}: " + ("; ".join(did) if did else "no family here uses it"))
    return out
