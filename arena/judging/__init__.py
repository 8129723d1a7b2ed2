"""Judges: score an agent's reply in its call on the seven rubric dimensions.

Pure Python (no Django), so apps and trainers share it. `RubricJudge` is the default:
deterministic and model-free; `ModelJudge` (model_judge.py) puts the rubric to a model behind
any provider and implements the same `Judge` protocol. Which one a world names under
Environment → Judge is arena.judges' (the Django side).
"""

from __future__ import annotations

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
    "judgement_or_error",
]
