"""The layers of ARCHITECTURE.md hold: no app imports an app above it.

`lint-imports` (the import contract in pyproject.toml, run by `make test`) counts every import
statement, function-level ones too. These tests show the contract can fail, and cover what it
cannot see: a module named in a string (`import_module("...")`, `apps.get_model("app", ...)`).
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Top to bottom; training and evaluation share the top layer and never import each other.
LAYERS = [{"training", "evaluation"}, {"policies"}, {"arena"}, {"levers9"}, {"trainers"}]
# The composition points allowed to name every app.
COMPOSITION_POINTS = {"levers9/urls.py", "levers9/asgi.py", "levers9/settings.py"}


def _rank(app: str) -> int | None:
    return next((index for index, layer in enumerate(LAYERS) if app in layer), None)


def _lint_imports(cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(Path(sys.executable).with_name("lint-imports")), "--no-cache"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_it_keeps_the_import_contract():
    run = _lint_imports(ROOT)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 kept, 0 broken" in run.stdout


def test_it_breaks_the_contract_on_a_function_level_upward_import(tmp_path):
    for package in ("training", "evaluation", "policies", "arena", "levers9", "trainers"):
        shutil.copytree(
            ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "arena" / "upward_probe.py").write_text(
        "def ask_the_registry():\n    from policies.models import PolicyVersion\n\n"
        "    return PolicyVersion\n"
    )
    run = _lint_imports(tmp_path)
    assert run.returncode != 0
    assert "arena is not allowed to import policies" in run.stdout
    assert "arena.upward_probe -> policies.models" in run.stdout


def _named_modules(tree: ast.AST) -> list[tuple[int, str]]:
    """Apps named in strings where a module or a model is looked up by name."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        name = (
            node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        )
        first = node.args[0]
        looked_up = name in {"import_module", "get_model", "__import__"}
        if looked_up and isinstance(first, ast.Constant) and isinstance(first.value, str):
            found.append((node.lineno, first.value.split(".")[0]))
    return found


def test_no_app_looks_up_a_higher_app_by_name():
    upward = []
    for app in ("training", "evaluation", "policies", "arena", "levers9", "trainers"):
        for path in sorted((ROOT / app).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if "/migrations/" in relative or relative in COMPOSITION_POINTS:
                continue
            for line, named in _named_modules(ast.parse(path.read_text())):
                mine, theirs = _rank(app), _rank(named)
                if theirs is None or named == app:
                    continue
                if theirs < mine or (theirs == mine and named != app):
                    upward.append(f"{relative}:{line} names {named}")
    assert upward == []


def test_the_scan_sees_a_lookup_by_name():
    tree = ast.parse("from django.apps import apps\nJob = apps.get_model('training', 'Job')\n")
    assert _named_modules(tree) == [(2, "training")]
