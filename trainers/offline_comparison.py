"""Off-line comparison: does a learned move strategy pick what the real agent picked, and does
it agree more on the calls that were won than on the calls that were lost?

    offline_agreement(strategy, calls) -> {"won": {...}, "lost": {...}, "difference": ...}

A call is {"outcome": "won" | "lost", "turns": [{"speaker", "text", "move"?}], "scenario"?}.
Agent turns without a "move" (or "move_label") are labelled by trainers.move_labels.

A recorded call has no simulator state, so `walk_call` approximates one at each agent turn
from what was said before it (coarse on purpose; the simulator's own variables, read off the
transcript):
    turn       agent turns so far (the strategy's horizon is max_turns: later turns are not
               compared)
    stage      opening at the first agent turn; then discovery, viewing once the agent has
               proposed a viewing, closing once it has offered a slot after that
    objection  open when the customer's last turn raises one (move_labels.customer_objection);
               resolved when one was raised earlier; else not raised
    interest   1, +1 once the agent has given details, -1 while an objection is open (0..2)
    trust      the number of rapport moves so far (greet, confirm, reassure, handle_objection),
               capped at 2

A strategy that agrees more with won calls than with lost ones chooses like the agents who won;
it is observational evidence, not a won rate.

Pure Python; never imports Django.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from trainers.move_labels import customer_objection, label_move
from trainers.move_strategy import choose_move
from trainers.simulator import DEFAULT_MAX_TURNS, MOVES, state_index

RAPPORT_MOVES = frozenset({"greet", "confirm", "reassure", "handle_objection"})
OUTCOMES = ("won", "lost")


def _turn_move(context: Sequence[Mapping[str, Any]], turn: Mapping[str, Any]) -> str:
    given = turn.get("move") or turn.get("move_label")
    if given:
        if given not in MOVES:
            raise ValueError(f"unknown move {given!r}; moves: {', '.join(MOVES)}")
        return str(given)
    return label_move(context, turn.get("text") or "")[0]


def walk_call(
    turns: Sequence[Mapping[str, Any]], *, max_turns: int = DEFAULT_MAX_TURNS
) -> list[dict[str, Any]]:
    """At each of the first `max_turns` agent turns: the approximate simulator state (index
    and parts) and the move the real agent made there."""
    points: list[dict[str, Any]] = []
    moves: list[str] = []
    objection_seen = False
    last_customer = ""
    for position, turn in enumerate(turns):
        if turn.get("speaker") != "agent":
            last_customer = turn.get("text") or ""
            objection_seen = objection_seen or customer_objection(last_customer) is not None
            continue
        agent_turn = len(moves)
        if agent_turn >= max_turns:
            break
        move = _turn_move(turns[:position], turn)

        # --- the state before this move, read off the call so far ---
        if agent_turn == 0:
            stage, objection = "opening", "not_raised"
        else:
            viewing_at = moves.index("propose_viewing") if "propose_viewing" in moves else None
            if viewing_at is not None and "offer_slot" in moves[viewing_at:]:
                stage = "closing"
            elif viewing_at is not None:
                stage = "viewing"
            else:
                stage = "discovery"
            if customer_objection(last_customer) is not None:
                objection = "open"
            elif objection_seen:
                objection = "resolved"
            else:
                objection = "not_raised"
        interest = 1 + ("give_details" in moves) - (objection == "open")
        trust = min(2, sum(m in RAPPORT_MOVES for m in moves))
        index = state_index(stage, objection, interest, trust, agent_turn)
        points.append(
            {
                "turn": agent_turn,
                "state_index": index,
                "stage": stage,
                "objection_status": objection,
                "interest": interest,
                "trust": trust,
                "move": move,
            }
        )
        moves.append(move)
    return points


def offline_agreement(
    strategy: Mapping[str, Any],
    calls: Sequence[Mapping[str, Any]],
    *,
    max_turns: int = DEFAULT_MAX_TURNS,
    scenario: str | None = None,
) -> dict[str, Any]:
    """How often `strategy` picks the real agent's move, on won and on lost calls.

    A call's own "scenario" (slug) picks the strategy's table for it; else `scenario`; else
    the strategy's default table. Rates are None where there is nothing to compare."""
    counts = {outcome: {"agree": 0, "total": 0} for outcome in OUTCOMES}
    n_calls = dict.fromkeys(OUTCOMES, 0)
    for call in calls:
        outcome = call.get("outcome")
        if outcome not in OUTCOMES:
            continue  # an unlabelled call says nothing about won against lost
        n_calls[outcome] += 1
        table = call.get("scenario") or scenario
        for point in walk_call(call.get("turns") or [], max_turns=max_turns):
            chosen = choose_move(strategy, state_index=point["state_index"], scenario=table)
            counts[outcome]["total"] += 1
            counts[outcome]["agree"] += int(chosen == point["move"])
    result: dict[str, Any] = {}
    for outcome, tally in counts.items():
        rate = tally["agree"] / tally["total"] if tally["total"] else None
        result[outcome] = {**tally, "rate": rate}
    won_rate, lost_rate = result["won"]["rate"], result["lost"]["rate"]
    result["difference"] = (
        won_rate - lost_rate if won_rate is not None and lost_rate is not None else None
    )
    result["calls"] = n_calls
    result["max_turns"] = max_turns
    return result
