"""What the formal tests share: a view's element offsets from the spec's letters (numpy), an expression at every
point of an enumeration, the models of a spec's kernels, a mutation of a model's accesses, and the two checks every
mutation must fail, and the sweeps' run of `deepgemm verify --formal` over many specs."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from dgemm_cli.cli import main
from dgemm_cli.formal.check import FAILED, PROVED, models_of, places, prove_model, references
from dgemm_cli.formal.coq import find_coqc
from dgemm_cli.formal.expr import Let, evaluate, replace, walk
from dgemm_cli.formal.model import obligations
from dgemm_cli.formal.search import search
from dgemm_cli.spec import load_spec

needs_coq = pytest.mark.skipif(find_coqc() is None, reason="coqc not installed (apt-get install coq)")


def sweep_jobs() -> int:
    """coqc processes a sweep runs at once: this machine's cores shared among pytest-xdist's workers, so that the
    two sweeps (started together, one a worker) run one coqc a core instead of two, each then half as fast."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    return max(1, (os.cpu_count() or 1) // workers)


def prove_every_kernel(paths: list[Path], *arch: str) -> list[dict]:
    """`deepgemm verify --formal --jobs N --json` of `paths` as a user runs it (N: sweep_jobs()): every kernel
    proved, every spec reported; the report's rows."""
    jobs = str(sweep_jobs())
    r = CliRunner().invoke(main, ["verify", "--formal", *map(str, paths), *arch, "--jobs", jobs, "--json"])
    rows = json.loads(r.stdout)
    unproved = [(x["kernel"], x["status"], x["failed"], x["reason"]) for x in rows if x["status"] != PROVED]
    assert r.exit_code == 0 and not unproved, unproved or r.output[-2000:]
    assert {x["spec"] for x in rows} == {load_spec(p).name for p in paths}, "a spec has no kernel in the report"
    return rows


def view_addresses(views, operand: str, rows: int | None = None) -> np.ndarray:
    """Every element offset of `operand`'s view from its kernel pointer, from the spec's letters (`rows`: the
    run-time letter's size)."""
    op = views.spec.operand(operand)
    dyn = views.spec.run_time_letter
    sizes = [rows if (dyn and x == dyn[0] and rows is not None) else s for x, s in zip(op.letters, op.sizes)]
    if not sizes:
        return np.zeros(1, dtype=np.int64)
    grids = np.meshgrid(*[np.arange(s) for s in sizes], indexing="ij")
    return sum(g.astype(np.int64) * st for g, st in zip(grids, op.strides)).ravel()


def at_points(e, pts: dict) -> np.ndarray:
    """`e` at every point of `pts` (a constant broadcast to them)."""
    n = len(next(iter(pts.values()))) if pts else 1
    return np.broadcast_to(np.asarray(evaluate(e, pts)), (n,))


def models_of_plans(plans, family: str | None = None) -> list:
    """(views, family plan, model) of every kernel of `plans` ((label, views, family plan), as check.kernel_plans
    yields them), each of `family` where it is given."""
    out = []
    for label, views, fp in plans:
        assert family is None or fp.family == family, (label, fp.family)
        found = models_of(views, fp, label)
        assert not isinstance(found, str), found
        out.extend((views, fp, m) for m in found)
    return out


def assert_the_search_finds(views, model, lemmas: str) -> None:
    """The enumerating search breaks one of the mutated model's obligations whose names start with `lemmas`."""
    broken = [ob for ob in obligations(model, references(views), places(views)) if ob.ident.startswith(lemmas)]
    assert broken and any(search(ob, tries=5000) for ob in broken), lemmas


def assert_coq_rejects(views, model, lemmas: str, out_dir) -> None:
    """Coq fails the mutated model at a lemma whose name starts with `lemmas`, with its statement and values that
    break it."""
    r = prove_model(views, model, out_dir)
    assert r.status == FAILED and r.failed.startswith(lemmas), (r.failed, r.reason)
    assert r.obligation and r.counterexample, r


def mutate_accesses(model, ident_prefix: str, field: str, pick, make):
    """`model` with the first node `pick` chooses in the `field` of the accesses named `ident_prefix*` replaced by
    `make(node)`."""
    accesses = []
    for a in model.accesses:
        if a.ident.startswith(ident_prefix):
            node = next(x for x in walk(getattr(a, field)) if pick(x))
            a = dataclasses.replace(a, **{field: replace(getattr(a, field), node, make(node))})
        accesses.append(a)
    return dataclasses.replace(model, accesses=tuple(accesses))


def let_named(name: str):
    """A `pick` for mutate_accesses: the Let named `name`."""
    return lambda x: isinstance(x, Let) and x.name == name


def mutation_tests(names, mutated):
    """The two tests a formal module runs over its MUTATIONS (a name -> (views, mutated model, lemma prefix) by
    `mutated`): the search finds each mutation, and Coq rejects it. Bound in the module as
    `test_the_search_finds_each_mutation, test_mutations_are_rejected_by_coq = mutation_tests(...)`."""

    @pytest.mark.parametrize("name", list(names))
    def test_the_search_finds_each_mutation(name):
        assert_the_search_finds(*mutated(name))

    @needs_coq
    @pytest.mark.parametrize("name", list(names))
    def test_mutations_are_rejected_by_coq(name, tmp_path):
        assert_coq_rejects(*mutated(name), tmp_path)

    return test_the_search_finds_each_mutation, test_mutations_are_rejected_by_coq
