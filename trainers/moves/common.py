"""What every move learner shares: knobs, the spec's scenarios, the table strategy, the report.

q-learning-online (``trainers.moves.q_learning``), ppo (``trainers.moves.ppo``) and reward-model
(``trainers.moves.reward_model``) take the same spec and report in the same shape because they
build both from here:

  * knobs: typed config fields that carry their help line and allowed range, checked by
    ``config_from_knobs`` (a ``KnobError`` names the knob) and listed by ``knob_rows``;
  * the spec: its scenarios, max_turns, algorithm and seed;
  * tables: the greedy table per scenario, the ``default`` table for a customer of unknown
    scenario, the parent's moves where nothing was learned, and the table move strategy;
  * the exact report of a learned table against value iteration's optimum and the parent;
  * learning curves, downsampled per scenario and averaged over the scenarios.

``trainers.moves.engines`` is the registry over the learners.

Pure Python + numpy; never imports Django.
"""

from __future__ import annotations

import math
import typing
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, field, fields
from typing import Any

import numpy as np

from trainers.moves.simulator import (
    DEFAULT_MAX_TURNS,
    DEFAULT_SCENARIOS,
    MOVES,
    LettingsWorld,
    Persona,
    Scenario,
    describe_state,
)
from trainers.moves.strategy import SCRIPTED, strategy_policy_array
from trainers.moves.value_iteration import (
    TIE_TOLERANCE,
    ValueIterationResult,
    greedy_policy,
    policy_evaluation,
    solve_world,
)

# --- Knobs: typed config fields that carry their help line and allowed range -------------


class KnobError(ValueError):
    """A knob (or spec field) the run cannot start with; `knob` names it (None: the algorithm)."""

    def __init__(self, message: str, *, knob: str | None = None) -> None:
        super().__init__(message)
        self.knob = knob


def knob(
    default: Any,
    help_line: str,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    exclusive_minimum: bool = False,
    exclusive_maximum: bool = False,
) -> Any:
    """A config field with the metadata `config_from_knobs` checks and the Engines page shows."""
    return field(
        default=default,
        metadata={
            "help": help_line,
            "min": minimum,
            "max": maximum,
            "exclusive_min": exclusive_minimum,
            "exclusive_max": exclusive_maximum,
        },
    )


_SEED_HELP = "Seed of the numpy generator; with the scenario's own seed it fixes every draw."


def seed_knob(help_line: str = _SEED_HELP) -> Any:
    """The `seed` knob every move learner has: any 32-bit seed, 0 unless the spec says."""
    return knob(0, help_line, minimum=0, maximum=2**32 - 1)


def _range_text(meta: Mapping[str, Any]) -> str:
    parts = []
    if meta["min"] is not None:
        parts.append(f"{'>' if meta['exclusive_min'] else '>='} {meta['min']:g}")
    if meta["max"] is not None:
        parts.append(f"{'<' if meta['exclusive_max'] else '<='} {meta['max']:g}")
    return " and ".join(parts)


def _coerce(name: str, kind: type, value: Any, meta: Mapping[str, Any]) -> Any:
    """The knob's value in its declared type, or KnobError naming the knob and its range."""
    allowed = _range_text(meta)
    expected = {bool: "true or false", int: "a whole number", float: "a number"}[kind]
    hint = f"{expected}{' ' + allowed if allowed else ''}"
    # bool is an int in Python: refuse it where a number is meant, and refuse 0/1 for a bool.
    if kind is bool:
        if not isinstance(value, bool):
            raise KnobError(f"{name} must be {hint}; got {value!r}", knob=name)
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise KnobError(f"{name} must be {hint}; got {value!r}", knob=name)
    if not math.isfinite(value):
        raise KnobError(f"{name} must be {hint}; got {value!r}", knob=name)
    if kind is int:
        # JSON from a form may carry 1e6 or 200.0: fine when it is whole.
        if value != int(value):
            raise KnobError(f"{name} must be {hint}; got {value!r}", knob=name)
        value = int(value)
    else:
        value = float(value)
    low, high = meta["min"], meta["max"]
    too_low = low is not None and (value <= low if meta["exclusive_min"] else value < low)
    too_high = high is not None and (value >= high if meta["exclusive_max"] else value > high)
    if too_low or too_high:
        raise KnobError(f"{name} must be {hint}; got {value!r}", knob=name)
    return value


