"""Each statistic is written once, in trainers/stats: the AUC, the bootstrap (and any percentile
interval), Wilson's interval, the chance test, the sigmoid and the logistic fits. Elsewhere code
calls them. A scan of the project's own modules finds a second copy by its name or its formula.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SCANNED = ("arena", "config", "evaluation", "levers9", "policies", "trainers", "training")
HOME = ROOT / "trainers" / "stats"

# Sites allowed to keep their own copy, keyed by file name and function (a move to another
# folder keeps its entry): none now. A stale entry fails below, so an entry added for a site
# on its way out is removed with it.
ALLOWED: set[tuple[str, str, str]] = set()

NAMES = {
    "AUC": re.compile(r"^_?auc(_|$)"),
    "bootstrap interval": re.compile(r"bootstrap|percentile_interval|wilson"),
    "chance test": re.compile(r"^_?(includes_chance|includes_half)$"),
    "sigmoid": re.compile(r"sigmoid"),
    "logistic fit": re.compile(r"logistic|bradley_terry|newton"),
}
# What trainers/stats offers for each kind: a function named for a statistic that calls one of
# these is a caller (the AUC by call, its calls grouped first), not a copy.
HOME_CALLS = {
    "AUC": {"auc", "stratified_auc"},
    "bootstrap interval": {
        "bootstrap_interval",
        "percentile_interval",
        "stratified_bootstrap_means",
        "wilson_interval",
    },
    "chance test": {"at_chance"},
    "sigmoid": {"sigmoid"},
    "logistic fit": {"bradley_terry_strengths", "logistic_descent", "logistic_fit", "newton"},
}
LIBRARY_CALLS = {
    "roc_auc_score": "AUC",
    "rankdata": "AUC",
    "LogisticRegression": "logistic fit",
}


def _called(node: ast.Call) -> str:
    function = node.func
    return function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", "")


def _is_mann_whitney(node: ast.AST) -> bool:
    """n * (n + 1) (/ 2): the correction that turns a rank sum into Mann–Whitney's U."""
    if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult)):
        return False
    plus_one = node.right
    return (
        isinstance(plus_one, ast.BinOp)
        and isinstance(plus_one.op, ast.Add)
        and isinstance(plus_one.right, ast.Constant)
        and plus_one.right.value == 1
        and ast.dump(plus_one.left) == ast.dump(node.left)
    )


def _is_sigmoid(node: ast.AST) -> bool:
    """1 / (1 + exp(-x))."""
    return (
        isinstance(node, ast.BinOp)
        and isinstance(node.op, ast.Div)
        and isinstance(node.left, ast.Constant)
        and node.left.value == 1
        and isinstance(node.right, ast.BinOp)
        and isinstance(node.right.op, ast.Add)
        and isinstance(node.right.right, ast.Call)
        and _called(node.right.right) == "exp"
        and isinstance(node.right.right.args[0], ast.UnaryOp)
    )


def _is_chance_test(node: ast.AST) -> bool:
    """An interval's bound against a half: `bounds[0] > 0.5`, `low[0] <= 0.5 <= high[1]`."""
    if not isinstance(node, ast.Compare):
        return False
    sides = [node.left, *node.comparators]
    half = any(isinstance(side, ast.Constant) and side.value == 0.5 for side in sides)
    bound = any(
        isinstance(side, ast.Subscript)
        and isinstance(side.slice, ast.Constant)
        and side.slice.value in (0, 1)
        for side in sides
    )
    return half and bound


def _is_two_tails(node: ast.Call) -> bool:
    """percentile/quantile of two bounds at once, or of a 2.5 or 97.5 bound."""
    if _called(node) not in ("percentile", "quantile") or len(node.args) < 2:
        return False
    bounds = node.args[1]
    if isinstance(bounds, ast.List | ast.Tuple):
        return len(bounds.elts) == 2
    return isinstance(bounds, ast.Constant) and bounds.value in (2.5, 97.5, 0.025, 0.975)


