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
from typing import Any

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


# --- The best fixed script --------------------------------------------------------------


@dataclass(frozen=True)
class _Blocks:
    """The model cut to where calls can be after each number of moves (live states only):
    at depth d, transitions from the live states of d to those of d + 1, the rewards of the
    states of d, and the optimum's values at d + 1 (the upper bound on any continuation)."""

    transitions: list[np.ndarray]
    rewards: list[np.ndarray]
    bounds: list[np.ndarray]


def _live_blocks(world: LettingsWorld, optimum: np.ndarray) -> _Blocks:
    supports = [np.array([world.initial_state])]
    for _ in range(world.max_turns):
        previous = supports[-1]
        reach = world.transitions[previous].sum(axis=(0, 1)) > 0.0
        supports.append(np.flatnonzero(reach & ~world.terminal_mask))
    if len(supports[-1]) != 0:
        raise ValueError("every call must end within max_turns for an exact search")
    depths = range(world.max_turns)
    moves = np.arange(world.n_actions)
    return _Blocks(
        transitions=[
            world.transitions[np.ix_(supports[d], moves, supports[d + 1])] for d in depths
        ],
        rewards=[world.rewards[supports[d]] for d in depths],
        bounds=[optimum[supports[d + 1]] for d in depths],
    )


@dataclass(frozen=True)
class _Prefixes:
    """Move sequences played so far, one row each: where their calls still are (live
    mass), the expected reward so far, the moves, and (for children) the upper bound."""

    live: np.ndarray
    accumulated: np.ndarray
    sequences: np.ndarray
    bound: np.ndarray | None = None

    @classmethod
    def start(cls) -> _Prefixes:
        return cls(np.ones((1, 1)), np.zeros(1), np.zeros((1, 0), dtype=np.int64))

    def __getitem__(self, rows: Any) -> _Prefixes:
        return _Prefixes(self.live[rows], self.accumulated[rows], self.sequences[rows])


def _children(blocks: _Blocks, prefixes: _Prefixes, depth: int) -> _Prefixes:
    """Every prefix followed by every move, flattened: row i * A + a is prefix i then a."""
    accumulated = prefixes.accumulated[:, None] + prefixes.live @ blocks.rewards[depth]  # (N, A)
    live = np.einsum("ns,sat->nat", prefixes.live, blocks.transitions[depth])  # (N, A, S')
    bound = accumulated + live @ blocks.bounds[depth]
    count, n_actions = accumulated.shape
    sequences = np.concatenate(
        [
            np.repeat(prefixes.sequences, n_actions, axis=0),
            np.tile(np.arange(n_actions), count)[:, None],
        ],
        axis=1,
    )
    return _Prefixes(
        live.reshape(count * n_actions, -1), accumulated.reshape(-1), sequences, bound.reshape(-1)
    )


def _best_finished(
    children: _Prefixes, finished: np.ndarray, best: tuple[float, tuple[int, ...]]
) -> tuple[float, tuple[int, ...]]:
    """The better of `best` and the best script among the children whose calls all ended."""
    if not finished.any():
        return best
    candidate = int(np.argmax(np.where(finished, children.accumulated, -np.inf)))
    if children.accumulated[candidate] > best[0]:
        return float(children.accumulated[candidate]), tuple(
            int(m) for m in children.sequences[candidate]
        )
    return best


def _beam_search(blocks: _Blocks, horizon: int, beam_width: int) -> tuple[float, tuple[int, ...]]:
    """A good script fast, keeping only the `beam_width` most promising prefixes a depth:
    the lower bound branch and bound starts from."""
    best: tuple[float, tuple[int, ...]] = (-np.inf, ())
    prefixes = _Prefixes.start()
    for depth in range(horizon):
        children = _children(blocks, prefixes, depth)
        finished = children.live.sum(axis=1) <= 0.0
        best = _best_finished(children, finished, best)
        keep = np.flatnonzero(~finished)
        prefixes = children[keep[np.argsort(-children.bound[keep], kind="stable")[:beam_width]]]
    return best


def _branch_and_bound(
    blocks: _Blocks, horizon: int, chunk_size: int, best: tuple[float, tuple[int, ...]]
) -> tuple[float, tuple[int, ...]]:
    """Every prefix whose upper bound beats the best script found, depth by depth: proves
    `best` optimal or finds the better one."""
    prefixes = _Prefixes.start()
    for depth in range(horizon):
        kept = []
        # Chunks keep memory flat when many prefixes survive the bound.
        for start in range(0, len(prefixes.accumulated), chunk_size):
            children = _children(blocks, prefixes[start : start + chunk_size], depth)
            finished = children.live.sum(axis=1) <= 0.0
            best = _best_finished(children, finished, best)
            kept.append(children[~finished & (children.bound > best[0] + 1e-12)])
        prefixes = _Prefixes(
            np.concatenate([part.live for part in kept]),
            np.concatenate([part.accumulated for part in kept]),
            np.concatenate([part.sequences for part in kept]),
        )
        if len(prefixes.accumulated) == 0:
            break
    return best


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
    blocks = _live_blocks(world, solve_world(world).values)
    best = _beam_search(blocks, world.max_turns, beam_width)
    best_value, best_sequence = _branch_and_bound(blocks, world.max_turns, chunk_size, best)
    return best_value, tuple(MOVES[m] for m in best_sequence)
