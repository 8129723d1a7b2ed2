"""What a side's replies look like, beside what the judge made of them: how often the on-topic
guard capped them, how long they are and how often they repeat themselves. A win that is only
length, repetition or drift off topic shows here (issue 44: no reward hacking passes as
learning).

Definitions (one each, so two evaluations read alike):
  * capped: the judge's verdict carries the guard's sentence (trainers.judge.topic_guard's
    ON_TOPIC reason), which the guard adds exactly where it capped the total;
  * words: runs of letters, digits and apostrophes, lower-cased;
  * repeats itself: a reply in which some word 3-gram occurs twice (a loop, a padded echo);
    two different moments answered alike do not count, each reply is read on its own.

Workspace schema: every row read here lives in the tenant's schema.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from evaluation import scoring
from evaluation.models import Evaluation, EvaluationAnswer
from trainers.judge.topic_guard import ON_TOPIC

REPEAT_NGRAM = 3
_WORD = re.compile(r"[\w']+")


def reply_words(text: str) -> list[str]:
    return _WORD.findall((text or "").lower())


def repeats_itself(text: str, *, n: int = REPEAT_NGRAM) -> bool:
    """Whether some word n-gram occurs twice in the reply."""
    words = reply_words(text)
    seen: set[tuple[str, ...]] = set()
    for start in range(len(words) - n + 1):
        gram = tuple(words[start : start + n])
        if gram in seen:
            return True
        seen.add(gram)
    return False


def reply_habits(replies: Iterable[tuple[str, bool]]) -> dict[str, Any]:
    """(text, capped) of each judged reply -> their count, how many and what share the guard
    capped, their mean length in words and the share that repeats itself."""
    rows = list(replies)
    count = len(rows)
    capped = sum(1 for _text, was_capped in rows if was_capped)
    repeating = sum(1 for text, _capped in rows if repeats_itself(text))
    return {
        "replies": count,
        "capped": capped,
        "capped_share": round(capped / count, 4) if count else None,
        "mean_words": scoring.mean([float(len(reply_words(text))) for text, _ in rows]),
        "repeating": repeating,
        "repeat_share": round(repeating / count, 4) if count else None,
    }


def evaluation_reply_habits(evaluation: Evaluation) -> dict[str, dict[str, Any]]:
    """Each version side's reply habits over its judged replies ("candidate", "baseline")."""
    by_side: dict[str, list[tuple[str, bool]]] = {"candidate": [], "baseline": []}
    answers = EvaluationAnswer.objects.filter(
        evaluation=evaluation, reply__isnull=False, judgement__isnull=False
    ).select_related("reply", "judgement")
    for answer in answers:
        if answer.total is None or answer.side not in by_side:
            continue
        capped = ON_TOPIC in (answer.judgement.reasons or {})
        by_side[answer.side].append((answer.reply.text, capped))
    return {side: reply_habits(rows) for side, rows in by_side.items()}
