"""No two modules of the project import each other, directly or round a longer loop, with
function-level imports counted: a function-level import hides a circle from Python, not from
the reader who has to hold both modules in mind at once.

Nor do two folders: each module belongs to its folder's room (a folder and the folder inside it
are two rooms), and no room may import one that imports it back, so a reader can learn a room
knowing only the rooms beneath it. An app's doors — its `admin`, `apps`, `urls`, and its API and
pages (`api`, `views`, and their parts such as `api_live`) at the app's top, which Django and
config find by name — are a room of their own above the app's folders: they put the rooms
together, as config does for the apps."""

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


# The modules Django looks for by name at an app's top; they sit above the app's folders.
DOORS = ("admin", "api", "apps", "urls", "views")
# Folder circles still open, each with what ends it. The test fails when one ends too, so the
# list only shrinks.
STILL_OPEN: list[list[str]] = []


def room_of(module: str, packages: set[str]) -> str:
    """The folder a module lives in (a package is its own folder); an app's doors
    (`<app>.admin`, ...) are the room `<app>:doors`."""
    if module in packages:
        return module
    folder, _, name = module.rpartition(".")
    door = name in DOORS or name.partition("_")[0] in DOORS
    if door and "." not in folder and folder in packages:
        return f"{folder}:doors"
    return folder


def folder_graph(graph: dict[str, set[str]], packages: set[str]) -> dict[str, set[str]]:
    """room -> the other rooms its modules import."""
    rooms: dict[str, set[str]] = {}
    for module, targets in graph.items():
        room = room_of(module, packages)
        rooms.setdefault(room, set())
        for target in targets:
            other = room_of(target, packages)
            rooms.setdefault(other, set())
            if other != room:
                rooms[room].add(other)
    return rooms


def _project_packages() -> set[str]:
    return {
        _module_name(path, ROOT)
        for package in PACKAGES
        for path in (ROOT / package).rglob("__init__.py")
        if "migrations" not in path.parts
    }


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


def test_no_folder_imports_itself_round_a_loop():
    sources = _project_sources()
    packages = _project_packages()
    assert {"trainers.judge", "trainers.reading", "arena.judge", "levers9.jobs"} <= packages
    assert circles(folder_graph(import_graph(sources), packages)) == STILL_OPEN


def test_it_sees_a_circle_between_a_folder_and_the_folder_inside_it():
    sources = {
        "app.models": "from app.judge.rubric import DIMENSIONS\n",
        "app.judge": "",
        "app.judge.rubric": "DIMENSIONS = ()\n",
        "app.judge.versions": "def latest():\n    from app.models import Version\n",
        "app.views": "from app.judge.versions import latest\n",
        "app": "",
    }
    packages = {"app", "app.judge"}
    assert circles(folder_graph(import_graph(sources), packages)) == [["app", "app.judge"]]
    # The same imports with the models' constant owned below the judge: no circle, and the
    # door (app.views) above both is no circle either.
    sources["app.models"] = "DIMENSIONS = ()\n"
    assert circles(folder_graph(import_graph(sources), packages)) == []
