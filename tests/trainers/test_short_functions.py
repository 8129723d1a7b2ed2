"""Every trainer reads as a pipeline of named stages: no function in trainers/ runs past 80
lines, so a run() is a list of steps that say what they do, each short enough to read whole."""

from __future__ import annotations

import ast
from pathlib import Path

TRAINERS = Path(__file__).resolve().parents[2] / "trainers"
LONGEST = 80


def long_functions(source: str, *, limit: int = LONGEST) -> list[tuple[str, int]]:
    """(name, lines) of every function or method longer than `limit` lines, nested ones too."""
    return [
        (node.name, node.end_lineno - node.lineno + 1)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno - node.lineno + 1 > limit
    ]


def test_no_trainer_function_is_longer_than_80_lines():
    found = {
        str(path.relative_to(TRAINERS.parent)): long_functions(path.read_text())
        for path in sorted(TRAINERS.rglob("*.py"))
    }
    assert len(found) > 20
    assert {path: functions for path, functions in found.items() if functions} == {}


def test_it_sees_a_long_function():
    body = "\n".join(f"    x{n} = {n}" for n in range(LONGEST))
    assert long_functions(f"def run(spec):\n{body}\n") == [("run", LONGEST + 1)]
    assert long_functions(f"def run(spec):\n{body}\n", limit=LONGEST + 1) == []
