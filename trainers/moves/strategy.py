"""Move strategies: which move a version goes for at each observable state.

Two kinds, both plain values so a version can store them as JSON:
  {"kind": "scripted"}                                the hand-written rules of v1 · baseline
  {"kind": "table", "default": [move per state],      a learned table (Q-learning, PPO, ...);
   "tables": {scenario_slug: [move per state]}}       per-scenario tables where it has them

Pure Python: the simulator, the trainers and the Django apps all use it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from trainers.moves.simulator import MOVES, describe_state, n_states_for

SCRIPTED = {"kind": "scripted"}


def scripted_move(state: Mapping[str, Any]) -> str:
    """v1 · baseline: a sensible salesperson's checklist, blind to who is on the line."""
    if state.get("stage") == "opening":
        return "greet"
    if state.get("objection_status") == "open":
        return "handle_objection"
    if state.get("slot_booked"):
        return "close"
    if state.get("viewing_agreed"):
        return "offer_slot"
    if (state.get("interest") or 0) < 1:
        return "give_details"
    if (state.get("trust") or 0) < 1:
        return "reassure"
    return "propose_viewing"


def strategy_table(strategy: Mapping[str, Any], *, scenario: str | None, max_turns: int) -> list:
    """The move (name) per state index this strategy plays for a scenario. A strategy learned
    from another world's recorded calls ("outcome") plays the scripted rules here."""
    if strategy.get("kind", "scripted") in {"scripted", "outcome"}:
        return [
            "close" if index < 2 else scripted_move(describe_state(index))
            for index in range(n_states_for(max_turns))
        ]
    tables = strategy.get("tables") or {}
    table = tables.get(scenario) if scenario else None
    table = table or strategy.get("default")
    if not table:
        raise ValueError("a table strategy needs a 'default' table or one for the scenario")
    return [MOVES[m] if isinstance(m, int) else m for m in table[: n_states_for(max_turns)]]


def strategy_policy_array(
    strategy: Mapping[str, Any], *, scenario: str | None, max_turns: int
) -> np.ndarray:
    """The same as move indices, the form the simulator and value iteration take."""
    return np.array(
        [
            MOVES.index(move)
            for move in strategy_table(strategy, scenario=scenario, max_turns=max_turns)
        ],
        dtype=np.int64,
    )


def choose_move(
    strategy: Mapping[str, Any], *, state_index: int, scenario: str | None = None
) -> str:
    """The move a strategy plays at one state ("outcome" strategies, learned on recorded
    calls with another world's moves, play the scripted rules in the simulator)."""
    if strategy.get("kind", "scripted") in {"scripted", "outcome"}:
        return scripted_move(describe_state(state_index))
    tables = strategy.get("tables") or {}
    table = (tables.get(scenario) if scenario else None) or strategy.get("default") or []
    if state_index >= len(table):
        # Past the table's horizon the call is at its end: wrap it up.
        return "close"
    move = table[state_index]
    return MOVES[move] if isinstance(move, int) else move
