"""Reads one typed value of a spec (mapping, integer, size, number, stride list, choice, dtype), raising a
`SpecError` that names the file, the key and the fix."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from dgemm_cli.errors import SpecError
from dgemm_cli.spec.model import DTYPE_ALIASES, DTYPE_BYTES
from dgemm_cli.spec.suggest import AMBIGUOUS_NAMES, fix_ambiguous, fix_naming, fix_unknown_key

_FLOAT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")


class SpecReader:
    """Carries the file name so that every error can name it."""

    def __init__(self, path: str):
        self.path = path
        self.notes: list[str] = []

    def fail(self, key: str, problem: str, fix: str) -> SpecError:
        return SpecError(self.path, key, problem, fix)

    def mapping(self, value: Any, key: str, allowed: set[str], what: str,
                nested: Mapping[str, str] | None = None) -> dict[str, Any]:
        """`value` as a mapping of `allowed` keys; `nested` (key -> where it goes) only feeds the fix."""
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.fail(key or "(top)", f"expected a mapping for {what}, got {type(value).__name__}",
                            f"write {key or 'the spec'} as `key: value` lines")
        for k in value:
            if k not in allowed:
                raise self.fail(f"{key}.{k}" if key else str(k), f"unknown key '{k}'",
                                fix_unknown_key(k, sorted(allowed), nested or {}))
        return value

    def integer(self, value: Any, key: str, minimum: int | None = None, what: str = "an integer",
                fix: str | None = None) -> int:
        """A whole number >= `minimum`; `what` names it in the problem ("an integer count of batches"), `fix`
        replaces the generic fix."""
        # bool is an int in Python; `m: true` is a typo, not 1.
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(key, f"expected {what}, got {value!r}", fix or "write a whole number")
        if minimum is not None and value < minimum:
            low = "negative" if value < 0 else f"less than {minimum}"
            raise self.fail(key, f"{value} is {low}", fix or f"use an integer >= {minimum}")
        return value

    def size(self, value: Any, key: str, letter: str, dynamic: dict[str, tuple[int, int]]) -> int:
        """A size, or a run-time range `{min: a, max: b}` (recorded in `dynamic`; the max is returned)."""
        if isinstance(value, dict):
            rng = self.mapping(value, key, {"min", "max"}, "a run-time size")
            for bound in ("min", "max"):
                if bound not in rng:
                    raise self.fail(f"{key}.{bound}", "missing", "write `{min: 1, max: 256}`")
            lo, hi = self.integer(rng["min"], f"{key}.min", 1), self.integer(rng["max"], f"{key}.max", 1)
            if lo > hi:
                raise self.fail(key, f"min {lo} > max {hi}", "give the smaller bound as min")
            dynamic[letter] = (lo, hi)
            return hi
        return self.integer(value, key, 1, "an integer size",
                            f"write the number of elements as a whole number >= 1, e.g. `{key.rpartition('.')[2]}: "
                            "128` (a dim of size 1 is dropped); only the rows may be a run-time range "
                            "`{min: 1, max: 256}`")

    def number(self, value: Any, key: str) -> float:
        # YAML 1.1 reads 1e-3 (no dot) as a string; accept what is plainly a number.
        if isinstance(value, str) and _FLOAT.fullmatch(value.strip()):
            value = float(value)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(key, f"expected a number, got {value!r}", "write a number such as 1.0")
        if value != value or value in (float("inf"), float("-inf")):
            raise self.fail(key, f"{value!r} is not finite", "use a finite number")
        return float(value)

    def int_list(self, value: Any, key: str, length: int, letters: str) -> list[int]:
        if not isinstance(value, list):
            raise self.fail(key, f"expected a list of {length} integers, got {value!r}",
                            f"write one stride per letter of '{letters}', e.g. [{', '.join(['1'] * length)}]")
        if len(value) != length:
            fix = (f"give exactly one stride per letter of '{letters}'" if letters else
                   "this operand has no letters (one element, e.g. the output of a full reduction): "
                   "give `strides: []` or leave strides out")
            raise self.fail(key, f"has {len(value)} entries but the operand has {length} dims ('{letters}')", fix)
        out = []
        for i, v in enumerate(value):
            if isinstance(v, int) and not isinstance(v, bool) and v < 0:
                raise self.fail(f"{key}[{i}]", f"{v} is negative: a view here walks forwards from its base pointer "
                                               "(the kernels' index math, the buffer span and TMA take strides >= 0)",
                                "use strides >= 0 and pass the lowest-addressed element as the base (`offset:` "
                                "from it); a dim that runs backwards needs a flipped copy (e.g. torch.flip)")
            out.append(self.integer(v, f"{key}[{i}]", 0))
        return out

    def choice(self, value: Any, key: str, choices: tuple[str, ...], what: str,
               aliases: Mapping[str, str] | None = None) -> str:
        """`value` if it is one of `choices` in any case ('Row', 'SM_90A': read as ours, with a note);
        `aliases` (other name -> choice) only feed the suggestion."""
        ours = {c.lower(): c for c in choices}.get(value.lower()) if isinstance(value, str) else None
        if ours is None:
            ambiguous = AMBIGUOUS_NAMES.get(value.lower()) if isinstance(value, str) else None
            fix = (fix_ambiguous(value, ambiguous, choices) if ambiguous and set(ambiguous) <= set(choices)
                   else fix_naming(value, choices, aliases))
            raise self.fail(key, f"unsupported {what} {value!r}", fix)
        if ours != value:
            self.notes.append(f"{key} '{value}' read as {ours}")
        return ours

    def dtype(self, value: Any, key: str, choices: tuple[str, ...] = tuple(DTYPE_BYTES), what: str = "dtype") -> str:
        """A dtype in our names, among `choices`; an alias (fp16, half, FP16, ...) is read as ours, with a note.
        Only `accum:` narrows `choices` (to ACCUM_TYPES): a dtype outside them is refused with that reason."""
        ours = DTYPE_ALIASES.get(value.lower(), value.lower()) if isinstance(value, str) else None
        if ours in DTYPE_BYTES and ours not in choices:
            raise self.fail(key, f"unsupported {what} {value!r}: the kernels accumulate in {' or '.join(choices)} "
                                 "only", f"write `{key}: {choices[0]}` or leave it out")
        if isinstance(value, str) and value.lower() in DTYPE_ALIASES:
            self.notes.append(f"{key} '{value}' read as {ours}")
            return ours
        return self.choice(value, key, choices, what, {a: n for a, n in DTYPE_ALIASES.items() if n in choices})
