"""The obligations checked by evaluation (pure, numpy): a counterexample search where Coq rejects a lemma (the
block, thread and iteration values that break it), and the exhaustive check that enumerates every point of an
obligation's ranges at small sizes, which guards the proof generator itself: a statement Coq proved must hold at
every point, and a hypothesis no point satisfies would make it vacuous."""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from dgemm_cli.formal.expr import evaluate
from dgemm_cli.formal.model import Obligation, Range

UNBOUNDED_SPAN = 64  # values drawn for a variable with no upper bound (a pointer's alignment multiple)


@dataclass(frozen=True)
class Counterexample:
    values: dict[str, int]

    def __str__(self) -> str:
        return ", ".join(f"{k} = {v}" for k, v in self.values.items())


def _draw(r: Range, env: dict[str, int], rng: random.Random) -> int | None:
    lo = int(evaluate(r.lo, env))
    hi = lo + UNBOUNDED_SPAN if r.hi is None else int(evaluate(r.hi, env))
    if hi <= lo:
        return None
    pick = rng.random()
    if pick < 0.2:
        return lo
    if pick < 0.4:
        return hi - 1
    if pick < 0.5:
        return min(hi - 1, lo + 1)
    return rng.randrange(lo, hi)


def search(ob: Obligation, tries: int = 20000, seed: int = 0) -> Counterexample | None:
    """A point of `ob`'s ranges where its hypotheses hold and its goal does not: edges of each range first, then
    anywhere."""
    rng = random.Random(seed)
    for _ in range(tries):
        env: dict[str, int] = {}
        for r in ob.ranges:
            v = _draw(r, env, rng)
            if v is None:
                break
            env[r.var.name] = v
        else:
            if evaluate(ob.hyps, env) and not evaluate(ob.goal, env):
                return Counterexample(dict(env))
    return None


def largest(ranges: tuple[Range, ...], e, tries: int = 400, seed: int = 0) -> int | None:
    """The largest value of `e` found at points of `ranges` (their edges first): a candidate bound for a proof to
    check, never a bound by itself."""
    rng = random.Random(seed)
    best = None
    for _ in range(tries):
        env: dict[str, int] = {}
        for r in ranges:
            v = _draw(r, env, rng)
            if v is None:
                break
            env[r.var.name] = v
        else:
            value = int(evaluate(e, env))
            best = value if best is None else max(best, value)
    return best


@dataclass(frozen=True)
class Enumerated:
    points: int  # points of the ranges
    satisfying: int  # where the hypotheses hold
    failing: Counterexample | None


MAX_POINTS = 4_000_000


def enumerate_points(ranges: tuple[Range, ...]) -> dict[str, np.ndarray] | None:
    """Every point of `ranges` (a range's bounds may name the variables before it), as arrays; None past MAX_POINTS."""
    env: dict[str, np.ndarray] = {}
    n = 1
    for r in ranges:
        lo = np.broadcast_to(np.asarray(evaluate(r.lo, env), dtype=np.int64), (n,))
        hi = (lo + UNBOUNDED_SPAN if r.hi is None
              else np.broadcast_to(np.asarray(evaluate(r.hi, env), dtype=np.int64), (n,)))
        counts = np.maximum(hi - lo, 0)
        total = int(counts.sum())
        if total > MAX_POINTS:
            return None
        rep = np.repeat(np.arange(n), counts)
        starts = np.repeat(np.cumsum(counts) - counts, counts)
        values = lo[rep] + (np.arange(total) - starts)
        env = {k: v[rep] for k, v in env.items()}
        env[r.var.name] = values.astype(np.int64)
        n = total
    return env


def exhaust(ob: Obligation) -> Enumerated | None:
    """`ob` at every point of its ranges; None where there are too many."""
    env = enumerate_points(ob.ranges)
    if env is None:
        return None
    n = len(next(iter(env.values()))) if env else 1
    hyps = np.broadcast_to(np.asarray(evaluate(ob.hyps, env), dtype=bool), (n,))
    goal = np.broadcast_to(np.asarray(evaluate(ob.goal, env), dtype=bool), (n,))
    bad = np.flatnonzero(hyps & ~goal)
    failing = Counterexample({k: int(v[bad[0]]) for k, v in env.items()}) if len(bad) else None
    return Enumerated(n, int(hyps.sum()), failing)
