"""A judge that is a model: the rubric as a JSON prompt, the model's verdict parsed back.

The model is asked for a score from 0 to 1 and one short reason on each dimension of its
world's rubric (the seven by default), with each dimension's one-line meaning, as a JSON
object. An answer that is not that object (no JSON, a dimension
missing, a score outside 0..1) is asked for once more, with the problem named; a second bad
answer raises JudgeOutputError, and the caller records it as an error (Judgement.error),
never as a score. A provider that does not answer at all (timeout, 5xx after its retries, no
key) raises JudgeUnavailable, recorded the same way.

Reviewers' overrides from the Duel are shown to the model as worked examples: the reply, the
call so far, and the scores the reviewer gave on the dimensions they overruled.

Pure Python (no Django): the provider is anything with `reply(messages, *, max_tokens)`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from trainers.judge.rubric import (
    DEFAULT_RUBRIC,
    Dimension,
    Judge,
    Judgement,
    Turn,
    weighted_total,
)

JUDGE_MAX_TOKENS = 600
_PRECISION = 4


class JudgeError(RuntimeError):
    """The judge gave no verdict; the message says why. Recorded as an error, never a score."""


class JudgeOutputError(JudgeError):
    """The model answered twice, and neither answer was a usable verdict."""


class JudgeUnavailable(JudgeError):
    """The model's provider did not answer."""


class ReplyProvider(Protocol):
    def reply(self, messages: Sequence[Mapping[str, str]], *, max_tokens: int = ...) -> str: ...


@dataclass(frozen=True)
class JudgeExample:
    """A reviewer's correction of an earlier verdict, shown to the model as an example."""

    context: Sequence[Turn]
    reply: str
    scores: Mapping[str, float]  # only the dimensions the reviewer overruled
    note: str = ""


SYSTEM_PROMPT = """You judge one reply of a sales agent on a call, given the call so far.
Score the reply on each of these dimensions, from 0 (bad) to 1 (good):
{dimensions}

Answer with one JSON object and nothing else, exactly of this shape:
{{"scores": {{{score_shape}}}, "reasons": {{{reason_shape}}}}}
Every score is a number from 0 to 1; every reason is one short sentence."""

EXAMPLES_HEADER = (
    "Reviewers corrected earlier verdicts of this judge. Follow them: on the dimensions "
    "named, the reviewer's score is the right one."
)


def _transcript(context: Sequence[Turn]) -> str:
    if not context:
        return "(The call has not started yet.)"
    return "\n".join(f"{turn.speaker.capitalize()}: {turn.text}" for turn in context)


def _described(rubric: Sequence[Dimension]) -> str:
    return "\n".join(
        f"- {dimension.name}: {dimension.help or dimension.label}" for dimension in rubric
    )


def judge_messages(
    context: Sequence[Turn],
    reply: str,
    examples: Sequence[JudgeExample] = (),
    rubric: Sequence[Dimension] = DEFAULT_RUBRIC,
) -> list[dict[str, str]]:
    """The rubric prompt for one reply."""
    system = SYSTEM_PROMPT.format(
        dimensions=_described(rubric),
        score_shape=", ".join(f'"{dimension.name}": 0.0' for dimension in rubric),
        reason_shape=", ".join(f'"{dimension.name}": "..."' for dimension in rubric),
    )
    if examples:
        lines = [EXAMPLES_HEADER]
        for number, example in enumerate(examples, start=1):
            verdict = json.dumps({k: round(float(v), 2) for k, v in example.scores.items()})
            lines.append(
                f"\nExample {number}.\nCall so far:\n{_transcript(example.context)}\n"
                f"Reply: {example.reply}\nReviewer's scores: {verdict}"
                + (f"\nReviewer's note: {example.note}" if example.note else "")
            )
        system += "\n\n" + "\n".join(lines)
    user = f"Call so far:\n{_transcript(context)}\n\nThe agent's reply to judge:\n{reply}"
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.IGNORECASE)


def verdict_parse(
    text: str, rubric: Sequence[Dimension] = DEFAULT_RUBRIC
) -> tuple[dict[str, float], dict[str, str]]:
    """Scores and reasons on the rubric's dimensions from a model's answer, or ValueError
    naming what is wrong."""
    names = [dimension.name for dimension in rubric]
    body = _FENCE.sub("", text.strip())
    start, end = body.find("{"), body.rfind("}")
    if start < 0 or end <= start:
        raise ValueError("the answer holds no JSON object")
    try:
        verdict = json.loads(body[start : end + 1])
    except json.JSONDecodeError as error:
        raise ValueError(f"the JSON does not parse ({error.msg})") from None
    if not isinstance(verdict, dict) or not isinstance(verdict.get("scores"), dict):
        raise ValueError('the JSON has no "scores" object')
    raw_scores: dict[str, Any] = verdict["scores"]
    missing = [name for name in names if name not in raw_scores]
    if missing:
        raise ValueError(f"scores are missing for {', '.join(missing)}")
    scores: dict[str, float] = {}
    for name in names:
        value = raw_scores[name]
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"the score for {name} is not a number")
        if not 0.0 <= float(value) <= 1.0:
            raise ValueError(f"the score for {name} ({value}) is outside 0..1")
        scores[name] = round(float(value), _PRECISION)
    raw_reasons = verdict.get("reasons") if isinstance(verdict.get("reasons"), dict) else {}
    reasons = {name: str(raw_reasons.get(name, "") or "")[:300] for name in names}
    return scores, reasons


