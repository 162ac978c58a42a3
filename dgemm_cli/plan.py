"""Stage 3: ProblemViews + Arch -> `Plan` (pure): which kernel family, and that family's plan.

The families (dgemm_cli/families/) each solve their own tiling graph. Here one more node, `family`,
chooses among them: each family's gates are constraints on it (TMA cannot take a strided innermost
dim, wgmma needs sm_90a, ...) and the cost is the family's best plan's estimate. When the chosen
family needs more pointer alignment at run time than the spec promises (TMA needs 16-byte aligned
views), the `cta` family's plan is rendered beside it and the launcher takes it when the check fails.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dgemm_cli import disable
from dgemm_cli.arch import Arch, get_arch
from dgemm_cli.constraints import ConstraintGraph, Decision, Unsatisfiable, solve
from dgemm_cli.errors import PlanError, SpecError
from dgemm_cli.families import FAMILIES, FamilyPlan
from dgemm_cli.families.solving import PINNED, best, best_or_why, domain_value, pinned
from dgemm_cli.spec.suggest import fix_naming
from dgemm_cli.views import ProblemViews, analyse


@dataclass(frozen=True)
class Plan:
    primary: FamilyPlan  # the chosen family's plan
    fallback: FamilyPlan | None  # the `cta` plan taken at run time when the primary's pointer checks fail
    family_decision: Decision
    tuned: dict[str, Any] | None = None  # what `deepgemm tune` measured for this plan (tune.summary)
    disabled: tuple[str, ...] = ()  # the optimizations `--disable` forced off (disable.OPTIONS), in its order

    @property
    def family(self) -> str:
        return self.primary.family

    @property
    def kernels(self) -> tuple[FamilyPlan, ...]:
        return (self.primary,) if self.fallback is None else (self.primary, self.fallback)

    @property
    def smem_bytes(self) -> int:
        return max(k.smem_bytes for k in self.kernels)

    def to_dict(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "family_decision": self.family_decision.to_dict(),
            "primary": self.primary.to_dict(),
            "fallback": self.fallback.to_dict() if self.fallback is not None else None,
            "runtime_align": dict(self.primary.runtime_align) if self.fallback is not None else {},
            "smem_bytes": self.smem_bytes,
            "tuned": self.tuned,
            **({"disabled": list(self.disabled)} if self.disabled else {}),
        }


@dataclass(frozen=True)
class PlanDetail:
    """Everything `explain` shows: the plan, the family graph and each family's own plan and graph."""

    plan: Plan
    family_graph: ConstraintGraph
    family_plans: dict[str, tuple[FamilyPlan, ConstraintGraph] | None]  # None: gated out
    gated: dict[str, list[tuple[str, str]]]  # each family's gates on the problem, the pins' and switches' among them


# How a gate and a message name each kind of inputs (spec.Spec.inputs) but "float", and where its design is.
INPUT_GATES = {"e4m3": "e4m3 inputs", "weight-only": "integer weights"}
INPUT_WORDS = {"e4m3": "e4m3", "weight-only": "integer weights"}
INPUT_DESIGN = {"e4m3": "docs/design/fp8.md", "weight-only": "docs/design/weight-only.md, issue 42"}

# How a message names each backend's code and targets (arch.Arch.backend, families.base.KernelFamily.backend).
BACKEND_CODE = {"cuda": "CUDA kernels", "cpu": "C++ for the host"}
BACKEND_TARGET = {"cuda": "a CUDA target", "cpu": "the host"}


def family_gates(views: ProblemViews, arch: Arch, disabled: tuple[str, ...] = ()) -> dict[str, list[tuple[str, str]]]:
    """Each family's gates on this problem: (constraint, reason) pairs; [] where it can run it. `disabled`: the
    optimizations forced off (disable.OPTIONS); a family that cannot run without one is gated by it."""
    # A family of another backend is not asked: its gates read the facts of its own kind of target.
    gated = {name: family.gates(views, arch) if family.backend == arch.backend else
             [("backend", f"{name} renders {BACKEND_CODE[family.backend]}, and {arch.name} is "
                          f"{BACKEND_TARGET[arch.backend]}")]
             for name, family in FAMILIES.items()}
    inputs = views.spec.inputs
    if inputs != "float":  # e4m3 or integer weights: only the families made for them
        own = [name for name, family in FAMILIES.items() if family.inputs == inputs]
        if own:
            here = any(FAMILIES[name].backend == arch.backend for name in own)
            runs = (f"{' and '.join(own)} run{'s' if len(own) == 1 else ''} {INPUT_WORDS[inputs]}"
                    + ("" if here else f" on {' and '.join(_input_targets(own))}"))
        why = (f"no {INPUT_WORDS[inputs]} kernel in this family ({runs})" if own else
               f"no family runs {INPUT_WORDS[inputs]} yet ({INPUT_DESIGN[inputs]})")
        for name, reasons in gated.items():
            if FAMILIES[name].inputs != inputs and FAMILIES[name].backend == arch.backend:
                reasons.insert(0, (INPUT_GATES[inputs], why))
    if views.spec.dynamic:  # one kernel for a range of the run-time letter
        for name, family in FAMILIES.items():
            if not family.runtime_rows:
                gated[name].append(("rows at run time", f"{name} kernels are compiled for one M; the family serves "
                                                        "only buckets of one size"))
    for name, family in FAMILIES.items():
        if family.backend == arch.backend:
            gated[name].extend(disable.family_refusals(name, views, arch, disabled))
    return gated


