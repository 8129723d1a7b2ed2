"""Auto-pairs: from real calls (versions + the real agent, best against worst) and from the
simulator for worlds without real calls."""

from __future__ import annotations

import json

import pytest

from arena.models import DuelPair, Judgement, Moment, Reply, World
from arena.services.pairs import duel_pairs_generate
from policies.models import PolicyVersion
from tests.arena.duel_helpers import real_world


@pytest.fixture
def lettings(in_workspace):
    return World.objects.get(slug="lettings")


def _reassuring_v2(world, *, name: str) -> PolicyVersion:
    """The world's v2: a move table that reassures in every state."""
    return PolicyVersion.objects.create(
        world=world,
        number=2,
        name=name,
        move_strategy={"kind": "table", "default": ["reassure"] * 600},
    )


def test_it_pairs_the_judges_best_against_its_worst_on_a_real_call(in_workspace):
    world = real_world()
    made = duel_pairs_generate(world=world, count=5)
    assert made == 5
    for pair in DuelPair.objects.filter(world=world).select_related("moment"):
        assert pair.moment.kind == Moment.Kind.REAL
        candidates = Reply.objects.filter(moment=pair.moment)
        # v1 alone answers: its reply and the real agent's, both judged and stored.
        assert {reply.source for reply in candidates} == {"policy", "real_agent"}
        judged = {j.reply_id: j.total for j in Judgement.objects.filter(reply__in=candidates)}
        assert len(judged) == candidates.count()
        shown = {pair.reply_a_id, pair.reply_b_id}
        assert max(judged, key=judged.get) in shown
        assert min(judged, key=judged.get) in shown
        # The dialogue shown is the call before the moment's turn.
        dialogue = json.loads(pair.dialogue)
        assert len(dialogue) == pair.moment.turn_index
        assert pair.judge_total == pytest.approx(
            (judged[pair.reply_a_id] + judged[pair.reply_b_id]) / 2, abs=1e-4
        )


def test_it_lets_two_versions_and_the_real_agent_compete(lettings):
    """Two versions with different move strategies and a third candidate: on the simulator
    (in a world of recorded calls both simulator versions answer with another call's real
    reply, the same one, so there a second version must run on a model to differ)."""
    _reassuring_v2(lettings, name="trained")
    duel_pairs_generate(world=lettings, count=4)
    numbers = {
        reply.author.version.number
        for reply in Reply.objects.filter(moment__world=lettings, source="policy")
    }
    assert numbers == {1, 2}


def test_two_simulator_versions_answer_alike_in_a_world_of_recorded_calls(in_workspace):
    world = real_world()
    _reassuring_v2(world, name="trained")
    duel_pairs_generate(world=world, count=4)
    moment = DuelPair.objects.filter(world=world).first().moment
    sources = sorted(
        (reply.source, reply.author.version.number if hasattr(reply, "author") else None)
        for reply in Reply.objects.filter(moment=moment)
    )
    # The same words twice teach a reviewer nothing: the second is not a candidate.
    assert sources == [("policy", 1), ("real_agent", None)]


def test_it_never_pairs_the_same_real_moment_twice(in_workspace):
    world = real_world()
    first = duel_pairs_generate(world=world, count=100)
    assert first == 12  # six calls, two agent turns after the opening each
    assert duel_pairs_generate(world=world, count=10) == 0
    assert DuelPair.objects.filter(world=world).count() == 12


def test_it_voices_two_moves_on_the_simulator_without_real_calls(lettings):
    made = duel_pairs_generate(world=lettings, count=12)
    assert made == 12
    for pair in DuelPair.objects.filter(world=lettings).select_related(
        "moment", "reply_a", "reply_b"
    ):
        assert pair.moment.kind == Moment.Kind.SYNTHETIC
        assert pair.scenario_id == pair.moment.scenario_id
        assert pair.move_a != pair.move_b
        assert pair.reply_a.text != pair.reply_b.text
        sources = {pair.reply_a.source, pair.reply_b.source}
        assert sources == {"policy", "simulator"}
    # More batches continue with new simulated moments.
    assert duel_pairs_generate(world=lettings, count=12) == 12
    digests = list(Moment.objects.filter(world=lettings).values_list("digest", flat=True))
    assert len(digests) == len(set(digests)) == 24


