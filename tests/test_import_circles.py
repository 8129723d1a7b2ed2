"""No two modules of the project import each other, directly or round a longer loop, with
function-level imports counted: a function-level import hides a circle from Python, not from
the reader who has to hold both modules in mind at once."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("config", "training", "evaluation", "policies", "arena", "levers9", "trainers")


def _module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(sources: dict[str, str]) -> dict[str, set[str]]:
    """module -> the project modules it imports anywhere in its body. `from a import b` names
    the module a.b where there is one, else a."""
    graph: dict[str, set[str]] = {name: set() for name in sources}
    for name, source in sources.items():
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                targets = [
                    f"{node.module}.{alias.name}"
                    if f"{node.module}.{alias.name}" in sources
                    else node.module
                    for alias in node.names
                ]
            else:
                continue
            graph[name].update(t for t in targets if t in sources and t != name)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return found


def _project_sources() -> dict[str, str]:
    return {
        _module_name(path, ROOT): path.read_text()
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if "migrations" not in path.parts
    }


def test_no_module_imports_itself_round_a_loop():
    sources = _project_sources()
    assert "arena.judge.fit_job" in sources
    assert "trainers.wording.rlhf" in sources
    assert circles(import_graph(sources)) == []


def test_it_sees_a_circle_closed_inside_a_function():
    sources = {
        "app.judges": "from app.fitting import fit\n",
        "app.fitting": "def fit():\n    from app.judges import score\n",
        "app.other": "import app.judges\n",
    }
    assert circles(import_graph(sources)) == [["app.fitting", "app.judges"]]


def test_it_sees_a_longer_loop_through_a_package():
    sources = {
        "app.services": "from app.services.pairs import make\n",
        "app.services.pairs": "from app.queue import next_pair\n",
        "app.queue": "from app.services import make\n",
    }
    assert circles(import_graph(sources)) == [["app.queue", "app.services", "app.services.pairs"]]