def _own_nodes(function: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a function's body, not of the functions and classes defined inside it."""
    pending = list(ast.iter_child_nodes(function))
    while pending:
        node = pending.pop()
        yield node
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            pending.extend(ast.iter_child_nodes(node))


def copies_in(source: str) -> set[tuple[str, str]]:
    """(function, statistic) for each function of `source` that defines a statistic."""
    found = set()

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                named = {kind for kind, rule in NAMES.items() if rule.search(child.name)}
                named -= _delegated(child)
                found.update((name, kind) for kind in named | _formulas(child))
                visit(child, f"{name}.")

    visit(ast.parse(source), "")
    return found


def _delegated(function: ast.AST) -> set[str]:
    """The kinds whose home in trainers/stats the function's own body calls."""
    called = {_called(node) for node in _own_nodes(function) if isinstance(node, ast.Call)}
    return {kind for kind, home in HOME_CALLS.items() if called & home}


def _formulas(function: ast.AST) -> set[str]:
    kinds, resamples, percentiles = set(), False, False
    for node in _own_nodes(function):
        if _is_mann_whitney(node):
            kinds.add("AUC")
        if _is_sigmoid(node):
            kinds.add("sigmoid")
        if _is_chance_test(node):
            kinds.add("chance test")
        if isinstance(node, ast.Call):
            called = _called(node)
            if called in LIBRARY_CALLS:
                kinds.add(LIBRARY_CALLS[called])
            if _is_two_tails(node):
                kinds.add("bootstrap interval")
            resamples |= called == "integers"
            percentiles |= called in ("percentile", "quantile")
    if resamples and percentiles:
        kinds.add("bootstrap interval")
    return kinds


def _project_copies() -> set[tuple[str, str, str, str]]:
    copies = set()
    for folder in SCANNED:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if HOME in path.parents or "migrations" in path.parts:
                continue
            for function, kind in copies_in(path.read_text(encoding="utf-8")):
                copies.add((path.name, function, kind, str(path.relative_to(ROOT))))
    return copies


def test_no_statistic_is_written_outside_trainers_stats():
    unexpected = sorted(
        f"{where}: {function} defines the {kind}"
        for name, function, kind, where in _project_copies()
        if (name, function, kind) not in ALLOWED
    )
    assert not unexpected, (
        "A statistic written again outside trainers/stats (call trainers.stats.auc, "
        ".intervals or .logistic instead):\n" + "\n".join(unexpected)
    )


def test_every_allowed_site_still_exists():
    found = {(name, function, kind) for name, function, kind, _where in _project_copies()}
    stale = sorted(ALLOWED - found)
    assert not stale, f"Allowed sites that are gone; remove them from ALLOWED: {stale}"


def test_the_scan_finds_each_kind_of_copy():
    planted = """
def area(scores, labels):
    n = len(labels)
    return (ranks.sum() - n * (n + 1) / 2) / pairs

def spread(rows, rng):
    draws = [rows[rng.integers(0, 9, 9)].mean() for _ in range(99)]
    return np.percentile(draws, [2.5, 97.5])

class Judge:
    def squash(self, x):
        return 1.0 / (1.0 + np.exp(-x))

def fit(rows, labels):
    return LogisticRegression(C=1.0).fit(rows, labels)

def _includes_half(bounds):
    return bounds is None

def _above_chance(measure):
    return measure["ci"][0] > 0.5

def _auc_by_fold(scores):
    return None

def _auc_by_call(scores, labels, calls):
    return stratified_auc(scores, labels, calls)
"""
    assert copies_in(planted) == {
        ("area", "AUC"),
        ("spread", "bootstrap interval"),
        ("Judge.squash", "sigmoid"),
        ("fit", "logistic fit"),
        ("_includes_half", "chance test"),
        ("_above_chance", "chance test"),
        ("_auc_by_fold", "AUC"),
    }
    assert copies_in("def lens(scores):\n    return np.percentile(scores, 90)\n") == set()
