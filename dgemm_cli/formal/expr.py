"""Index expressions as data (pure): the integer arithmetic a kernel forms its addresses with, printable as the CUDA
the kernel headers spell and as Coq terms over Z, and evaluable on Python ints or numpy arrays.

The expressions are quasi-affine: sums, products (by constants, where the planner's sizes are concrete; by a run-time
size where the rows are sized at run time), floor division and remainder, min, and a conditional. Every node carries
the C++ type it is computed in (`INT`, 32-bit `int`, or `INDEX`, the kernel's `index_t`), so that each intermediate
value can be checked against its type's range.

Division and remainder are Z's floor division (Coq's `Z.div`, `Z.modulo`, numpy's `//`, `%`); C++ truncates. The two
agree when the dividend is non-negative and the divisor positive, and the obligations require exactly that of every
division the kernel performs (`division_facts`).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

INT = "int"  # C++ int: 32 bits
INDEX = "index"  # the kernel's index_t: int or long long, per plan
INT_BITS = {"int": 32, "long long": 64}


class Expr:
    """An integer expression. Operators build new nodes; `+`, `-`, `*` take ints too."""

    ctype: str

    def __add__(self, other: Expr | int) -> Expr:
        return add(self, lift(other))

    def __radd__(self, other: int) -> Expr:
        return add(lift(other), self)

    def __sub__(self, other: Expr | int) -> Expr:
        return add(self, mul(lift(other), Const(-1)))

    def __rsub__(self, other: int) -> Expr:
        return add(lift(other), mul(self, Const(-1)))

    def __mul__(self, other: Expr | int) -> Expr:
        return mul(self, lift(other))

    def __rmul__(self, other: int) -> Expr:
        return mul(lift(other), self)

    def __floordiv__(self, other: Expr | int) -> Expr:
        return Div(self, lift(other), self.ctype)

    def __mod__(self, other: Expr | int) -> Expr:
        return Mod(self, lift(other), self.ctype)

    def __lt__(self, other: Expr | int) -> Pred:  # type: ignore[override]
        return Cmp("<", self, lift(other))

    def __le__(self, other: Expr | int) -> Pred:  # type: ignore[override]
        return Cmp("<=", self, lift(other))

    def __gt__(self, other: Expr | int) -> Pred:  # type: ignore[override]
        return Cmp("<", lift(other), self)

    def __ge__(self, other: Expr | int) -> Pred:  # type: ignore[override]
        return Cmp("<=", lift(other), self)

    def eq(self, other: Expr | int) -> Pred:
        return Cmp("==", self, lift(other))

    def as_(self, ctype: str) -> Expr:
        """The same value computed in `ctype` (a C++ conversion: `index_t(kt)`)."""
        return Cast(self, ctype)


@dataclass(frozen=True, eq=True)
class Var(Expr):
    """A value the kernel does not know at compile time: a block, thread or iteration index, a run-time size."""

    name: str
    ctype: str = INT
    spelled: str | None = None  # how the kernel spells it where that is not `name` (threadIdx.x)


@dataclass(frozen=True, eq=True)
class Const(Expr):
    """A constant; `name` is how the kernel header spells it (`T::BK`, `kPerRow`), None for a literal."""

    value: int
    name: str | None = None
    ctype: str = INT


@dataclass(frozen=True, eq=True)
class Rewritten(Const):
    """The value a proof rewrote a run-time expression to (a tile count that one run-time bucket fixes): Coq's term
    after the rewrite holds the literal inside the unfolded expression around it, so the printer folds nothing that
    holds it."""


@dataclass(frozen=True, eq=True)
class Add(Expr):
    a: Expr
    b: Expr
    ctype: str = INT


@dataclass(frozen=True, eq=True)
class Mul(Expr):
    a: Expr
    b: Expr
    ctype: str = INT


@dataclass(frozen=True, eq=True)
class Div(Expr):
    a: Expr
    b: Expr
    ctype: str = INT


@dataclass(frozen=True, eq=True)
class Mod(Expr):
    a: Expr
    b: Expr
    ctype: str = INT


@dataclass(frozen=True, eq=True)
class Min(Expr):
    a: Expr
    b: Expr
    ctype: str = INT


@dataclass(frozen=True, eq=True)
class Cast(Expr):
    a: Expr
    ctype: str = INT


@dataclass(frozen=True, eq=True)
class Ite(Expr):
    """cond ? a : b."""

    cond: Pred
    a: Expr
    b: Expr
    ctype: str = INT


@dataclass(frozen=True, eq=True)
class Let(Expr):
    """A named intermediate the kernel declares (`const int row = c / kPerRow`): printed by its name in CUDA, by its
    value in Coq and numpy."""

    name: str
    value: Expr
    ctype: str = INT


# ---- predicates


class Pred:
    def __and__(self, other: Pred) -> Pred:
        return And((self, other))

    def __invert__(self) -> Pred:
        return Not(self)


@dataclass(frozen=True, eq=True)
class Cmp(Pred):
    op: str  # "<", "<=", "=="
    a: Expr
    b: Expr


@dataclass(frozen=True, eq=True)
class And(Pred):
    parts: tuple[Pred, ...]


@dataclass(frozen=True, eq=True)
class Not(Pred):
    p: Pred


@dataclass(frozen=True, eq=True)
class Or(Pred):
    parts: tuple[Pred, ...]


TRUE = And(())


def lift(x: Expr | int) -> Expr:
    if isinstance(x, Expr):
        return x
    assert isinstance(x, int) and not isinstance(x, bool), f"not an integer expression: {x!r}"
    return Const(x)


def _wider(a: Expr, b: Expr) -> str:
    return INDEX if INDEX in (a.ctype, b.ctype) else INT


def add(a: Expr, b: Expr) -> Expr:
    if isinstance(b, Const) and b.value == 0 and b.name is None:
        return a
    if isinstance(a, Const) and a.value == 0 and a.name is None:
        return b
    return Add(a, b, _wider(a, b))


def mul(a: Expr, b: Expr) -> Expr:
    for x, y in ((a, b), (b, a)):
        if isinstance(y, Const) and y.name is None and y.value == 1:
            return x
    return Mul(a, b, _wider(a, b))


def const(value: int, name: str | None = None, ctype: str = INT) -> Const:
    return Const(int(value), name, ctype)


def all_of(*preds: Pred) -> Pred:
    parts: list[Pred] = []
    for p in preds:
        parts.extend(p.parts if isinstance(p, And) else (p,))
    return And(tuple(parts))


# ---- walking


def children(e: Expr | Pred) -> tuple[Expr | Pred, ...]:
    if isinstance(e, (Add, Mul, Div, Mod, Min)):
        return (e.a, e.b)
    if isinstance(e, Cast):
        return (e.a,)
    if isinstance(e, Ite):
        return (e.cond, e.a, e.b)
    if isinstance(e, Let):
        return (e.value,)
    if isinstance(e, Cmp):
        return (e.a, e.b)
    if isinstance(e, (And, Or)):
        return e.parts
    if isinstance(e, Not):
        return (e.p,)
    return ()


def rebuild(e: Expr | Pred, kids: tuple[Any, ...]) -> Expr | Pred:
    """`e`'s node over new children (in `children`'s order)."""
    if isinstance(e, (Add, Mul, Div, Mod, Min)):
        return type(e)(kids[0], kids[1], e.ctype)
    if isinstance(e, Cast):
        return Cast(kids[0], e.ctype)
    if isinstance(e, Ite):
        return Ite(kids[0], kids[1], kids[2], e.ctype)
    if isinstance(e, Let):
        return Let(e.name, kids[0], e.ctype)
    if isinstance(e, Cmp):
        return Cmp(e.op, kids[0], kids[1])
    if isinstance(e, (And, Or)):
        return type(e)(tuple(kids))
    if isinstance(e, Not):
        return Not(kids[0])
    raise TypeError(f"not an expression with children: {e!r}")


def walk(e: Expr | Pred) -> Iterator[Expr | Pred]:
    """Every node of `e`, parents first, each distinct node once."""
    seen: set[int] = set()
    stack: list[Expr | Pred] = [e]
    while stack:
        x = stack.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        yield x
        stack.extend(reversed(children(x)))


def free_vars(e: Expr | Pred) -> set[str]:
    return {x.name for x in walk(e) if isinstance(x, Var)}


def substitute(e: Any, env: Mapping[str, Expr]) -> Any:
    """`e` with each Var named in `env` replaced (Lets keep their names: the kernel's intermediates)."""
    if isinstance(e, Var):
        return env.get(e.name, e)
    if not isinstance(e, (Expr, Pred)):
        raise TypeError(f"not an expression: {e!r}")
    kids = children(e)
    return rebuild(e, tuple(substitute(k, env) for k in kids)) if kids else e


# ---- evaluation (Python ints or numpy int64 arrays, Z's floor semantics)


def evaluate(e: Any, env: Mapping[str, Any]) -> Any:
    if isinstance(e, Var):
        return env[e.name]
    if isinstance(e, Const):
        return e.value
    if isinstance(e, Add):
        return evaluate(e.a, env) + evaluate(e.b, env)
    if isinstance(e, Mul):
        return evaluate(e.a, env) * evaluate(e.b, env)
    if isinstance(e, Div):
        return evaluate(e.a, env) // evaluate(e.b, env)
    if isinstance(e, Mod):
        return evaluate(e.a, env) % evaluate(e.b, env)
    if isinstance(e, Min):
        a, b = evaluate(e.a, env), evaluate(e.b, env)
        return _where(a < b, a, b)
    if isinstance(e, Cast):
        return evaluate(e.a, env)
    if isinstance(e, Let):
        return evaluate(e.value, env)
    if isinstance(e, Ite):
        return _where(evaluate(e.cond, env), evaluate(e.a, env), evaluate(e.b, env))
    if isinstance(e, Cmp):
        a, b = evaluate(e.a, env), evaluate(e.b, env)
        return a < b if e.op == "<" else a <= b if e.op == "<=" else a == b
    if isinstance(e, And):
        out: Any = True
        for p in e.parts:
            out = out & evaluate(p, env)
        return out
    if isinstance(e, Or):
        out = False
        for p in e.parts:
            out = out | evaluate(p, env)
        return out
    if isinstance(e, Not):
        v = evaluate(e.p, env)
        return not v if isinstance(v, bool) else ~v
    raise TypeError(f"not an expression: {e!r}")


def _where(c: Any, a: Any, b: Any) -> Any:
    if isinstance(c, bool):
        return a if c else b
    import numpy as np  # arrays only reach here from the enumerating check

    return np.where(c, a, b)


# ---- printing

_PREC = {Add: 1, Mul: 2, Div: 2, Mod: 2}


def cuda(e: Expr | Pred) -> str:
    """`e` as the kernel headers spell it: named constants and intermediates by name."""
    return _cuda(e, 0)


def _cuda(e: Any, outer: int) -> str:
    if isinstance(e, Var):
        return e.spelled or e.name
    if isinstance(e, Const):
        return e.name or str(e.value)
    if isinstance(e, Let):
        return e.name
    if isinstance(e, Cast):
        return f"{'index_t' if e.ctype == INDEX else 'int'}({_cuda(e.a, 0)})"
    if isinstance(e, Min):
        return f"min({_cuda(e.a, 0)}, {_cuda(e.b, 0)})"
    if isinstance(e, Ite):
        return f"{_cuda(e.cond, 0)} ? {_cuda(e.a, 0)} : {_cuda(e.b, 0)}"
    if isinstance(e, Add):
        if isinstance(e.b, Mul) and isinstance(e.b.b, Const) and e.b.b.value == -1 and e.b.b.name is None:
            text = f"{_cuda(e.a, 1)} - {_cuda(e.b.a, 2)}"
        elif isinstance(e.b, Const) and e.b.name is None and e.b.value < 0:
            text = f"{_cuda(e.a, 1)} - {-e.b.value}"
        else:
            text = f"{_cuda(e.a, 1)} + {_cuda(e.b, 1)}"
        return f"({text})" if outer > 1 else text
    if isinstance(e, (Mul, Div, Mod)):
        op = {Mul: "*", Div: "/", Mod: "%"}[type(e)]
        # A quotient or remainder inside a product is parenthesized, as the headers write it: (c % kPerRow) * VEC.
        left = 3 if isinstance(e, Mul) and isinstance(e.a, (Div, Mod)) else 2
        text = f"{_cuda(e.a, left)} {op} {_cuda(e.b, 3)}"
        return f"({text})" if outer > 2 else text
    if isinstance(e, Cmp):
        return f"{_cuda(e.a, 1)} {e.op} {_cuda(e.b, 1)}"
    if isinstance(e, And):
        return " && ".join(_cuda(p, 0) for p in e.parts) or "true"
    if isinstance(e, Or):
        return " || ".join(_cuda(p, 0) for p in e.parts) or "false"
    if isinstance(e, Not):
        return f"!({_cuda(e.p, 0)})"
    raise TypeError(f"not an expression: {e!r}")


def coq(e: Expr | Pred) -> str:
    """`e` as a Coq term over Z (constants by value, a constant expression folded; conditionals must have been split
    off: `split_ite`)."""
    if isinstance(e, Expr) and not isinstance(e, Var) and constant(e):
        value = evaluate(e, {})
        return str(value) if value >= 0 else f"({value})"
    if isinstance(e, Var):
        return e.name
    if isinstance(e, Const):
        return str(e.value) if e.value >= 0 else f"({e.value})"
    if isinstance(e, Let):
        return coq(e.value)
    if isinstance(e, Cast):
        return coq(e.a)
    if isinstance(e, Add):
        return f"({coq(e.a)} + {coq(e.b)})"
    if isinstance(e, Mul):
        return f"({coq(e.a)} * {coq(e.b)})"
    if isinstance(e, Div):
        return f"({coq(e.a)} / {coq(e.b)})"
    if isinstance(e, Mod):
        return f"({coq(e.a)} mod {coq(e.b)})"
    if isinstance(e, Min):
        return f"(Z.min {coq(e.a)} {coq(e.b)})"
    if isinstance(e, Cmp):
        return f"{coq(e.a)} {'=' if e.op == '==' else e.op} {coq(e.b)}"
    if isinstance(e, And):
        return " /\\ ".join(f"({coq(p)})" for p in e.parts) or "True"
    if isinstance(e, Or):
        return " \\/ ".join(f"({coq(p)})" for p in e.parts) or "False"
    if isinstance(e, Not):
        return f"~ ({coq(e.p)})"
    raise TypeError(f"Coq has no term for {type(e).__name__} here: {e!r}")


def readable(e: Expr | Pred) -> str:
    """`e` with its intermediates spelled out (for an obligation's text and the index dump)."""
    return _cuda(_inline(e), 0)


def _inline(e: Any) -> Any:
    if isinstance(e, Expr) and not isinstance(e, Var) and constant(e):
        return Const(int(evaluate(e, {})))
    if isinstance(e, Let):
        return _inline(e.value)
    if isinstance(e, (Var, Const)):
        return e
    if isinstance(e, (Add, Mul, Div, Mod, Min)):
        return type(e)(_inline(e.a), _inline(e.b), e.ctype)
    if isinstance(e, Cast):
        return _inline(e.a)
    if isinstance(e, Ite):
        return Ite(_inline(e.cond), _inline(e.a), _inline(e.b), e.ctype)
    if isinstance(e, Cmp):
        return Cmp(e.op, _inline(e.a), _inline(e.b))
    if isinstance(e, (And, Or)):
        return type(e)(tuple(_inline(p) for p in e.parts))
    if isinstance(e, Not):
        return Not(_inline(e.p))
    raise TypeError(f"not an expression: {e!r}")


def split_ite(p: Pred) -> list[tuple[Pred, Pred]]:
    """`p` as cases (condition, p without conditionals) covering every valuation: Coq's lia takes no `if`."""
    # A conditional whose condition holds none: the cases' conditions then hold none either (a condition may hold
    # a conditional where a guard compares an index formed by one).
    ite = next((x for x in walk(p) if isinstance(x, Ite) and not any(isinstance(y, Ite) for y in walk(x.cond))),
               None)
    if ite is None:
        return [(TRUE, p)]
    cases = []
    for cond, branch in ((ite.cond, ite.a), (Not(ite.cond), ite.b)):
        replaced = replace(p, ite, branch)
        for c2, q in split_ite(replaced):
            cases.append((all_of(cond, c2), q))
    return cases


def replace(e: Any, old: Any, new: Any) -> Any:
    if e is old or e == old:
        return new
    if not isinstance(e, (Expr, Pred)):
        raise TypeError(f"not an expression: {e!r}")
    kids = children(e)
    return rebuild(e, tuple(replace(k, old, new) for k in kids)) if kids else e


def int_nodes(e: Expr | Pred) -> list[Expr]:
    """The arithmetic nodes of `e` the kernel computes (sums, products, quotients, remainders, mins), each once:
    the values whose range the 64-bit obligations bound."""
    seen: dict[Expr, None] = {}
    for x in walk(e):
        if isinstance(x, (Add, Mul, Div, Mod, Min)) and not constant(x):
            seen.setdefault(x, None)
    return list(seen)


def divisions(e: Expr | Pred) -> list[Div | Mod]:
    seen: dict[Expr, None] = {}
    for x in walk(e):
        if isinstance(x, (Div, Mod)) and not constant(x):
            seen.setdefault(x, None)
    return list(seen)  # type: ignore[arg-type]


@functools.cache
def constant(e: Expr | Pred) -> bool:
    """Whether `e` has no variable and no rewritten value (an expression Coq holds unfolded)."""
    return all(constant(k) for k in children(e)) if not isinstance(e, (Var, Rewritten)) else False
