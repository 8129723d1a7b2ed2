"""The independent measure of a wording version: it against its own base untrained (the same
base with no adapter, the same conversation and decoding) on the world's held-out calls, which
neither the reward model, the policy nor DPO trained on, scored by the world's judge with the
on-topic guard on. Once that checkpoint is done, its outcome is written into the version's
record (WordingResult.against_base), and where the version is not shown to beat its base, or
drifted off topic more often than it, the reason joins its did_not_learn — whatever its own
reward model said.

    A version learned only where the judge's win rate's 95% interval (by call) lies wholly above
    0.5, from a judge measured above chance (evaluation.verdicts decides, as everywhere).

Length and repetition are shown beside the win rate, not as a mark: a longer reply may be a
better one; the reader sees "its replies are 2.3× the base's length" and judges.

Workspace schema: every row read here lives in the tenant's schema.
"""

from __future__ import annotations

from typing import Any

from evaluation import scoring
from evaluation.models import Evaluation
from evaluation.verdicts import NO_VERDICT

# When a win's words are shown as longer or more repetitive than the base's. A display rule
# (what is worth a sentence beside the win rate), not a threshold fitted to any data.
LONGER_SHOWN_AT = 1.5
MORE_REPETITIVE_SHOWN_AT = 0.10


def _rate(win_rate: float | None, interval: list[float] | None) -> str:
    if win_rate is None:
        return "compares no moment"
    words = f"{win_rate:.2f}"
    if interval:
        words += f" [{interval[0]:.2f}, {interval[1]:.2f}]"
    return words


def _percent(share: float | None) -> str:
    return f"{(share or 0.0) * 100:.0f}%"


def _not_better(outcome: dict[str, Any], decided: Any) -> str:
    """Why the version is not shown to beat its base, in one plain sentence."""
    opening = (
        f"Against its base untrained ({outcome['base']}, no adapter), the world's judge prefers "
        f"it {_rate(outcome['win_rate'], outcome['interval'])} of the time on "
        f"{outcome['calls']} {outcome['unit']}"
    )
    if outcome["win_rate"] is None:
        return f"{opening}: it was not compared with its base at all."
    if decided.outcome == NO_VERDICT:
        why = decided.sentence.removeprefix("no verdict: ")
        return f"{opening}, but that is no verdict ({why}): not shown to beat its base."
    if decided.outcome == scoring.INCOMPLETE:
        return (
            f"{opening}, compared at only {outcome['compared']} of {outcome['moments']} "
            "moments: not shown to beat its base."
        )
    if decided.outcome == "lost":
        return f"{opening}: worse than its base."
    return f"{opening}: no better than the base."


def _capped_more(outcome: dict[str, Any]) -> str:
    """The guard capped the version more often than its base: the rate of each."""
    mine, base = outcome["replies"]["version"], outcome["replies"]["base"]
    if not mine.get("replies") or not base.get("replies"):
        return ""
    if (mine.get("capped_share") or 0.0) <= (base.get("capped_share") or 0.0):
        return ""
    return (
        f"The on-topic guard capped {_percent(mine['capped_share'])} of its replies "
        f"({mine['capped']} of {mine['replies']}) against {_percent(base['capped_share'])} of "
        f"its base's ({base['capped']} of {base['replies']}): it drifted off topic."
    )


def _habits_notes(outcome: dict[str, Any]) -> list[str]:
    """Sentences shown beside the win rate where the version's replies are much longer or
    more repetitive than its base's."""
    mine, base = outcome["replies"]["version"], outcome["replies"]["base"]
    notes = []
    mine_words, base_words = mine.get("mean_words"), base.get("mean_words")
    if mine_words and base_words and mine_words >= LONGER_SHOWN_AT * base_words:
        notes.append(
            f"its replies are {mine_words / base_words:.1f}× the base's length "
            f"({mine_words:.0f} words against {base_words:.0f})"
        )
    mine_repeat, base_repeat = mine.get("repeat_share"), base.get("repeat_share")
    if (
        mine_repeat is not None
        and base_repeat is not None
        and mine_repeat - base_repeat >= MORE_REPETITIVE_SHOWN_AT
    ):
        notes.append(
            f"{_percent(mine_repeat)} of its replies repeat a 3-word phrase within themselves, "
            f"against {_percent(base_repeat)} of the base's"
        )
    return notes


def against_base_outcome(evaluation: Evaluation) -> dict[str, Any]:
    """A finished against-base checkpoint as the version's record keeps it: the judge's win
    rate with its interval by call, the verdict, what each side's replies look like, the
    reasons it joins did_not_learn ("reasons") and the sentences shown beside the win rate
    ("notes")."""
    summary = evaluation.summary or {}
    decided = evaluation.verdict_decided
    outcome: dict[str, Any] = {
        "evaluation": evaluation.pk,
        "base": evaluation.candidate.base_model or "its base",
        "win_rate": decided.judge_win_rate,
        "interval": decided.judge_ci,
        "ci_level": summary.get("ci_level", scoring.CONFIDENCE),
        "calls": summary.get("calls"),
        # What a counted call is ("held-out pairs" in a world of imported pairs).
        "unit": evaluation.call_set.held_out_unit,
        "moments": summary.get("moments"),
        "compared": summary.get("compared"),
        "judge": evaluation.judge_model,
        "verdict": decided.outcome,
        "beats_base": decided.outcome == "won",
        "replies": {
            "version": (summary.get("candidate") or {}).get("replies") or {},
            "base": (summary.get("baseline") or {}).get("replies") or {},
        },
    }
    reasons = [] if outcome["beats_base"] else [_not_better(outcome, decided)]
    capped = _capped_more(outcome)
    if capped:
        reasons.append(capped)
    outcome["reasons"] = reasons
    outcome["notes"] = _habits_notes(outcome)
    return outcome


def against_base_mark(evaluation: Evaluation) -> bool:
    """Write a done against-base checkpoint into its version's record, once (a redelivered
    finish writes nothing: policies.services.version_against_base_record). Returns whether
    it wrote."""
    from policies.services import version_against_base_record

    if not evaluation.against_base or evaluation.state != Evaluation.State.DONE:
        return False
    return version_against_base_record(
        version=evaluation.candidate, against_base=against_base_outcome(evaluation)
    )
