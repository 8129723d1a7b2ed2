"""The guard around a judge that scores many replies at once (the fitted judge's way): an
off-topic reply's total is capped once, whether it is scored alone or in a batch."""

from __future__ import annotations

from trainers.judge import rubric as judge_kinds
from trainers.judge.rubric import Judgement, Turn
from trainers.judge.topic import TopicUnit, topic_model_fit
from trainers.judge.topic_guard import OFF_TOPIC_SCALE, TopicGuard, judge_guarded

OWN = [
    "Would you consider a donation to Save the Children today?",
    "Every donation helps children in need around the world.",
    "The charity works with children in war zones and poor families.",
    "Even one dollar of your payment helps the children.",
    "Save the Children is a charity I trust with my donation.",
]
VIEWING = "Would you like to arrange a viewing of the flat on Saturday?"
CONTEXT = [Turn("customer", "Tell me more.")]


class ManyJudge:
    """Scores 0.9 in batches; one reply at a time goes through the batch, as the fitted judge."""

    model_name = "many"
    quick = False
    paid = False

    def score_many(self, items, *, digits=4):
        return [{"scores": {}, "total": 0.9, "won_probability": None} for _item in items]

    def score(self, context, reply):
        total = self.score_many([(context, reply)], digits=None)[0]["total"]
        return Judgement(scores={}, total=total, judge_model=self.model_name, reasons={})


def _guard() -> TopicGuard:
    units = [
        TopicUnit(f"call-{n}", ({"speaker": "customer", "text": "Hi"},), OWN[n % len(OWN)])
        for n in range(40)
    ]
    return TopicGuard(topic_model_fit(["A charity: Save the Children."], units), units)


def test_it_caps_an_off_topic_reply_once_alone_or_in_a_batch():
    judge = judge_guarded(ManyJudge(), _guard())
    capped = 0.9 * 0.9 * OFF_TOPIC_SCALE  # the floor is 0.9: every own turn scores 0.9
    batch = judge.score_many([(CONTEXT, VIEWING), (CONTEXT, OWN[0])], digits=None)
    assert [result["total"] for result in batch] == [capped, 0.9]
    alone = judge.score(CONTEXT, VIEWING)
    assert alone.total == capped
    assert "viewing" in alone.reasons["on_topic"]
    # What a caller asks of it is what the judge says: it scores many at once, unpaid.
    assert isinstance(judge, judge_kinds.ManyJudge)
    assert (judge.quick, judge.paid) == (False, False)
