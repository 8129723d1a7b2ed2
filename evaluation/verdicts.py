"""The one decision of what an evaluation found, read by every page, the API and the admin:
Evaluate, the checkpoints on Train, the Policies page and its leaderboard, the home page's
mission, and the admin's evaluations and "Last evaluation".

- Where the simulator played the duel (a simulated world's versions), its verdict is the one:
  it knows who won.
- Elsewhere the judge's win rate gives one only when the judge is measured above chance on
  enough held-out items (trainers.judge.standing), and the verdict names the figure that
  licensed it ("licensed by the judge's AUC 0.68 [0.58, 0.77] on 116 held-out calls"), with
  the judge's other figure beside it when that one does not count ("its pair accuracy is too
  few to measure (n = 5)"): a reader sees what the verdict stands on. A judge at chance,
  measured on too few
  items, or not measured at all gives "no verdict", said with why
  ("no verdict: this world's judge is at chance (AUC 0.50 [0.42, 0.59])"), and its raw win
  rate is shown beside it, never as a win or a loss.

Read from an evaluation's stored summary, so evaluations finished before this rule are read
by it too. Pure Python (no Django).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from evaluation.scoring import INCOMPLETE
from trainers.judge.standing import (
    ABOVE_CHANCE,
    AT_CHANCE,
    MEASURE_KINDS,
    measure_shown,
    measure_text,
    measures_above_chance,
    standing,
    standing_words,
)

NO_VERDICT = "no_verdict"


@dataclass(frozen=True)
class Verdict:
    """What an evaluation found, and what it rests on."""

    outcome: str  # won | lost | even | incomplete | no_verdict | "" (not done, nothing compared)
    source: str  # "simulator" or "judge"
    reason: str  # why no verdict: the judge's standing (at_chance, too_few, not_measured)
    sentence: str  # "no verdict: …" when there is none, else ""
    judge_outcome: str  # the judge's own reading of its win rate's interval
    judge_win_rate: float | None
    judge_ci: list[float] | None
    # The judge's figures that licensed its verdict, in words ("" for the simulator's verdict
    # and where there is none), and its other figures, which did not ("" when none).
    licensed_by: str = ""
    not_counted: str = ""

    @property
    def label(self) -> str:
        return "no verdict" if self.outcome == NO_VERDICT else self.outcome

    @property
    def lost(self) -> bool:
        return self.outcome == "lost"

    @property
    def raw_rate_words(self) -> str:
        """The judge's raw win rate with its interval: "the judge's raw win rate 0.697 [0.638,
        0.753]" ("" when it compared nothing)."""
        if self.judge_win_rate is None:
            return ""
        words = f"the judge's raw win rate {self.judge_win_rate:.3f}"
        if self.judge_ci:
            words += f" [{self.judge_ci[0]:.3f}, {self.judge_ci[1]:.3f}]"
        return words

    @property
    def words(self) -> str:
        """The no-verdict sentence with the raw win rate beside it, for one-line places."""
        if self.outcome != NO_VERDICT:
            return ""
        return "; ".join(part for part in (self.sentence, self.raw_rate_words) if part)

    @property
    def licence_words(self) -> str:
        """What a judge's verdict stands on, in one sentence for the pages: "Licensed by the
        judge's AUC 0.68 [0.58, 0.77] on 116 held-out calls, above chance; its pair accuracy
        is too few to measure (n = 5) and does not count." ("" when it has no licence)."""
        if not self.licensed_by:
            return ""
        words = f"Licensed by the judge's {self.licensed_by}, above chance"
        if self.not_counted:
            words += f"; {self.not_counted} and does not count"
        return words + "."

    def why_none(self) -> dict[str, Any] | None:
        """Why there is no verdict, as the API gives it; None when there is one."""
        if self.outcome != NO_VERDICT:
            return None
        keys = ("reason", "sentence", "judge_win_rate", "judge_ci")
        return {key: getattr(self, key) for key in keys}


