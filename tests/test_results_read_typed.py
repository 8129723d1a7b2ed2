"""Issue 43, point 2: a version's learned_from is read through its typed record
(trainers.results), and a job's finish_needs holds the platform's plain values, not the
product's ids. This scan finds any key of either read by string outside the record module —
`x.learned_from.get("key")`, `needs["key"]` where `needs = job.finish_needs or {}`, a
`learned_from__key=` or `finish_needs__key=` lookup — and names file:line.

Migrations and tests are not scanned (a migration reads the rows as they were then).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIELDS = ("learned_from", "finish_needs")
# The typed-record module: the one place learned_from's keys are spelt.
RECORD_MODULES = {"trainers/results.py"}
SKIPPED_FOLDERS = {"tests", "migrations", ".venv", "var", "node_modules", "data", "static"}

# Sites another task moves or splits now (issue 43): the lead empties this list as they
# change. Each is (file, the key read). Everything else fails.
ALLOWED = {
    # A benchmark reading the API's JSON (a client of the API, not of the model).
    ("bench/wording_demo.py", "metrics"),
    ("bench/wording_demo.py", "preference_version"),
}


def _is_field(node: ast.AST, aliases: set[str]) -> bool:
    """Whether `node` is one of the fields (or a name bound to one), `field or {}` included."""
    if isinstance(node, ast.Attribute):
        return node.attr in FIELDS
    if isinstance(node, ast.Name):
        return node.id in FIELDS or node.id in aliases
    if isinstance(node, ast.BoolOp):
        return _is_field(node.values[0], aliases)
    if isinstance(node, ast.Subscript):  # a JSON answer's ["learned_from"]
        return isinstance(node.slice, ast.Constant) and node.slice.value in FIELDS
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return (
            node.func.attr == "get"
            and bool(node.args)
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value in FIELDS
        )
    return False


def _lookup_key(value: object) -> str | None:
    if isinstance(value, str) and value.startswith(tuple(f"{field}__" for field in FIELDS)):
        return value
    return None


class _Reads(ast.NodeVisitor):
    """Keys read by string from an expression naming one of the fields, or from a name bound
    to one (in the same function)."""

    def __init__(self) -> None:
        self.found: list[tuple[int, str]] = []
        self.aliases: list[set[str]] = [set()]

    def _is_field(self, node: ast.AST) -> bool:
        return _is_field(node, self.aliases[-1])

    def _function(self, node: ast.AST) -> None:
        self.aliases.append(set())
        self.generic_visit(node)
        self.aliases.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function

    def visit_Assign(self, node: ast.Assign) -> None:
        if self._is_field(node.value):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id not in FIELDS:
                    self.aliases[-1].add(target.id)
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        key = node.slice
        if (
            isinstance(key, ast.Constant)
            and isinstance(key.value, str)
            and key.value not in FIELDS
            and self._is_field(node.value)
        ):
            self.found.append((node.lineno, key.value))
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        function = node.func
        if (
            isinstance(function, ast.Attribute)
            and function.attr in ("get", "pop", "setdefault")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
            and node.args[0].value not in FIELDS
            and self._is_field(function.value)
        ):
            self.found.append((node.lineno, node.args[0].value))
        for keyword in node.keywords:
            lookup = _lookup_key(keyword.arg)
            if lookup:
                self.found.append((node.lineno, lookup))
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        # A lookup spelt as a dict key (`filter(**{"learned_from__x": ...})`) or a string.
        lookup = _lookup_key(node.value)
        if lookup:
            self.found.append((node.lineno, lookup))


def keys_read_by_string(source: str) -> list[tuple[int, str]]:
    reads = _Reads()
    reads.visit(ast.parse(source))
    return sorted(set(reads.found))


def _project_modules() -> list[Path]:
    return sorted(
        path
        for path in ROOT.rglob("*.py")
        if not SKIPPED_FOLDERS & set(path.relative_to(ROOT).parts[:-1])
    )


def test_it_finds_a_key_read_by_string_however_it_is_spelt():
    source = """
def f(version, job):
    a = version.learned_from.get("algorithm")
    frozen = {"number": version.learned_from["seed"]}
    frozen["number"]  # a dict built from it is not the field
    b = (version.learned_from or {})["base"]
    needs = job.finish_needs or {}
    c = needs.get("world")
    Job.objects.filter(finish_needs__world=1)
    PolicyVersion.objects.filter(**{"learned_from__seed": 3})

def g(needs):
    return needs.get("world")  # another function's name: not the field
"""
    assert keys_read_by_string(source) == [
        (3, "algorithm"),
        (4, "seed"),
        (6, "base"),
        (8, "world"),
        (9, "finish_needs__world"),
        (10, "learned_from__seed"),
    ]


def test_it_reads_learned_from_and_finish_needs_by_key_nowhere_else():
    found, seen_allowed = [], set()
    for path in _project_modules():
        relative = path.relative_to(ROOT).as_posix()
        if relative in RECORD_MODULES:
            continue
        for line, key in keys_read_by_string(path.read_text(encoding="utf-8")):
            if (relative, key) in ALLOWED:
                seen_allowed.add((relative, key))
            else:
                found.append(f"{relative}:{line}: {key!r}")
    assert not found, (
        "learned_from / finish_needs read by string key: read a version's record through "
        "PolicyVersion.learned (trainers.results) and query its columns; keep the product's "
        "ids in the kind's own table:\n" + "\n".join(found)
    )
    # An entry whose site is gone is taken off the list, so the list only shrinks.
    assert seen_allowed >= ALLOWED, f"allowed but no longer read: {sorted(ALLOWED - seen_allowed)}"
