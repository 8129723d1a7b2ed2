"""Another business's lines against the real agent's reply at the same moments, with and without
the on-topic guard (trainers.judge.topic_guard), and how often the guard flags the real agent.

    python -m bench.on_topic [--seed 0] [--folds 5] [--base smollm2-135m-instruct]
                             [--lines lettings|other-calls] [--split-only]

The world is the demo's Persuasion world (data/real-calls/persuasionforgood: a
charity's real chats), built as a world is: its name, description, default system prompt and
generic moves. Its guard and its fitted judge (trainers.judge.fit on the calls' outcomes, as a
world's fit does) learn only from the calls Evaluate does not hold out, chosen as
arena.held_out chooses them (40 calls by a hash of their ids).

At every agent turn of the held-out calls, the real agent's reply meets each of the lettings
simulator's 22 agent lines plus "Would you like to arrange a viewing of the flat on Saturday?"
(another business's lines). Each judge (the rubric, the fitted judge) scores both, with and
without the guard; "real preferred" is the share of these meetings the real reply wins (a tie
counts half), with a 95% bootstrap interval over calls. "flagged" is the share of the real
agent's own replies at those moments that the guard calls off-topic (the false off-topic rate).

With --base, the fitted judge reads every reply with that base and its fit places the world's
answer floor on the guard's floor sample (as the product's fit does), so "fitted judge + guard"
also caps a reply whose words and answer to its call (trainers.judge.answers) are together rarer
than the world's own rarest 2% (trainers.judge.topic.joint_statistic); beside it, the same judge
with the guard's words only, and the rubric with the fitted version's answer check.

With --lines other-calls, the product split's foreign lines are 23 real agent lines of the
training calls instead (five words or more, drawn on the seed): they share every everyday word
of the world, so the guard's words let them through and only the answer check can tell them
from the real reply. Each row with the answer check is shown again over only the lines the
guard's words let through (with the lettings lines too).

With --folds K (default 5), the same figures over every call, each scored by a guard and a
fitted judge built on the other folds (by call), at each call's first four agent turns
(Evaluate's moments) for the meetings and at every agent turn for the false off-topic rate.

The reverse: in the Lettings world (its description, moves and the simulator's agent lines, as
its guard is built in the product), the simulator's own reply at moments of simulated calls
meets 23 persuasion agent lines; the rubric scores (no fitted judge: the world has no labels).
The lettings lines are the guard's own units there, so that row is in-sample.

Nothing here sets a threshold: the guard's is the world's own (trainers.judge.topic).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from levers9.shipped_data import PERSUASION_CALLS

ROOT = Path(__file__).resolve().parent.parent
FEATURES = ROOT / "var" / "features-bench"
VIEWING = "Would you like to arrange a viewing of the flat on Saturday?"
BOOTSTRAP = 1000


def _setup() -> None:
    # Only to read the app's world defaults (no database is touched).
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()


def _calls() -> list[dict[str, Any]]:
    return [json.loads(line) for line in PERSUASION_CALLS.read_text().splitlines() if line.strip()]


def held_out_ids(calls: Sequence[dict[str, Any]]) -> set[str]:
    """The calls arena.held_out.real_calls_choose would hold out of this world."""
    from arena.held_out import HELD_OUT_CALLS, TURNS_PER_CALL, _call_order_key

    def agent_turns(call: dict[str, Any]) -> int:
        return sum(turn["speaker"] == "agent" for turn in call["turns"])

    eligible = [call for call in calls if agent_turns(call) >= 1]
    eligible.sort(key=lambda c: (agent_turns(c) < TURNS_PER_CALL, _call_order_key(c["id"])))
    return {call["id"] for call in eligible[:HELD_OUT_CALLS]}


def units_of(calls: Sequence[dict[str, Any]], *, opening: int | None = None) -> list[Any]:
    """Each agent turn (the first `opening` of a call, if given) with the call so far."""
    from trainers.judge.topic import TopicUnit

    units = []
    for call in calls:
        seen = 0
        for index, turn in enumerate(call["turns"]):
            if turn["speaker"] != "agent":
                continue
            seen += 1
            if opening is not None and seen > opening:
                break
            units.append(TopicUnit(call["id"], tuple(call["turns"][:index]), turn["text"]))
    return units


def lettings_lines() -> list[str]:
    from trainers.moves.simulator_wording import AGENT_LINES, OBJECTION_ANSWERS

    return [*AGENT_LINES.values(), *OBJECTION_ANSWERS.values()]


def persuasion_world_guard(train: Sequence[dict[str, Any]]) -> Any:
    from arena.judge.world_topic_guard import topic_texts
    from arena.models import World
    from arena.moves import generic_moves
    from trainers.judge.topic import topic_model_fit
    from trainers.judge.topic_guard import TopicGuard

    world = World(
        name="Persuasion for Good (real calls)",
        description="1,017 real recorded persuasion chats with their real outcome "
        "(won = the persuadee donated). Wang et al., ACL 2019, Apache-2.0.",
        moves=generic_moves(),
    )
    units = units_of(train)
    return TopicGuard(topic_model_fit(topic_texts(world), units), units)


def fitted_judge(
    train: Sequence[dict[str, Any]], seed: int, base: str = "", guard: Any = None
) -> Any:
    """The world's fitted judge on these calls' outcomes; with `base`, reading every reply with
    it (the learned scorer, features cached in var/features-bench) and, as the product's fit
    does, reading the `guard`'s floor sample ahead, which places the world's answer floor."""
    from trainers.judge.fit import JudgeFitSpec, fit
    from trainers.judge.fitted_judge import FittedJudge, outcome_rows
    from trainers.judge.rubric import DIMENSIONS
    from trainers.reading.base_features import BaseReader

    folders = {"models_dir": str(ROOT / "var/models"), "features_dir": str(FEATURES)}
    spec = JudgeFitSpec(
        dimensions=list(DIMENSIONS),
        pairs=[],
        overrides=[],
        outcomes=outcome_rows(train),
        seed=seed,
        base=base,
        also_read=[
            {"context": [dict(turn) for turn in unit.context], "reply": unit.reply}
            for unit in (guard.floor_sample() if guard is not None and base else [])
        ],
        **folders,
    )
    model, _report = fit(spec)
    reader = BaseReader(base, **folders) if base else None
    return FittedJudge(model, model_name="fitted (bench)", reader=reader)


def _totals(judge: Any, items: list[tuple[Sequence[Any], str]]) -> np.ndarray:
    from trainers.judge.rubric import Turn

    if hasattr(judge, "score_many"):
        return np.asarray([r["total"] for r in judge.score_many(items, digits=None)])
    return np.asarray(
        [judge.score([Turn(t["speaker"], t["text"]) for t in c], r).total for c, r in items]
    )


@dataclasses.dataclass
class Meetings:
    """Per row and meeting: the call, whether the real reply won (1, 0.5 for a tie, 0)."""

    calls: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    won: dict[str, list[float]] = dataclasses.field(default_factory=dict)

    def add(
        self,
        name: str,
        real: np.ndarray,
        other: np.ndarray,
        calls: Sequence[str],
        kept: np.ndarray | None = None,
    ) -> None:
        """The meetings of one row (only those `kept`, where given)."""
        result = np.where(
            real > other + 1e-12, 1.0, np.where(np.abs(real - other) <= 1e-12, 0.5, 0)
        )
        kept = np.ones(len(result), dtype=bool) if kept is None else kept
        self.won.setdefault(name, []).extend(result[kept].tolist())
        self.calls.setdefault(name, []).extend(np.asarray(calls)[kept].tolist())


def meet(
    judges: dict[str, Any], guard: Any, units: Sequence[Any], lines: Sequence[str], into: Meetings
) -> None:
    """Score each unit's real reply and every line at that unit's moment with every judge,
    then with the guard on (trainers.judge.topic_guard's cap, each total scored once)."""
    real_items = [(unit.context, unit.reply) for unit in units]
    line_items = [(unit.context, line) for unit in units for line in lines]
    calls = [unit.group for unit in units for _line in lines]
    # The lines the guard's words let through: where only the answer check can cap them.
    words_pass = ~_off(guard, line_items)
    # A judge that reads with a base brings the world's answer check (trainers.judge.answers).
    checks = [getattr(judge, "answer_check", None) for judge in judges.values()]
    check = next((each for each in checks if each is not None), None)
    for name, judge in judges.items():
        real = np.repeat(_totals(judge, real_items), len(lines))
        other = _totals(judge, line_items)
        into.add(name, real, other, calls)
        capped = guard.capped(1.0, judge)  # the cap is floor x total x 0.99: a factor
        # What the product runs (with the judge's own answer check where it has one) and,
        # beside it, the guard's words alone for the fitted judge, and the fitted version's
        # check on the rubric's totals (not how the product runs the rubric).
        own = getattr(judge, "answer_check", None)
        ways = {" + guard": own}
        if check is not None and own is not None:
            ways[" + guard, words only"] = None
        elif check is not None:
            ways[" + guard + the fitted answer check"] = check
        for label, used in ways.items():
            real_off = np.repeat(_off(guard, real_items, used), len(lines))
            line_off = _off(guard, line_items, used)
            real_scored = np.where(real_off, real * capped, real)
            line_scored = np.where(line_off, other * capped, other)
            into.add(name + label, real_scored, line_scored, calls)
            if used is not None:
                label += ", lines the words let through"
                into.add(name + label, real_scored, line_scored, calls, words_pass)


def _off(guard: Any, items: Sequence[tuple[Sequence[Any], str]], check: Any = None) -> np.ndarray:
    return np.asarray([not verdict.on_topic for verdict in guard.verdicts(items, check)])


def by_call_interval(
    groups: Sequence[str], values: Sequence[float], *, seed: int
) -> tuple[float, float, float]:
    """The mean and its 95% bootstrap interval, resampling calls whole."""
    per_call: dict[str, list[float]] = {}
    for group, value in zip(groups, values, strict=True):
        per_call.setdefault(group, []).append(float(value))
    sums = np.asarray([sum(v) for v in per_call.values()])
    counts = np.asarray([len(v) for v in per_call.values()])
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(BOOTSTRAP):
        pick = rng.integers(0, len(sums), len(sums))
        draws.append(sums[pick].sum() / counts[pick].sum())
    return sums.sum() / counts.sum(), *np.percentile(draws, [2.5, 97.5])


def _row(label: str, groups: Sequence[str], values: Sequence[float], seed: int) -> str:
    mean, low, high = by_call_interval(groups, values, seed=seed)
    calls = len(set(groups))
    return f"  {label:<44}{mean:6.3f} [{low:.3f}, {high:.3f}]   n={len(values)} ({calls} calls)"


def judges_for(fitted: Any | None) -> dict[str, Any]:
    from trainers.judge.rubric import RubricJudge

    return {"rubric": RubricJudge()} | ({"fitted judge": fitted} if fitted is not None else {})


def flagged(guard: Any, units: Sequence[Any], check: Any = None) -> list[float]:
    return _off(guard, [(u.context, u.reply) for u in units], check).astype(float).tolist()


def own_lines(calls: Sequence[dict[str, Any]], seed: int, count: int = 23) -> list[str]:
    """`count` real agent lines of these calls (five words or more), drawn on `seed`: lines
    that share every everyday word of the world but were said in another call."""
    rng = np.random.default_rng(seed)
    pool = [u.reply for u in units_of(calls) if len(u.reply.split()) >= 5]
    return [pool[i] for i in rng.choice(len(pool), count, replace=False)]


def product_split(
    calls: list[dict[str, Any]], seed: int, base: str = "", foreign: str = "lettings"
) -> None:
    held = held_out_ids(calls)
    train = [call for call in calls if call["id"] not in held]
    test = [call for call in calls if call["id"] in held]
    started = time.monotonic()
    guard = persuasion_world_guard(train)
    guard_seconds = time.monotonic() - started
    fitted = fitted_judge(train, seed, base, guard)
    # With a base, Evaluate's moments only (each call's first four agent turns): every line at
    # every turn would be hours of reading on two cores.
    units = units_of(test, opening=4 if base else None)
    check = fitted.answer_check
    if base:
        print(f"the fitted judge reads each reply with {base} (its total: {fitted.scorer})")
        floor = f"{check.floor:.3f}" if check is not None else "none (too few own turns)"
        print(f"its answer check's floor, from the world's own turns: {floor}")
    lines = [*lettings_lines(), VIEWING] if foreign == "lettings" else own_lines(train, seed)
    meetings = Meetings()
    meet(judges_for(fitted), guard, units, lines, meetings)
    print(f"Persuasion world, the product's split: guard built on {len(train)} calls in ")
    print(
        f"{guard_seconds:.1f} s (threshold {guard.model.threshold:.2f}, {guard.model.units} own "
        f"turns); {len(units)} moments of the {len(test)} held-out calls × {len(lines)} lines"
    )
    print(
        "real agent's reply preferred over "
        + ("another business's line:" if foreign == "lettings" else "another call's real line:")
    )
    for name, won in meetings.won.items():
        print(_row(name, meetings.calls[name], won, seed))
    groups = [unit.group for unit in units]
    print(_row("guard flags the real reply (false off-topic)", groups, flagged(guard, units), seed))
    if check is not None:
        flags = flagged(guard, units, check)
        print(_row("guard + answer check flags the real reply", groups, flags, seed))
    print("each line: the share of these moments where the guard calls it off-topic")
    print("  (words alone" + (" | with the fitted judge's answer check)" if check else ")"))
    for line in lines:
        moments = [dataclasses.replace(u, reply=line) for u in units]
        share = f"{np.mean(flagged(guard, moments)):5.2f}"
        if check is not None:
            share += f" | {np.mean(flagged(guard, moments, check)):5.2f}"
        print(f"  {share}  {line[:80]}")


def cross_fitted(calls: list[dict[str, Any]], folds: int, seed: int) -> None:
    from trainers.judge.topic import _fold

    lines = [*lettings_lines(), VIEWING]
    meetings = Meetings()
    false_groups: list[str] = []
    false_flags: list[float] = []
    for fold in range(folds):
        train = [call for call in calls if _fold(call["id"], folds) != fold]
        test = [call for call in calls if _fold(call["id"], folds) == fold]
        guard = persuasion_world_guard(train)
        meet(
            judges_for(fitted_judge(train, seed)),
            guard,
            units_of(test, opening=4),
            lines,
            meetings,
        )
        every = units_of(test)
        false_groups += [unit.group for unit in every]
        false_flags += flagged(guard, every)
    print()
    print(f"Persuasion world, {folds} folds by call over all {len(calls)} calls (openings):")
    for name, won in meetings.won.items():
        print(_row(name, meetings.calls[name], won, seed))
    print(_row("guard flags the real reply (every agent turn)", false_groups, false_flags, seed))


def lettings_reverse(calls: list[dict[str, Any]], seed: int) -> None:
    from arena.judge.world_topic_guard import topic_texts
    from arena.models import World
    from arena.moves import lettings_moves
    from trainers.judge.topic import TopicUnit, topic_model_fit
    from trainers.judge.topic_guard import TopicGuard
    from trainers.moves.simulator import (
        DEFAULT_SCENARIOS,
        LettingsWorld,
        episode_dialogue,
        run_episode,
    )
    from trainers.moves.strategy import SCRIPTED, strategy_policy_array

    world = World(
        name="Lettings",
        description="A letting agent on the phone with people looking to rent. "
        "Customers are simulated personas on fixed seeds.",
        moves=lettings_moves(),
    )
    own = [TopicUnit(f"line-{n}", (), line) for n, line in enumerate(lettings_lines())]
    guard = TopicGuard(topic_model_fit(topic_texts(world), own), own)
    units = []
    for number, scenario in enumerate(DEFAULT_SCENARIOS):
        simulated = LettingsWorld(scenario.persona)
        policy = strategy_policy_array(
            SCRIPTED, scenario=scenario.slug, max_turns=simulated.max_turns
        )
        for episode_seed in range(5):
            played = seed * 1000 + number * 10 + episode_seed
            episode = run_episode(simulated, policy, played)
            dialogue = episode_dialogue(simulated, episode, played)
            group = f"{scenario.slug}-{episode_seed}"
            for index, turn in enumerate(dialogue):
                if turn["speaker"] == "agent":
                    units.append(TopicUnit(group, tuple(dialogue[:index]), turn["text"]))
    lines = own_lines(calls, seed)
    meetings = Meetings()
    meet(judges_for(None), guard, units, lines, meetings)
    print()
    print(
        f"Lettings world (simulator; guard threshold {guard.model.threshold:.2f}): {len(units)} "
        f"moments "
        f"of {len(set(u.group for u in units))} simulated calls × 23 persuasion agent lines"
    )
    for name, won in meetings.won.items():
        print(_row(name, meetings.calls[name], won, seed))
    groups = [unit.group for unit in units]
    print(
        _row("guard flags the simulator's reply (in-sample)", groups, flagged(guard, units), seed)
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--folds", type=int, default=5, help="0 to skip the cross-fitted run")
    parser.add_argument(
        "--base",
        default="",
        help="the fitted judge reads replies with this base (the product split)",
    )
    parser.add_argument(
        "--lines",
        choices=("lettings", "other-calls"),
        default="lettings",
        help="the product split's foreign lines: the lettings simulator's, or 23 real agent "
        "lines of the training calls (the world's own words, said in another call)",
    )
    parser.add_argument(
        "--split-only", action="store_true", help="the product split alone (no folds, no reverse)"
    )
    arguments = parser.parse_args(argv)
    _setup()
    calls = _calls()
    started = time.monotonic()
    product_split(calls, arguments.seed, arguments.base, arguments.lines)
    if arguments.folds and not arguments.split_only:
        cross_fitted(calls, arguments.folds, arguments.seed)
    if not arguments.split_only:
        lettings_reverse(calls, arguments.seed)
    print(f"\n({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