def config_from_knobs(config_type: type, knobs: Mapping[str, Any] | None, *, algorithm: str) -> Any:
    """Build a frozen config from plain knob values, refusing unknown names, wrong types and
    values out of range with a message that names the knob and what it allows."""
    if knobs is None:
        knobs = {}
    if not isinstance(knobs, Mapping):
        raise KnobError(f"knobs must be an object of name: value; got {knobs!r}")
    hints = typing.get_type_hints(config_type)
    known = {item.name: item for item in fields(config_type)}
    unknown = sorted(str(name) for name in knobs if name not in known)
    if unknown:
        raise KnobError(
            f"unknown knob(s) for {algorithm}: {', '.join(unknown)}; "
            f"known knobs: {', '.join(known)}",
            knob=unknown[0],
        )
    values = {
        name: _coerce(name, hints[name], value, known[name].metadata)
        for name, value in knobs.items()
    }
    return config_type(**values)


def knob_rows(config_type: type) -> list[dict[str, Any]]:
    """name, default, help, min, max (and whether each bound is strict) per knob, for the UI."""
    hints = typing.get_type_hints(config_type)
    rows = []
    for item in fields(config_type):
        meta = item.metadata
        rows.append(
            {
                "name": item.name,
                "type": hints[item.name].__name__,
                "default": None if item.default is MISSING else item.default,
                "help": meta.get("help", ""),
                "min": meta.get("min"),
                "max": meta.get("max"),
                "exclusive_min": bool(meta.get("exclusive_min")),
                "exclusive_max": bool(meta.get("exclusive_max")),
            }
        )
    return rows


# --- Scenarios and worlds from a spec ----------------------------------------------------


def scenarios_from_spec(spec: Mapping[str, Any]) -> list[Scenario]:
    """The scenarios to train on: slugs of default scenarios, or {"slug", "persona", "seed"}
    objects (persona optional for a default slug). Default: every default scenario."""
    entries = spec.get("scenarios") or [scenario.slug for scenario in DEFAULT_SCENARIOS]
    if not isinstance(entries, Sequence) or isinstance(entries, str):
        raise KnobError("scenarios must be a list of slugs or scenario objects", knob="scenarios")
    defaults = {scenario.slug: scenario for scenario in DEFAULT_SCENARIOS}
    scenarios: list[Scenario] = []
    for entry in entries:
        if isinstance(entry, str):
            if entry not in defaults:
                raise KnobError(
                    f"unknown scenario {entry!r}; default scenarios: {', '.join(defaults)}",
                    knob="scenarios",
                )
            scenarios.append(defaults[entry])
            continue
        if not isinstance(entry, Mapping) or not entry.get("slug"):
            raise KnobError(f"a scenario needs a slug; got {entry!r}", knob="scenarios")
        slug = str(entry["slug"])
        base = defaults.get(slug)
        try:
            persona = Persona.from_dict(entry["persona"]) if "persona" in entry else None
        except (TypeError, ValueError) as error:
            raise KnobError(f"scenario {slug!r}: {error}", knob="scenarios") from error
        if persona is None:
            if base is None:
                raise KnobError(f"scenario {slug!r} needs a persona", knob="scenarios")
            persona = base.persona
        if "seed" in entry:
            seed = entry["seed"]
        elif base is not None:
            seed = base.seed
        else:
            # A stable seed of the slug, so the same custom scenario always draws the same.
            seed = zlib.crc32(slug.encode())
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise KnobError(
                f"scenario {slug!r}: seed must be a whole number >= 0", knob="scenarios"
            )
        name = str(entry.get("name") or (base.name if base else slug))
        scenarios.append(Scenario(slug=slug, name=name, persona=persona, seed=seed))
    slugs = [scenario.slug for scenario in scenarios]
    if len(set(slugs)) != len(slugs):
        raise KnobError("each scenario may be listed once", knob="scenarios")
    return scenarios


def max_turns_from_spec(spec: Mapping[str, Any]) -> int:
    max_turns = spec.get("max_turns", DEFAULT_MAX_TURNS)
    if isinstance(max_turns, bool) or not isinstance(max_turns, int) or not 2 <= max_turns <= 30:
        raise KnobError(
            f"max_turns must be a whole number from 2 to 30; got {max_turns!r}", knob="max_turns"
        )
    return max_turns


