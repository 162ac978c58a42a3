"""The fixes for a misspelt key or value: the nearest valid name ("did you mean 'layout'?") and all of them."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from typing import Any

# Names a user types that stand for more than one of ours: the fix offers each, saying what it is.
AMBIGUOUS_NAMES = {"gelu": ("gelu_tanh", "gelu_erf")}
MEANINGS = {
    "gelu_tanh": "GeLU's tanh approximation, torch's GELU(approximate='tanh') and cuBLASLt's GELU",
    "gelu_erf": "the exact GeLU with erf, torch's default nn.GELU()",
}

_NEAR = 0.6  # difflib's default ratio: 'layuot' -> 'layout', 'rwo' -> 'row', 'column' -> 'col'


def closest(word: Any, names: Iterable[str], aliases: Mapping[str, str] | None = None) -> str | None:
    """The name in `names` nearest to `word`, or None when none is near.

    Case is ignored, and an alias in other case ('Half') suggests the name it stands for. Otherwise difflib
    decides, among names with the same digits only: the digits are the meaning (bit width, compute
    capability), so 'f64' must not suggest 'f16'."""
    if isinstance(word, bool) or not isinstance(word, (str, int, float)):
        return None
    names = list(names)
    text = str(word).strip().lower()
    by_lower = {name.lower(): name for name in names}
    for alias, name in (aliases or {}).items():
        by_lower.setdefault(alias.lower(), name)
    if text in by_lower:
        return by_lower[text]
    if all(len(name) == 1 for name in names):
        return None  # one-letter names (einsum letters, operands) are near only by case: 'hw' is no typo of 'h'
    digits = re.sub(r"\D", "", text)
    same_digits = [name.lower() for name in names if re.sub(r"\D", "", name) == digits]
    hits = difflib.get_close_matches(text, same_digits, n=1, cutoff=_NEAR)
    return by_lower[hits[0]] if hits else None


def fix_ambiguous(word: str, names: tuple[str, ...], valid: Iterable[str]) -> str:
    """The fix for a name that means more than one of ours ('gelu'): each candidate and what it is."""
    offers = " or ".join(f"'{n}' ({MEANINGS[n]})" for n in names)
    return f"'{word}' is ambiguous: write {offers} (valid: {', '.join(valid)})"


def fix_unknown_key(word: Any, allowed: list[str], nested: Mapping[str, str]) -> str:
    """Like `fix_naming`; but when the nearest key is one of the level below (`nested`: key -> example),
    the fix says where it goes."""
    near = closest(word, [*allowed, *(k for k in sorted(nested) if k not in allowed)])
    if near is None or near in allowed:
        return fix_naming(word, allowed)
    where = f"one level down: `{nested[near]}`"
    return f"'{near}' goes {where}" if near == word else f"did you mean '{near}'? It goes {where}"


def fix_naming(word: Any, names: Iterable[str], aliases: Mapping[str, str] | None = None) -> str:
    """The fix for an unknown key or value: the nearest valid name when there is one, and all of them."""
    names = list(names)
    near = closest(word, names, aliases)
    valid = ", ".join(names)
    return f"did you mean '{near}'? (valid: {valid})" if near is not None else f"use one of: {valid}"