class ModelJudge:
    """Scores with a model behind any provider; same interface as the rubric judge."""

    quick = False
    paid = True

    def __init__(
        self,
        provider: ReplyProvider,
        *,
        model_name: str,
        examples: Sequence[JudgeExample] = (),
        max_tokens: int = JUDGE_MAX_TOKENS,
        rubric: Sequence[Dimension] = DEFAULT_RUBRIC,
    ) -> None:
        self.provider = provider
        self.model_name = model_name
        self.examples = tuple(examples)
        self.max_tokens = max_tokens
        self.rubric = tuple(rubric)

    def _ask(self, messages: list[dict[str, str]]) -> str:
        try:
            return self.provider.reply(messages, max_tokens=self.max_tokens)
        except Exception as error:  # the provider's failure, whatever it is, is the judge's
            raise JudgeUnavailable(f"{self.model_name} gave no verdict: {error}") from error

    def score(self, context: Sequence[Turn], reply: str) -> Judgement:
        """Judge `reply` after `context`; JudgeError when no usable verdict comes back."""
        messages = judge_messages(context, reply, self.examples, self.rubric)
        answer = self._ask(messages)
        try:
            scores, reasons = verdict_parse(answer, self.rubric)
        except ValueError as first_problem:
            # One more try, telling the model what was wrong with its answer.
            retry = [
                *messages,
                {"role": "assistant", "content": answer},
                {
                    "role": "user",
                    "content": f"That answer cannot be used: {first_problem}. Answer again "
                    "with the JSON object only.",
                },
            ]
            answer = self._ask(retry)
            try:
                scores, reasons = verdict_parse(answer, self.rubric)
            except ValueError as second_problem:
                raise JudgeOutputError(
                    f"{self.model_name} answered twice without a usable verdict: "
                    f"{first_problem}; then {second_problem}."
                ) from None
        return Judgement(
            scores=scores,
            total=weighted_total(scores, self.rubric),
            judge_model=self.model_name,
            reasons=reasons,
        )


COMPARE_PROMPT = """You compare two replies a sales agent could give next on a call, given the
call so far, on these dimensions:
{dimensions}

Answer with one JSON object and nothing else: {{"better": 1}} or {{"better": 2}}."""


@dataclass(frozen=True)
class Comparison:
    """A model judge's verdict on two replies, asked in both orders: "a", "b" or "tie" (the
    two orders disagreed, or an answer was unusable), and whether the orders agreed."""

    preferred: str
    consistent: bool


def compare_messages(
    context: Sequence[Turn],
    first: str,
    second: str,
    rubric: Sequence[Dimension] = DEFAULT_RUBRIC,
) -> list[dict[str, str]]:
    system = COMPARE_PROMPT.format(dimensions=_described(rubric))
    user = (
        f"Call so far:\n{_transcript(context)}\n\nReply 1:\n{first}\n\nReply 2:\n{second}\n\n"
        "Which reply is better?"
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def _better(answer: str) -> int | None:
    body = _FENCE.sub("", answer.strip())
    start, end = body.find("{"), body.rfind("}")
    try:
        value = json.loads(body[start : end + 1]) if 0 <= start < end else None
    except json.JSONDecodeError:
        return None
    better = value.get("better") if isinstance(value, dict) else None
    return better if better in (1, 2) and not isinstance(better, bool) else None


def model_judge_compare(
    judge: ModelJudge, context: Sequence[Turn], reply_a: str, reply_b: str
) -> Comparison:
    """Ask in both orders (A first, then B first): a model that prefers a position rather
    than a reply answers "1" both times, and that counts as a tie, not as a verdict."""
    first = _better(judge._ask(compare_messages(context, reply_a, reply_b, judge.rubric)))
    second = _better(judge._ask(compare_messages(context, reply_b, reply_a, judge.rubric)))
    picked_first = {1: "a", 2: "b"}.get(first)
    picked_second = {1: "b", 2: "a"}.get(second)
    if picked_first is not None and picked_first == picked_second:
        return Comparison(preferred=picked_first, consistent=True)
    return Comparison(preferred="tie", consistent=False)


def comparisons_agreement(comparisons: Sequence[Comparison]) -> dict[str, Any]:
    """Agreement with reviewers when each comparison's reply A is the one they chose: the
    share agreeing (a tie is not agreement), ties apart, and the position-consistency rate."""
    total = len(comparisons)
    if not total:
        return {"pairs": 0}
    agree = sum(1 for c in comparisons if c.preferred == "a")
    ties = sum(1 for c in comparisons if c.preferred == "tie")
    return {
        "pairs": total,
        "accuracy": round(agree / total, 4),
        "ties": ties,
        "position_consistency": round(sum(c.consistent for c in comparisons) / total, 4),
    }


def judgement_or_error(
    judge: Judge, context: Sequence[Turn], reply: str
) -> tuple[Judgement | None, str]:
    """(judgement, "") or (None, the error to record): a model judge's failure is recorded
    as an error, never as a score."""
    try:
        return judge.score(context, reply), ""
    except JudgeError as error:
        return None, str(error)
