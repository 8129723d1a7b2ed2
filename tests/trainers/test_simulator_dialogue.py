"""Simulated customers talk like people: the move-strategy Duel in Lettings showed "Nice — is
it furnished?" turn after turn, and no reply of the scripted agent ever answered it. A keen
customer now asks nothing the agent cannot answer, and one who says a line again says why.
Wording only: the episode and its random draws are what they were."""

from __future__ import annotations

import numpy as np

from trainers.moves.simulator import (
    DEFAULT_SCENARIOS,
    MOVES,
    LettingsWorld,
    episode_dialogue,
    n_states_for,
    run_episode,
    said_again,
)
from trainers.moves.simulator_wording import AGENT_LINES, CUSTOMER_LINES, OBJECTION_ANSWERS


def _dialogues():
    for scenario in DEFAULT_SCENARIOS:
        world = LettingsWorld(scenario.persona)
        for seed in range(12):
            policy = np.random.default_rng(seed).integers(0, len(MOVES), n_states_for(8))
            episode = run_episode(world, policy, seed=seed)
            yield scenario.slug, seed, episode, episode_dialogue(world, episode, seed)


def test_a_customer_never_says_the_same_line_twice_in_a_call():
    repeats = 0
    for slug, seed, _episode, lines in _dialogues():
        said = [line["text"] for line in lines if line["speaker"] == "customer"]
        assert len(said) == len(set(said)), (slug, seed, said)
        repeats += sum("you didn't say" in text or "as I have not had" in text for text in said)
    assert repeats  # the check can fail: calls where a question comes again exist


def test_a_keen_customer_asks_nothing_no_agent_line_answers():
    agent_words = " ".join([*AGENT_LINES.values(), *OBJECTION_ANSWERS.values()]).lower()
    for dialect in ("formal", "casual"):
        for line in CUSTOMER_LINES[("warm", dialect)]:
            assert not line.endswith("?"), line
    assert "furnished" not in agent_words  # hence no customer may ask about it
    assert not any("furnished" in line for lines in CUSTOMER_LINES.values() for line in lines)


def test_a_line_said_again_says_why():
    assert (
        said_again("Tell me a bit more?", "casual") == "Sorry, you didn't say — tell me a bit more?"
    )
    assert said_again("I'm just worried whether it's right for the kids.", "casual") == (
        "Like I said, I'm just worried whether it's right for the kids."
    )
    assert (
        said_again("The difficulty is timing.", "formal") == "As I said, the difficulty is timing."
    )


def test_the_wording_leaves_the_episode_and_its_draws_as_they_were():
    for _slug, _seed, episode, lines in _dialogues():
        assert [line["move"] for line in lines if line["speaker"] == "agent"] == list(episode.moves)
