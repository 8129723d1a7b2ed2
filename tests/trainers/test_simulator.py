"""The lettings world: a well-formed MDP, a faithful sampler, and scripted wording."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from trainers.moves.simulator import (
    CLOSE,
    DEFAULT_SCENARIOS,
    LOST_STATE,
    MOVE_LABELS,
    MOVES,
    OFFER_SLOT,
    PROPOSE_VIEWING,
    WON_STATE,
    LettingsWorld,
    Persona,
    Scenario,
    describe_state,
    episode_dialogue,
    n_states_for,
    run_episode,
    scenario_by_slug,
    scripted_customer_line,
    scripted_reply,
    state_index,
)


def _world(slug: str, **kwargs: object) -> LettingsWorld:
    return LettingsWorld(scenario_by_slug(slug).persona, **kwargs)


def _random_policy(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, len(MOVES), n_states_for(8))


# --- the model ---


def test_it_lists_the_eight_moves_in_order() -> None:
    assert MOVES == (
        "greet",
        "give_details",
        "confirm",
        "handle_objection",
        "reassure",
        "propose_viewing",
        "offer_slot",
        "close",
    )
    assert list(MOVE_LABELS) == list(MOVES)
    assert MOVE_LABELS["handle_objection"] == "Handle the objection"


@pytest.mark.parametrize("scenario", DEFAULT_SCENARIOS, ids=lambda s: s.slug)
def test_it_has_transition_rows_that_sum_to_one(scenario: Scenario) -> None:
    world = LettingsWorld(scenario.persona)
    assert world.transitions.shape == (world.n_states, world.n_actions, world.n_states)
    assert world.rewards.shape == (world.n_states, world.n_actions)
    assert (world.transitions >= 0.0).all()
    np.testing.assert_allclose(world.transitions.sum(axis=2), 1.0, rtol=0, atol=1e-12)


def test_it_makes_terminal_states_absorb_with_no_reward() -> None:
    world = _world("family-relocating")
    rng = np.random.default_rng(0)
    for terminal in (WON_STATE, LOST_STATE):
        assert world.terminal_mask[terminal]
        assert (world.transitions[terminal, :, terminal] == 1.0).all()
        assert (world.rewards[terminal] == 0.0).all()
        for action in range(world.n_actions):
            assert world.step(terminal, action, rng) == (terminal, 0.0, True)
    assert world.terminal_mask.sum() == 2


def test_it_ends_every_call_by_max_turns() -> None:
    world = _world("retiree-downsizing", max_turns=6)
    last_turn = [
        index
        for index in range(world.n_states)
        if describe_state(index)["turn"] == world.max_turns - 1
    ]
    assert last_turn
    # From the last turn every move ends the call: won, or lost.
    leaving = world.transitions[last_turn][:, :, [WON_STATE, LOST_STATE]].sum(axis=2)
    np.testing.assert_allclose(leaving, 1.0, atol=1e-12)


def test_it_round_trips_every_state_index() -> None:
    for index in range(n_states_for(8)):
        described = describe_state(index)
        rebuilt = state_index(
            described["stage"],
            described["objection_status"] or "not_raised",
            described["interest"] or 0,
            described["trust"] or 0,
            described["turn"] or 0,
        )
        assert rebuilt == index
    assert describe_state(WON_STATE)["outcome"] == "won"
    assert describe_state(LOST_STATE)["outcome"] == "lost"


def test_it_names_the_open_objection_with_the_persona() -> None:
    persona = Persona(objection="timing")
    index = state_index("discovery", "open", interest=1, trust=1, turn=2)
    assert describe_state(index)["objection"] == "open"
    assert describe_state(index, persona)["objection"] == "timing"
    assert describe_state(index, persona)["viewing_agreed"] is False


def test_it_penalises_pushy_moves() -> None:
    world = _world("retiree-downsizing")
    dyn = world.dynamics
    discovery = state_index("discovery", interest=2, trust=0, turn=2)
    booked = state_index("closing", interest=2, trust=2, turn=4)
    assert world.rewards[discovery, CLOSE] == pytest.approx(-dyn.turn_cost - dyn.pushy_penalty)
    assert world.rewards[discovery, OFFER_SLOT] == pytest.approx(-dyn.turn_cost - dyn.pushy_penalty)
    assert world.rewards[discovery, PROPOSE_VIEWING] == pytest.approx(
        -dyn.turn_cost - dyn.pushy_penalty
    )
    # Closing with a slot booked is where the lead is won.
    assert world.rewards[booked, CLOSE] > 0.9 * dyn.won_reward - dyn.turn_cost
    # Closing too early loses the lead more often than not.
    assert world.transitions[discovery, CLOSE, LOST_STATE] > 0.5


def test_it_books_a_slot_only_after_a_viewing_is_agreed() -> None:
    world = _world("urgent-mover-timing")
    for index in range(world.n_states):
        described = describe_state(index)
        if described["terminal"] or described["viewing_agreed"]:
            continue
        successors = np.flatnonzero(world.transitions[index, OFFER_SLOT])
        assert not any(describe_state(s)["slot_booked"] for s in successors)
        assert world.transitions[index, OFFER_SLOT, WON_STATE] == 0.0


def test_it_costs_trust_when_the_register_is_mismatched() -> None:
    formal = Persona(dialect="formal")
    matched = LettingsWorld(formal)
    mismatched = LettingsWorld(formal, agent_dialect="casual")
    trust_gained = state_index("discovery", interest=1, trust=1, turn=1)
    opening = matched.initial_state
    greet = MOVES.index("greet")
    assert (
        mismatched.transitions[opening, greet, trust_gained]
        < matched.transitions[opening, greet, trust_gained]
    )


# --- the persona ---


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("budget", "huge"),
        ("urgency", "yesterday"),
        ("objection", "parking"),
        ("dialect", "shouty"),
        ("family", "yes"),
    ],
)
def test_it_refuses_bad_persona_values(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=f"Persona.{field} must be one of"):
        Persona(**{field: value})


def test_it_round_trips_persona_dicts() -> None:
    for scenario in DEFAULT_SCENARIOS:
        assert Persona.from_dict(scenario.persona.to_dict()) == scenario.persona
        assert Scenario.from_dict(scenario.to_dict()) == scenario
    with pytest.raises(ValueError, match="unknown field"):
        Persona.from_dict({"budget": "within", "pets": True})


def test_it_ships_varied_default_scenarios() -> None:
    slugs = [scenario.slug for scenario in DEFAULT_SCENARIOS]
    assert len(set(slugs)) == len(slugs) >= 5
    personas = [scenario.persona for scenario in DEFAULT_SCENARIOS]
    assert {p.objection for p in personas} == {"price", "timing", "family", "none"}
    assert {p.dialect for p in personas} == {"formal", "casual"}
    assert {p.family for p in personas} == {True, False}


# --- sampling ---


def test_it_replays_the_same_episode_for_the_same_seed() -> None:
    world = _world("young-professional-price")
    policy = _random_policy(3)
    first = run_episode(world, policy, seed=42)
    again = run_episode(world, policy, seed=42)
    assert first == again
    assert first.states[0] == world.initial_state
    assert len(first.moves) == len(first.rewards) == len(first.states) - 1
    assert first.total_return == pytest.approx(sum(first.rewards))
    assert first.won == (first.states[-1] == WON_STATE)


def test_it_varies_episodes_across_seeds() -> None:
    world = _world("young-professional-price")
    policy = _random_policy(3)
    episodes = {run_episode(world, policy, seed=seed) for seed in range(20)}
    assert len(episodes) > 1


def test_it_accepts_a_callable_policy() -> None:
    world = _world("retiree-downsizing")
    episode = run_episode(world, lambda state: "greet", seed=1)
    assert set(episode.moves) == {"greet"}
    assert not episode.won


def test_it_samples_step_batch_with_the_model_frequencies() -> None:
    world = _world("family-relocating")
    # The (state, action) with the most successors is the hardest row to get right.
    widths = (world.transitions > 0.0).sum(axis=2)
    state, action = np.unravel_index(int(widths.argmax()), widths.shape)
    assert widths[state, action] >= 5
    n_samples = 200_000
    rng = np.random.default_rng(7)
    next_states, rewards, dones = world.step_batch(
        np.full(n_samples, state), np.full(n_samples, action), rng
    )
    frequencies = np.bincount(next_states, minlength=world.n_states) / n_samples
    np.testing.assert_allclose(frequencies, world.transitions[state, action], atol=0.01)
    np.testing.assert_array_equal(dones, world.terminal_mask[next_states])
    # Sampled rewards average to the model's expected immediate reward.
    standard_error = rewards.std() / np.sqrt(n_samples) + 1e-12
    assert abs(rewards.mean() - world.rewards[state, action]) < 5 * standard_error


def test_it_samples_wins_with_their_reward() -> None:
    world = _world("retiree-downsizing")
    booked = state_index("closing", interest=2, trust=2, turn=4)
    next_states, rewards, dones = world.step_batch(
        np.full(1000, booked), np.full(1000, CLOSE), np.random.default_rng(0)
    )
    won = next_states == WON_STATE
    assert won.any()
    assert dones[won].all()
    np.testing.assert_allclose(rewards[won], world.dynamics.won_reward - world.dynamics.turn_cost)


def test_it_draws_step_and_step_batch_from_the_same_stream() -> None:
    world = _world("urgent-mover-timing")
    policy = _random_policy(5)
    single_rng = np.random.default_rng(11)
    batch_rng = np.random.default_rng(11)
    single = batch = world.initial_state
    for _ in range(world.max_turns):
        single, single_reward, _ = world.step(single, policy[single], single_rng)
        states, rewards, _ = world.step_batch(
            np.array([batch]), policy[np.array([batch])], batch_rng
        )
        batch = int(states[0])
        assert single == batch
        assert single_reward == rewards[0]


# --- wording ---


def test_it_speaks_both_registers() -> None:
    for move in MOVES:
        formal = scripted_reply(move, "formal")
        casual = scripted_reply(move, "casual")
        assert formal
        assert casual
        assert formal != casual
    assert "Levers9 Lettings" in scripted_reply("greet", "formal")
    price = scripted_reply("handle_objection", "formal", {"objection": "price"})
    assert "rent" in price
    with pytest.raises(ValueError, match="dialect"):
        scripted_reply("greet", "pirate")


def test_it_shows_a_simulated_call_as_a_dialogue() -> None:
    world = _world("family-relocating")
    episode = run_episode(world, _random_policy(9), seed=9)
    lines = episode_dialogue(world, episode, seed=9)
    speakers = [line["speaker"] for line in lines]
    assert speakers[:2] == ["customer", "agent"]
    assert speakers.count("agent") == len(episode.moves)
    assert all(line["text"] for line in lines)
    opening = scripted_customer_line(
        world.persona, describe_state(world.initial_state), np.random.default_rng(0)
    )
    assert "family" in opening


def test_it_never_imports_django() -> None:
    code = (
        "import sys, trainers.moves.simulator, trainers.moves.value_iteration; "
        "sys.exit(1 if any(m.split('.')[0] == 'django' for m in sys.modules) else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, check=False)
    assert result.returncode == 0, result.stderr.decode()
