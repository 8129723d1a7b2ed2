"""The fitted judge at scoring time, and the rows a fit learns from (pure Python, no Django).

A world's fit (trainers.judge.fit) leaves a model on the datasets volume; `FittedJudge` loads it
and answers the same `Judge` protocol as the rubric judge, with a won-probability where the world
had outcome labels. The rubric's numbers are one of its feature groups, so this module computes
them the same way for fitting (`rubric_numbers`) and for scoring, on the world's rubric (its
dimensions: arena.judge.world_dimensions), the seven by default.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from trainers.judge.answers import AnswerCheck
from trainers.judge.fit import FittedJudgeModel
from trainers.judge.rubric import (
    DEFAULT_RUBRIC,
    Dimension,
    Judgement,
    RubricJudge,
    Turn,
    dimension_default,
)
from trainers.wording.spec import outcome_examples_from_calls

Rubric = Sequence[Dimension]


@functools.lru_cache(maxsize=64)
def _rubric_judge(rubric: tuple[Dimension, ...]) -> RubricJudge:
    return RubricJudge(rubric)


def _turns(context: Iterable[Any]) -> list[Turn]:
    return [
        turn if isinstance(turn, Turn) else Turn(turn["speaker"], turn["text"]) for turn in context
    ]


def _plain(context: Iterable[Any]) -> list[dict[str, str]]:
    return [{"speaker": turn.speaker, "text": turn.text} for turn in _turns(context)]


def rubric_numbers(
    context: Iterable[Any], reply: str, rubric: Rubric = DEFAULT_RUBRIC
) -> list[float]:
    """The rubric's score of each of its dimensions, in its order, then its total: the fitted
    judge's rubric features (a fit's spec lists the same dimensions in the same order)."""
    judged = _rubric_judge(tuple(rubric)).score(_turns(context), reply)
    return [float(judged.scores[dimension.name]) for dimension in rubric] + [float(judged.total)]


def pair_row(
    *,
    group: str,
    context: Sequence[Any],
    chosen: str,
    rejected: str,
    reasons: Sequence[str] = (),
    rubric: Rubric = DEFAULT_RUBRIC,
) -> dict[str, Any]:
    """A pick as the fit reads it; `group` keeps picks of one call (or moment) on one side.
    Only reasons that are the rubric's dimensions count (a pick ticked before its world's
    rubric changed may carry others)."""
    names = {dimension.name for dimension in rubric}
    return {
        "group": group,
        "context": _plain(context),
        "chosen": chosen,
        "rejected": rejected,
        "reasons": [reason for reason in reasons if reason in names],
        "rubric_chosen": rubric_numbers(context, chosen, rubric),
        "rubric_rejected": rubric_numbers(context, rejected, rubric),
    }


def override_row(
    *,
    context: Sequence[Any],
    reply: str,
    scores: Mapping[str, float],
    rubric: Rubric = DEFAULT_RUBRIC,
) -> dict[str, Any]:
    """A reviewer's own scores of a reply: absolute rows for the fit."""
    names = {dimension.name for dimension in rubric}
    known = {name: float(value) for name, value in scores.items() if name in names}
    total = sum(known.values()) / len(known) if known else 0.5
    return {
        "context": _plain(context),
        "reply": reply,
        "scores": known,
        "total": total,
        "rubric": rubric_numbers(context, reply, rubric),
    }


def outcome_rows(
    calls: Iterable[Mapping[str, Any]], rubric: Rubric = DEFAULT_RUBRIC
) -> list[dict[str, Any]]:
    """Every agent turn in the opening of every labelled call: (call so far, reply, won),
    grouped by call so a call is held out whole."""
    rows = []
    for example in outcome_examples_from_calls(calls):
        rows.append(
            {
                "group": example["call_id"],
                "context": example["dialogue"],
                "reply": example["reply"],
                "won": example["won"],
                "rubric": rubric_numbers(example["dialogue"], example["reply"], rubric),
            }
        )
    return rows