def _input_targets(families: list[str]) -> list[str]:
    """The backends these families render for, as a message names them."""
    return sorted({"CUDA targets" if FAMILIES[name].backend == "cuda" else f"{FAMILIES[name].backend} targets"
                   for name in families})


def _family_graph(gated: dict[str, list[tuple[str, str]]], prefer: str | None,
                  spec_family: str | None = None, backend: str = "cuda") -> ConstraintGraph:
    """The family node: the families of the target's backend (the others never run on it, so they are not its
    candidates), each one's gates a constraint."""
    g = ConstraintGraph()
    g.node("family", tuple(name for name, f in FAMILIES.items() if f.backend == backend),
           "the kernel family (dgemm_cli/families/)")
    if prefer is not None:
        # First, so that it is what rules every other family out: the decision reads
        # "family = hopper (forced by --family hopper)".
        g.constrain(f"--family {prefer}", "problem", ["family"],
                    lambda a: f"the command line asks for {prefer}" if a["family"] != prefer else None)
    elif spec_family is not None:
        g.constrain(PINNED, "problem", ["family"],
                    lambda a: f"family = {spec_family}" if a["family"] != spec_family else None)
    for name, reasons in gated.items():
        if FAMILIES[name].backend != backend:
            continue
        for constraint, reason in reasons:
            g.constrain(f"{name}: {constraint}", "view" if "TMA" in constraint else "arch", ["family"],
                        lambda a, name=name, reason=reason: reason if a["family"] == name else None)
    return g


def no_family(views: ProblemViews, arch: Arch, gated: dict[str, list[tuple[str, str]]]) -> PlanError:
    """Every family's gates refuse the problem: the gates the target's families all share said once, else each
    one's; for e4m3 inputs or integer weights only their families' (the others all say they have no such kernel).
    The families of another backend are not named."""
    own = [name for name, family in FAMILIES.items() if family.backend == arch.backend]
    inputs = views.spec.inputs
    special = [name for name in own if FAMILIES[name].inputs == inputs]
    if inputs != "float" and special:
        why = ("; ".join(f"{name}: {refusals(gated, name)}" for name in special)
               + f"; no other family runs {INPUT_WORDS[inputs]}")
        return PlanError(f"{views.spec.source}: no kernel family can run this problem ({why})")
    shared = [g for g in gated[own[-1]] if all(g in gated[name] for name in own)]
    why = ("; ".join(f"{c}: {r}" for c, r in shared) if shared else
           "; ".join(f"{name}: {refusals(gated, name)}" for name in own))
    return PlanError(f"{views.spec.source}: no kernel family can run this problem ({why})")


def refusals(gated: dict[str, list[tuple[str, str]]], family: str) -> str:
    """Why `family`'s gates refuse a problem: "<gate>: <reason>; ..."."""
    return "; ".join(f"{constraint}: {reason}" for constraint, reason in gated[family])


def _refused_family(views: ProblemViews, family: str, why: str, gated: dict[str, list[tuple[str, str]]]) -> PlanError:
    allowed = [name for name, reasons in gated.items() if not reasons]
    return PlanError(f"{views.spec.source}: --family {family} cannot run this problem ({why}). Fix: leave "
                     "--family out to let the planner choose among the families that can"
                     + (f" ({', '.join(allowed)})" if allowed else ""))


