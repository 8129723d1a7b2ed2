"""A world whose picks are imported preference pairs, with no real calls and no scripted
customers, is evaluated (and checkpointed) on the pairs it holds out: one held-out call per
pair, its moment the only one, the reviewer's chosen reply the yardstick. Two versions
evaluated there get a win rate with its interval, bootstrapped over pairs (each pair its own
call), and the pages that list held-out calls show them.

The versions answer through a stub model (the path to it is the point) and the judge is a stub
that scores by length, so the outcomes are known."""

from __future__ import annotations

import pytest

from arena.held_out import HELD_OUT_PAIRS, held_out_pairs_ensure
from arena.services.preferences import preferences_import
from arena.services.worlds import world_create
from evaluation import scoring
from evaluation.call_sets import call_set_ensure
from evaluation.errors import EvaluationError
from evaluation.models import Evaluation, EvaluationCallSet
from levers9.shipped_data import HH_RLHF_PAIRS
from trainers.judge.rubric import Judgement


def _pairs(count: int) -> str:
    return "\n".join(HH_RLHF_PAIRS.read_text().splitlines()[:count])


@pytest.fixture
def pairs_world(in_workspace, datasets):
    world = world_create(slug="human-preferences", name="Human preference pairs")
    preferences_import(world=world, text=_pairs(2 * HELD_OUT_PAIRS), source="hh-rlhf")
    return world


@pytest.fixture
def two_versions(pairs_world):
    """v2 · wordy (answers at length where the customer's last line has an even length, else
    in two words) and v3 · plain (always five words): both through a model."""
    from policies.models import PolicyVersion
    from policies.services import version_register

    v1 = PolicyVersion.objects.get(world=pairs_world, number=1)
    return tuple(
        version_register(
            world=pairs_world,
            name=name,
            parent=v1,
            move_strategy=v1.move_strategy,
            learned_from={"pack": pairs_world.slug, "kind": "test"},
            provider=PolicyVersion.Provider.OPENAI,
            provider_model=name,
        )
        for name in ("wordy", "plain")
    )


class _Stub:
    def __init__(self, answer) -> None:
        self.answer = answer

    def available(self):
        return True, ""

    def reply(self, messages, *, max_tokens):
        return self.answer(messages)


def _wordy(messages) -> str:
    if len(messages[-1]["content"]) % 2 == 0:
        return "I am so sorry, I cannot help with that, but here is something safe instead."
    return "No thanks."


class _LengthJudge:
    model_name = "length judge"
    quick = True

    def score(self, context, reply):
        total = min(1.0, len(reply.split()) / 20)
        return Judgement(
            scores={"respect": total}, total=total, judge_model=self.model_name, reasons={}
        )


@pytest.fixture
def stubbed(monkeypatch):
    from evaluation import replay
    from policies import agents

    monkeypatch.setenv("LEVERS9_PROVIDER_CONCURRENCY", "1")
    answers = {"wordy": _wordy, "plain": lambda messages: "I would rather not, sorry."}
    monkeypatch.setattr(
        agents, "provider_for", lambda target, *, limits=None: _Stub(answers[target.model])
    )
    monkeypatch.setattr(replay, "judge_for_world", lambda world: _LengthJudge())


def test_a_pairs_only_world_replays_each_held_out_pair_as_a_call_of_one_moment(pairs_world):
    call_set = call_set_ensure(world=pairs_world)
    assert call_set.kind == EvaluationCallSet.Kind.PAIRS
    assert call_set.yardstick_label == "chosen reply"
    held = list(call_set.calls.prefetch_related("moments__moment", "moments__yardstick"))
    assert [h.position for h in held] == list(range(1, HELD_OUT_PAIRS + 1))
    picks = held_out_pairs_ensure(world=pairs_world)
    for held_call, pick in zip(held, picks, strict=True):
        assert held_call.call_id is None
        assert held_call.scenario_id is None
        assert held_call.label == f"held-out pair {held_call.position}"
        (moment,) = held_call.moments.all()
        assert moment.number == 1
        assert moment.moment_id == pick.pair.moment_id
        assert moment.yardstick_id == pick.chosen_reply_id
    assert call_set_ensure(world=pairs_world).pk == call_set.pk


def test_a_world_with_too_few_pairs_to_spare_says_so(in_workspace, datasets):
    world = world_create(slug="few-pairs", name="A few pairs")
    preferences_import(world=world, text=_pairs(HELD_OUT_PAIRS))
    with pytest.raises(EvaluationError, match="too few imported preference pairs"):
        call_set_ensure(world=world)


