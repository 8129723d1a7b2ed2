"""Exact planning: hand-checked value iteration, and the proofs that the lettings world is
not trivial (the best move depends on the persona; no fixed script reaches the optimum)."""

from __future__ import annotations

import numpy as np
import pytest

from trainers.moves.simulator import (
    DEFAULT_SCENARIOS,
    MOVES,
    LettingsWorld,
    describe_state,
    scenario_by_slug,
    simulate_returns,
)
from trainers.moves.value_iteration import (
    best_fixed_sequence_return,
    optimal_return,
    policy_evaluation,
    policy_return,
    solve_world,
    value_iteration,
)


def _world(slug: str, **kwargs: object) -> LettingsWorld:
    return LettingsWorld(scenario_by_slug(slug).persona, **kwargs)


def _tiny_mdp() -> tuple[np.ndarray, np.ndarray]:
    """Three states, two actions; state 2 is terminal.

    s0, a0: -> s2, reward 1          s0, a1: -> s1 (0.5) or s2 (0.5), reward 0
    s1, a0: -> s2, reward 4          s1, a1: -> s2, reward 2
    s2: absorbs with reward 0.
    """
    transitions = np.zeros((3, 2, 3))
    rewards = np.zeros((3, 2))
    transitions[0, 0, 2] = 1.0
    rewards[0, 0] = 1.0
    transitions[0, 1, 1] = 0.5
    transitions[0, 1, 2] = 0.5
    transitions[1, 0, 2] = 1.0
    rewards[1, 0] = 4.0
    transitions[1, 1, 2] = 1.0
    rewards[1, 1] = 2.0
    transitions[2, :, 2] = 1.0
    return transitions, rewards


# --- by hand ---


def test_it_solves_a_tiny_mdp_by_hand() -> None:
    transitions, rewards = _tiny_mdp()
    # discount 0.9, by hand:
    #   V(2) = 0
    #   Q(1, a0) = 4, Q(1, a1) = 2                       -> V(1) = 4, pi(1) = a0
    #   Q(0, a0) = 1 + 0.9 * 0 = 1
    #   Q(0, a1) = 0 + 0.9 * (0.5 * 4 + 0.5 * 0) = 1.8   -> V(0) = 1.8, pi(0) = a1
    result = value_iteration(transitions, rewards, discount=0.9)
    assert result.converged
    np.testing.assert_allclose(result.values, [1.8, 4.0, 0.0], rtol=0, atol=1e-12)
    np.testing.assert_allclose(
        result.q_values, [[1.0, 1.8], [4.0, 2.0], [0.0, 0.0]], rtol=0, atol=1e-12
    )
    assert result.policy.tolist() == [1, 0, 0]  # the terminal's tie goes to a0


def test_it_evaluates_a_fixed_policy_by_hand() -> None:
    transitions, rewards = _tiny_mdp()
    # pi = (a1, a1, a0), discount 1: V(1) = 2, V(0) = 0.5 * 2 + 0.5 * 0 = 1, V(2) = 0.
    values = policy_evaluation(transitions, rewards, np.array([1, 1, 0]), discount=1.0)
    np.testing.assert_allclose(values, [1.0, 2.0, 0.0], rtol=0, atol=1e-12)


def test_it_refuses_a_policy_that_never_ends_undiscounted() -> None:
    transitions = np.zeros((1, 1, 1))
    transitions[0, 0, 0] = 1.0
    rewards = np.array([[1.0]])  # paid forever: no finite undiscounted value
    with pytest.raises(ValueError, match="never terminates"):
        policy_evaluation(transitions, rewards, np.array([0]), discount=1.0)
    result = value_iteration(transitions, rewards, discount=1.0, max_iterations=50)
    assert not result.converged
    discounted = value_iteration(transitions, rewards, discount=0.5)
    assert discounted.converged
    assert discounted.values[0] == pytest.approx(2.0)


# --- the lettings world ---