def plan_detail(views: ProblemViews, arch: Arch, prefer: str | None = None,
                disabled: tuple[str, ...] = ()) -> PlanDetail:
    """`prefer`: take this family (gen --family) instead of the cheapest; a PlanError with its gates' reasons
    when they refuse the problem. `disabled`: optimizations forced off (gen --disable, disable.OPTIONS)."""
    if prefer is not None and prefer not in FAMILIES:
        raise PlanError(f"unknown kernel family '{prefer}': use one of {', '.join(FAMILIES)}")
    gated = family_gates(views, arch, disabled)
    if prefer is not None and gated[prefer]:
        raise _refused_family(views, prefer, refusals(gated, prefer), gated)
    pins = disable.overriding(target_pins(views, arch), disabled)
    spec_family = pins.pop("family", None)
    # --family overrides the spec's family; the family it names keeps the pins of its own decisions.
    spec_family = _spec_family(views, spec_family, gated) if prefer is None else None
    solved = _solve_families(views, arch, gated, pins, prefer, disabled)
    if prefer is not None and gated[prefer]:  # the switches left the family no plan
        raise _refused_family(views, prefer, refusals(gated, prefer), gated)
    graph = _family_graph(gated, prefer, spec_family, arch.backend)
    try:
        sol = solve(graph, lambda a: solved[a["family"]][0].cost_us)
    except Unsatisfiable:
        refused = [name for name in FAMILIES if gated[name] and gated[name][0][0] == PINNED]
        if not refused:
            raise no_family(views, arch, gated) from None
        raise SpecError(views.spec.source, "plan", "no kernel family can take the decisions it fixes ("
                        + "; ".join(f"{name}: {refusals(gated, name)}" for name in refused) + ")",
                        "drop or change the pinned decisions (`deepgemm explain SPEC` shows each family's)") from None
    primary = solved[sol.assignment["family"]][0]
    # The fallback serves the primary's misaligned pointers: its fallback family's best plan, whatever the spec pins.
    fallback = None
    if needs_fallback(primary):
        family = FAMILIES[FAMILIES[primary.family].fallback]
        solved_fb = solved[family.name]
        unpinned = solved_fb is not None and not any(n.name in pins for n in solved_fb[1].nodes)
        fallback = family.as_fallback(solved_fb[0]) if unpinned else fallback_plan(primary, views, arch, disabled)
    return PlanDetail(Plan(primary, fallback, sol.decisions[0], disabled=disabled), graph, solved, gated)


def target_pins(views: ProblemViews, arch: Arch) -> dict[str, Any]:
    """The spec's `plan:` pins, for a target of its own backend: pins tune the families of the spec's `arch:`, so a
    GPU spec generated for the host (`--arch cpu`) is planned by the cost model alone, and the other way round."""
    if get_arch(views.spec.arch).backend != arch.backend:
        return {}
    return dict(views.spec.pins)


def _solve_families(views: ProblemViews, arch: Arch, gated: dict[str, list[tuple[str, str]]], pins: dict[str, Any],
                    prefer: str | None, disabled: tuple[str, ...] = ()
                    ) -> dict[str, tuple[FamilyPlan, ConstraintGraph] | None]:
    """Each family's best plan within the spec's pinned decisions and without the disabled optimizations (None where
    gated out). A family without a pinned decision, or whose graph the pins leave no assignment, is gated out with
    that reason (added to `gated`), and so is one whose graph the disabled optimizations leave none; a pin no family
    that can run the problem has is a SpecError."""
    solved: dict[str, tuple[FamilyPlan, ConstraintGraph] | None] = {name: None for name in FAMILIES}
    nodes: set[str] = set()  # the decisions of the families that can run the problem
    for name, family in FAMILIES.items():
        if gated[name]:
            continue
        problem = family.problem(views, arch)
        own = {n.name for n in problem.graph.nodes}
        nodes |= own
        switched = disable.constrained(problem, disabled)
        here = {node: v for node, v in pins.items() if node in own or prefer is None}
        if not here and switched is problem:
            solved[name] = best(problem)
            continue
        if not here:  # the switches may leave the graph no assignment: the family is gated by them
            found = best_or_why(switched)
            if isinstance(found, str):
                gated[name] = [(disable.gate_name(name, problem.graph, disabled), f"no plan is left ({found})")]
            else:
                solved[name] = found
            continue
        problem = switched
        problem, refused = pinned(problem, here)
        lacking = [node for node in here if node not in own]
        if lacking:
            refused = f"no decision {', '.join(lacking)} in its tiling graph"
        if refused is None:
            found = best_or_why(problem)
            if isinstance(found, str):
                refused = found
            else:
                solved[name] = found
        if refused is not None:
            gated[name] = [(PINNED, refused)]
    for node in pins if prefer is None else ():
        if node not in nodes:
            raise SpecError(views.spec.source, f"plan.{node}", f"no kernel family that can run this problem has a "
                            f"decision '{node}'", fix_naming(node, ["family", *sorted(nodes)]))
    return solved