def test_it_preloads_pairs_of_one_scenario(lettings):
    duel_pairs_generate(world=lettings, count=6, scenario="family-relocating")
    slugs = set(DuelPair.objects.filter(world=lettings).values_list("scenario__slug", flat=True))
    assert slugs == {"family-relocating"}


def test_it_asks_every_fifth_pair_for_a_second_opinion(lettings):
    duel_pairs_generate(world=lettings, count=10)
    wanted = list(
        DuelPair.objects.filter(world=lettings)
        .order_by("id")
        .values_list("picks_wanted", flat=True)
    )
    assert wanted.count(2) == 2


def test_it_refuses_a_released_version_chosen_by_the_reviewer(in_workspace):
    from arena.errors import DuelBadInput

    world = real_world()
    released = PolicyVersion.objects.create(world=world, number=3, name="old", status="released")
    with pytest.raises(DuelBadInput, match="released"):
        duel_pairs_generate(world=world, count=2, versions=[released])


def test_it_makes_no_pair_when_the_judge_cannot_score(in_workspace, monkeypatch):
    from arena.services import pairs
    from arena.services.pairs import JudgeFailed

    class BrokenJudge:
        model_name = "broken-judge"

        def score(self, context, reply):
            raise RuntimeError("the model did not answer")

    monkeypatch.setattr(pairs, "judge_for_world", lambda world: BrokenJudge())
    world = real_world()
    with pytest.raises(JudgeFailed, match="broken-judge.*did not answer"):
        duel_pairs_generate(world=world, count=3)
    assert not DuelPair.objects.filter(world=world).exists()
    assert not Moment.objects.filter(world=world).exists()


def test_a_judge_that_reads_with_a_base_reads_a_moments_candidates_together_first(
    in_workspace, monkeypatch
):
    """So the call so far they share is read once (trainers.reading.passes); each score then
    finds its read in the cache."""
    from arena.services import pairs
    from trainers.judge.rubric import RubricJudge

    calls: list[tuple[str, int]] = []

    class ReadingJudge(RubricJudge):
        def read_ahead(self, items):
            calls.append(("read_ahead", len({tuple(map(str, c)) for c, _reply in items})))
            calls.append(("candidates", len(items)))

        def score(self, context, reply):
            calls.append(("score", 1))
            return super().score(context, reply)

    monkeypatch.setattr(pairs, "judge_for_world", lambda world: ReadingJudge())
    assert duel_pairs_generate(world=real_world(), count=2) == 2
    ahead = [index for index, (what, _n) in enumerate(calls) if what == "read_ahead"]
    assert len(ahead) == 2  # once a pair
    for index in ahead:
        assert calls[index][1] == 1  # the candidates of one moment: one call so far
        count = calls[index + 1][1]
        assert count >= 2
        assert calls[index + 2 : index + 2 + count] == [("score", 1)] * count


def test_it_offers_only_the_worlds_own_versions_in_the_duel(lettings):
    """Each world has its own versions: a version made in one world never answers in
    another's Duel, and a number names the world's own version."""
    from arena.errors import DuelNotFound
    from arena.selectors import policy_versions_numbered
    from arena.services.pairs import duel_versions

    world = real_world()
    _reassuring_v2(lettings, name="lettings-only")
    chosen = duel_versions(world=world)
    assert [(version.world_id, version.number) for version in chosen] == [(world.pk, 1)]
    assert {version.world_id for version in duel_versions(world=lettings)} == {lettings.pk}
    with pytest.raises(DuelNotFound, match="v2"):
        policy_versions_numbered(numbers=[2], world=world)
    duel_pairs_generate(world=world, count=4)
    assert not Reply.objects.filter(moment__world=world, author__version__world=lettings).exists()
