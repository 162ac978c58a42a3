"""`deepgemm verify --formal`: each kernel of a planned spec, its model's obligations, the Coq script, coqc's verdict,
and where Coq rejects a lemma the values that break it (edge)."""

from __future__ import annotations

import importlib
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dgemm_cli.families import FAMILIES
from dgemm_cli.formal import coq as coq_mod
from dgemm_cli.formal.model import KernelModel, Obligation, PlaceReference, obligations, reference_offset
from dgemm_cli.formal.packed import quant_reference, quant_views, value_place
from dgemm_cli.formal.search import Counterexample, search
from dgemm_cli.plan import BucketPlan, Plan
from dgemm_cli.views import ProblemViews

PROVED, FAILED, UNMODELED = "proved", "failed", "unmodeled"


@dataclass(frozen=True)
class KernelProof:
    """One kernel's verdict."""

    spec: str
    kernel: str
    family: str
    status: str  # PROVED, FAILED or UNMODELED
    lemmas: int = 0
    seconds: float = 0.0
    script: str = ""  # the .v file
    failed: str = ""  # the first lemma Coq rejected: its name
    obligation: str = ""  # ... its property and statement in words
    counterexample: str = ""  # values that break it, where the search found some
    reason: str = ""  # why a kernel is unmodeled, or coqc's message
    trusted: tuple[str, ...] = field(default_factory=tuple)
    shared: int = 0  # of `lemmas`, those proved already in this run (ProvedLemmas: another kernel's, or a repeat)

    def to_dict(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


def kernel_plans(plan: Plan | BucketPlan, views: ProblemViews) -> list[tuple[str, ProblemViews, Any]]:
    """(label, views, family plan) of every kernel the folder renders: each bucket's, each primary and fallback."""
    if isinstance(plan, BucketPlan):
        out = []
        for b in plan.buckets:
            for label, v, p in kernel_plans(b.plan, b.views):
                out.append((f"{plan.letter} {b.lo}..{b.hi} {label}".strip(), v, p))
        return out
    out = [("", views, plan.primary)]
    if plan.fallback is not None:
        out.append(("fallback kernel", views, plan.fallback))
    return out


def models_of(views: ProblemViews, family_plan: Any, label: str) -> list[KernelModel] | str:
    """The family's models of the kernel, or why there are none."""
    family = FAMILIES[family_plan.family]
    if not family.formal:
        return f"the {family.name} family has no index model yet"
    build: Callable[..., list[KernelModel]] = importlib.import_module(family.formal).models
    return build(views, family_plan, f"{views.spec.name} {label}".strip())


def references(views: ProblemViews) -> dict[str, Callable]:
    """Each operand's reference offset: the spec's letters (`reference_offset`); for the weight-only views (an
    integer B, the scales, the zero points) their words or elements through blocks and packing
    (`formal.packed.quant_reference`)."""
    names = ("A", "B", "C", *(op.name for op in views.spec.extra_operands))
    out: dict[str, Callable] = {x: (lambda index, x=x: reference_offset(views, x, index)) for x in names}
    for name, q in quant_views(views).items():
        out[name] = lambda index, q=q: quant_reference(views, q, index)
    return out


def places(views: ProblemViews) -> dict[str, PlaceReference]:
    """Each packed operand's statement of the place its loads select in their word (`formal.packed.value_place`)."""
    return {name: (lambda index, place, q=q: value_place(views, q, index, place))
            for name, q in quant_views(views).items() if q.packing is not None}


def prove(views: ProblemViews, plan: Plan | BucketPlan, out_dir: Path, use_coq: bool = True,
          progress: Callable[[str], None] | None = None) -> list[KernelProof]:
    """Every kernel of `plan`: write `out_dir/<kernel>.v`, run coqc (or, without Coq, search each obligation), and the
    verdict."""
    out_dir.mkdir(parents=True, exist_ok=True)
    results = []
    for label, v, fp in kernel_plans(plan, views):
        found = models_of(v, fp, label)
        if isinstance(found, str):
            results.append(KernelProof(v.spec.name, f"{v.spec.name} {label}".strip(), fp.family, UNMODELED,
                                       reason=found))
            continue
        for model in found:
            if progress:
                progress(model.kernel)
            results.append(prove_model(v, model, out_dir, use_coq))
    return results


def _file_name(kernel: str) -> str:
    keep = "".join(ch if ch.isalnum() else "_" for ch in kernel)
    while "__" in keep:
        keep = keep.replace("__", "_")
    return "k_" + keep.strip("_")[:120]


class ProvedLemmas:
    """The lemmas coqc proved in this run, by key (statement and proof; Lemma.key). Kernels of one spec, and specs of
    one size, share many (the run-time buckets' loads of B, a family's store at the same sizes): half of specs/'
    34544 lemmas repeat one proved before. Every kernel's script is still written whole and proves alone; coqc runs
    a copy without the lemmas a run that succeeded already proved (under the same PRELUDE, so the same tactics)."""

    def __init__(self) -> None:
        self._keys: set[str] = set()
        self._lock = threading.Lock()  # verify --formal --jobs proves kernels on threads

    def pending(self, lemmas: list[coq_mod.Lemma]) -> list[coq_mod.Lemma]:
        """`lemmas` less those already proved and less repeats of one key (the first kept), in order."""
        out, seen = [], set()
        with self._lock:
            for lem in lemmas:
                if lem.key not in self._keys and lem.key not in seen:
                    seen.add(lem.key)
                    out.append(lem)
        return out

    def add(self, lemmas: list[coq_mod.Lemma]) -> None:
        with self._lock:
            self._keys.update(lem.key for lem in lemmas)


def prove_model(views: ProblemViews, model: KernelModel, out_dir: Path, use_coq: bool = True,
                proved: ProvedLemmas | None = None) -> KernelProof:
    """Write the kernel's whole script to `out_dir` and prove it: with coqc (less what `proved` holds, which it then
    gains), or without Coq by searching each obligation."""
    obs = obligations(model, references(views), places(views))
    lemmas = coq_mod.lemmas(obs)
    name = _file_name(model.kernel)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.v"
    path.write_text(coq_mod.script(name, model.kernel, model.trusted, lemmas))
    base = dict(spec=views.spec.name, kernel=model.kernel, family=model.family, lemmas=len(lemmas), script=str(path),
                trusted=model.trusted)
    start = time.monotonic()
    if not use_coq:
        for ob in obs:
            cex = search(ob, tries=2000)
            if cex is not None:
                return _failed(base, ob.ident, ob, cex, "", time.monotonic() - start)
        return KernelProof(status=PROVED, seconds=time.monotonic() - start,
                           reason="searched, not proved (no coqc): no obligation broke at 2000 points each", **base)
    run = proved.pending(lemmas) if proved is not None else lemmas
    base["shared"] = len(lemmas) - len(run)
    if len(run) == len(lemmas):
        result = coq_mod.run_coqc(path, lemmas)
    else:
        with tempfile.TemporaryDirectory(prefix="deepgemm-coq-") as tmp:
            run_path = Path(tmp) / path.name
            run_path.write_text(coq_mod.script(name, model.kernel, model.trusted, run))
            result = coq_mod.run_coqc(run_path, run)
    if result.proved:
        if proved is not None:
            proved.add(run)
        return KernelProof(status=PROVED, seconds=result.seconds, **base)
    failed = result.failed
    ob = failed.obligation if failed else None
    cex = search(ob) if ob else None
    return _failed(base, failed.name if failed else "", ob, cex, result.message, result.seconds)


def _failed(base: dict, lemma: str, ob: Obligation | None, cex: Counterexample | None, message: str,
            seconds: float) -> KernelProof:
    return KernelProof(status=FAILED, seconds=seconds, failed=lemma,
                       obligation=f"{ob.prop}: {ob.text}" if ob else "",
                       counterexample=str(cex) if cex else "", reason=_short(message), **base)


def _short(message: str) -> str:
    lines = [ln for ln in message.splitlines() if ln.strip()]
    return " ".join(lines[-3:])[:400]
