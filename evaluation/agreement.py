"""How well the judge that scored an evaluation is measured to agree with the reviewers'
picks and the real outcomes on held-out data, as the evaluation keeps it when it runs (read
back through evaluation.verdicts).

Workspace schema: every row read here lives in the tenant's schema.
"""

from __future__ import annotations

from typing import Any

from arena.models import JudgeVersion, World
from evaluation import scoring
from evaluation.verdicts import agreement_figures
from trainers.judge.rubric import RubricJudge


def _measured(report: dict[str, Any], who: str) -> dict[str, Any]:
    """One judge's column ("fitted" or "rubric") of a judge version's held-out report."""
    return agreement_figures(
        (report.get("pairs") or {}).get(who), (report.get("outcomes") or {}).get(who)
    )


def _model_measured(world: World, judge_model: str) -> dict[str, Any] | None:
    """A model judge's newest measurement on held-out picks (arena.judge.agreement), with a
    Wilson interval of its accuracy: None when that model was not measured."""
    from arena.judge.agreement import judge_measurement_latest

    measurement = judge_measurement_latest(world) or {}
    model = measurement.get("model") or {}
    if measurement.get("judge") != judge_model or not model.get("pairs"):
        return None
    agreed = round(float(model.get("accuracy") or 0.0) * model["pairs"])
    return agreement_figures(
        {**model, "accuracy_ci": list(scoring.wilson_interval(agreed, model["pairs"]) or [])},
        None,
    )


def judge_agreement(*, world: World, judge_model: str) -> dict[str, Any]:
    """How well the judge that scored an evaluation is measured to agree, on held-out data,
    with the reviewers' picks (pair accuracy) and the real outcomes (AUC by call): the
    fitted judge version it is, the rubric as measured beside the world's newest fitted
    version, or a model judge as its newest measurement found. Otherwise "measured" is
    False. Figures on too few held-out items are None, with why
    (evaluation.verdicts.agreement_figures)."""
    from arena.judge.versions import judge_version_latest

    row: dict[str, Any] = {"judge_model": judge_model, "measured": False, "measured_by": None}
    for version in JudgeVersion.objects.filter(world=world).order_by("-number"):
        # The name arena.judge.versions.judge_version_name gives a version's verdicts.
        if judge_model == f"{version.label} of {world.slug}":
            figures = _measured(version.report or {}, "fitted")
            return {**row, **figures, "measured": True, "measured_by": version.label}
    latest = judge_version_latest(world)
    if judge_model == RubricJudge.model_name and latest is not None:
        # A fitted version measures the rubric on the same held-out rows, beside itself.
        figures = _measured(latest.report or {}, "rubric")
        return {**row, **figures, "measured": True, "measured_by": latest.label, "beside": True}
    model = _model_measured(world, judge_model)
    if model is not None:
        return {**row, **model, "measured": True, "measured_by": "its measurement"}
    return row
