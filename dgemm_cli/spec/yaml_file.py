"""A spec file -> the YAML document, refusing what pyyaml would read silently (a key given twice)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from dgemm_cli.errors import SpecError
from dgemm_cli.spec.model import Spec
from dgemm_cli.spec.parse import parse_spec


def load_spec(path: str | Path) -> Spec:
    """Read and validate one YAML spec file."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise SpecError(str(path), "(file)", "no such file", "check the path") from None
    except IsADirectoryError:
        raise SpecError(str(path), "(file)", "is a directory", "pass a .yaml spec file") from None
    except UnicodeDecodeError as exc:
        raise SpecError(str(path), f"byte {exc.start}", "not UTF-8 text", "save the spec as UTF-8") from None
    loader = _SpecLoader(text)
    try:
        data = loader.get_single_data()
    except _DuplicateKey as dup:
        lines = f"on line {dup.first}" if dup.first == dup.second else f"on lines {dup.first} and {dup.second}"
        raise SpecError(str(path), dup.key, f"'{dup.key.rpartition('.')[2]}' is given twice {lines} (YAML would "
                        "silently keep the last)", "keep one of the two and delete the other") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else "(yaml)"
        raise SpecError(str(path), where, f"not valid YAML ({getattr(exc, 'problem', exc)})",
                        "fix the YAML syntax") from None
    finally:
        loader.dispose()
    return parse_spec(data, str(path))


class _DuplicateKey(Exception):
    """A mapping of the document gives one key twice: `key` is its dotted path, the lines are 1-based."""

    def __init__(self, key: str, first: int, second: int):
        super().__init__(key)
        self.key, self.first, self.second = key, first, second


class _SpecLoader(yaml.SafeLoader):
    """pyyaml's safe loader, except that a key given twice in one mapping is an error, at any depth
    (pyyaml keeps the last one silently)."""

    def construct_document(self, node: yaml.Node) -> Any:
        _check_unique_keys(node, "", set())
        return super().construct_document(node)


def _check_unique_keys(node: yaml.Node, where: str, seen: set[int]) -> None:
    """Raise `_DuplicateKey` for the first key given twice in a mapping under `node` (`where`: its path)."""
    if id(node) in seen:  # an alias: checked where its anchor is
        return
    seen.add(id(node))
    if isinstance(node, yaml.MappingNode):
        lines: dict[tuple[str, str], int] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *base`: later keys override merged ones by design
                continue
            name = str(key_node.value) if isinstance(key_node, yaml.ScalarNode) else "(key)"
            path = f"{where}.{name}" if where else name
            ident = (key_node.tag, name)
            if ident in lines:
                raise _DuplicateKey(path, lines[ident], key_node.start_mark.line + 1)
            lines[ident] = key_node.start_mark.line + 1
            _check_unique_keys(value_node, path, seen)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _check_unique_keys(item, f"{where}[{i}]", seen)
