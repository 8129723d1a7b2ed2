"""A canary for TRL's private methods: the RLHF update (trainers.wording.ppo_update) overrides
private methods of TRL's GRPOTrainer, which TRL may rename, re-sign or stop calling in any
release without notice. An override TRL no longer calls changes nothing and raises nothing:
the update would run with TRL's per-prompt advantages and no rollout timings. This file fails
first, naming the method and what changed, when the pinned TRL is moved."""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
from pathlib import Path

import pytest

from trainers.wording.ppo_update import policy_trainer_class

ROOT = Path(__file__).resolve().parents[2]

# The private methods the subclass overrides, and what it relies on beyond each one's
# parameters: how many values TRL's own call site unpacks from it (None: not unpacked).
PRIVATE_OVERRIDES = {
    "_calculate_rewards": None,  # the override keeps the whole batch's rewards
    "_generate_single_turn": 2,  # the override unpacks (completion_ids, logprobs)
    "_generate_and_score_completions": None,  # the override rewrites output["advantages"]
}


def _pinned_trl() -> str:
    pins = (ROOT / "requirements.txt").read_text(encoding="utf-8")
    return re.search(r"^trl==(\S+)", pins, re.MULTILINE).group(1)


def _parameters(function) -> list[tuple[str, object]]:
    return [(p.name, p.kind) for p in inspect.signature(function).parameters.values()]


def _passes_everything_on(function) -> bool:
    kinds = {kind for _name, kind in _parameters(function)}
    return {inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD} <= kinds


def _calls_of(base: type, name: str) -> list[ast.Call]:
    """The calls `self.<name>(...)` in the base class's own source, outside `name` itself."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(base)))
    calls = []
    for method in ast.walk(tree):
        if isinstance(method, ast.FunctionDef) and method.name != name:
            calls += [
                node
                for node in ast.walk(method)
                if isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == name
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "self"
            ]
    return calls


def _unpacked_counts(base: type, name: str) -> set[int]:
    """How many names each `a, b = self.<name>(...)` in the base unpacks."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(base)))
    return {
        len(node.targets[0].elts)
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        and isinstance(node.targets[0], ast.Tuple)
        and isinstance(node.value, ast.Call)
        and isinstance(node.value.func, ast.Attribute)
        and node.value.func.attr == name
    }


def override_problems(base: type, subclass: type, name: str, unpacks: int | None) -> list[str]:
    """What no longer holds between `subclass.<name>` and the base's, in words; [] when fine."""
    if name not in vars(subclass):
        return [f"{subclass.__name__} no longer overrides {name}: drop it from this canary"]
    theirs = getattr(base, name, None)
    if theirs is None:
        return [f"{base.__name__}.{name} is gone: the override is never called"]
    problems = []
    ours = vars(subclass)[name]
    if not _passes_everything_on(ours) and _parameters(ours) != _parameters(theirs):
        problems.append(
            f"{base.__name__}.{name} now takes {inspect.signature(theirs)}; "
            f"the override takes {inspect.signature(ours)}"
        )
    if not _calls_of(base, name):
        problems.append(f"{base.__name__} no longer calls self.{name}(...): the override is dead")
    if unpacks is not None and _unpacked_counts(base, name) != {unpacks}:
        problems.append(
            f"{base.__name__} unpacks {sorted(_unpacked_counts(base, name))} values from "
            f"{name}; the override unpacks {unpacks}"
        )
    return problems


def test_the_installed_trl_is_the_pinned_one():
    import trl

    assert trl.__version__ == _pinned_trl(), (
        f"requirements.txt pins trl=={_pinned_trl()} but {trl.__version__} is installed: the "
        "canary below checks the installed one"
    )


def test_the_canary_covers_every_private_override():
    from trl import GRPOTrainer

    subclass = policy_trainer_class()
    overridden = {
        name
        for name in vars(subclass)
        if name.startswith("_") and not name.startswith("__") and hasattr(GRPOTrainer, name)
    }
    assert overridden == set(PRIVATE_OVERRIDES), (
        "The policy trainer's private overrides of GRPOTrainer changed: list each in "
        f"PRIVATE_OVERRIDES (now {sorted(overridden)})"
    )


@pytest.mark.parametrize("name", sorted(PRIVATE_OVERRIDES))
def test_trl_still_has_and_calls_the_private_method_we_override(name):
    from trl import GRPOTrainer

    problems = override_problems(GRPOTrainer, policy_trainer_class(), name, PRIVATE_OVERRIDES[name])
    assert not problems, f"TRL {_pinned_trl()}: " + "; ".join(problems)


class _Base:
    def run(self):
        first, second = self._step(1)
        return self._score([first, second], weights=None)

    def _step(self, prompt_ids):
        return prompt_ids, None

    def _score(self, inputs, weights):
        return inputs


class _RenamedBase:
    def run(self):
        first, second, third = self._step(1)
        return self._score_all([first])

    def _step(self, prompt_ids):
        return prompt_ids, None, None

    def _score_all(self, inputs):
        return inputs


class _Override(_Base):
    def _step(self, *args, **kwargs):
        return super()._step(*args, **kwargs)

    def _score(self, inputs, weights):
        return super()._score(inputs, weights)

    def _planted(self, inputs):  # a name the base never had
        return inputs


def test_the_canary_fails_on_a_renamed_re_signed_or_dead_method():
    assert override_problems(_Base, _Override, "_score", None) == []
    assert override_problems(_Base, _Override, "_step", 2) == []
    assert "is gone" in override_problems(_Base, _Override, "_planted", None)[0]
    assert "is gone" in override_problems(_RenamedBase, _Override, "_score", None)[0]
    assert "unpacks [3] values" in override_problems(_RenamedBase, _Override, "_step", 2)[0]

    class _Resigned(_Base):
        def _score(self, inputs, weights, extra):
            return inputs

    class _Silent(_Base):
        def run(self):
            return None

    assert (
        "now takes (self, inputs, weights)"
        in override_problems(_Base, _Resigned, "_score", None)[0]
    )
    assert "no longer calls self._score" in override_problems(_Silent, _Override, "_score", None)[0]
