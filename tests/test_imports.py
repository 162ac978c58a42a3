"""The package's import graph has no cycle: every import statement of dgemm_cli (top level or inside a function),
`from package import submodule` counted as importing the submodule."""

from __future__ import annotations

import ast

from .conftest import REPO

PACKAGE = REPO / "dgemm_cli"


def _import_graph() -> dict[str, set[str]]:
    modules = {".".join(p.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__"): p
               for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module in modules:
                subs = [f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in modules]
                graph[name] |= set(subs) if len(subs) == len(node.names) else {node.module, *subs}
            elif isinstance(node, ast.Import):
                graph[name] |= {a.name for a in node.names if a.name in modules}
        graph[name].discard(name)
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph (a depth-first search's back edge), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        path.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                return path[path.index(n):] + [n]
            if n not in state and (found := visit(n)):
                return found
        path.pop()
        state[m] = 2
        return None

    return next((c for m in sorted(graph) if m not in state and (c := visit(m))), None)


def test_the_package_has_no_import_cycle():
    assert _cycle(_import_graph()) is None


def test_the_cycle_check_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]


PLANNING = ("dgemm_cli.spec", "dgemm_cli.views", "dgemm_cli.arch", "dgemm_cli.constraints", "dgemm_cli.plan",
            "dgemm_cli.families", "dgemm_cli.tune", "dgemm_cli.baseline")
EDGES = ("dgemm_cli.render", "dgemm_cli.renderers", "dgemm_cli.build", "dgemm_cli.toolchain", "dgemm_cli.run",
         "dgemm_cli.cli", "dgemm_cli.tune_run")


def _within(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def _family_renderer(module: str) -> bool:
    """A family package's renderer (dgemm_cli.families.<name>.render): rendering, beside the family's planner."""
    return module.startswith("dgemm_cli.families.") and module.endswith(".render")


def test_planning_never_imports_rendering_building_or_the_command_line():
    graph = _import_graph()
    assert any(_family_renderer(m) for m in graph)
    for start in (m for m in graph if _within(m, PLANNING) and not _family_renderer(m)):
        seen, todo = set(), [start]
        while todo:
            m = todo.pop()
            if m not in seen:
                seen.add(m)
                todo.extend(graph[m])
        reached = sorted(m for m in seen if _within(m, EDGES) or _family_renderer(m))
        assert not reached, f"{start} reaches {reached}"
