"""Reads of the policy registry: pure reads.

The registry is kept in step with the endpoints by the writes (policies.endpoints:
endpoints_reconcile runs when a serve job ends, when an endpoint row is deleted, and on each
look of the job watcher), so a read never frees cards or cancels jobs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from arena.models import World
from arena.selectors import (
    WORLD_RECORDED,
    WORLD_SIMULATED,
    WorldDescription,
    world_description,
)
from levers9.jobs.kinds import JobAbout
from policies.models import Endpoint, PolicyVersion
from trainers.registry import OFFLINE_OUTCOME, PPO, Q_LEARNING_ONLINE, RLHF, trainer_label
from trainers.results import (
    MoveStrategyResult,
    OfflineMovesResult,
    RlhfResult,
    VersionRecord,
    WordingResult,
)


def policy_live(*, world: World) -> PolicyVersion | None:
    """The version taking `world`'s live calls: the one made live last there; its v1 ·
    baseline before any was."""
    from policies.live import live_version

    return live_version(world=world)


@dataclass(frozen=True)
class VersionAnswers:
    """How a version answers in its world, in words: `runs_on` names it in a cell, `how` says
    what its replies are (empty where `runs_on` says it all)."""

    runs_on: str
    how: str = ""


def simulator_answers(*, described: WorldDescription, strategy: str = "scripted") -> VersionAnswers:
    """What a version on the simulator answers with in the described world, its move
    strategy of kind `strategy` ("scripted": the hand-written rules)."""
    name = described.world.name
    if described.kind == WORLD_SIMULATED:
        how = (
            "scripted move rules and wording"
            if strategy == "scripted"
            else "its learned move strategy, in the simulator's scripted words"
        )
        return VersionAnswers(runs_on=PolicyVersion.Provider.SIMULATOR.label, how=how)
    if described.kind == WORLD_RECORDED:
        how = f"the real agents' replies from {name}'s other calls"
        if strategy == "outcome":  # policies.agents: its strategy's move first
            how += ", making the move its strategy chooses"
        calls = f"{described.call_count} call" + ("" if described.call_count == 1 else "s")
        return VersionAnswers(runs_on=f"Recorded replies ({calls})", how=how)
    return VersionAnswers(
        runs_on="Recorded replies (no calls yet)",
        how=f"nothing until calls are imported (it answers from {name}'s recorded calls)",
    )


def version_answers(version: PolicyVersion, *, described: WorldDescription) -> VersionAnswers:
    """The one answer to "what does this version answer with here", for the header's badge,
    Home and the Policies page alike. A simulator version answers as policies.agents makes it:
    scripted words where the world has a simulator, else the real agents' replies from the
    world's other recorded calls (the most similar moment; a learned strategy's move first),
    and nothing where there are no calls yet."""
    if version.provider == PolicyVersion.Provider.SIMULATOR:
        strategy = (version.move_strategy or {}).get("kind", "scripted")
        return simulator_answers(described=described, strategy=strategy)
    runs_on = version.get_provider_display()
    if version.provider in (
        PolicyVersion.Provider.VLLM,
        PolicyVersion.Provider.OPENAI,
        PolicyVersion.Provider.ANTHROPIC,
    ):
        runs_on += f" {version.lora_adapter or version.provider_model}"
    return VersionAnswers(runs_on=runs_on)


def policy_agent_label(version: PolicyVersion | None, *, world: World | None = None) -> str:
    """Who the agent is, for the header badge: the version and what it answers with in the
    world (version_answers: in a world with no simulator a simulator version answers from the
    world's recorded calls, and the badge says so)."""
    if version is None:
        return "no version yet"
    described = world_description(world or version.world)
    answers = version_answers(version, described=described)
    # Where no simulator plays, "on Simulator" would mislead: say what it answers with.
    if answers.how and described.kind != WORLD_SIMULATED:
        label = f"{version.label}: {answers.how}"
    else:
        label = f"{version.label} on {answers.runs_on}"
    if not version.can_answer:
        label += f" ({version.get_status_display().lower()})"
    return label


def policies_answering(*, world: World) -> list[PolicyVersion]:
    """`world`'s versions that can answer, newest first: what the Duel, Train and Evaluate
    pick from (each world's own, never another's)."""
    from policies.agents import RegistryAgents

    return RegistryAgents().answering(world=world)


def policy_version_numbered(*, world: World, number: int) -> PolicyVersion | None:
    """`world`'s version with this number (each world numbers its own), or None."""
    return PolicyVersion.objects.filter(world=world, number=number).first()


def version_lineage(version: PolicyVersion, *, known: dict[int, PolicyVersion] | None = None):
    """The version and its ancestors, newest first (v5 ← v3 ← v1)."""
    known = known or {}
    chain = [version]
    seen = {version.pk}
    parent_id = version.parent_id
    while parent_id and parent_id not in seen:
        parent = known.get(parent_id) or PolicyVersion.objects.filter(pk=parent_id).first()
        if parent is None:
            break
        chain.append(parent)
        seen.add(parent.pk)
        parent_id = parent.parent_id
    return chain


@dataclass(frozen=True)
class VersionRow:
    """One version as the Policies page shows it."""

    version: PolicyVersion
    lineage: list[PolicyVersion]
    endpoint: Endpoint | None  # the live (or else the newest) endpoint of a trained version
    # The last evaluation against its parent: {"summary": "...", "lost": bool} or None.
    evaluation: dict | None = None
    # How long the job that made it ran, in seconds (None: not trained, or not known).
    trained_seconds: float | None = None
    # What it answers with in its world (version_answers), as the header says it.
    answers: VersionAnswers | None = None
    # What Make live warns of (policies.live.make_live_warnings), where a page asked.
    make_live_warnings: list[str] = field(default_factory=list)

    @property
    def facts(self) -> list[tuple[str, str]]:
        return learned_facts(self.version.learned)

    @property
    def against_base(self) -> str:
        """A wording version against its own base untrained, in one line ("" before it was
        measured, or for a version with no base)."""
        return against_base_words(getattr(self.version.learned, "against_base", None))

    @property
    def summary(self) -> str:
        return learned_summary(
            self.version, trained_seconds=self.trained_seconds, answers=self.answers
        )

    @property
    def description(self) -> str:
        """The version's description, less the baseline's text shared by every world (it
        says both ways v1 may answer; `summary` says the one of this world)."""
        from policies.services import BASELINE_DESCRIPTION

        text = self.version.description
        return "" if text == BASELINE_DESCRIPTION else text


# What the Policies page says a version learned from, in this order; other keys follow.
_FACT_ORDER = (
    "algorithm",
    "base",
    "preference_version",
    "pairs",
    "reward_source",
    "outcome_examples",
    "held_out_accuracy",
    "held_out_auc",
    "metrics",
    "epochs",
    "seed",
    "job",
)
# Shown elsewhere on the row (the weights under "Runs on") or too long to read in a cell.
_FACT_SKIP = {
    "did_not_learn",
    "against_base",
    "merged_weights",
    "reward_adapter",
    "returns",
    "kind",
    "method",
    "gpu",
    "curve",
}


def against_base_words(against: dict[str, Any] | None) -> str:
    """ "Against its base untrained (smollm2-135m-instruct, no adapter): preferred 0.62 [0.55,
    0.70] of the time on 40 held-out calls by <judge>, beyond its interval; its replies are
    2.3× the base's length (…)." — the record's against_base as the Policies page says it
    ("" when not measured)."""
    if not against or against.get("win_rate") is None:
        return ""
    words = (
        f"Against its base untrained ({against.get('base')}, no adapter): preferred "
        f"{_figure('', against['win_rate'], against.get('interval')).strip()} of the time on "
        f"{against.get('calls')} {against.get('unit') or 'held-out calls'} "
        f"by {against.get('judge') or 'the judge'}, "
        + ("beyond its interval" if against.get("beats_base") else "not beyond its interval")
    )
    notes = [str(note) for note in against.get("notes") or []]
    return words + "".join(f"; {note}" for note in notes) + "."


def _interval(bounds: Any) -> str:
    """The text after a measured figure: its bootstrap interval, or "" without one."""
    if (
        isinstance(bounds, list)
        and len(bounds) == 2
        and all(isinstance(bound, int | float) for bound in bounds)
    ):
        return f" [{bounds[0]:.3g}, {bounds[1]:.3g}]"
    return ""


def _fact_value(value: Any, bounds: Any = None) -> str:
    if isinstance(value, bool) or value is None:
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:.3g}" + _interval(bounds)
    if isinstance(value, dict):
        # A figure and its interval (`x` and `x_ci`) read as one: "x 0.55 [0.35, 0.75]".
        return ", ".join(
            f"{key.replace('_', ' ')} {_fact_value(inner, value.get(f'{key}_ci'))}"
            for key, inner in value.items()
            if inner is not None and key not in _FACT_SKIP and not isinstance(inner, list | dict)
        )
    if isinstance(value, list):
        return f"{len(value)} items"
    return str(value)


