"""A model judge asked to compare two replies is asked in both orders: a disagreement (a model
that prefers a position, not a reply) is a tie, and the position-consistency rate says how often
the two orders agreed."""

from __future__ import annotations

import json

from trainers.judge.model_judge import ModelJudge, comparisons_agreement, model_judge_compare
from trainers.judge.rubric import Turn


class _Answers:
    """A provider that answers as `choose(messages)` says (the model is not the point)."""

    def __init__(self, choose):
        self.choose = choose
        self.asked = []

    def reply(self, messages, *, max_tokens=0):
        self.asked.append(messages)
        return json.dumps({"better": self.choose(messages[-1]["content"])})


CONTEXT = [Turn("customer", "Is the flat still free?")]
GOOD, POOR = "Yes, it is: shall I book you a viewing?", "Dunno."


def _reply_one_is(text: str, content: str) -> bool:
    return content.index("Reply 1:") < content.index(text) < content.index("Reply 2:")


def test_a_judge_that_sees_the_better_reply_agrees_in_both_orders():
    provider = _Answers(lambda content: 1 if _reply_one_is(GOOD, content) else 2)
    judge = ModelJudge(provider, model_name="test-model")
    comparison = model_judge_compare(judge, CONTEXT, GOOD, POOR)
    assert (comparison.preferred, comparison.consistent) == ("a", True)
    assert len(provider.asked) == 2


def test_a_judge_that_always_says_the_first_reply_gives_only_ties():
    judge = ModelJudge(_Answers(lambda content: 1), model_name="biased-model")
    comparisons = [model_judge_compare(judge, CONTEXT, GOOD, POOR) for _ in range(4)]
    assert {c.preferred for c in comparisons} == {"tie"}
    agreement = comparisons_agreement(comparisons)
    assert agreement == {"pairs": 4, "accuracy": 0.0, "ties": 4, "position_consistency": 0.0}


def test_an_unusable_answer_is_a_tie_not_a_verdict():
    class Garbage:
        def reply(self, messages, *, max_tokens=0):
            return "I think reply one, probably"

    comparison = model_judge_compare(ModelJudge(Garbage(), model_name="m"), CONTEXT, GOOD, POOR)
    assert (comparison.preferred, comparison.consistent) == ("tie", False)