def _spec_family(views: ProblemViews, family: Any, gated: dict[str, list[tuple[str, str]]]) -> str | None:
    """The family a spec's `plan: {family: ...}` names (None: it names none), checked against the registry and
    the family's gates."""
    if family is None:
        return None
    name = domain_value(tuple(FAMILIES), family)
    if name is None:
        raise SpecError(views.spec.source, "plan.family", f"unknown kernel family '{family}'",
                        fix_naming(family, FAMILIES))
    if gated[name]:
        raise SpecError(views.spec.source, "plan.family", f"the {name} family cannot run this problem "
                        f"({refusals(gated, name)})", "drop `family:` from `plan:` or pick another family")
    return name


def needs_fallback(primary: FamilyPlan) -> bool:
    """The primary needs pointer alignment the spec does not promise: its fallback family's plan goes beside it."""
    return primary.family != FAMILIES[primary.family].fallback and bool(primary.runtime_align)


def fallback_plan(primary: FamilyPlan, views: ProblemViews, arch: Arch, disabled: tuple[str, ...] = ()) -> FamilyPlan:
    """The best plan of `primary`'s fallback family (without the `disabled` optimizations), as a run-time fallback."""
    family = FAMILIES[FAMILIES[primary.family].fallback]
    return family.as_fallback(best(disable.constrained(family.problem(views, arch), disabled))[0])


def make_plan(views: ProblemViews, arch: Arch, prefer: str | None = None,
              disabled: tuple[str, ...] = ()) -> Plan | BucketPlan:
    """The plan of a spec: one kernel (and its run-time fallback), or for a spec with a letter sized at
    run time, a kernel for each bucket of that size. `disabled`: optimizations forced off (disable.OPTIONS)."""
    if views.spec.dynamic:
        return plan_buckets(views, arch, prefer, disabled=disabled)
    return plan_detail(views, arch, prefer, disabled).plan


# Run-time sizes up to this get a kernel each: the gemv family keeps its rows in registers sized at
# compile time (measured the fastest for one row of a wide weight, and for two at N = 14336;
# docs/RESULTS.md), and a tile planned for 4 rows would waste most of its rows on 1.
EXACT_ROWS = 4


@dataclass(frozen=True)
class RowsBucket:
    """Sizes lo..hi of the run-time letter, served by one plan made for the largest of them."""

    lo: int
    hi: int
    views: ProblemViews  # the bucket's problem: the letter at hi, run-time sized when lo < hi
    plan: Plan

    @property
    def exact(self) -> bool:
        return self.lo == self.hi

    @property
    def label(self) -> str:
        """Part of a C++ identifier: m3, m5_8."""
        return f"m{self.lo}" if self.exact else f"m{self.lo}_{self.hi}"

    def sizes(self, letter: str) -> str:
        return f"{letter} = {self.lo}" if self.exact else f"{letter} in {self.lo}..{self.hi}"


@dataclass(frozen=True)
class BucketPlan:
    """A spec whose letter `letter` is sized lo..hi at run time: one entry point that picks a bucket's
    kernel by the size it is called with."""

    letter: str
    lo: int
    hi: int
    buckets: tuple[RowsBucket, ...]  # in order of size, covering lo..hi; a tuned bucket's plan says so
    why: str  # how the sizes were cut into buckets
    disabled: tuple[str, ...] = ()  # the optimizations `--disable` forced off in every bucket

    @property
    def family(self) -> str:
        """The families of the buckets' primary kernels, smallest sizes first."""
        return "+".join(dict.fromkeys(b.plan.family for b in self.buckets))

    @property
    def kernels(self) -> tuple[FamilyPlan, ...]:
        return tuple(k for b in self.buckets for k in b.plan.kernels)

    @property
    def smem_bytes(self) -> int:
        return max(k.smem_bytes for k in self.kernels)

    def to_dict(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "run_time": {"letter": self.letter, "min": self.lo, "max": self.hi, "why": self.why},
            "buckets": [{"min": b.lo, "max": b.hi, **b.plan.to_dict()} for b in self.buckets],
            "smem_bytes": self.smem_bytes,
            "tuned": [b.plan.tuned for b in self.buckets if b.plan.tuned] or None,
            **({"disabled": list(self.disabled)} if self.disabled else {}),
        }