def _bounds_of(learned: VersionRecord, key: str) -> Any:
    """A top-level figure's interval, where the trainer kept it: among the metrics, or in the
    reward model's record (the held-out AUC of an outcome reward). (No record keeps one beside
    the figure.)"""
    metrics = learned.metrics if isinstance(learned, WordingResult) else None
    reward_model = learned.reward_model if isinstance(learned, RlhfResult) else None
    for record in (metrics, reward_model):
        if isinstance(record, dict) and record.get(f"{key}_ci") is not None:
            return record[f"{key}_ci"]
    return None


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _figure(name: str, value: Any, bounds: Any) -> str:
    """ "name 0.62 [0.55, 0.70]": a measured figure with its interval, "" without a number."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return ""
    return f"{name} {value:.2f}" + (
        f" [{bounds[0]:.2f}, {bounds[1]:.2f}]" if _interval(bounds) else ""
    )


def learned_summary(
    version: PolicyVersion,
    *,
    trained_seconds: float | None = None,
    answers: VersionAnswers | None = None,
) -> str:
    """What made a version, in one readable line: "Q-learning on Lettings's simulator,
    2 min, seed 7, from v1", or "RLHF on SmolLM2-135M from preference v3 (200 pairs), from
    v1; reward model held-out accuracy 0.62 [0.55, 0.70]". Each measured figure keeps its
    interval; the full settings stay in learned_facts. The hand-written start says what it
    answers with in its world (`answers`, version_answers; read here when not given)."""
    learned = version.learned
    if learned.is_hand_written or version.number == 1 and not learned.job:
        if answers is None:
            answers = version_answers(version, described=world_description(version.world))
        return f"Hand-written start: {answers.how or answers.runs_on}."
    algorithm = learned.algorithm
    if not algorithm:
        return ""
    name = trainer_label(algorithm)
    world = version.world.name if version.world_id else "its world"
    parent = f"from v{version.parent.number}" if version.parent_id else ""
    seed = learned.seed
    run = [_duration(trained_seconds), f"seed {seed}" if seed is not None else "", parent]
    measured: list[str] = []
    if algorithm in (Q_LEARNING_ONLINE, PPO) and isinstance(learned, MoveStrategyResult):
        head = f"{name} on {world}'s simulator"
        share = learned.mean_fraction_of_optimum
        if share is not None:
            measured.append(f"reaches {share:.0%} of the best return on its scenarios")
    elif algorithm == OFFLINE_OUTCOME and isinstance(learned, OfflineMovesResult):
        head = f"{name} on {learned.trained_calls or 'the'} labelled real calls of {world}"
        interval = learned.interval or {}
        difference = learned.difference
        if isinstance(difference, int | float):
            bounds = [interval.get("low"), interval.get("high")]
            measured.append(
                _figure(
                    f"won-share difference on {learned.held_out_calls} held-out calls",
                    difference,
                    bounds,
                )
                + (f" ({learned.trust})" if learned.trust else "")
            )
    elif isinstance(learned, WordingResult):
        head = _wording_head(learned, name)
        reward_model = (learned.reward_model if isinstance(learned, RlhfResult) else None) or {}
        for key, label, figure in (
            ("held_out_accuracy", "accuracy", learned.held_out_accuracy),
            ("held_out_auc", "AUC", learned.held_out_auc),
        ):
            # The record's own figure where it holds the key (None included), else the reward
            # model's.
            value = figure if learned.holds(key) else reward_model.get(key)
            text = _figure(label, value, _bounds_of(learned, key))
            if text:
                who = "reward model" if algorithm == RLHF else "preferred reply"
                measured.append(f"{who} held-out {text}")
        metrics = learned.metrics or {}
        gain = _figure("reward gain", metrics.get("reward_gain"), metrics.get("reward_gain_ci"))
        if gain:
            measured.append(gain)
    else:
        # A move reward model planned into a table: no base, no picks.
        head = f"{name} on its base"
    line = ", ".join(part for part in [head, *run] if part)
    measured = [part for part in measured if part]
    return line + ("; " + "; ".join(measured) if measured else "")


def _wording_head(learned: WordingResult, name: str) -> str:
    """ "RLHF on SmolLM2-135M from preference v3 (200 pairs)": the base and what it learned
    from."""
    head = f"{name} on {learned.base or 'its base'}"
    if learned.reward_source == "outcomes":
        return head + f" from the outcomes of {learned.outcome_examples or 'real'} calls"
    if learned.preference_version:
        head += f" from preference v{learned.preference_version}"
        head += f" ({learned.pairs_total} pairs)" if learned.pairs_total is not None else ""
    return head


def learned_facts(learned: VersionRecord) -> list[tuple[str, str]]:
    """A version's record as (label, text) pairs a person can read: nested numbers flattened,
    floats to three figures with their intervals, paths and raw curves left out."""
    learned_from = learned.to_dict()
    keys = [key for key in _FACT_ORDER if key in learned_from]
    keys += sorted(key for key in learned_from if key not in _FACT_ORDER)
    facts = []
    for key in keys:
        value = learned_from[key]
        if key in _FACT_SKIP or value is None or value == {} or value == []:
            continue
        if key.endswith("_ci") and key.removesuffix("_ci") in learned_from:
            continue  # shown with its figure
        if key == "preference_version":
            facts.append(("picks", f"preference v{value}"))
            continue
        text = _fact_value(value, _bounds_of(learned, key))
        if text:
            facts.append((key.replace("_", " "), text))
    return facts


# What Evaluate says of each version ({version id: {"summary", "lost", ...}}): evaluation
# lives above the registry and registers its reader here (evaluation.apps).
_verdicts: list[Any] = []


def version_verdicts_register(read: Any) -> None:
    _verdicts[:] = [read]


def versions_with_verdicts(*, world: World | None) -> list[VersionRow]:
    """The version rows of `world` (of every world: None), each with its last evaluation's
    verdict when Evaluate has one."""
    import dataclasses

    rows = versions_list(world=world)
    if not _verdicts:
        return rows
    verdicts = _verdicts[0]()
    return [dataclasses.replace(row, evaluation=verdicts.get(row.version.pk)) for row in rows]


def versions_list(*, world: World | None) -> list[VersionRow]:
    """`world`'s versions (every world's: None), newest first, with their lineage and
    endpoint."""
    versions = PolicyVersion.objects.select_related("world", "parent").order_by(
        "-number", "world__name"
    )
    if world is not None:
        versions = versions.filter(world=world)
    versions = list(versions)
    by_id = {version.pk: version for version in versions}
    newest_endpoint: dict[int, Endpoint] = {}
    for endpoint in Endpoint.objects.order_by("created_at", "id"):
        current = newest_endpoint.get(endpoint.version_id)
        if current is None or not current.is_live:
            newest_endpoint[endpoint.version_id] = endpoint
    seconds = _trained_seconds(versions)
    # Each world described once (a count of its calls), however many versions it has.
    worlds = {version.world_id: version.world for version in versions}
    described = {world_id: world_description(world) for world_id, world in worlds.items()}
    return [
        VersionRow(
            version=version,
            lineage=version_lineage(version, known=by_id),
            endpoint=newest_endpoint.get(version.pk),
            trained_seconds=seconds.get(version.pk),
            answers=version_answers(version, described=described[version.world_id]),
        )
        for version in versions
    ]


def _trained_seconds(versions: list[PolicyVersion]) -> dict[int, float]:
    """How long the job that produced each version ran (started to finished), by version: the
    job its `learned_from` names (the training's own table is above the registry)."""
    from levers9.jobs.models import Job

    made_by = {version.pk: version.learned.job for version in versions}
    job_ids = {job: version_id for version_id, job in made_by.items() if isinstance(job, int)}
    seconds: dict[int, float] = {}
    for job_id, started, finished in Job.objects.filter(
        pk__in=job_ids, started_at__isnull=False, finished_at__isnull=False
    ).values_list("pk", "started_at", "finished_at"):
        seconds[job_ids[job_id]] = (finished - started).total_seconds()
    return seconds


def serve_jobs_about(jobs: list[Any]) -> dict[int, JobAbout]:
    """What a serve job is about, for the jobs' pages and API: the version its endpoint
    serves (the job's parent), and the endpoint its finish reads."""
    endpoints = Endpoint.objects.filter(job_id__in=[job.pk for job in jobs]).select_related(
        "version"
    )
    return {
        endpoint.job_id: JobAbout(
            parent_version=endpoint.version,
            finish_needs={"endpoint": endpoint.pk, "version": endpoint.version.number},
        )
        for endpoint in endpoints
    }


def endpoints_list() -> list[Endpoint]:
    """Every endpoint, newest first, with its version."""
    return list(Endpoint.objects.select_related("version__world").order_by("-created_at", "-id"))