def test_it_agrees_with_exact_policy_evaluation() -> None:
    for scenario in DEFAULT_SCENARIOS:
        world = LettingsWorld(scenario.persona)
        result = solve_world(world)
        exact = policy_evaluation(world.transitions, world.rewards, result.policy)
        np.testing.assert_allclose(exact, result.values, rtol=0, atol=1e-9)
        assert policy_return(world, result.policy) == pytest.approx(optimal_return(world), abs=1e-9)


def test_it_matches_monte_carlo_returns_of_the_optimal_policy() -> None:
    world = _world("family-relocating")
    result = solve_world(world)
    returns, won = simulate_returns(world, result.policy, n_episodes=20_000, seed=123)
    standard_error = returns.std() / np.sqrt(len(returns))
    assert abs(returns.mean() - result.values[world.initial_state]) < 4 * standard_error
    assert 0.0 < won.mean() < 1.0


def test_it_finds_moves_that_differ_between_personas() -> None:
    family = _world("family-relocating")
    urgent = _world("urgent-mover-timing")
    family_result = solve_world(family)
    urgent_result = solve_world(urgent)
    # States both optimal agents actually visit, so the difference is not academic.
    common = (
        family.reachable_mask(family_result.policy)
        & urgent.reachable_mask(urgent_result.policy)
        & ~family.terminal_mask
    )
    differing = []
    for state in np.flatnonzero(common):
        family_move = family_result.policy[state]
        urgent_move = urgent_result.policy[state]
        family_q = family_result.q_values[state]
        urgent_q = urgent_result.q_values[state]
        # Strictly: each persona loses value by playing the other's move.
        if (
            family_q[family_move] - family_q[urgent_move] > 1e-6
            and urgent_q[urgent_move] - urgent_q[family_move] > 1e-6
        ):
            differing.append((describe_state(state), MOVES[family_move], MOVES[urgent_move]))
    assert differing
    # The story the world tells: a family with no trust yet wants reassurance.
    assert any(family == "reassure" for _, family, _ in differing)


def test_it_scores_every_fixed_script_strictly_below_the_optimum() -> None:
    for scenario in DEFAULT_SCENARIOS:
        world = LettingsWorld(scenario.persona)
        fixed_value, sequence = best_fixed_sequence_return(world)
        assert fixed_value < optimal_return(world) - 0.5, scenario.slug
        assert len(sequence) <= world.max_turns
        assert _sequence_value(world, sequence) == pytest.approx(fixed_value, abs=1e-9)


def _sequence_value(world: LettingsWorld, sequence: tuple[str, ...]) -> float:
    """Exact expected return of playing `sequence` whatever happens."""
    distribution = np.zeros(world.n_states)
    distribution[world.initial_state] = 1.0
    total = 0.0
    for move in sequence:
        action = MOVES.index(move)
        total += float(distribution @ world.rewards[:, action])
        distribution = distribution @ world.transitions[:, action, :]
    return total


def test_it_finds_the_best_fixed_sequence_exactly() -> None:
    # Brute force over all 8 ** 5 scripts on a shorter call, against branch and bound.
    world = _world("young-professional-price", max_turns=5)
    distribution = np.zeros((1, world.n_states))
    distribution[0, world.initial_state] = 1.0
    totals = np.zeros(1)
    for _ in range(world.max_turns):
        step_rewards = distribution @ world.rewards  # (N, A)
        totals = (totals[:, None] + step_rewards).reshape(-1)
        distribution = np.einsum("ns,sat->nat", distribution, world.transitions).reshape(
            -1, world.n_states
        )
    brute_force = float(totals.max())
    best_index = int(totals.argmax())
    digits = np.unravel_index(best_index, (len(MOVES),) * world.max_turns)
    brute_sequence = tuple(MOVES[d] for d in digits)

    fixed_value, sequence = best_fixed_sequence_return(world)
    assert fixed_value == pytest.approx(brute_force, abs=1e-9)
    assert _sequence_value(world, sequence) == pytest.approx(
        _sequence_value(world, brute_sequence), abs=1e-9
    )
    assert fixed_value < optimal_return(world)
