"""Approve: a reviewer overrules the judge per dimension; the rescoring replaces the judge's
score on the overruled dimensions, reorders the queue and reports agreement per dimension."""

from __future__ import annotations

import pytest

from arena.errors import DuelBadInput, DuelNotFound
from arena.judge.agreement import judge_agreement
from arena.judge.overrides import judge_override_submit, judgements_rescore
from arena.models import DuelPair, Judgement, JudgeOverride
from arena.selectors import reply_judgements
from arena.services.pairs import duel_pairs_generate
from tests.arena.duel_helpers import real_world


@pytest.fixture
def pair(in_workspace):
    world = real_world()
    duel_pairs_generate(world=world, count=2)
    return DuelPair.objects.filter(world=world).select_related("reply_a").first()


def test_it_stores_an_override_against_the_judge_model(pair, rita):
    judged = reply_judgements([pair.reply_a_id])[pair.reply_a_id]
    override = judge_override_submit(
        reply_id=pair.reply_a_id, reviewer=rita, scores={"respect": 0.0}, note="rude"
    )
    assert override.judge_model == "rubric-v1"
    assert override.judge_scores == judged.scores
    # Saying it again replaces the verdict.
    judge_override_submit(reply_id=pair.reply_a_id, reviewer=rita, scores={"respect": 0.5})
    assert JudgeOverride.objects.get().scores == {"respect": 0.5}


def test_it_refuses_bad_verdicts(pair, rita):
    with pytest.raises(DuelBadInput, match="Unknown dimension"):
        judge_override_submit(reply_id=pair.reply_a_id, reviewer=rita, scores={"charm": 1})
    with pytest.raises(DuelBadInput, match="from 0 to 1"):
        judge_override_submit(reply_id=pair.reply_a_id, reviewer=rita, scores={"respect": 2})
    with pytest.raises(DuelBadInput, match="at least one dimension"):
        judge_override_submit(reply_id=pair.reply_a_id, reviewer=rita, scores={})
    with pytest.raises(DuelNotFound):
        judge_override_submit(reply_id=10**9, reviewer=rita, scores={"respect": 1})
    assert not JudgeOverride.objects.exists()


def test_it_replaces_the_judges_score_when_rescoring(pair, rita, rob):
    judged = reply_judgements([pair.reply_a_id])[pair.reply_a_id]
    judge_override_submit(reply_id=pair.reply_a_id, reviewer=rita, scores={"respect": 0.0})
    judge_override_submit(
        reply_id=pair.reply_a_id, reviewer=rob, scores={"respect": 1.0, "timing": 0.0}
    )
    report = judgements_rescore()
    assert report.replies_rescored == 1
    assert report.pairs_reordered == 1
    rescored = reply_judgements([pair.reply_a_id])[pair.reply_a_id]
    assert rescored.overruled
    assert rescored.scores["respect"] == 0.5  # the reviewers' mean
    assert rescored.scores["timing"] == 0.0
    assert rescored.scores["dialect"] == judged.scores["dialect"]
    assert "Overruled by 2 reviewer(s)" in rescored.reasons["respect"]
    refreshed = DuelPair.objects.get(pk=pair.pk)
    other = reply_judgements([pair.reply_b_id])[pair.reply_b_id]
    assert refreshed.judge_total == pytest.approx((rescored.total + other.total) / 2, abs=1e-4)
    # The judge's own verdict is kept beside it, and a second rescoring changes nothing.
    assert Judgement.objects.filter(reply_id=pair.reply_a_id, overruled=False).exists()
    assert judgements_rescore().replies_rescored == 0


def test_it_reports_judge_reviewer_agreement_per_dimension(pair, rita, rob):
    judged = reply_judgements([pair.reply_a_id])[pair.reply_a_id]
    judge_override_submit(
        reply_id=pair.reply_a_id,
        reviewer=rita,
        scores={"respect": judged.scores["respect"]},  # agrees, explicitly
    )
    far = 0.0 if judged.scores["timing"] > 0.5 else 1.0
    judge_override_submit(reply_id=pair.reply_a_id, reviewer=rob, scores={"timing": far})
    agreement = judge_agreement()
    assert agreement["respect"] == {**agreement["respect"], "reviewed": 2, "agreed": 2, "rate": 1}
    assert agreement["timing"]["rate"] == 0.5
    assert agreement["dialect"]["rate"] == 1  # left alone by both: accepted
    assert judgements_rescore().agreement == agreement


def test_a_capped_or_fitted_total_survives_rescoring_and_comes_back_when_overrides_go(pair, rita):
    """A judge's total need not be the weighted sum of its dimensions (the on-topic guard's cap,
    a fitted judge's own head): an override moves it by what the reviewers changed, and
    removing the override gives the judge's own total back, not the sum."""
    from trainers.judge.rubric import weighted_total

    judged = reply_judgements([pair.reply_a_id])[pair.reply_a_id]
    Judgement.objects.filter(pk=judged.pk).update(total=0.05)  # as the guard caps it
    judge_override_submit(reply_id=pair.reply_a_id, reviewer=rita, scores={"respect": 1.0})
    judgements_rescore()
    rescored = reply_judgements([pair.reply_a_id])[pair.reply_a_id]
    moved = weighted_total(rescored.scores) - weighted_total(judged.scores)
    assert rescored.total == pytest.approx(min(1.0, max(0.0, 0.05 + moved)), abs=1e-4)
    assert rescored.total < weighted_total(rescored.scores)

    JudgeOverride.objects.all().delete()
    judgements_rescore()
    back = reply_judgements([pair.reply_a_id])[pair.reply_a_id]
    assert back.total == pytest.approx(0.05)
