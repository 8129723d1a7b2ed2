"""The run a tabular learner on the simulator shares: q-learning-online and ppo differ only in
how one scenario is learned.

    run_tabular_learner(spec, progress, algorithm=..., config_type=..., steps_each=..., learn=...)

is the pipeline of both runs:

  1. ``learner_setup``: the spec checked (algorithm, knobs with the spec's seed, scenarios,
     max_turns, the parent's strategy);
  2. ``learn_each_scenario``: one world per scenario, learned by the learner's ``learn`` on
     the scenario's own generator, with progress counted over every scenario's steps;
  3. ``greedy_tables``: the best-scored move per visited state, the parent's move elsewhere,
     the ``default`` table for a customer of unknown scenario, and each table's exact report;
  4. ``learner_result``: the plain-value result both learners return, in one shape.

Pure Python + numpy; never imports Django.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from trainers.moves.common import (
    check_algorithm,
    config_from_knobs,
    default_table,
    downsample_curve,
    knobs_with_spec_seed,
    max_turns_from_spec,
    mean_curve,
    parent_policy,
    scenario_report,
    scenario_rng,
    scenarios_from_spec,
    summarise,
    table_from_scores,
    table_strategy,
)
from trainers.moves.simulator import LettingsWorld, Scenario
from trainers.moves.strategy import SCRIPTED
from trainers.runtime import Progress

# --- What a learner gives for one scenario -----------------------------------------------


@dataclass(frozen=True)
class Learned:
    """One scenario's learning, in the terms the tables and the report need."""

    scores: np.ndarray
    """(S, A): a state's learned move is its best-scored move (Q values, or logits)."""
    state_visits: np.ndarray
    """(S,): how often training stood in each state; unvisited ones keep the parent's move."""
    episodes: int
    """Simulated calls played."""
    curve_episodes: list[int]
    curve_returns: list[float]
    """Mean return of the calls played by each step, at the episode count it ended on."""
    metrics: dict[str, float] | None = None
    """The learner's own numbers for the scenario (PPO's clip fraction, KL, entropy)."""


StepReport = Callable[..., None]
"""(steps done in this scenario, **metrics): progress within one scenario."""

LearnScenario = Callable[[LettingsWorld, Any, np.random.Generator, float, StepReport], Learned]
"""(world, config, the scenario's generator, its time budget in seconds, report) -> Learned."""


@dataclass(frozen=True)
class LearnerSetup:
    """What the spec asks for, checked before anything is learned."""

    config: Any
    scenarios: list[Scenario]
    max_turns: int
    parent_strategy: Mapping[str, Any]

    @property
    def time_budget_per_scenario(self) -> float:
        """The run's wall-clock cap, shared evenly by the scenarios (0: no cap)."""
        return self.config.time_budget_s / len(self.scenarios)


@dataclass(frozen=True)
class ScenarioLearned:
    scenario: Scenario
    world: LettingsWorld
    learned: Learned
    curve: list[dict[str, float]]
    """The learning curve, downsampled for the page."""


@dataclass(frozen=True)
class GreedyTables:
    default: np.ndarray
    tables: dict[str, np.ndarray]
    reports: list[dict[str, Any]]


# --- The stages --------------------------------------------------------------------------


def learner_setup(spec: Mapping[str, Any], *, algorithm: str, config_type: type) -> LearnerSetup:
    check_algorithm(spec, algorithm)
    return LearnerSetup(
        config=config_from_knobs(config_type, knobs_with_spec_seed(spec), algorithm=algorithm),
        scenarios=scenarios_from_spec(spec),
        max_turns=max_turns_from_spec(spec),
        parent_strategy=spec.get("parent_strategy") or SCRIPTED,
    )


def _scenario_progress(progress: Progress, *, slug: str, offset: int, total: int) -> StepReport:
    def report(done: int, **metrics: Any) -> None:
        progress(offset + done, total, scenario=slug, **metrics)

    return report


