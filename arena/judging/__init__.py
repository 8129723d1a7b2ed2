"""Judges: score an agent's reply in its call on the seven rubric dimensions.

Pure Python (no Django), so apps and trainers share it. `RubricJudge` is the default:
deterministic and model-free; model-backed judges implement the same `Judge` protocol.
"""

from __future__ import annotations

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

__all__ = [
    "DIMENSIONS",
    "DIMENSION_HELP",
    "DIMENSION_LABELS",
    "DIMENSION_WEIGHTS",
    "RULES",
    "Judge",
    "Judgement",
    "RubricJudge",
    "Turn",
    "Verdict",
]