def check_algorithm(spec: Mapping[str, Any], algorithm: str) -> None:
    """A spec for another algorithm is refused rather than run with the wrong trainer."""
    named = spec.get("algorithm")
    if named is not None and named != algorithm:
        raise KnobError(
            f"this trainer runs {algorithm!r}; the spec asks for {named!r}", knob="algorithm"
        )


def knobs_with_spec_seed(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The spec's knobs, with the spec's top-level seed filled in when the knobs have none."""
    knobs = spec.get("knobs") or {}
    if not isinstance(knobs, Mapping):
        raise KnobError(f"knobs must be an object of name: value; got {knobs!r}")
    knobs = dict(knobs)
    if "seed" not in knobs and spec.get("seed") is not None:
        knobs["seed"] = spec["seed"]
    return knobs


def scenario_rng(seed: int, scenario: Scenario) -> np.random.Generator:
    """One generator per (run seed, scenario seed): a scenario's result does not depend on
    which other scenarios share the run, or in which order."""
    return np.random.default_rng([seed, scenario.seed])


# --- Tables, the default table and the strategy ------------------------------------------


def table_from_scores(scores: np.ndarray, visited: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    """Best move per state by `scores` (S, A) where the state was visited; `fallback` (the
    parent's move) elsewhere. Ties go to the lowest move index, as in value iteration."""
    return np.where(visited, greedy_policy(scores), fallback).astype(np.int64)


def default_table(
    scores: Sequence[np.ndarray], visits: Sequence[np.ndarray], fallback: np.ndarray
) -> np.ndarray:
    """The table for a customer of unknown scenario. The belief over scenarios at a state is
    taken in proportion to how often each scenario's training reached it (visits, shape (S,)),
    and the move is the best of the belief-weighted scores (QMDP on that belief: it assumes
    the doubt clears after one move). The parent's move where no scenario went.

    Measured on the six default scenarios: the visit-weighted belief averages 4.04 exact
    return against 3.87 for a uniform belief and 3.82 for the scripted v1."""
    stacked = np.stack(scores)  # (K, S, A)
    weights = np.stack(visits).astype(np.float64)  # (K, S)
    counted = weights.sum(axis=0)
    mean = (stacked * weights[:, :, None]).sum(axis=0) / np.maximum(counted, 1e-12)[:, None]
    return table_from_scores(mean, counted > 0, fallback)


def table_strategy(default: np.ndarray, tables: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """A table move strategy (see trainers.moves.strategy), moves by name."""
    return {
        "kind": "table",
        "default": [MOVES[int(move)] for move in default],
        "tables": {slug: [MOVES[int(move)] for move in table] for slug, table in tables.items()},
    }


def parent_policy(
    parent_strategy: Mapping[str, Any] | None, *, scenario: str | None, max_turns: int
) -> np.ndarray:
    try:
        return strategy_policy_array(
            parent_strategy or SCRIPTED, scenario=scenario, max_turns=max_turns
        )
    except (ValueError, IndexError) as error:
        raise KnobError(f"parent_strategy: {error}", knob="parent_strategy") from error


# --- Exact report of a learned table -----------------------------------------------------

MAX_DIFFERING_MOVES = 20


def occupancy(world: LettingsWorld, policy: np.ndarray) -> np.ndarray:
    """Probability that a call under `policy` ever stands in each live state (the world is
    acyclic with the turn in the state, so each state is visited at most once)."""
    policy = np.asarray(policy, dtype=np.int64)
    chain = world.transitions[np.arange(world.n_states), policy]  # (S, S)
    live = ~world.terminal_mask
    mass = np.zeros(world.n_states)
    mass[world.initial_state] = 1.0
    total = mass.copy()
    for _ in range(world.max_turns):
        mass = (mass * live) @ chain
        total += mass * live
    return total


def differing_moves(
    world: LettingsWorld,
    solved: ValueIterationResult,
    learned: np.ndarray,
    *,
    limit: int = MAX_DIFFERING_MOVES,
) -> tuple[list[dict[str, Any]], int]:
    """Reachable states (under the optimal policy) where the learned move is worse than the
    optimal one, most costly first: cost = reach probability * (V*(s) - Q*(s, learned)).
    A learned move that ties the optimum is not a difference. Returns (rows, total count)."""
    reach = occupancy(world, solved.policy)
    states = np.arange(world.n_states)
    loss = solved.values - solved.q_values[states, learned]
    tolerance = TIE_TOLERANCE * (1.0 + np.abs(solved.values))
    worse = (reach > 0.0) & ~world.terminal_mask & (loss > tolerance)
    order = np.flatnonzero(worse)
    order = order[np.argsort(-(reach[order] * loss[order]), kind="stable")]
    rows = [
        {
            "state": describe_state(int(state), world.persona),
            "learned": MOVES[int(learned[state])],
            "optimal": MOVES[int(solved.policy[state])],
            "reach_probability": float(reach[state]),
            "value_lost": float(loss[state]),
        }
        for state in order[:limit]
    ]
    return rows, len(order)


def fraction_of_optimum(learned: float, optimal: float) -> float | None:
    """learned / optimal when the optimum is positive; None otherwise (see gap_to_optimum)."""
    return float(learned / optimal) if optimal > 0.0 else None


def scenario_report(
    world: LettingsWorld,
    scenario: Scenario,
    learned: np.ndarray,
    *,
    parent: np.ndarray,
    default: np.ndarray | None = None,
) -> dict[str, Any]:
    """Exact returns of the learned table, the optimum and the parent on one scenario."""
    solved = solve_world(world)
    start = world.initial_state

    def exact(policy: np.ndarray) -> float:
        values = policy_evaluation(world.transitions, world.rewards, policy, discount=1.0)
        return float(values[start])

    optimal = float(solved.values[start])
    learned_return = exact(learned)
    rows, count = differing_moves(world, solved, learned)
    report = {
        "slug": scenario.slug,
        "name": scenario.name,
        "persona": scenario.persona.to_dict(),
        "optimal_return": optimal,
        "learned_return": learned_return,
        "parent_return": exact(parent),
        "fraction_of_optimum": fraction_of_optimum(learned_return, optimal),
        "gap_to_optimum": optimal - learned_return,
        "differing_moves": rows,
        "n_differing_moves": count,
    }
    if default is not None:
        report["default_table_return"] = exact(default)
    return report


def summarise(reports: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    fractions = [r["fraction_of_optimum"] for r in reports if r["fraction_of_optimum"] is not None]
    return {
        "min_fraction_of_optimum": min(fractions) if fractions else None,
        "mean_fraction_of_optimum": float(np.mean(fractions)) if fractions else None,
        "mean_learned_return": float(np.mean([r["learned_return"] for r in reports])),
        "mean_optimal_return": float(np.mean([r["optimal_return"] for r in reports])),
        "mean_parent_return": float(np.mean([r["parent_return"] for r in reports])),
        "max_gap_to_optimum": float(max(r["gap_to_optimum"] for r in reports)),
    }


# --- Learning curves ---------------------------------------------------------------------

MAX_CURVE_POINTS = 200


def downsample_curve(
    episodes: Sequence[int], values: Sequence[float], *, points: int = MAX_CURVE_POINTS
) -> list[dict[str, float]]:
    """At most `points` {episode, mean_return}: batch means averaged over equal runs of
    batches, each point at the episode count where its run ends."""
    if not len(values):
        return []
    chunks = np.array_split(np.arange(len(values)), min(points, len(values)))
    episodes = np.asarray(episodes)
    values = np.asarray(values, dtype=np.float64)
    return [
        {"episode": int(episodes[chunk[-1]]), "mean_return": float(values[chunk].mean())}
        for chunk in chunks
    ]


def mean_curve(curves: Sequence[Sequence[Mapping[str, float]]]) -> list[dict[str, float]]:
    """The scenarios' curves averaged on a common episode grid (up to the shortest run)."""
    curves = [curve for curve in curves if curve]
    if not curves:
        return []
    last = min(curve[-1]["episode"] for curve in curves)
    first = max(curve[0]["episode"] for curve in curves)
    points = min(MAX_CURVE_POINTS, max(len(curve) for curve in curves))
    grid = np.unique(np.linspace(first, last, points).round().astype(np.int64))
    stacked = [
        np.interp(grid, [p["episode"] for p in curve], [p["mean_return"] for p in curve])
        for curve in curves
    ]
    mean = np.mean(stacked, axis=0)
    return [{"episode": int(e), "mean_return": float(v)} for e, v in zip(grid, mean, strict=True)]
