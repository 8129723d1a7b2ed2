"""Judges: score an agent's reply in its call on the seven rubric dimensions.

Pure Python (no Django), so apps and trainers share it. `RubricJudge` is the default:
deterministic and model-free; `ModelJudge` (model_judge.py) puts the rubric to a model behind
any provider and implements the same `Judge` protocol. `judge_for_world` picks the one a
world names under Environment → Judge.
"""

from __future__ import annotations

from typing import Any

from arena.judging.model_judge import (
    JudgeError,
    JudgeExample,
    JudgeOutputError,
    JudgeUnavailable,
    ModelJudge,
    judgement_or_error,
)
from arena.judging.rubric import (
    DIMENSION_HELP,
    DIMENSION_LABELS,
    DIMENSION_WEIGHTS,
    DIMENSIONS,
    RULES,
    Judge,
    Judgement,
    RubricJudge,
    Turn,
    Verdict,
)

RUBRIC_JUDGE = "rubric"


def judge_for_world(world: Any) -> Judge:
    """The judge a world names (World.judge_provider / judge_model): the rubric judge by
    default, else a ModelJudge on that provider's model with the reviewers' overrides as
    examples. Model judges are built by policies (providers and their connections live
    there); it is imported only when a world names a model, so scoring with the rubric
    never touches it."""
    if (getattr(world, "judge_provider", "") or RUBRIC_JUDGE) == RUBRIC_JUDGE:
        return RubricJudge()
    from policies.judges import model_judge_for_world

    return model_judge_for_world(world)


__all__ = [
    "DIMENSIONS",
    "DIMENSION_HELP",
    "DIMENSION_LABELS",
    "DIMENSION_WEIGHTS",
    "RULES",
    "RUBRIC_JUDGE",
    "Judge",
    "JudgeError",
    "JudgeExample",
    "JudgeOutputError",
    "JudgeUnavailable",
    "Judgement",
    "ModelJudge",
    "RubricJudge",
    "Turn",
    "Verdict",
    "judge_for_world",
    "judgement_or_error",
]