def row_buckets(lo: int, hi: int) -> list[tuple[int, int]]:
    """Sizes lo..hi cut into buckets: one a size up to EXACT_ROWS, then up to each power of two (the
    largest size of a bucket at most twice its smallest, so a tile planned for the largest wastes at
    most half its rows on the smallest)."""
    out = [(m, m) for m in range(lo, min(hi, EXACT_ROWS) + 1)]
    start = max(lo, EXACT_ROWS + 1)
    while start <= hi:
        top = min(1 << (start - 1).bit_length(), hi)
        out.append((start, top))
        start = top + 1
    return out


def plan_buckets(views: ProblemViews, arch: Arch, prefer: str | None = None,
                 tuned: dict[tuple[int, int], Plan] | None = None, disabled: tuple[str, ...] = ()) -> BucketPlan:
    """Plan each bucket of the run-time letter: a size of its own is an ordinary fixed-size problem
    (every family may take it); a range is planned at its largest size among the families whose
    kernels take M at run time. `tuned`: measured plans of some buckets (deepgemm tune), which replace
    the cost model's there. Neighbouring ranges whose plans are the same share a kernel."""
    spec = views.spec
    run_time = spec.run_time_letter
    assert run_time is not None
    x, lo, hi = run_time
    tuned = tuned or {}
    if prefer is not None and prefer in FAMILIES:
        _check_every_bucket(views, arch, prefer, disabled)
    buckets: list[RowsBucket] = []
    # The host's engine takes the rows at run time whatever their count: one kernel serves the whole range.
    cuts = [(lo, hi)] if arch.backend == "cpu" else row_buckets(lo, hi)
    for blo, bhi in cuts:
        bucket_views = analyse(spec.rows_bucket(blo, bhi))
        plan = tuned.get((blo, bhi)) or plan_detail(bucket_views, arch, prefer, disabled).plan
        bucket = RowsBucket(blo, bhi, bucket_views, plan)
        prev = buckets[-1] if buckets else None
        if prev is not None and not prev.exact and not bucket.exact and _same_kernels(prev.plan, bucket.plan):
            # The plan made for the larger sizes serves the merged range: only the range's lower end moves.
            buckets[-1] = RowsBucket(prev.lo, bhi, analyse(spec.rows_bucket(prev.lo, bhi)), plan)
        else:
            buckets.append(bucket)
    exact = [b for b in buckets if b.exact]
    why = (f"{x} is sized {lo}..{hi} at run time: one host kernel takes every size" if arch.backend == "cpu" else
           f"{x} is sized {lo}..{hi} at run time: "
           + (f"one kernel a size for {x} <= {EXACT_ROWS} (a family may hold the rows in registers sized at compile "
              "time), " if exact else "")
           + "ranges up to each power of two planned at their largest size by the families that take M at run "
             "time; neighbouring ranges whose best plans agree share one kernel")
    if tuned:
        why += f"; {len(tuned)} of {len(row_buckets(lo, hi))} buckets measured (deepgemm tune)"
    return BucketPlan(x, lo, hi, tuple(buckets), why, disabled)


def _check_every_bucket(views: ProblemViews, arch: Arch, family: str, disabled: tuple[str, ...] = ()) -> None:
    """A PlanError naming each bucket of the run-time letter whose problem `family`'s gates refuse."""
    run_time = views.spec.run_time_letter
    assert run_time is not None
    x, lo, hi = run_time
    refused = []
    for blo, bhi in row_buckets(lo, hi):
        gated = family_gates(analyse(views.spec.rows_bucket(blo, bhi)), arch, disabled)
        if gated[family]:
            sizes = f"{x} = {blo}" if blo == bhi else f"{x} in {blo}..{bhi}"
            refused.append((sizes, refusals(gated, family)))
    if refused:
        why = (f"{len(refused)} of {len(row_buckets(lo, hi))} buckets of {x} in {lo}..{hi} refused: "
               + "; ".join(f"{sizes}: {reason}" for sizes, reason in refused))
        raise _refused_family(views, family, why, family_gates(views, arch, disabled))


def _same_kernels(a: Plan, b: Plan) -> bool:
    """The same family and tiling choices (sizes aside): one kernel made for the larger serves both. Only
    the primaries count: the larger range's misaligned-pointer fallback serves the merged range too."""
    def key(plan: Plan) -> tuple:
        return plan.family, sorted(plan.primary.assignment.items()), plan.fallback is None
    return key(a) == key(b)
