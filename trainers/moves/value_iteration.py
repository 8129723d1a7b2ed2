"""Exact planning on the lettings world: value iteration, policy evaluation, and the best
open-loop (fixed) move sequence.

These are the yardsticks the learners are measured against: ``optimal_return`` is the
best any policy can do on a scenario, ``best_fixed_sequence_return`` the best a script
that ignores the customer can do. The gap between them is why learning a move strategy
is worth anything.

Discount: the lettings world is episodic and acyclic (the turn counter only goes up and
the terminals absorb with reward 0), so the default ``discount=1.0`` is well defined and
gives the plain expected sum of rewards — the same quantity as ``Episode.total_return``.
Pass ``discount < 1`` for MDPs with cycles.

Pure Python + numpy; never imports Django.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from trainers.moves.simulator import MOVES, LettingsWorld

# Q-values closer than this count as a tie; ties go to the lowest move index, so the
# greedy policy does not flip with float noise between runs or machines.
TIE_TOLERANCE = 1e-9


@dataclass(frozen=True)
class ValueIterationResult:
    values: np.ndarray
    """V*(s), shape (S,)."""
    q_values: np.ndarray
    """Q*(s, a), shape (S, A)."""
    policy: np.ndarray
    """Greedy action per state, shape (S,), int; ties go to the lowest index."""
    iterations: int
    converged: bool


def _check_model(transitions: np.ndarray, rewards: np.ndarray, discount: float) -> None:
    if transitions.ndim != 3 or transitions.shape[0] != transitions.shape[2]:
        raise ValueError(f"transitions must have shape (S, A, S); got {transitions.shape}")
    if rewards.shape != transitions.shape[:2]:
        raise ValueError(f"rewards must have shape {transitions.shape[:2]}; got {rewards.shape}")
    if not 0.0 < discount <= 1.0:
        raise ValueError(f"discount must be in (0, 1]; got {discount}")


def greedy_policy(q_values: np.ndarray, tie_tolerance: float = TIE_TOLERANCE) -> np.ndarray:
    """The first action within `tie_tolerance` of the best, per state."""
    best = q_values.max(axis=1, keepdims=True)
    near_best = q_values >= best - tie_tolerance * (1.0 + np.abs(best))
    return near_best.argmax(axis=1).astype(np.int64)


# --- Value iteration ---------------------------------------------------------------------


def value_iteration(
    transitions: np.ndarray,
    rewards: np.ndarray,
    *,
    discount: float = 1.0,
    tolerance: float = 1e-10,
    max_iterations: int = 10_000,
) -> ValueIterationResult:
    """Synchronous value iteration: V <- max_a R(s, a) + discount * sum_s' P(s'|s,a) V(s').

    Stops when no value moves by more than `tolerance`. On an acyclic episodic MDP
    with horizon H it is exact after H + 1 sweeps; `converged` is False if
    `max_iterations` ran out first (a cyclic MDP with discount 1 may never settle).
    """
    transitions = np.asarray(transitions, dtype=np.float64)
    rewards = np.asarray(rewards, dtype=np.float64)
    _check_model(transitions, rewards, discount)
    values = np.zeros(transitions.shape[0], dtype=np.float64)
    q_values = rewards.copy()
    converged = False
    iterations = 0
    while iterations < max_iterations:
        iterations += 1
        # (S, A, S) @ (S,) -> (S, A): the expected next value of every move.
        q_values = rewards + discount * (transitions @ values)
        new_values = q_values.max(axis=1)
        change = float(np.max(np.abs(new_values - values)))
        values = new_values
        if change < tolerance:
            converged = True
            break
    return ValueIterationResult(
        values=values,
        q_values=q_values,
        policy=greedy_policy(q_values),
        iterations=iterations,
        converged=converged,
    )


# --- Policy evaluation -------------------------------------------------------------------


def policy_evaluation(
    transitions: np.ndarray,
    rewards: np.ndarray,
    policy: np.ndarray,
    *,
    discount: float = 1.0,
) -> np.ndarray:
    """Exact V^pi by a linear solve of (I - discount * P_pi) V = R_pi.

    With discount 1 that system is singular on absorbing zero-reward states (their row
    of I - P_pi is all zeros); their value is 0 by definition, so they are fixed at 0 and
    the rest is solved. A policy that never terminates with discount 1 raises ValueError.
    """
    transitions = np.asarray(transitions, dtype=np.float64)
    rewards = np.asarray(rewards, dtype=np.float64)
    _check_model(transitions, rewards, discount)
    policy = np.asarray(policy, dtype=np.int64)
    n_states = transitions.shape[0]
    if policy.shape != (n_states,):
        raise ValueError(f"policy must have shape ({n_states},); got {policy.shape}")
    rows = np.arange(n_states)
    chain = transitions[rows, policy]  # (S, S)
    reward = rewards[rows, policy]  # (S,)

    absorbing = np.isclose(chain[rows, rows], 1.0, rtol=0.0, atol=1e-12) & (reward == 0.0)
    free = ~absorbing
    values = np.zeros(n_states, dtype=np.float64)
    system = np.eye(int(free.sum())) - discount * chain[np.ix_(free, free)]
    try:
        values[free] = np.linalg.solve(system, reward[free])
    except np.linalg.LinAlgError as error:
        raise ValueError(
            "policy evaluation has no unique solution: the policy never terminates "
            "from some state; use discount < 1"
        ) from error
    return values


# --- The lettings world ------------------------------------------------------------------


def solve_world(world: LettingsWorld) -> ValueIterationResult:
    """Optimal values, Q-values and policy of one world (undiscounted return)."""
    result = value_iteration(world.transitions, world.rewards, discount=1.0)
    if not result.converged:  # pragma: no cover - the turn counter makes it acyclic
        raise RuntimeError("value iteration did not converge on the lettings world")
    return result


def optimal_return(world: LettingsWorld) -> float:
    """The best expected return any policy gets from the start of the call."""
    return float(solve_world(world).values[world.initial_state])


def policy_return(world: LettingsWorld, policy_table: np.ndarray) -> float:
    """Exact expected return of a state -> action table from the start of the call."""
    values = policy_evaluation(world.transitions, world.rewards, policy_table, discount=1.0)
    return float(values[world.initial_state])


def best_fixed_sequence_return(
    world: LettingsWorld, *, beam_width: int = 256, chunk_size: int = 4096
) -> tuple[float, tuple[str, ...]]:
    """The best open-loop script: the move sequence, fixed in advance and played whatever
    the customer says, with the highest expected return from the start of the call.

    Exact, not a heuristic: a beam search first finds a good script (a lower bound), then
    branch and bound walks every prefix of length 1..max_turns, tracking the state
    distribution and the expected reward so far. A prefix is dropped only when even the
    closed-loop optimum from its distribution (expected reward so far + sum p(s) V*(s),
    an upper bound on any continuation) cannot beat the best script found, so the
    maximum over all N_ACTIONS ** max_turns scripts is returned (to within 1e-12).

    The returned sequence stops once every call has ended: moves after that cannot
    change the return.
    """
    transitions = world.transitions
    rewards = world.rewards
    horizon = world.max_turns
    optimum = solve_world(world).values

    # --- where the calls can be after each number of moves (live states only) ---
    supports = [np.array([world.initial_state])]
    for _ in range(horizon):
        previous = supports[-1]
        reach = transitions[previous].sum(axis=(0, 1)) > 0.0
        supports.append(np.flatnonzero(reach & ~world.terminal_mask))
    if len(supports[-1]) != 0:
        raise ValueError("every call must end within max_turns for an exact search")
    blocks = [
        transitions[np.ix_(supports[depth], np.arange(world.n_actions), supports[depth + 1])]
        for depth in range(horizon)
    ]
    block_rewards = [rewards[supports[depth]] for depth in range(horizon)]
    block_bounds = [optimum[supports[depth + 1]] for depth in range(horizon)]

    def expand(
        live: np.ndarray, accumulated: np.ndarray, depth: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Children of every node: (live mass, expected reward so far, upper bound)."""
        child_accumulated = accumulated[:, None] + live @ block_rewards[depth]  # (N, A)
        child_live = np.einsum("ns,sat->nat", live, blocks[depth])  # (N, A, S')
        child_bound = child_accumulated + child_live @ block_bounds[depth]
        return child_live, child_accumulated, child_bound

    # --- a good script first: beam search keeps the most promising prefixes ---
    best_value = -np.inf
    best_sequence: tuple[int, ...] = ()
    live = np.ones((1, 1))
    accumulated = np.zeros(1)
    sequences = np.zeros((1, 0), dtype=np.int64)
    for depth in range(horizon):
        child_live, child_accumulated, child_bound = expand(live, accumulated, depth)
        count, n_actions = child_accumulated.shape
        child_live = child_live.reshape(count * n_actions, -1)
        child_accumulated = child_accumulated.reshape(-1)
        child_bound = child_bound.reshape(-1)
        child_sequences = np.concatenate(
            [
                np.repeat(sequences, n_actions, axis=0),
                np.tile(np.arange(n_actions), count)[:, None],
            ],
            axis=1,
        )
        finished = child_live.sum(axis=1) <= 0.0
        if finished.any():
            candidate = int(np.argmax(np.where(finished, child_accumulated, -np.inf)))
            if child_accumulated[candidate] > best_value:
                best_value = float(child_accumulated[candidate])
                best_sequence = tuple(int(m) for m in child_sequences[candidate])
        keep = np.flatnonzero(~finished)
        keep = keep[np.argsort(-child_bound[keep], kind="stable")[:beam_width]]
        live = child_live[keep]
        accumulated = child_accumulated[keep]
        sequences = child_sequences[keep]

    # --- then prove it (or improve it): branch and bound over every prefix ---
    live = np.ones((1, 1))
    accumulated = np.zeros(1)
    sequences = np.zeros((1, 0), dtype=np.int64)
    for depth in range(horizon):
        next_live, next_accumulated, next_sequences = [], [], []
        # Chunks keep memory flat when many prefixes survive the bound.
        for start in range(0, len(accumulated), chunk_size):
            part = slice(start, start + chunk_size)
            child_live, child_accumulated, child_bound = expand(
                live[part], accumulated[part], depth
            )
            count, n_actions = child_accumulated.shape
            child_live = child_live.reshape(count * n_actions, -1)
            child_accumulated = child_accumulated.reshape(-1)
            child_bound = child_bound.reshape(-1)
            parents = np.repeat(sequences[part], n_actions, axis=0)
            moves = np.tile(np.arange(n_actions), count)[:, None]
            finished = child_live.sum(axis=1) <= 0.0
            if finished.any():
                candidate = int(np.argmax(np.where(finished, child_accumulated, -np.inf)))
                if child_accumulated[candidate] > best_value:
                    best_value = float(child_accumulated[candidate])
                    best_sequence = (
                        *(int(m) for m in parents[candidate]),
                        int(moves[candidate, 0]),
                    )
            keep = ~finished & (child_bound > best_value + 1e-12)
            next_live.append(child_live[keep])
            next_accumulated.append(child_accumulated[keep])
            next_sequences.append(np.concatenate([parents[keep], moves[keep]], axis=1))
        live = np.concatenate(next_live)
        accumulated = np.concatenate(next_accumulated)
        sequences = np.concatenate(next_sequences)
        if len(accumulated) == 0:
            break

    return best_value, tuple(MOVES[m] for m in best_sequence)