def preference_rows(records: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Pairs in TRL's conversational preference format (prompt/chosen/rejected) as fit rows;
    `user` is the customer, `assistant` the agent."""
    rows = []
    for record in records:
        context = [
            {
                "speaker": "agent" if message["role"] == "assistant" else "customer",
                "text": message["content"],
            }
            for message in record["prompt"]
            if message["role"] != "system"
        ]
        rows.append(
            pair_row(
                group=str(record["id"]),
                context=context,
                chosen=_reply_text(record["chosen"]),
                rejected=_reply_text(record["rejected"]),
                reasons=record.get("reasons") or (),
            )
        )
    return rows


def _reply_text(reply: Any) -> str:
    if isinstance(reply, str):
        return reply
    return "\n".join(message["content"] for message in reply if message["role"] == "assistant")


# Said in a version's name where it scores without the base it was fitted with: its verdicts
# are then stored apart from the ones the whole scorer gave.
WORDS_ALONE = " (words alone: its base is not on this machine)"


class FittedJudge:
    """A world's fitted judge version: the `Judge` protocol, plus many replies at once. Where
    its fit kept the base's heads, `reader` gives the base's features of each reply (None:
    the base is not on this machine, and the words' heads score alone)."""

    quick = False
    paid = False

    def __init__(
        self,
        model: FittedJudgeModel,
        *,
        model_name: str,
        reader: Any = None,
        rubric: Rubric = DEFAULT_RUBRIC,
    ):
        self.model = model
        self.reader = reader if model.base_needed() else None
        self.model_name = model_name
        if model.base_needed() and self.reader is None:
            self.model_name = model_name + WORDS_ALONE
        self._rubric_set(rubric)

    def _rubric_set(self, rubric: Rubric) -> None:
        """Score on `rubric`, the world's as it is now. The fit's features are the rubric's
        numbers on the dimensions it was fitted with, so those are computed as then (with the
        world's definitions where it still has them); a verdict holds the world's dimensions
        only, a dimension added since the fit scored by the rubric until the refit that a
        changed rubric asks for (arena.services.worlds.world_update)."""
        self.rubric = tuple(rubric)
        in_force = {dimension.name: dimension for dimension in self.rubric}
        self._fitted_rubric = tuple(
            in_force.get(name) or dimension_default(name) for name in self.model.dimensions
        )
        self._added = tuple(
            dimension for dimension in self.rubric if dimension.name not in self.model.dimensions
        )

    @classmethod
    def load(
        cls,
        folder: Path,
        *,
        model_name: str,
        reader_for: Callable[[str], Any] | None = None,
        rubric: Rubric = DEFAULT_RUBRIC,
    ) -> FittedJudge:
        """The version in `folder`; `reader_for(base)` gives a reader of the base it needs."""
        model = FittedJudgeModel.load(folder)
        base = model.base_needed()
        reader = reader_for(base) if base and reader_for is not None else None
        return cls(model, model_name=model_name, reader=reader, rubric=rubric)

    @property
    def answer_check(self) -> AnswerCheck | None:
        """The world's check that a reply answers its call, where the fit placed its floor and
        the base is on this machine (the on-topic guard applies it: trainers.judge.topic_guard)."""
        learned = self.model.learned
        if self.reader is None or learned is None or learned.answers_floor is None:
            return None
        own = learned.answers_own
        return AnswerCheck(self.reader, learned.answers_floor, own if own is not None else ())

    @property
    def scorer(self) -> str:
        """What scores a reply's total: "words", "base" or "words + base" (with the base's
        name), as a person reads it."""
        learned = self.model.learned
        if self.model.total is None and not self.model.won_is_total:
            return "rubric"  # no picks, and a won head at chance (FittedJudgeModel.score)
        # A judge without picks scores its total by its won head (FittedJudgeModel.score).
        head = None
        if learned is not None:
            head = learned.total if self.model.total is not None else learned.won
        kind = (head.kind if head else None) or "words"
        if self.reader is None or kind == "words":
            return "words"
        return f"{kind} ({learned.base})"

    def read_ahead(self, items: Sequence[tuple[Sequence[Any], str]]) -> None:
        """Read `items` with the base together, so the call so far they share is read once
        (trainers.reading.passes) and scoring them one at a time afterwards finds each read in
        the cache: the candidates of a pair, which the pair's maker scores one by one."""
        if self.reader is None or not items:
            return
        plain = [(_plain(context), reply) for context, reply in items]
        if self.answer_check is not None:
            self.reader.answers(plain)  # its pass keeps each item's features too
        elif self.model.learned.heads_read_base():
            self.reader.features(plain)

    def score_many(
        self, items: Sequence[tuple[Sequence[Any], str]], *, digits: int | None = 4
    ) -> list[dict[str, Any]]:
        contexts = [_plain(context) for context, _reply in items]
        replies = [reply for _context, reply in items]
        rubric = [rubric_numbers(context, reply, self._fitted_rubric) for context, reply in items]
        learned = self.model.learned
        features = (
            self.reader.features(list(zip(contexts, replies, strict=True)))
            if self.reader is not None and items and learned.heads_read_base()
            else None
        )
        scored = self.model.score(contexts, replies, rubric, digits=digits, base_features=features)
        added = _rubric_judge(self._added) if self._added else None
        for result, context, reply in zip(scored, contexts, replies, strict=True):
            fitted = result["scores"]
            extra = added.score(_turns(context), reply).scores if added is not None else {}
            result["scores"] = {
                dimension.name: fitted[dimension.name]
                if dimension.name in fitted
                else extra[dimension.name]
                for dimension in self.rubric
            }
        return scored

    def score(self, context: Sequence[Turn], reply: str) -> Judgement:
        # Unrounded: a verdict compares totals, and a fitted head's totals can differ below
        # the fourth decimal (rounded, Evaluate saw only ties and called a version "even").
        scored = self.score_many([(context, reply)], digits=None)[0]
        own = {name for name, head in self.model.by_dimension.items() if head is not None}
        return Judgement(
            scores=scored["scores"],
            total=scored["total"],
            judge_model=self.model_name,
            reasons={
                name: "learned from this world's reviewers"
                if name in own
                else "the rubric's score (too few picks with this reason to learn it)"
                for name in scored["scores"]
            },
            won_probability=scored["won_probability"],
        )
