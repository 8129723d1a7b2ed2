"""Off-line comparison: does a learned move strategy pick what the real agent picked, and does
it agree more on the calls that were won than on the calls that were lost?

    offline_agreement(strategy, calls) -> {"won": {...}, "lost": {...}, "difference": ...}

A call is {"outcome": "won" | "lost", "turns": [{"speaker", "text", "move"?}], "scenario"?}.
Agent turns without a "move" (or "move_label") are labelled by trainers.moves.labels.

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

For a world with no simulator the strategy is an "outcome" one (trainers.moves.offline_outcome) over
the world's own moves, and `outcome_policy_comparison` measures it on the HELD-OUT calls only
(which it never learned from): each call's agreement is the share of its agent turns where the
real agent made the move the policy would have; the calls that agree at least as much as the
held-out calls do on average are set against those that agree less (most calls share the
opening and the goodbye, so a fixed "half the turns" would put nearly every call on one side),
by won share, with a bootstrap interval over calls.
`comparison_trust` says in one line how far that can be trusted.

Pure Python; never imports Django.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from trainers.moves.labels import customer_objection, label_move
from trainers.moves.offline_outcome import outcome_choose_move
from trainers.moves.simulator import DEFAULT_MAX_TURNS, MOVES, state_index
from trainers.moves.strategy import choose_move
from trainers.stats.intervals import percentile_interval

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


# --- Off-line comparison of an outcome strategy (a world with no simulator) ---------------

BOOTSTRAP_RESAMPLES = 2000
CONFIDENCE = 0.95


def _won_share(won: np.ndarray, mask: np.ndarray) -> float | None:
    return float(won[mask].mean()) if mask.any() else None


def outcome_policy_comparison(
    strategy: Mapping[str, Any],
    calls: Sequence[Mapping[str, Any]],
    *,
    seed: int = 0,
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> dict[str, Any]:
    """The learned policy against the real agents' own moves on held-out calls
    ({"id", "won", "moves"} each): won share of the calls whose agent mostly made the policy's
    moves against the others, the difference and its bootstrap interval (None where a side
    has no calls)."""
    agreements, outcomes = [], []
    for call in calls:
        moves = [str(m) for m in call.get("moves") or []]
        if not moves:
            continue  # a call with no agent turn says nothing about the agent's moves
        previous, agree = "", 0
        for turn, move in enumerate(moves):
            agree += outcome_choose_move(strategy, agent_turn=turn, previous=previous) == move
            previous = move
        agreements.append(agree / len(moves))
        outcomes.append(bool(call.get("won")))
    agreement = np.asarray(agreements, dtype=float)
    won = np.asarray(outcomes, dtype=float)
    threshold = float(agreement.mean()) if len(agreement) else 0.0
    # A hair below the mean, so calls exactly at it count as agreeing despite rounding.
    agrees = agreement >= threshold - 1e-9
    agree_share, disagree_share = _won_share(won, agrees), _won_share(won, ~agrees)
    difference = (
        agree_share - disagree_share
        if agree_share is not None and disagree_share is not None
        else None
    )
    interval = None
    if difference is not None:
        rng = np.random.default_rng(seed)
        draws = []
        for _ in range(resamples):
            pick = rng.integers(0, len(won), len(won))
            sample_agrees, sample_won = agrees[pick], won[pick]
            if sample_agrees.all() or not sample_agrees.any():
                continue  # one side empty in this resample: no difference to draw
            draws.append(sample_won[sample_agrees].mean() - sample_won[~sample_agrees].mean())
        if draws:
            interval = percentile_interval(draws, confidence=CONFIDENCE)
    return {
        "held_out_calls": len(won),
        "won_share": float(won.mean()) if len(won) else None,
        "mean_agreement": float(agreement.mean()) if len(won) else None,
        "agree": {
            "calls": int(agrees.sum()),
            "won": int(won[agrees].sum()),
            "won_share": agree_share,
        },
        "disagree": {
            "calls": int((~agrees).sum()),
            "won": int(won[~agrees].sum()),
            "won_share": disagree_share,
        },
        "difference": difference,
        "interval": interval,
        "confidence": CONFIDENCE,
        "resamples": resamples,
        "threshold": threshold,
    }


def comparison_trust(comparison: Mapping[str, Any]) -> str:
    """One line: how far an outcome comparison can be trusted."""
    calls = comparison.get("held_out_calls") or 0
    if not calls:
        return "not measured: the world has no held-out calls yet (it needs 80 calls to spare 40)"
    interval = comparison.get("interval")
    if interval is None:
        return (
            f"not measured: on {calls} held-out calls the agents' moves all agree, or all "
            "disagree, with the policy"
        )
    low, high = interval
    span = (
        f"{int(CONFIDENCE * 100)}% interval [{low:+.2f}, {high:+.2f}] over {calls} held-out calls"
    )
    if low > 0:
        return f"supported: calls that agree with it were won more often ({span})"
    if high < 0:
        return f"contradicted: calls that agree with it were won less often ({span})"
    return f"weak: the won-share difference could be zero ({span})"
