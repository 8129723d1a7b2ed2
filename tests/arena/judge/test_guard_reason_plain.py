"""The on-topic guard's reason as a reviewer reads it: one plain sentence naming what is wrong
(another business's words, or no answer to the call), never the guard's statistics; the figures
stay with the judgement for operators (its reasons in the admin)."""

from __future__ import annotations

import re

import pytest

from tests.arena.judge.test_on_topic_guard import CONTEXT, VIEWING, ManyJudge, _guard
from trainers.judge.rubric import Turn
from trainers.judge.topic import JOINT_LIMIT, TopicVerdict
from trainers.judge.topic_guard import ON_TOPIC, ON_TOPIC_FIGURES, judge_guarded, reviewer_sentence

WORDS_OFF = TopicVerdict(
    on_topic=False, evidence=-7.25, threshold=-2.5, foreign=("viewing", "flat", "saturday")
)
JOINT_OFF = TopicVerdict(
    on_topic=False,
    evidence=0.0,
    threshold=-2.5,
    answers=-0.31,
    answers_floor=-0.2,
    joint=JOINT_LIMIT + 3.5,
)
ANSWERS_OFF = TopicVerdict(
    on_topic=False, evidence=1.0, threshold=-2.5, answers=-0.42, answers_floor=-0.1
)


def _plain(sentence: str) -> None:
    assert sentence, "a capped reply says why"
    assert re.search(r"\d", sentence) is None, sentence  # no figures
    for jargon in ("evidence", "combined", "floor", "threshold", "score", "percentile"):
        assert jargon not in sentence.lower(), sentence
    # One sentence: a capital first, one full stop, at the end.
    assert sentence[0].isupper()
    assert sentence.endswith(".")
    assert sentence.count(". ") == 0, sentence


@pytest.mark.parametrize("verdict", [WORDS_OFF, JOINT_OFF, ANSWERS_OFF])
def test_it_says_why_in_one_plain_sentence(verdict):
    _plain(reviewer_sentence(verdict))


def test_it_names_another_business_and_its_words():
    sentence = reviewer_sentence(WORDS_OFF)
    assert "another business's line" in sentence
    assert "'viewing'" in sentence
    assert "'flat'" in sentence


def test_it_says_when_a_reply_does_not_answer_the_call():
    assert "does not answer" in reviewer_sentence(ANSWERS_OFF)
    joint = reviewer_sentence(JOINT_OFF)
    assert "another business's line" in joint or "does not answer" in joint


def test_an_on_topic_reply_has_no_sentence():
    assert reviewer_sentence(TopicVerdict(on_topic=True, evidence=2.0, threshold=-2.5)) == ""


def test_the_judgement_keeps_the_figures_beside_the_sentence():
    judge = judge_guarded(ManyJudge(), _guard())
    judgement = judge.score(CONTEXT, VIEWING)
    _plain(judgement.reasons[ON_TOPIC])
    assert "another business's line" in judgement.reasons[ON_TOPIC]
    assert "evidence" in judgement.reasons[ON_TOPIC_FIGURES]  # the operator's figures
    batch = judge.score_many([(CONTEXT, VIEWING), ([Turn("customer", "Hi")], VIEWING)])
    for result in batch:
        _plain(result[ON_TOPIC])
