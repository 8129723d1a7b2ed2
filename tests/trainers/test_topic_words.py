"""How the on-topic guard weighs a reply's words (trainers.judge.topic): a word counts for this
world only as far as it does against both readings of "another topic" (general English's use of
the word, and every word alike), so a common word the world happens to use a lot is no evidence
that a reply belongs here."""

from __future__ import annotations

import math

import pytest

from trainers.judge.topic import GENERAL_SHARE, Background, TopicModel, TopicUnit, topic_model_fit

# General conversation: "month" and "lovely" are common in it; "donate" is rare; "viewing" unseen.
BACKGROUND = Background({"month": 400, "lovel": 200, "donat": 2, "weath": 300, "cake": 98}, 1000)
# A charity's language: "donate" a lot, "month" often (a donation a month), "lovely" now and then.
WORLD = {"donat": 50.0, "month": 30.0, "lovel": 1.0, "child": 19.0}


@pytest.fixture
def model() -> TopicModel:
    return TopicModel(WORLD, sum(WORLD.values()), BACKGROUND)


def _stories(model: TopicModel, stem: str) -> tuple[float, float]:
    """A word's weight against each reading of the other topic: general English's use of it,
    and every word alike."""
    common = BACKGROUND.probability(stem)
    general = GENERAL_SHARE * common
    here = general + (1 - GENERAL_SHARE) * WORLD.get(stem, 0.0) / model.total
    uniform = 1.0 / BACKGROUND.vocabulary
    return (
        math.log(here / (general + (1 - GENERAL_SHARE) * common)),
        math.log(here / (general + (1 - GENERAL_SHARE) * uniform)),
    )


def test_a_word_weighs_the_lesser_of_the_two_readings(model):
    for word in ("donate", "month", "lovely", "viewing", "weather"):
        evidence, _foreign = model.evidence([], word)
        assert evidence == pytest.approx(min(_stories(model, word[:5])))


def test_a_common_word_the_world_uses_a_lot_is_no_evidence_for_it(model):
    # The world says "month" more often than chance would, so against "every word alike" it
    # would count for the world; general English says it more often still.
    against_general, against_uniform = _stories(model, "month")
    assert against_uniform > 0 > against_general
    evidence, foreign = model.evidence([], "month")
    assert evidence < 0
    assert foreign == ("month",)


def test_the_worlds_own_word_counts_for_it_and_a_foreign_rare_word_against(model):
    assert model.evidence([], "donate")[0] > 1.0
    assert model.evidence([], "viewing")[0] < -1.0
    # A word the customer used is never evidence of another business.
    said = [{"speaker": "customer", "text": "Is there a viewing?"}]
    assert model.evidence(said, "viewing")[0] > 0


def _call(number: int) -> list[TopicUnit]:
    """A call's agent turns: a short greeting, then two turns about the charity that use a
    word of the world's own a different number of times each call (so their scores spread)."""
    said = ({"speaker": "customer", "text": "Hello, who is this?"},)
    return [
        TopicUnit(f"call-{number}", (), "Hello there, lovely weather!"),
        TopicUnit(f"call-{number}", said, "donate " * (1 + number % 7) + "to the children"),
        TopicUnit(f"call-{number}", said * 2, "weather cake " + "children " * (number % 3)),
    ]


def test_an_opening_line_is_ranked_against_the_worlds_own_openings():
    units = [unit for number in range(40) for unit in _call(number)]
    model = topic_model_fit(["A charity for children: donate."], units, background=BACKGROUND)
    assert len(model.held_out_scores) == 80  # the turns after something was said, only
    assert model.opening_threshold is not None
    assert model.threshold is not None
    assert model.opening_threshold != model.threshold
    opening = model.verdict([], "Hello there")
    assert opening.threshold == model.opening_threshold
    assert opening.opening
    flagged = model.verdict([], "viewing viewing viewing")
    assert not flagged.on_topic
    assert "the world's own openings' floor" in flagged.note()
    said = [{"speaker": "customer", "text": "Hi"}]
    assert model.verdict(said, "Hello there").threshold == model.threshold
    assert not model.verdict(said, "Hello there").opening


def test_a_world_of_openings_alone_ranks_every_reply_against_them():
    # A simulated world's own lines have no call before them: too few later turns to rank
    # against, so every reply is ranked against all of its own lines.
    units = [TopicUnit(f"line-{n}", (), "donate " * (1 + n % 5) + "cake") for n in range(30)]
    model = topic_model_fit(["A charity: donate."], units, background=BACKGROUND)
    assert model.threshold is not None
    assert model.opening_threshold == model.threshold
    assert len(model.held_out_scores) == 30