def learn_each_scenario(
    setup: LearnerSetup, learn: LearnScenario, progress: Progress, *, steps_each: int
) -> list[ScenarioLearned]:
    """Each scenario learned on its own world and generator, one after the other."""
    total = steps_each * len(setup.scenarios)
    learned = []
    for position, scenario in enumerate(setup.scenarios):
        world = LettingsWorld(scenario.persona, max_turns=setup.max_turns)
        report = _scenario_progress(
            progress, slug=scenario.slug, offset=position * steps_each, total=total
        )
        outcome = learn(
            world,
            setup.config,
            scenario_rng(setup.config.seed, scenario),
            setup.time_budget_per_scenario,
            report,
        )
        curve = downsample_curve(outcome.curve_episodes, outcome.curve_returns)
        learned.append(ScenarioLearned(scenario, world, outcome, curve))
    return learned


def greedy_tables(setup: LearnerSetup, learned: list[ScenarioLearned]) -> GreedyTables:
    """The learned tables, the default table, and each scenario's exact report."""
    fallback_default = parent_policy(
        setup.parent_strategy, scenario=None, max_turns=setup.max_turns
    )
    default = default_table(
        [item.learned.scores for item in learned],
        [item.learned.state_visits for item in learned],
        fallback_default,
    )
    tables: dict[str, np.ndarray] = {}
    reports = []
    for item in learned:
        slug = item.scenario.slug
        parent = parent_policy(setup.parent_strategy, scenario=slug, max_turns=setup.max_turns)
        tables[slug] = table_from_scores(item.learned.scores, item.learned.state_visits > 0, parent)
        report = scenario_report(
            item.world, item.scenario, tables[slug], parent=parent, default=default
        )
        report["episodes"] = item.learned.episodes
        report["learning_curve"] = item.curve
        if item.learned.metrics is not None:
            report["metrics"] = item.learned.metrics
        reports.append(report)
    return GreedyTables(default=default, tables=tables, reports=reports)


def _mean_metrics(learned: list[ScenarioLearned]) -> dict[str, dict[str, float]]:
    """{"metrics": each metric averaged over the scenarios}, or {} for a learner without."""
    per_scenario = [item.learned.metrics for item in learned if item.learned.metrics is not None]
    if not per_scenario:
        return {}
    names = per_scenario[0]
    return {
        "metrics": {
            name: float(np.mean([metrics[name] for metrics in per_scenario])) for name in names
        }
    }


def learner_result(
    algorithm: str,
    setup: LearnerSetup,
    learned: list[ScenarioLearned],
    tables: GreedyTables,
    *,
    started: float,
) -> dict[str, Any]:
    return {
        "algorithm": algorithm,
        "strategy": table_strategy(tables.default, tables.tables),
        "scenarios": tables.reports,
        "summary": summarise(tables.reports),
        **_mean_metrics(learned),
        "learning_curve": mean_curve([item.curve for item in learned]),
        "curve": {"x": "episode", "y": "mean_return"},
        "knobs": asdict(setup.config),
        "seed": setup.config.seed,
        "max_turns": setup.max_turns,
        "seconds": time.perf_counter() - started,
    }


# --- The run -----------------------------------------------------------------------------


def run_tabular_learner(
    spec: Mapping[str, Any],
    progress: Progress,
    *,
    algorithm: str,
    config_type: type,
    steps_each: Callable[[Any], int],
    learn: LearnScenario,
) -> dict[str, Any]:
    """Learn one table per scenario with `learn` and report the tables exactly.
    `steps_each(config)` is how many progress steps one scenario takes."""
    started = time.perf_counter()
    setup = learner_setup(spec, algorithm=algorithm, config_type=config_type)
    steps = steps_each(setup.config)
    learned = learn_each_scenario(setup, learn, progress, steps_each=steps)
    tables = greedy_tables(setup, learned)
    total = steps * len(setup.scenarios)
    progress(total, total, stage="done")
    return learner_result(algorithm, setup, learned, tables, started=started)