def agreement_figures(pairs: dict[str, Any] | None, outcomes: dict[str, Any] | None) -> dict:
    """A judge's held-out measures as an evaluation keeps them: each figure None under
    trainers.judge.standing.MIN_HELD_OUT_ITEMS with why ("pairs_too_few", "outcomes_too_few"),
    and the judge's standing (above_chance, at_chance, too_few, not_measured)."""
    pairs = measure_shown(pairs, "pairs") or {}
    outcomes = measure_shown(outcomes, "outcomes") or {}
    judge_standing = standing([("pairs", pairs), ("outcomes", outcomes)])
    return {
        "pair_accuracy": pairs.get("accuracy"),
        "pair_accuracy_ci": pairs.get("accuracy_ci"),
        "pairs": pairs.get("pairs"),
        "pairs_too_few": pairs.get("too_few"),
        "outcome_auc": outcomes.get("auc"),
        "outcome_auc_ci": outcomes.get("auc_ci"),
        "calls": outcomes.get("calls"),
        "outcomes_too_few": outcomes.get("too_few"),
        "standing": judge_standing["state"],
        "at_chance": judge_standing["state"] == AT_CHANCE,
    }


def judge_agreement_shown(agreement: dict[str, Any] | None) -> dict[str, Any] | None:
    """An evaluation's stored judge_agreement read through trainers.judge.standing's rule, as
    pages and the API show it: summaries kept before the rule held figures on too few items,
    and those read as None with why, like a new one's."""
    if not agreement or not agreement.get("measured"):
        return agreement
    return {**agreement, **agreement_figures(*_agreement_measures_of(agreement))}


def _agreement_measures_of(agreement: dict[str, Any]) -> tuple[dict | None, dict | None]:
    """The (pairs, outcomes) measures a stored judge_agreement holds (None: not measured)."""
    pairs = {
        "pairs": agreement.get("pairs"),
        "accuracy": agreement.get("pair_accuracy"),
        "accuracy_ci": agreement.get("pair_accuracy_ci"),
    }
    outcomes = {
        "calls": agreement.get("calls"),
        "auc": agreement.get("outcome_auc"),
        "auc_ci": agreement.get("outcome_auc_ci"),
    }
    return (pairs if pairs["pairs"] else None, outcomes if outcomes["calls"] else None)


def agreement_standing(agreement: Mapping[str, Any] | None) -> dict[str, Any]:
    """The standing of the judge an evaluation's summary names (its judge_agreement, as
    evaluation.agreement.judge_agreement stored it, old or new)."""
    agreement = agreement or {}
    if not agreement.get("measured"):
        return standing([])
    return standing(zip(("pairs", "outcomes"), _agreement_measures_of(agreement), strict=True))


def _licence(agreement: Mapping[str, Any]) -> tuple[str, str]:
    """(the judge's figures above chance, its other figures) in words, from a stored
    judge_agreement: ("AUC 0.68 [0.58, 0.77] on 116 held-out calls", "its pair accuracy is
    too few to measure (n = 5)")."""
    licensing: list[str] = []
    others: list[str] = []
    measures = zip(("pairs", "outcomes"), _agreement_measures_of(dict(agreement)), strict=True)
    for kind, measure in measures:
        if not measure:
            continue
        above = measures_above_chance([(kind, measure)])
        if above:
            licensing += above
            continue
        name, text = MEASURE_KINDS[kind][2], measure_text(measure, kind, digits=2)
        others.append(
            f"its {name} is {text}"
            if text.startswith("too few")
            else f"its {name} {text} reaches chance"
        )
    return " and ".join(licensing), " and ".join(others)


def verdict_decide(summary: Mapping[str, Any] | None) -> Verdict:
    """What a finished evaluation's summary found (see the module's docstring)."""
    summary = summary or {}
    judge_outcome = summary.get("judge_verdict", summary.get("verdict", "")) or ""
    common = {
        "judge_outcome": judge_outcome,
        "judge_win_rate": summary.get("win_rate"),
        "judge_ci": summary.get("ci") or None,
    }
    duel = summary.get("simulator") or {}
    if summary.get("verdict_source") == "simulator" and duel.get("verdict"):
        return Verdict(
            outcome=duel["verdict"], source="simulator", reason="", sentence="", **common
        )
    if judge_outcome in ("", INCOMPLETE):
        return Verdict(outcome=judge_outcome, source="judge", reason="", sentence="", **common)
    judge_standing = agreement_standing(summary.get("judge_agreement"))
    if judge_standing["state"] == ABOVE_CHANCE:
        licensed_by, not_counted = _licence(summary.get("judge_agreement") or {})
        return Verdict(
            outcome=judge_outcome,
            source="judge",
            reason="",
            sentence="",
            licensed_by=licensed_by,
            not_counted=not_counted,
            **common,
        )
    return Verdict(
        outcome=NO_VERDICT,
        source="judge",
        reason=judge_standing["state"],
        sentence=f"no verdict: {standing_words(judge_standing)}",
        **common,
    )
