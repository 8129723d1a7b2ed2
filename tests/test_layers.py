"""The layers of docs/architecture.md hold: no app imports an app above it, nor names one.

`lint-imports` (the import contract in pyproject.toml, run by `make test`) counts every import
statement, function-level ones too. These tests show the contract can fail, and cover what it
cannot see: an app named in a string, where a module or a model is looked up by name
(`import_module("...")`, `apps.get_model("app", ...)`) or where a model field points at another
app's model (`models.ForeignKey("policies.PolicyVersion", ...)`): a table that names a higher
app's table ties the lower app to it as surely as an import.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Top to bottom; training and evaluation share a layer and never import each other. `config`
# (settings, the URL confs, ASGI and WSGI) is the composition root above every app.
LAYERS = [
    {"config"},
    {"training", "evaluation"},
    {"policies"},
    {"arena"},
    {"levers9"},
    {"trainers"},
]
PACKAGES = sorted(set().union(*LAYERS))
# Calls whose first argument names a module or an app by string.
LOOKUPS = {"import_module", "get_model", "__import__"}
# Model fields that name their target as "app_label.Model": first argument, or these keywords.
RELATIONS = {"ForeignKey", "OneToOneField", "ManyToManyField"}
RELATION_KEYWORDS = {"to", "through"}


def _rank(app: str) -> int | None:
    return next((index for index, layer in enumerate(LAYERS) if app in layer), None)


def _app_labels() -> dict[str, str]:
    """Each Django app's label with the package it lives in: a model reference names the label,
    which need not be the package's name (`jobs` is levers9.jobs)."""
    labels = {}
    for apps_module in sorted(ROOT.glob("*/**/apps.py")):
        for node in ast.walk(ast.parse(apps_module.read_text())):
            if not isinstance(node, ast.ClassDef):
                continue
            fields = {
                target.id: statement.value.value
                for statement in node.body
                if isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Constant)
                for target in statement.targets
                if isinstance(target, ast.Name)
            }
            if isinstance(fields.get("name"), str):
                name = fields["name"]
                labels[fields.get("label", name.rsplit(".", 1)[-1])] = name.split(".")[0]
    return labels


def _called(node: ast.Call) -> str:
    return node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")


def _names_in_strings(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, text) of each string that names a module, an app or another app's model."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        called = _called(node)
        if called in LOOKUPS:
            named = node.args[:1]
        elif called in RELATIONS:
            named = node.args[:1] + [
                keyword.value for keyword in node.keywords if keyword.arg in RELATION_KEYWORDS
            ]
        else:
            continue
        for value in named:
            if not (isinstance(value, ast.Constant) and isinstance(value.value, str)):
                continue
            # A model of the field's own app is named without its label ("Moment", "self").
            if called in RELATIONS and "." not in value.value:
                continue
            found.append((value.lineno, value.value))
    return found


def _string_names(root: Path) -> Iterator[tuple[str, int, str, str, str]]:
    """(module, line, its app, the app named, the string) for every app module under root,
    migrations aside (they record the state they migrate, not a dependency to keep)."""
    labels = _app_labels()
    for app in PACKAGES:
        for path in sorted((root / app).rglob("*.py")):
            relative = path.relative_to(root).as_posix()
            if "/migrations/" in relative:
                continue
            for line, text in _names_in_strings(ast.parse(path.read_text())):
                first = text.split(".")[0]
                yield relative, line, app, labels.get(first, first), text


def _upward_names(root: Path) -> list[str]:
    upward = []
    for relative, line, app, named, text in _string_names(root):
        theirs = _rank(named)
        if named != app and theirs is not None and theirs <= _rank(app):
            upward.append(f"{relative}:{line} names {named} ({text!r})")
    return upward


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
    for package in PACKAGES:
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


def test_no_app_names_a_higher_app_in_a_string():
    assert _upward_names(ROOT) == []


def test_it_fails_on_an_upward_model_reference(tmp_path):
    (tmp_path / "arena").mkdir()
    (tmp_path / "arena" / "probe.py").write_text(
        "from django.db import models\n"
        "class Probe(models.Model):\n"
        "    version = models.ForeignKey('policies.PolicyVersion', on_delete=models.CASCADE)\n"
        "    versions = models.ManyToManyField(to='training.Run')\n"
        "    world = models.ForeignKey('arena.World', on_delete=models.CASCADE)\n"
        "    moment = models.OneToOneField('Moment', on_delete=models.CASCADE)\n"
        "    job = models.ForeignKey(to='jobs.Job', on_delete=models.CASCADE)\n"
    )
    (tmp_path / "trainers").mkdir()
    (tmp_path / "trainers" / "probe.py").write_text("Job = apps.get_model('jobs', 'Job')\n")
    assert _upward_names(tmp_path) == [
        "arena/probe.py:3 names policies ('policies.PolicyVersion')",
        "arena/probe.py:4 names training ('training.Run')",
        "trainers/probe.py:1 names levers9 ('jobs')",
    ]


def test_the_scan_reads_the_real_model_references():
    assert _app_labels()["jobs"] == "levers9"
    referenced = {(module, text) for module, _, _, _, text in _string_names(ROOT)}
    assert ("policies/models.py", "arena.World") in referenced
    assert ("evaluation/models.py", "arena.Moment") in referenced


def test_the_scan_sees_a_lookup_by_name():
    tree = ast.parse("from django.apps import apps\nJob = apps.get_model('training', 'Job')\n")
    assert _names_in_strings(tree) == [(2, "training")]
