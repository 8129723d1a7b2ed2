"""The on-topic guard around a judge (pure Python, no Django): a reply the world's topic model
(trainers.judge.topic) finds off-topic has its total capped below the world's on-topic floor.

Off-topic is what the world's topic model says (the reply's words), or, for a judge that reads
replies with a base and whose fit placed the world's floor of it, a reply after something was
said whose words and answer to its call (trainers.judge.answers) are together rarer than the
world's own rarest 2 %
(Fisher's test: trainers.judge.topic.joint_statistic); a version fitted before it kept its own
answer scores flags a reply below the answer floor instead.

The rule: an off-topic reply's total becomes floor x total x 0.99, where the floor is the lowest
total the judge gives a sample of the world's own on-topic agent turns — below every one of them,
keeping the order among off-topic replies. Its dimension scores stay as the judge gave them; its
reasons gain "on_topic", one plain sentence saying why for the reviewer who sees the reply, and
"on_topic_figures", the guard's own figures for operators (a judgement's reasons in the admin).
A reply the guard finds on-topic is returned exactly as the judge scored it. Which world's guard
a judge gets is arena.judge.world_topic_guard's.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trainers.judge.answers import AnswerCheck
from trainers.judge.rubric import Judge, Judgement, ManyJudge, Turn
from trainers.judge.topic import NOTE_WORDS, TopicModel, TopicUnit, TopicVerdict, opening_line

# The key of the sentence an off-topic verdict adds to its reasons: what the Duel shows.
ON_TOPIC = "on_topic"
# The key of the guard's figures beside it (evidence, floors, the joint statistic): an
# operator's, seen with the judgement in the admin; a reviewer reads the sentence.
ON_TOPIC_FIGURES = "on_topic_figures"
# Below floor x total: strictly below the floor even for a perfect total.
OFF_TOPIC_SCALE = 0.99
# How many of the world's own agent turns the judge scores to find its floor.
FLOOR_SAMPLE = 200
# A judge whose floor is not measured (a model judge: each score is a paid call) caps at this.
UNMEASURED_FLOOR = 0.1


@dataclass
class TopicGuard:
    """A world's topic model, the agent turns it was built from, and each judge's floor."""

    model: TopicModel
    units: Sequence[TopicUnit]
    _floors: dict[tuple[type, str], float] = field(default_factory=dict)
    _floor_lock: threading.Lock = field(default_factory=threading.Lock)

    def verdict(self, context: Sequence[Any], reply: str) -> TopicVerdict:
        return self.model.verdict(_plain(context), reply)

    def verdicts(
        self, items: Sequence[tuple[Sequence[Any], str]], check: AnswerCheck | None = None
    ) -> list[TopicVerdict]:
        """Each item's verdict; with the judge's answer check (trainers.judge.answers), a
        reply the words let through must also answer its call (one batch for all of them). A
        call's opening line answers nothing (its score is 0 whatever it says): its words
        alone judge it, against the world's own openings."""
        found = [self.verdict(context, reply) for context, reply in items]
        asked = [
            index
            for index, verdict in enumerate(found)
            if verdict.on_topic and not opening_line(items[index][0])
        ]
        if check is None or not asked:
            return found
        scores = check.scores([(_plain(items[i][0]), items[i][1]) for i in asked])
        own_words = np.asarray(self.model.held_out_scores)  # once, not once a reply
        for index, score in zip(asked, scores, strict=True):
            joint = check.joint(own_words, found[index].evidence, float(score))
            found[index] = found[index].with_answers(score, check.floor, joint)
        return found

    def floor(self, judge: Judge) -> float:
        """The lowest total `judge` gives the world's own on-topic agent turns (a sample)."""
        key = (type(judge), judge.model_name)
        with self._floor_lock:
            if key not in self._floors:
                self._floors[key] = self._floor_measured(judge)
            return self._floors[key]

    def floor_sample(self) -> list[TopicUnit]:
        """The world's own on-topic agent turns a judge's floor is measured on (the same ones
        every time: a judge fit reads them with its base ahead, arena.judge.fit_job)."""
        step = max(1, len(self.units) // FLOOR_SAMPLE)
        return [
            unit
            for unit in list(self.units)[::step][:FLOOR_SAMPLE]
            if self.model.verdict(unit.context, unit.reply).on_topic
        ]

    def _floor_measured(self, judge: Judge) -> float:
        if judge.paid:
            return UNMEASURED_FLOOR
        sample = self.floor_sample()
        if not sample:
            return UNMEASURED_FLOOR
        score_many = getattr(judge, "score_many", None)
        if score_many is not None:
            results = score_many([(unit.context, unit.reply) for unit in sample], digits=None)
            totals = [float(result["total"]) for result in results]
        else:
            totals = [judge.score(_turns(unit.context), unit.reply).total for unit in sample]
        return min(1.0, max(0.0, min(totals)))

    def capped(self, total: float, judge: Judge) -> float:
        return self.floor(judge) * float(total) * OFF_TOPIC_SCALE


def reviewer_sentence(verdict: TopicVerdict) -> str:
    """Why the guard capped a reply, in one plain sentence for the reviewer who sees it: whose
    line it reads like (with the words that say so), or that it does not answer the call. The
    figures behind it are the verdict's note() (ON_TOPIC_FIGURES). "" for an on-topic reply."""
    if verdict.on_topic:
        return ""
    words = ", ".join(f"'{word}'" for word in verdict.foreign[:NOTE_WORDS])
    foreign = "it reads like another business's line" + (
        f" ({words} are words of neither this world nor this call)" if words else ""
    )
    unanswered = "it does not answer what the customer said"
    if verdict.words_off:
        said = [foreign]
    elif verdict.joint is not None and verdict.joint_off:
        # Rare on the words and the answer together: say the side(s) that lean away.
        said = [foreign] if verdict.evidence < 0 else []
        if verdict.answers is not None and verdict.answers < 0:
            said.append(unanswered)
        said = said or [foreign]
    else:
        said = [unanswered]
    why = " and ".join(said)
    return f"{why[0].upper()}{why[1:]}, so the judge ranks it below every reply that fits."


def _plain(context: Sequence[Any]) -> list[dict[str, str]]:
    return [
        {"speaker": turn.speaker, "text": turn.text} if isinstance(turn, Turn) else turn
        for turn in context
    ]


def _turns(context: Sequence[Mapping[str, str]]) -> list[Turn]:
    return [Turn(turn["speaker"], turn["text"]) for turn in context]


# --- the guarded judge ---------------------------------------------------------------------


class GuardedJudge:
    """A judge with the world's guard on every total it gives: it scores with the judge it
    wraps, then caps an off-topic reply. It answers the Judge protocol as that judge does
    (model_name, quick, paid); whatever else a caller reads of it (a fitted judge's reader,
    its answer check) is the wrapped judge's own."""

    def __init__(self, judge: Judge, guard: TopicGuard) -> None:
        self.unguarded = judge
        self.topic_guard = guard

    def __getattr__(self, name: str) -> Any:
        # Only what the wrapper itself lacks reaches here. Its own two fields never go on to the
        # wrapped judge: a copy made without __init__ (copy, pickle) would ask itself forever.
        if name in ("unguarded", "topic_guard"):
            raise AttributeError(name)
        return getattr(self.unguarded, name)

    def _verdicts(self, items: Sequence[tuple[Sequence[Any], str]]) -> list[TopicVerdict]:
        return self.topic_guard.verdicts(items, getattr(self.unguarded, "answer_check", None))

    def score(self, context: Sequence[Turn], reply: str) -> Judgement:
        # The verdict first: its pass over the reply leaves the base's features in the cache
        # for a judge that reads them.
        verdict = self._verdicts([(context, reply)])[0]
        judgement = self.unguarded.score(context, reply)
        if verdict.on_topic:
            return judgement
        return dataclasses.replace(
            judgement,
            total=self.topic_guard.capped(judgement.total, self.unguarded),
            reasons={
                **judgement.reasons,
                ON_TOPIC: reviewer_sentence(verdict),
                ON_TOPIC_FIGURES: verdict.note(),
            },
        )


class GuardedManyJudge(GuardedJudge):
    """The same for a judge that scores many items at once (ManyJudge: the fitted judge)."""

    def score_many(
        self, items: Sequence[tuple[Sequence[Any], str]], *, digits: int | None = 4
    ) -> list[dict[str, Any]]:
        verdicts = self._verdicts(items)
        results = self.unguarded.score_many(items, digits=digits)
        for result, verdict in zip(results, verdicts, strict=True):
            if verdict.on_topic:
                continue
            result[ON_TOPIC] = reviewer_sentence(verdict)
            total = self.topic_guard.capped(result["total"], self.unguarded)
            result["total"] = round(total, digits) if digits is not None else total
        return results


def judge_guarded(judge: Judge, guard: TopicGuard) -> Judge:
    """`judge` with the world's guard on every total it gives: a wrapper that answers what a
    caller asks of a judge (the Judge protocol's quick and paid, ManyJudge's score_many) as
    `judge` does."""
    kind = GuardedManyJudge if isinstance(judge, ManyJudge) else GuardedJudge
    return kind(judge, guard)