def test_two_versions_are_evaluated_on_the_held_out_pairs_with_an_interval_by_pair(
    pairs_world, two_versions, stubbed, evaluate, owner_client
):
    wordy, plain = two_versions
    evaluation = evaluate(pairs_world, wordy, plain)
    assert evaluation.state == Evaluation.State.DONE, evaluation.error
    summary = evaluation.summary
    assert summary["kind"] == EvaluationCallSet.Kind.PAIRS
    assert summary["calls"] == summary["moments"] == summary["compared"] == HELD_OUT_PAIRS
    assert 0 < summary["wins"] < HELD_OUT_PAIRS
    assert summary["wins"] + summary["losses"] == HELD_OUT_PAIRS
    # The bootstrap resamples pairs: each held-out pair is its own call.
    outcomes = [[1.0 if row["wins"] else 0.0] for row in summary["per_call"]]
    assert (summary["win_rate"], *summary["ci"]) == scoring.win_rate_with_interval(
        outcomes, seed=evaluation.seed
    )
    assert summary["ci"][0] < summary["win_rate"] < summary["ci"][1]

    # The pages that list held-out calls show the pairs (no lens: it reads real calls).
    page = owner_client.get(f"/evaluate/{evaluation.pk}/")
    assert page.status_code == 200
    assert "held-out pair 1" in page.content.decode()
    episode = owner_client.get(f"/evaluate/{evaluation.pk}/calls/1/")
    assert episode.status_code == 200
    assert "chosen reply" in episode.content.decode()
    assert "An imported preference pair, held out" in episode.content.decode()


def test_a_version_of_a_pairs_only_world_is_checkpointed_there(
    pairs_world, two_versions, django_capture_on_commit_callbacks
):
    from evaluation.services import evaluation_checkpoint_start

    wordy, _plain = two_versions
    with django_capture_on_commit_callbacks(execute=False):
        evaluation_checkpoint_start(version=wordy)
    checkpoint = Evaluation.objects.get(candidate=wordy, purpose=Evaluation.Purpose.CHECKPOINT)
    assert checkpoint.call_set.kind == EvaluationCallSet.Kind.PAIRS


def test_the_baseline_answers_a_held_out_pair_with_another_pairs_chosen_reply(pairs_world):
    """`v1 · baseline` has no simulator here: it answers as in a world of recorded calls, from
    the most similar moment the world holds, here a pair not held out, with the reply people
    chose there."""
    from arena.models import Pick
    from policies.agents import version_reply
    from policies.models import PolicyVersion

    baseline = PolicyVersion.objects.get(world=pairs_world, number=1)
    held = held_out_pairs_ensure(world=pairs_world)
    kept = Pick.objects.filter(world=pairs_world, pair__moment__held_out=False)
    chosen = set(kept.values_list("chosen_reply__text", flat=True))
    rejected_only = set(kept.values_list("rejected_reply__text", flat=True)) - chosen
    held_only = {pick.chosen_reply.text for pick in held} - chosen
    answers = [version_reply(baseline, pick.pair.moment).text for pick in held[:12]]
    assert all(answer in chosen for answer in answers)
    assert not set(answers) & (rejected_only | held_only)


def test_a_version_is_evaluated_against_the_baseline_of_a_pairs_only_world(
    pairs_world, two_versions, stubbed, evaluate
):
    from policies.models import PolicyVersion

    wordy, _plain = two_versions
    baseline = PolicyVersion.objects.get(world=pairs_world, number=1)
    evaluation = evaluate(pairs_world, wordy, baseline)
    assert evaluation.state == Evaluation.State.DONE, evaluation.error
    assert evaluation.summary["compared"] == HELD_OUT_PAIRS


def test_a_pairs_worlds_measure_against_a_base_counts_pairs_not_calls(
    pairs_world, two_versions, stubbed, evaluate
):
    """The sentence a version's record and the Policies page give of its checkpoint says what
    was held out: pairs, in a world of imported pairs."""
    from evaluation.against_base import against_base_outcome
    from policies.selectors import against_base_words

    wordy, plain = two_versions
    evaluation = evaluate(pairs_world, wordy, plain)
    outcome = against_base_outcome(evaluation)
    assert outcome["unit"] == "held-out pairs"
    assert f"on {HELD_OUT_PAIRS} held-out pairs by" in against_base_words(outcome)
    assert "held-out calls" not in " ".join([against_base_words(outcome), *outcome["reasons"]])
