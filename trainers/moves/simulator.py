"""The lettings world: a phone/chat lettings call as a small, explicit tabular MDP.

A sales agent at Levers9 Lettings talks to one customer. The customer is a hidden
``Persona`` (budget fit, children, urgency, objection, dialect); the agent sees only the
observable state of the call (stage, objection status, coarse interest and trust, turn)
and picks one of eight moves a turn. Transition probabilities and rewards are built once
per persona as dense numpy arrays, so value iteration on them is exact
(``trainers.moves.value_iteration``), and the same arrays drive a fast vectorised sampler for
Q-learning and evaluation. ``scripted_reply`` and ``episode_dialogue`` turn moves and states
into the scripted dialogue, in the words of ``trainers.moves.simulator_wording``.

Pure Python + numpy; never imports Django.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

from trainers.moves.simulator_wording import (
    AGENT_LINES,
    CUSTOMER_FAMILY_OPENING,
    CUSTOMER_LINES,
    CUSTOMER_SAID_AGAIN,
    OBJECTION_ANSWERS,
)

# --- Moves -------------------------------------------------------------------------------

MOVES: tuple[str, ...] = (
    "greet",
    "give_details",
    "confirm",
    "handle_objection",
    "reassure",
    "propose_viewing",
    "offer_slot",
    "close",
)
MOVE_LABELS: dict[str, str] = {
    "greet": "Greet",
    "give_details": "Give details",
    "confirm": "Confirm",
    "handle_objection": "Handle the objection",
    "reassure": "Reassure",
    "propose_viewing": "Propose a viewing",
    "offer_slot": "Offer a slot",
    "close": "Close",
}
MOVE_INDEX: dict[str, int] = {move: index for index, move in enumerate(MOVES)}
N_ACTIONS = len(MOVES)

(
    GREET,
    GIVE_DETAILS,
    CONFIRM,
    HANDLE_OBJECTION,
    REASSURE,
    PROPOSE_VIEWING,
    OFFER_SLOT,
    CLOSE,
) = range(N_ACTIONS)

# --- Persona and scenarios ---------------------------------------------------------------

BUDGETS: tuple[str, ...] = ("within", "stretch")
URGENCIES: tuple[str, ...] = ("high", "low")
OBJECTIONS: tuple[str, ...] = ("price", "timing", "family", "none")
DIALECTS: tuple[str, ...] = ("formal", "casual")


@dataclass(frozen=True)
class Persona:
    """The hidden customer of one scenario; the agent never sees these fields directly."""

    budget: str = "within"
    """'within': the flat fits the budget; 'stretch': it does not quite (price bites)."""
    family: bool = False
    """Children in the household: reassurance and the family dimension matter."""
    urgency: str = "low"
    """'high': needs to move soon (keen but impatient); 'low': browsing (patient, cooler)."""
    objection: str = "none"
    """The concern this customer raises at some point: price, timing, family or none."""
    dialect: str = "formal"
    """The register the customer speaks in; the agent's wording should match it."""

    def __post_init__(self) -> None:
        allowed: dict[str, tuple[str, ...]] = {
            "budget": BUDGETS,
            "urgency": URGENCIES,
            "objection": OBJECTIONS,
            "dialect": DIALECTS,
        }
        for name, values in allowed.items():
            value = getattr(self, name)
            if value not in values:
                raise ValueError(
                    f"Persona.{name} must be one of {', '.join(values)}; got {value!r}"
                )
        # bool is checked by type: "yes" or 1 would silently be truthy otherwise.
        if not isinstance(self.family, bool):
            raise ValueError(f"Persona.family must be one of True, False; got {self.family!r}")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Persona:
        """Build from plain values (a scenario row, a spec); unknown keys are refused."""
        known = {field.name for field in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(
                f"Persona got unknown field(s) {', '.join(unknown)}; "
                f"allowed: {', '.join(sorted(known))}"
            )
        return cls(**dict(data))

    def to_dict(self) -> dict[str, str | bool]:
        return {
            "budget": self.budget,
            "family": self.family,
            "urgency": self.urgency,
            "objection": self.objection,
            "dialect": self.dialect,
        }


@dataclass(frozen=True)
class Scenario:
    """A named customer with the seed its scripted calls are drawn from."""

    slug: str
    name: str
    persona: Persona
    seed: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "slug": self.slug,
            "name": self.name,
            "persona": self.persona.to_dict(),
            "seed": self.seed,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Scenario:
        return cls(
            slug=str(data["slug"]),
            name=str(data["name"]),
            persona=Persona.from_dict(data["persona"]),
            seed=int(data["seed"]),
        )


# The customers every world starts with: slug, seed, then the hidden persona's budget,
# family, urgency, objection and dialect.
_DEFAULT_CUSTOMERS: tuple[tuple[str, int, str, bool, str, str, str], ...] = (
    ("young-professional-price", 101, "stretch", False, "low", "price", "casual"),
    ("family-relocating", 202, "within", True, "low", "family", "formal"),
    ("urgent-mover-timing", 303, "within", False, "high", "timing", "casual"),
    ("retiree-downsizing", 404, "within", False, "low", "none", "formal"),
    ("young-family-stretch", 505, "stretch", True, "high", "price", "casual"),
    ("relocating-executive-timing", 606, "within", False, "high", "timing", "formal"),
)
_DEFAULT_NAMES: dict[str, str] = {
    "young-professional-price": "Young professional worried about the rent",
    "family-relocating": "Family relocating for school places",
    "urgent-mover-timing": "Urgent mover whose tenancy ends next month",
    "retiree-downsizing": "Retiree downsizing, no particular concern",
    "young-family-stretch": "Young family stretching for a bigger place",
    "relocating-executive-timing": "Relocating executive with a fixed start date",
}
DEFAULT_SCENARIOS: tuple[Scenario, ...] = tuple(
    Scenario(
        slug=slug,
        name=_DEFAULT_NAMES[slug],
        persona=Persona(
            budget=budget, family=family, urgency=urgency, objection=objection, dialect=dialect
        ),
        seed=seed,
    )
    for slug, seed, budget, family, urgency, objection, dialect in _DEFAULT_CUSTOMERS
)


def scenario_by_slug(slug: str) -> Scenario:
    for scenario in DEFAULT_SCENARIOS:
        if scenario.slug == slug:
            return scenario
    slugs = ", ".join(scenario.slug for scenario in DEFAULT_SCENARIOS)
    raise ValueError(f"unknown scenario {slug!r}; default scenarios: {slugs}")


# --- Observable state and its integer encoding -------------------------------------------
#
# Layout (turn-major, so indices do not depend on max_turns and terminals are fixed):
#   0                 won  (viewing booked and the call closed)
#   1                 lost (hung up, lead lost, or out of turns)
#   2 .. 10           opening, turn 0: interest * 3 + trust (objection not raised yet)
#   11 + (turn-1)*81  turn >= 1: ((stage-1) * 3 + objection) * 9 + interest * 3 + trust
# so a world with max_turns T has 11 + (T - 1) * 81 states (578 for the default T = 8).

STAGES: tuple[str, ...] = ("opening", "discovery", "viewing", "closing")
"""opening: not greeted yet; discovery: talking needs; viewing: viewing agreed in
principle; closing: a slot is booked and the call can be closed."""
OPENING, DISCOVERY, VIEWING, CLOSING = range(len(STAGES))
OBJECTION_STATUSES: tuple[str, ...] = ("not_raised", "open", "resolved")
NOT_RAISED, OPEN, RESOLVED = range(len(OBJECTION_STATUSES))
LEVELS = 3  # interest and trust are each 0 (low), 1, 2 (high)

WON_STATE = 0
LOST_STATE = 1
_OPENING_BASE = 2
_TURN_BASE = _OPENING_BASE + LEVELS * LEVELS
_PER_TURN = (len(STAGES) - 1) * len(OBJECTION_STATUSES) * LEVELS * LEVELS
DEFAULT_MAX_TURNS = 8


def n_states_for(max_turns: int) -> int:
    return _TURN_BASE + (max_turns - 1) * _PER_TURN


def state_index(
    stage: str,
    objection_status: str = "not_raised",
    interest: int = 0,
    trust: int = 0,
    turn: int = 0,
) -> int:
    """Encode an observable state; stage 'won' or 'lost' gives the terminal states.

    Indices do not depend on max_turns: a world with max_turns T holds the indices
    below n_states_for(T)."""
    if stage == "won":
        return WON_STATE
    if stage == "lost":
        return LOST_STATE
    if stage not in STAGES:
        raise ValueError(f"stage must be one of {', '.join((*STAGES, 'won', 'lost'))}")
    if objection_status not in OBJECTION_STATUSES:
        raise ValueError(f"objection_status must be one of {', '.join(OBJECTION_STATUSES)}")
    if not (0 <= interest < LEVELS and 0 <= trust < LEVELS):
        raise ValueError("interest and trust must be 0, 1 or 2")
    stage_i = STAGES.index(stage)
    objection_i = OBJECTION_STATUSES.index(objection_status)
    if stage_i == OPENING or turn == 0:
        # The call opens exactly once: turn 0 is the opening and the opening is turn 0.
        if stage_i != OPENING or turn != 0 or objection_i != NOT_RAISED:
            raise ValueError("the opening is turn 0 only, with no objection raised yet")
        return _OPENING_BASE + interest * LEVELS + trust
    if turn < 0:
        raise ValueError("turn must be >= 0")
    return _encode(turn, stage_i, objection_i, interest, trust)


def _encode(turn: int, stage: int, objection: int, interest: int, trust: int) -> int:
    if stage == OPENING:
        return _OPENING_BASE + interest * LEVELS + trust
    offset = ((stage - 1) * len(OBJECTION_STATUSES) + objection) * LEVELS * LEVELS
    return _TURN_BASE + (turn - 1) * _PER_TURN + offset + interest * LEVELS + trust


def _decode(index: int) -> tuple[int, int, int, int, int]:
    """(turn, stage, objection_status, interest, trust) of a live state index."""
    if index < _TURN_BASE:
        interest, trust = divmod(index - _OPENING_BASE, LEVELS)
        return 0, OPENING, NOT_RAISED, interest, trust
    turn_offset, rest = divmod(index - _TURN_BASE, _PER_TURN)
    combined, levels = divmod(rest, LEVELS * LEVELS)
    stage_offset, objection = divmod(combined, len(OBJECTION_STATUSES))
    interest, trust = divmod(levels, LEVELS)
    return turn_offset + 1, stage_offset + 1, objection, interest, trust


def describe_state(index: int, persona: Persona | None = None) -> dict[str, Any]:
    """Plain-value view of a state. With a persona, 'objection' names the open one;
    without, an open objection reads 'open' (the index does not say which it is: that
    is the persona's, and the persona is hidden)."""
    index = int(index)
    if index < 0:
        raise ValueError(f"state index must be >= 0; got {index}")
    if index in (WON_STATE, LOST_STATE):
        won = index == WON_STATE
        return {
            "index": index,
            "stage": "won" if won else "lost",
            "objection": "none",
            "objection_status": None,
            "interest": None,
            "trust": None,
            "viewing_agreed": True if won else None,
            "slot_booked": True if won else None,
            "turn": None,
            "terminal": True,
            "outcome": "won" if won else "lost",
        }
    turn, stage, objection, interest, trust = _decode(index)
    if objection == OPEN:
        objection_name = persona.objection if persona is not None else "open"
    else:
        objection_name = "none"
    return {
        "index": index,
        "stage": STAGES[stage],
        "objection": objection_name,
        "objection_status": OBJECTION_STATUSES[objection],
        "interest": interest,
        "trust": trust,
        "viewing_agreed": stage in (VIEWING, CLOSING),
        "slot_booked": stage == CLOSING,
        "turn": turn,
        "terminal": False,
        "outcome": None,
    }


# --- Dynamics: every number the world is built from --------------------------------------


@dataclass(frozen=True)
class Dynamics:
    """Probabilities and rewards of the lettings world, in one frozen (hashable) place."""

    won_reward: float = 10.0
    """Reward for closing with a viewing booked: the lead is won."""
    turn_cost: float = 0.2
    """Paid every turn, so dawdling costs even when nobody hangs up."""
    pushy_penalty: float = 1.0
    """Non-compliant pressure: close or offer a slot with no viewing agreed, or propose
    a viewing while trust is still 0."""
    mismatch_factor: float = 0.7
    """Trust gains are scaled by this when the agent's register is not the customer's."""

    greet_trust_formal: float = 0.9
    """Formal customers value the courtesies: a proper greeting usually earns trust."""
    greet_trust_casual: float = 0.7
    skipped_greeting_interest_loss_formal: float = 0.3
    """Launching into business without a greeting cools a formal customer..."""
    skipped_greeting_interest_loss_casual: float = 0.1
    """...and a casual one a little."""
    skipped_greeting_trust_factor: float = 0.5
    """Trust gains of a first move that is not a greeting are scaled by this: no rapport
    yet."""

    details_interest_within: float = 0.75
    details_interest_stretch: float = 0.5
    """Details land less well when the rent is a stretch."""
    confirm_trust: float = 0.55
    confirm_interest: float = 0.25

    reassure_trust_family: float = 0.75
    """Reassurance (safety, schools, the landlord's flexibility) matters to families."""
    reassure_trust_other: float = 0.3
    reassure_resolves_family_objection: float = 0.75
    reassure_resolves_other_objection: float = 0.1

    handle_resolves_price_within: float = 0.7
    handle_resolves_price_stretch: float = 0.45
    handle_resolves_timing: float = 0.75
    handle_resolves_family: float = 0.35
    """A family worry is better met with reassurance than with a rebuttal."""
    handle_trust_on_resolve: float = 0.5
    handle_fail_interest_loss: float = 0.25
    handle_unraised_trust_loss: float = 0.25
    """Rebutting an objection nobody raised sounds scripted."""

    viewing_by_trust: tuple[float, float, float] = (0.1, 0.5, 0.85)
    viewing_by_interest: tuple[float, float, float] = (0.5, 0.8, 1.0)
    viewing_open_objection_factor: float = 0.3
    viewing_urgent_factor: float = 1.1
    viewing_fail_interest_loss: float = 0.2

    slot_urgent: float = 0.9
    slot_relaxed: float = 0.75
    slot_open_objection_factor: float = 0.35
    early_slot_interest_loss: float = 0.4

    close_keen: float = 0.95
    close_lukewarm: float = 0.6
    close_open_objection_factor: float = 0.5
    early_close_lost: float = 0.6
    """Closing before a slot is booked usually loses the lead outright."""

    hang_up_by_interest: tuple[float, float, float] = (0.2, 0.06, 0.02)
    hang_up_urgent_factor: float = 1.5
    """Urgent customers are keener but hang up sooner when the call drags."""
    hang_up_open_objection: float = 0.05
    hang_up_pushy_formal: float = 0.15
    hang_up_pushy_casual: float = 0.08

    initial_interest_urgent: int = 2
    initial_interest_relaxed: int = 1

    objection_triggers: tuple[tuple[str, str, float], ...] = (
        ("price", "give_details", 0.5),
        ("price", "propose_viewing", 0.3),
        ("price", "offer_slot", 0.3),
        ("timing", "confirm", 0.3),
        ("timing", "propose_viewing", 0.6),
        ("timing", "offer_slot", 0.6),
        ("family", "give_details", 0.4),
        ("family", "confirm", 0.4),
        ("family", "propose_viewing", 0.5),
    )
    """(objection, move, probability): the move brings the persona's objection up."""
    price_trigger_stretch_factor: float = 1.6
    """A stretch budget makes the price objection likelier wherever it can come up."""


DEFAULT_DYNAMICS = Dynamics()

# --- Building the arrays -----------------------------------------------------------------


@dataclass(frozen=True)
class _Call:
    """The turn-free part of a live state while a move is being resolved."""

    stage: int
    objection: int
    interest: int
    trust: int


_Outcome = _Call | str  # a live call, or "won" / "lost"
_Tree = list[tuple[float, _Outcome]]


def _chance(tree: _Tree, probability: float, change: Callable[[_Call], _Outcome]) -> _Tree:
    """Split every live leaf: with `probability` apply `change`, else leave it."""
    probability = min(max(probability, 0.0), 1.0)
    out: _Tree = []
    for weight, outcome in tree:
        if isinstance(outcome, str):
            out.append((weight, outcome))
            continue
        if probability > 0.0:
            out.append((weight * probability, change(outcome)))
        if probability < 1.0:
            out.append((weight * (1.0 - probability), outcome))
    return out


def _shift(level: str, step: int) -> Callable[[_Call], _Call]:
    """A change that moves the call's interest or trust one level up or down, within 0..2."""

    def change(call: _Call) -> _Call:
        return replace(call, **{level: min(max(getattr(call, level) + step, 0), LEVELS - 1)})

    return change


_gain_trust = _shift("trust", +1)
_lose_trust = _shift("trust", -1)
_gain_interest = _shift("interest", +1)
_lose_interest = _shift("interest", -1)


def _resolve(call: _Call) -> _Call:
    return replace(call, objection=RESOLVED)


def _is_pushy(call: _Call, action: int) -> bool:
    if action == CLOSE:
        return call.stage != CLOSING
    if action == OFFER_SLOT:
        return call.stage in (OPENING, DISCOVERY)
    if action == PROPOSE_VIEWING:
        return call.stage in (OPENING, DISCOVERY) and call.trust == 0
    return False


def _trigger_probability(persona: Persona, action: int, dyn: Dynamics) -> float:
    if persona.objection == "none":
        return 0.0
    probability = 0.0
    for objection, move, value in dyn.objection_triggers:
        if objection == persona.objection and move == MOVES[action]:
            probability = value
    if persona.objection == "price" and persona.budget == "stretch":
        probability *= dyn.price_trigger_stretch_factor
    return min(probability, 1.0)


def _move_tree(
    persona: Persona, call: _Call, action: int, register_match: float, dyn: Dynamics
) -> _Tree:
    """What one move does to the call, before the hang-up risk of the turn."""
    formal = persona.dialect == "formal"
    tree: _Tree = []

    # --- opening: any move starts the call; only a greeting starts it well ---
    if call.stage == OPENING:
        started = replace(call, stage=DISCOVERY)
        if action == GREET:
            trust_gain = dyn.greet_trust_formal if formal else dyn.greet_trust_casual
            return _chance([(1.0, started)], trust_gain * register_match, _gain_trust)
        loss = (
            dyn.skipped_greeting_interest_loss_formal
            if formal
            else dyn.skipped_greeting_interest_loss_casual
        )
        tree = _chance([(1.0, started)], loss, _lose_interest)
        register_match *= dyn.skipped_greeting_trust_factor
        call_after_opening = started
    else:
        tree = [(1.0, call)]
        call_after_opening = call

    # --- the persona's objection may come up instead of the move landing ---
    # The raised branch is kept apart so the move's own effect applies only to the
    # quiet branch: a customer who has just said "it's too expensive" has not agreed
    # to anything else this turn.
    trigger = 0.0
    if call_after_opening.objection == NOT_RAISED:
        trigger = _trigger_probability(persona, action, dyn)
    raised: _Tree = []
    if trigger > 0.0:
        raised = [
            (weight * trigger, replace(outcome, objection=OPEN))
            for weight, outcome in tree
            if isinstance(outcome, _Call)
        ]
        tree = [(weight * (1.0 - trigger), outcome) for weight, outcome in tree]

    tree = _apply_move(persona, tree, action, register_match, dyn)
    return raised + tree


def _apply_move(
    persona: Persona, tree: _Tree, action: int, register_match: float, dyn: Dynamics
) -> _Tree:
    """Apply the main effect of `action` to every live leaf of `tree`."""
    out: _Tree = []
    for weight, outcome in tree:
        if isinstance(outcome, str):
            out.append((weight, outcome))
            continue
        leaf = _effect(persona, outcome, action, register_match, dyn)
        out.extend((weight * p, o) for p, o in leaf)
    return out


# --- What each move does to a live call (before the turn's hang-up risk) ---
# Each takes (persona, call, register_match, dyn) and returns the call's outcomes with their
# probabilities; `register_match` scales trust gains when the agent's register is not the
# customer's.


def _greet_again(persona: Persona, call: _Call, register_match: float, dyn: Dynamics) -> _Tree:
    # Greeting again mid-call wastes the turn.
    return [(1.0, call)]


def _give_details(persona: Persona, call: _Call, register_match: float, dyn: Dynamics) -> _Tree:
    gain = (
        dyn.details_interest_within if persona.budget == "within" else dyn.details_interest_stretch
    )
    return _chance([(1.0, call)], gain, _gain_interest)


def _confirm(persona: Persona, call: _Call, register_match: float, dyn: Dynamics) -> _Tree:
    tree = _chance([(1.0, call)], dyn.confirm_trust * register_match, _gain_trust)
    return _chance(tree, dyn.confirm_interest, _gain_interest)


def _handle_objection(persona: Persona, call: _Call, register_match: float, dyn: Dynamics) -> _Tree:
    if call.objection != OPEN:
        return _chance([(1.0, call)], dyn.handle_unraised_trust_loss, _lose_trust)
    resolves = {
        "price": dyn.handle_resolves_price_within
        if persona.budget == "within"
        else dyn.handle_resolves_price_stretch,
        "timing": dyn.handle_resolves_timing,
        "family": dyn.handle_resolves_family,
        # Unreachable (a persona without an objection never opens one), but the
        # arrays cover every state, so give it a harmless value.
        "none": 1.0,
    }[persona.objection]
    resolved = _chance(
        [(resolves, _resolve(call))],
        dyn.handle_trust_on_resolve * register_match,
        _gain_trust,
    )
    unresolved = _chance([(1.0 - resolves, call)], dyn.handle_fail_interest_loss, _lose_interest)
    return resolved + unresolved


def _reassure(persona: Persona, call: _Call, register_match: float, dyn: Dynamics) -> _Tree:
    tree: _Tree = [(1.0, call)]
    if call.objection == OPEN:
        resolves = (
            dyn.reassure_resolves_family_objection
            if persona.objection == "family"
            else dyn.reassure_resolves_other_objection
        )
        tree = _chance(tree, resolves, _resolve)
    gain = dyn.reassure_trust_family if persona.family else dyn.reassure_trust_other
    return _chance(tree, gain * register_match, _gain_trust)


def _propose_viewing(persona: Persona, call: _Call, register_match: float, dyn: Dynamics) -> _Tree:
    if call.stage != DISCOVERY:
        return [(1.0, call)]  # already agreed: asking again wastes the turn
    success = dyn.viewing_by_trust[call.trust] * dyn.viewing_by_interest[call.interest]
    if call.objection == OPEN:
        success *= dyn.viewing_open_objection_factor
    if persona.urgency == "high":
        success *= dyn.viewing_urgent_factor
    success = min(success, 1.0)
    agreed = [(success, replace(call, stage=VIEWING))]
    refused = _chance([(1.0 - success, call)], dyn.viewing_fail_interest_loss, _lose_interest)
    return agreed + refused


def _offer_slot(persona: Persona, call: _Call, register_match: float, dyn: Dynamics) -> _Tree:
    tree: _Tree = [(1.0, call)]
    if call.stage == DISCOVERY:
        return _chance(tree, dyn.early_slot_interest_loss, _lose_interest)
    if call.stage == CLOSING:
        return tree
    booked = dyn.slot_urgent if persona.urgency == "high" else dyn.slot_relaxed
    if call.objection == OPEN:
        booked *= dyn.slot_open_objection_factor
    return _chance(tree, booked, lambda c: replace(c, stage=CLOSING))


def _close(persona: Persona, call: _Call, register_match: float, dyn: Dynamics) -> _Tree:
    if call.stage != CLOSING:
        # Too early: usually the lead is lost; at best the customer cools.
        lost = dyn.early_close_lost
        return [(lost, "lost"), (1.0 - lost, _lose_interest(call))]
    won = dyn.close_keen if call.interest >= 1 else dyn.close_lukewarm
    if call.objection == OPEN:
        won *= dyn.close_open_objection_factor
    return [(won, "won"), (1.0 - won, call)]


_EFFECTS: dict[int, Callable[[Persona, _Call, float, Dynamics], _Tree]] = {
    GREET: _greet_again,
    GIVE_DETAILS: _give_details,
    CONFIRM: _confirm,
    HANDLE_OBJECTION: _handle_objection,
    REASSURE: _reassure,
    PROPOSE_VIEWING: _propose_viewing,
    OFFER_SLOT: _offer_slot,
    CLOSE: _close,
}


def _effect(
    persona: Persona, call: _Call, action: int, register_match: float, dyn: Dynamics
) -> _Tree:
    """The main effect of `action` on one live call, once the call is open and quiet."""
    if action not in _EFFECTS:
        raise ValueError(f"unknown action {action}")
    return _EFFECTS[action](persona, call, register_match, dyn)


@dataclass(frozen=True)
class _WorldArrays:
    transitions: np.ndarray
    rewards: np.ndarray
    next_states: np.ndarray
    next_cdf: np.ndarray
    next_rewards: np.ndarray
    terminal_mask: np.ndarray
    initial_state: int


def _hang_up(persona: Persona, call: _Call, pushy: bool, dyn: Dynamics) -> float:
    """The chance the customer hangs up at the end of a turn that left the call as `call`."""
    hang_up = dyn.hang_up_by_interest[call.interest]
    if persona.urgency == "high":
        hang_up *= dyn.hang_up_urgent_factor
    if call.objection == OPEN:
        hang_up += dyn.hang_up_open_objection
    if pushy:
        formal = persona.dialect == "formal"
        hang_up += dyn.hang_up_pushy_formal if formal else dyn.hang_up_pushy_casual
    return min(hang_up, 1.0)


def _add_outcomes(
    row: np.ndarray,
    tree: _Tree,
    *,
    turn: int,
    max_turns: int,
    hang_up: Callable[[_Call], float],
) -> None:
    """Add one move's outcomes to its transition row: a win, a loss, or the next turn's state
    less the hang-up risk (and a loss once the call runs out of turns)."""
    for weight, outcome in tree:
        if weight <= 0.0:
            continue
        if outcome == "won":
            row[WON_STATE] += weight
            continue
        if outcome == "lost" or not isinstance(outcome, _Call):
            row[LOST_STATE] += weight
            continue
        leaves = hang_up(outcome)
        row[LOST_STATE] += weight * leaves
        if turn + 1 >= max_turns:
            row[LOST_STATE] += weight * (1.0 - leaves)
        else:
            next_index = _encode(
                turn + 1, outcome.stage, outcome.objection, outcome.interest, outcome.trust
            )
            row[next_index] += weight * (1.0 - leaves)


def _transition_model(
    persona: Persona, max_turns: int, register_match: float, dyn: Dynamics
) -> tuple[np.ndarray, np.ndarray]:
    """(transitions[s, a, s'], the (s, a) part of the reward: turn cost and pushy penalty).
    The win bonus is paid on the transition into the won state, so it is not in the second."""
    n_states = n_states_for(max_turns)
    transitions = np.zeros((n_states, N_ACTIONS, n_states), dtype=np.float64)
    base_rewards = np.zeros((n_states, N_ACTIONS), dtype=np.float64)
    # --- terminals absorb with reward 0 ---
    for terminal in (WON_STATE, LOST_STATE):
        transitions[terminal, :, terminal] = 1.0
    for index in range(_OPENING_BASE, n_states):
        turn, stage, objection, interest, trust = _decode(index)
        call = _Call(stage, objection, interest, trust)
        for action in range(N_ACTIONS):
            pushy = _is_pushy(call, action)
            base_rewards[index, action] = -dyn.turn_cost - (dyn.pushy_penalty if pushy else 0.0)
            _add_outcomes(
                transitions[index, action],
                _move_tree(persona, call, action, register_match, dyn),
                turn=turn,
                max_turns=max_turns,
                hang_up=functools.partial(_hang_up, persona, pushy=pushy, dyn=dyn),
            )
    # Float sums of the probability tree drift by ~1e-16; renormalise so rows are exact
    # enough for the tests and for cumulative sampling.
    transitions /= transitions.sum(axis=2, keepdims=True)
    return transitions, base_rewards


def _sampling_tables(
    transitions: np.ndarray, base_rewards: np.ndarray, dyn: Dynamics
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(next_states, next_cdf, next_rewards): the nonzero successors of each (s, a), their
    cumulative probabilities and the reward of landing on each, padded to one width."""
    n_states = transitions.shape[0]
    width = int((transitions > 0.0).sum(axis=2).max())
    next_states = np.zeros((n_states, N_ACTIONS, width), dtype=np.int64)
    next_cdf = np.ones((n_states, N_ACTIONS, width), dtype=np.float64)
    next_rewards = np.zeros((n_states, N_ACTIONS, width), dtype=np.float64)
    for index in range(n_states):
        for action in range(N_ACTIONS):
            successors = np.flatnonzero(transitions[index, action])
            count = len(successors)
            cumulative = np.cumsum(transitions[index, action, successors])
            cumulative[-1] = 1.0  # u < 1 always lands inside the row
            next_states[index, action, :count] = successors
            next_states[index, action, count:] = successors[-1]
            next_cdf[index, action, :count] = cumulative
            next_rewards[index, action, :count] = base_rewards[index, action] + np.where(
                (successors == WON_STATE) & (index != WON_STATE), dyn.won_reward, 0.0
            )
    return next_states, next_cdf, next_rewards


def _initial_state(persona: Persona, dyn: Dynamics) -> int:
    interest = (
        dyn.initial_interest_urgent if persona.urgency == "high" else dyn.initial_interest_relaxed
    )
    return _encode(0, OPENING, NOT_RAISED, interest, 0)


@functools.lru_cache(maxsize=32)
def _build_world(
    persona: Persona, max_turns: int, agent_dialect: str, dyn: Dynamics
) -> _WorldArrays:
    """Build the dense model and the sparse sampling tables once per persona."""
    register_match = 1.0 if agent_dialect == persona.dialect else dyn.mismatch_factor
    transitions, base_rewards = _transition_model(persona, max_turns, register_match, dyn)
    # Expected immediate reward; terminal rows stay 0 (they never win again).
    rewards = base_rewards + dyn.won_reward * transitions[:, :, WON_STATE]
    rewards[[WON_STATE, LOST_STATE]] = 0.0
    next_states, next_cdf, next_rewards = _sampling_tables(transitions, base_rewards, dyn)
    terminal_mask = np.zeros(transitions.shape[0], dtype=bool)
    terminal_mask[[WON_STATE, LOST_STATE]] = True
    arrays = _WorldArrays(
        transitions=transitions,
        rewards=rewards,
        next_states=next_states,
        next_cdf=next_cdf,
        next_rewards=next_rewards,
        terminal_mask=terminal_mask,
        initial_state=_initial_state(persona, dyn),
    )
    # The arrays are shared by every world of this persona through the cache.
    for array in (transitions, rewards, next_states, next_cdf, next_rewards, terminal_mask):
        array.setflags(write=False)
    return arrays


# --- The world ---------------------------------------------------------------------------

Policy = Callable[[int], int | str] | np.ndarray


class LettingsWorld:
    """One persona's lettings call as an MDP, plus a sampler over it.

    ``transitions[s, a, s']`` and ``rewards[s, a]`` (expected immediate reward) are the
    exact model; ``step`` / ``step_batch`` sample from the same numbers. The arrays are
    shared and read-only (cached per persona).
    """

    def __init__(
        self,
        persona: Persona,
        max_turns: int = DEFAULT_MAX_TURNS,
        *,
        agent_dialect: str | None = None,
        dynamics: Dynamics = DEFAULT_DYNAMICS,
    ) -> None:
        if not isinstance(persona, Persona):
            raise TypeError("LettingsWorld needs a Persona")
        if not 2 <= int(max_turns) <= 30:
            raise ValueError(f"max_turns must be between 2 and 30; got {max_turns}")
        # The scripted agent mirrors the customer's register unless told otherwise;
        # a mismatched register is the knob that makes wording cost trust.
        agent_dialect = persona.dialect if agent_dialect is None else agent_dialect
        if agent_dialect not in DIALECTS:
            raise ValueError(f"agent_dialect must be one of {', '.join(DIALECTS)}")
        arrays = _build_world(persona, int(max_turns), agent_dialect, dynamics)
        self.persona = persona
        self.max_turns = int(max_turns)
        self.agent_dialect = agent_dialect
        self.dynamics = dynamics
        self.n_states = arrays.transitions.shape[0]
        self.n_actions = N_ACTIONS
        self.transitions = arrays.transitions
        self.rewards = arrays.rewards
        self.terminal_mask = arrays.terminal_mask
        self.initial_state = arrays.initial_state
        self.won_state = WON_STATE
        self.lost_state = LOST_STATE
        self._next_states = arrays.next_states
        self._next_cdf = arrays.next_cdf
        self._next_rewards = arrays.next_rewards

    @classmethod
    def from_scenario(cls, scenario: Scenario, **kwargs: Any) -> LettingsWorld:
        return cls(scenario.persona, **kwargs)

    def __repr__(self) -> str:
        return (
            f"LettingsWorld({self.persona!r}, max_turns={self.max_turns}, "
            f"agent_dialect={self.agent_dialect!r})"
        )

    def describe_state(self, index: int) -> dict[str, Any]:
        if not 0 <= int(index) < self.n_states:
            raise ValueError(f"state index must be 0..{self.n_states - 1}; got {index}")
        return describe_state(index, self.persona)

    def reset(self) -> int:
        return self.initial_state

    # --- sampling ---

    def step(
        self, state: int, action: int | str, rng: np.random.Generator
    ) -> tuple[int, float, bool]:
        """Sample one transition; a terminal state stays put with reward 0."""
        action = _action_index(action)
        # One uniform draw per step, compared with the same cumulative table as
        # step_batch, so a batch of one consumes the generator identically.
        draw = rng.random()
        position = int(np.count_nonzero(self._next_cdf[state, action] <= draw))
        next_state = int(self._next_states[state, action, position])
        reward = float(self._next_rewards[state, action, position])
        return next_state, reward, bool(self.terminal_mask[next_state])

    def step_batch(
        self, states: np.ndarray, actions: np.ndarray, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Sample one transition for each (state, action) pair; vectorised."""
        states = np.asarray(states, dtype=np.int64)
        actions = np.asarray(actions, dtype=np.int64)
        draws = rng.random(states.shape[0])
        cdf = self._next_cdf[states, actions]  # (n, width)
        position = (cdf <= draws[:, None]).sum(axis=1)
        next_states = self._next_states[states, actions, position]
        rewards = self._next_rewards[states, actions, position]
        return next_states, rewards, self.terminal_mask[next_states]

    # --- analysis helpers ---

    def reachable_mask(self, policy: np.ndarray | None = None) -> np.ndarray:
        """States reachable from the start with positive probability: under any moves,
        or under `policy` (a state -> action table) when given."""
        reachable = np.zeros(self.n_states, dtype=bool)
        frontier = np.zeros(self.n_states, dtype=bool)
        frontier[self.initial_state] = True
        while frontier.any():
            reachable |= frontier
            sources = np.flatnonzero(frontier)
            if policy is None:
                successors = self.transitions[sources].sum(axis=1)
            else:
                successors = self.transitions[sources, np.asarray(policy)[sources]]
            frontier = (successors.sum(axis=0) > 0.0) & ~reachable
        return reachable


def _action_index(action: int | str | np.integer) -> int:
    if isinstance(action, str):
        if action not in MOVE_INDEX:
            raise ValueError(f"unknown move {action!r}; moves: {', '.join(MOVES)}")
        return MOVE_INDEX[action]
    action = int(action)
    if not 0 <= action < N_ACTIONS:
        raise ValueError(f"action must be 0..{N_ACTIONS - 1}; got {action}")
    return action


def _policy_action(policy: Policy, state: int) -> int:
    if isinstance(policy, np.ndarray):
        return _action_index(policy[state])
    return _action_index(policy(state))


# --- Episodes ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Episode:
    """One simulated call: states[i] is where moves[i] was made; states[-1] is final."""

    states: tuple[int, ...]
    moves: tuple[str, ...]
    rewards: tuple[float, ...]
    won: bool
    total_return: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "states": list(self.states),
            "moves": list(self.moves),
            "rewards": list(self.rewards),
            "won": self.won,
            "total_return": self.total_return,
        }


def run_episode(world: LettingsWorld, policy: Policy, seed: int) -> Episode:
    """Play one call from the start; the same seed gives the same episode."""
    rng = np.random.default_rng(seed)
    state = world.initial_state
    states = [state]
    moves: list[str] = []
    rewards: list[float] = []
    # The turn counter makes every call end within max_turns; the bound is a backstop.
    for _ in range(world.max_turns):
        action = _policy_action(policy, state)
        state, reward, done = world.step(state, action, rng)
        states.append(state)
        moves.append(MOVES[action])
        rewards.append(reward)
        if done:
            break
    return Episode(
        states=tuple(states),
        moves=tuple(moves),
        rewards=tuple(rewards),
        won=state == WON_STATE,
        total_return=float(sum(rewards)),
    )


def simulate_returns(
    world: LettingsWorld, policy: np.ndarray, *, n_episodes: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Returns and won flags of `n_episodes` calls under a state -> action table,
    simulated side by side with step_batch (undiscounted, like Episode.total_return)."""
    policy = np.asarray(policy, dtype=np.int64)
    rng = np.random.default_rng(seed)
    states = np.full(n_episodes, world.initial_state, dtype=np.int64)
    returns = np.zeros(n_episodes, dtype=np.float64)
    for _ in range(world.max_turns):
        states, rewards, _dones = world.step_batch(states, policy[states], rng)
        returns += rewards  # terminal states keep paying 0, so finished calls are inert
    return returns, states == WON_STATE


# --- Scripted wording --------------------------------------------------------------------
# Which line is said when; the words themselves are in trainers.moves.simulator_wording.


def scripted_reply(move: str, dialect: str, state: Mapping[str, Any] | None = None) -> str:
    """The scripted agent's words for a move, in the given register. With a described
    state whose objection is named, handling the objection answers that objection."""
    if move not in MOVE_INDEX:
        raise ValueError(f"unknown move {move!r}; moves: {', '.join(MOVES)}")
    if dialect not in DIALECTS:
        raise ValueError(f"dialect must be one of {', '.join(DIALECTS)}; got {dialect!r}")
    objection = (state or {}).get("objection")
    # Reassurance answers a family worry in the same words a rebuttal would.
    answers_objection = move == "handle_objection" or (move == "reassure" and objection == "family")
    if answers_objection and (objection, dialect) in OBJECTION_ANSWERS:
        return OBJECTION_ANSWERS[(objection, dialect)]
    return AGENT_LINES[(move, dialect)]


def scripted_customer_line(
    persona: Persona, state: Mapping[str, Any], rng: np.random.Generator
) -> str:
    """What the scripted customer says in a described state (see describe_state), so a
    simulated moment reads as dialogue. Picks among a few variants with `rng`."""
    outcome = state.get("outcome")
    stage = state.get("stage")
    if outcome in ("won", "lost"):
        situation = str(outcome)
    elif stage == "opening":
        situation = "opening"
    elif state.get("objection") not in (None, "none"):
        # An index-only description says 'open'; the persona says which objection.
        situation = persona.objection
    elif stage in ("closing", "viewing"):
        situation = str(stage)
    elif (state.get("interest") or 0) == 0:
        situation = "cool"
    else:
        situation = "warm"
    lines = CUSTOMER_LINES[(situation, persona.dialect)]
    line = lines[int(rng.integers(len(lines)))]
    if situation == "opening" and persona.family:
        line += CUSTOMER_FAMILY_OPENING[persona.dialect]
    return line


def said_again(line: str, dialect: str, *, times: int = 2) -> str:
    """A line the customer says for the `times`-th time in this call, as a person repeats
    it: saying why (an unanswered question, or a point they stand by), never word for word."""
    kind = "question" if line.rstrip().endswith("?") else "statement"
    second, later = CUSTOMER_SAID_AGAIN[(kind, dialect)]
    first_word = line.split(" ", 1)[0]
    # "I", "I'm", "I'd" keep their capital; any other opening word follows the preface.
    if first_word != "I" and not first_word.startswith("I'"):
        line = line[:1].lower() + line[1:]
    return (second if times == 2 else later.format(times=times)) + line


def episode_dialogue(world: LettingsWorld, episode: Episode, seed: int) -> list[dict[str, str]]:
    """An episode as alternating customer/agent lines (plain dicts for pages and JSON). The
    same situation can last several turns; the customer then says why they say it again
    (said_again). Wording only: the random draws are the same as without it."""
    rng = np.random.default_rng(seed)
    persona = world.persona
    lines: list[dict[str, str]] = []
    said: dict[str, int] = {}
    for state, move in zip(episode.states, episode.moves, strict=False):
        described = describe_state(state, persona)
        text = scripted_customer_line(persona, described, rng)
        said[text] = said.get(text, 0) + 1
        lines.append(
            {
                "speaker": "customer",
                "text": said_again(text, persona.dialect, times=said[text])
                if said[text] > 1
                else text,
                "move": "",
            }
        )
        lines.append(
            {
                "speaker": "agent",
                "text": scripted_reply(move, world.agent_dialect, described),
                "move": move,
            }
        )
    final = describe_state(episode.states[-1], persona)
    if final["terminal"]:
        lines.append(
            {
                "speaker": "customer",
                "text": scripted_customer_line(persona, final, rng),
                "move": "",
            }
        )
    return lines
