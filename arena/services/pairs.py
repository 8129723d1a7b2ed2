"""The Duel's pair making: which versions answer, candidate replies from real calls
or simulated episodes, the judge's best-against-worst drafts, saving a batch, and asking
for pairs now or (when a model answers, or the judge reads with a base) as a job with its
progress (kind "duel-pairs", registered in arena.apps). Workspace schema."""

from __future__ import annotations

import hashlib
import secrets
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.db import transaction
from django.db.models import CharField as CharFieldType
from django.db.models import Exists, OuterRef, QuerySet
from django.db.models.functions import MD5, Cast

from arena import preference_format
from arena.agents import AgentCannotAnswer, agents
from arena.errors import DuelBadInput, DuelConflict
from arena.held_out import held_out_call_ids
from arena.job_worlds import arena_job_start
from arena.judge.world_judge import judge_for_world, judge_reads_with_a_base
from arena.models import (
    Call,
    DuelPair,
    JobWorld,
    Judgement,
    Moment,
    Reply,
    Scenario,
    Turn,
    World,
)
from arena.selectors import policy_versions_numbered
from arena.services._common import _advisory_lock
from arena.services.move_labels import calls_label_moves
from levers9.jobs.models import Job
from levers9.models import GpuPool
from levers9.pools import pool_default
from trainers.judge.rubric import Turn as JudgeTurn
from trainers.moves.simulator import (
    MOVES,
    LettingsWorld,
    Persona,
    describe_state,
    episode_dialogue,
    run_episode,
    scripted_reply,
)

# How many pairs one generation makes: enough for a sitting, quick enough for a request.
PAIR_BATCH = 40
# Every fifth pair asks for a second reviewer, so reviewer agreement can be measured.
SECOND_OPINION_EVERY = 5


def duel_versions(*, world: World, versions: Sequence[Any] | None = None) -> list[Any]:
    """The versions that answer in the world's Duel: those the reviewer chose, else the
    world's live version and its newest version that can answer (one of them when they are
    the same)."""
    if versions:
        chosen: list[Any] = []
        for version in versions:
            if not version.can_answer:
                raise DuelBadInput(
                    f"{version.label} is released and answers nothing: choose a version "
                    "that can answer."
                )
            if version not in chosen:
                chosen.append(version)
        return chosen
    live = agents().live(world=world)
    chosen = [live] if live is not None and live.can_answer else []
    answering = agents().answering(world=world)
    if answering and answering[0] not in chosen:
        chosen.append(answering[0])
    return chosen


@dataclass
class _Candidate:
    text: str
    source: str
    move: str
    version: Any = None
    judgement: Any = None
    reply: Reply | None = None


@dataclass
class _PairDraft:
    moment: Moment
    scenario: Scenario | None
    dialogue: list[dict[str, str]]
    previous_move: str
    candidates: list[_Candidate]
    best: _Candidate
    worst: _Candidate


def _version_candidates(moment: Moment, versions: Sequence[Any]) -> list[_Candidate]:
    candidates = []
    for version in versions:
        try:
            answer = agents().reply(version, moment)
        except AgentCannotAnswer:
            continue  # a version that cannot answer is simply not a candidate
        candidates.append(_Candidate(answer.text, Reply.Source.POLICY, answer.move, version))
    return candidates


def _distinct(candidates: Iterable[_Candidate]) -> list[_Candidate]:
    """Candidates with different words (the first of each kept): two replies that read the
    same teach a reviewer nothing."""
    seen: set[str] = set()
    out = []
    for candidate in candidates:
        if candidate.text not in seen:
            seen.add(candidate.text)
            out.append(candidate)
    return out


class JudgeFailed(DuelConflict):
    """The world's judge could not score the candidates, so no pair could be made."""


def _draft(
    judge: Any,
    moment: Moment,
    scenario: Scenario | None,
    dialogue: list[dict[str, str]],
    previous_move: str,
    candidates: list[_Candidate],
) -> _PairDraft | None:
    candidates = _distinct(candidates)
    if len(candidates) < 2:
        return None
    context = [JudgeTurn(turn["speaker"], turn["text"]) for turn in dialogue]
    # A judge that reads with a base reads the candidates together first: the call so far
    # they share is then read once, and each score below finds its read in the cache.
    read_ahead = getattr(judge, "read_ahead", None)
    try:
        if read_ahead is not None:
            read_ahead([(context, candidate.text) for candidate in candidates])
        for candidate in candidates:
            candidate.judgement = judge.score(context, candidate.text)
    except Exception as error:  # noqa: BLE001 - a model judge's failure, whatever its kind
        # Best against worst needs every candidate scored: no pair without the judge.
        raise JudgeFailed(f"The judge ({judge.model_name}) could not score: {error}") from error
    # Stable sort: on equal totals the earlier candidate counts as the better one.
    ranked = sorted(candidates, key=lambda candidate: -candidate.judgement.total)
    return _PairDraft(moment, scenario, dialogue, previous_move, candidates, ranked[0], ranked[-1])


def _real_drafts(world: World, count: int, versions: list[Any]) -> list[_PairDraft]:
    """Moments from real calls: an agent turn not paired yet; the versions answer it and the
    real agent's own words there are a third candidate."""
    already_paired = DuelPair.objects.filter(
        moment__call_id=OuterRef("call_id"), moment__turn_index=OuterRef("index")
    )
    chosen = list(
        Turn.objects.filter(call__world=world, speaker=Turn.Speaker.AGENT, index__gte=1)
        .exclude(call_id__in=held_out_call_ids(world=world))
        .filter(~Exists(already_paired))
        # A hash of the id spreads the batch over many calls, the same way every time.
        .order_by(MD5(Cast("id", output_field=CharFieldType())), "id")
        .values_list("call_id", "index")[:count]
    )
    if not chosen:
        return []
    call_ids = {call_id for call_id, _index in chosen}
    # The labels as the labeller gives them now (after the latest corrections): the pairs
    # keep them, and the map and the queue preload read the pairs.
    calls_label_moves(world=world, call_ids=call_ids)
    calls = Call.objects.in_bulk(call_ids)
    turns_by_call: dict[int, list[tuple[int, str, str, str]]] = defaultdict(list)
    for call_id, index, speaker, text, move_label in (
        Turn.objects.filter(call_id__in=call_ids)
        .order_by("call_id", "index")
        .values_list("call_id", "index", "speaker", "text", "move_label")
    ):
        turns_by_call[call_id].append((index, speaker, text, move_label))
    existing = {
        (moment.call_id, moment.turn_index): moment
        for moment in Moment.objects.filter(kind=Moment.Kind.REAL, call_id__in=call_ids)
    }
    judge = judge_for_world(world)
    drafts = []
    for call_id, index in chosen:
        turns = turns_by_call[call_id]
        before = [turn for turn in turns if turn[0] < index]
        real = next(turn for turn in turns if turn[0] == index)
        dialogue = [{"speaker": speaker, "text": text} for _i, speaker, text, _m in before]
        moment = existing.get((call_id, index)) or Moment(
            world=world, kind=Moment.Kind.REAL, call=calls[call_id], turn_index=index
        )
        moment._dialogue_cache = dialogue
        previous_move = next(
            (move for _i, speaker, _t, move in reversed(before) if speaker == "agent" and move),
            "",
        )
        candidates = _version_candidates(moment, versions)
        candidates.append(_Candidate(real[2], Reply.Source.REAL_AGENT, real[3]))
        draft = _draft(judge, moment, None, dialogue, previous_move, candidates)
        if draft is not None:
            drafts.append(draft)
    return drafts


def _synthetic_drafts(
    world: World, count: int, versions: list[Any], scenario_slug: str | None
) -> list[_PairDraft]:
    """Moments from simulated calls of the world's scenarios, played by the first version's
    move strategy; the versions answer, and with one voice only the simulator voices a
    different move against it."""
    from trainers.moves.strategy import SCRIPTED, strategy_policy_array

    scenarios = list(world.scenarios.order_by("slug"))
    if scenario_slug:
        scenarios = [scenario for scenario in scenarios if scenario.slug == scenario_slug]
    if not scenarios:
        return []
    strategy = (versions[0].move_strategy if versions else None) or SCRIPTED
    # Continue each scenario's episodes where earlier batches stopped.
    played = {
        scenario.pk: world.moments.filter(scenario=scenario).count() for scenario in scenarios
    }
    judge = judge_for_world(world)
    drafts: list[_PairDraft] = []
    digests: set[str] = set()
    for episode_number in range(count * 2 + 12):
        if len(drafts) >= count:
            break
        scenario = scenarios[episode_number % len(scenarios)]
        persona = Persona.from_dict(scenario.persona_dict())
        simulated = LettingsWorld(persona)
        seed = scenario.seed * 100_003 + played[scenario.pk] + episode_number
        try:
            policy = strategy_policy_array(
                strategy, scenario=scenario.slug, max_turns=simulated.max_turns
            )
        except ValueError:
            policy = strategy_policy_array(
                SCRIPTED, scenario=scenario.slug, max_turns=simulated.max_turns
            )
        episode = run_episode(simulated, policy, seed)
        lines = episode_dialogue(simulated, episode, seed)
        rng = np.random.default_rng(seed)
        turns = []
        for turn, state in enumerate(episode.states[: len(episode.moves)]):
            dialogue = [
                {"speaker": line["speaker"], "text": line["text"]} for line in lines[: 2 * turn + 1]
            ]
            digest = hashlib.sha1(  # noqa: S324 - a dedupe key, not a security measure
                f"{scenario.slug}|{state}|{preference_format.dialogue_json(dialogue)}".encode()
            ).hexdigest()
            turns.append((turn, state, dialogue, digest))
        # Moments paired before are skipped before any version is asked: a model's replies
        # take seconds each, and the opening moments of a scenario repeat across episodes.
        digests |= set(
            Moment.objects.filter(
                world=world, digest__in=[digest for *_rest, digest in turns]
            ).values_list("digest", flat=True)
        )
        for turn, state, dialogue, digest in turns:
            played_move = episode.moves[turn]
            if digest in digests:
                continue
            digests.add(digest)
            moment = Moment(
                world=world,
                kind=Moment.Kind.SYNTHETIC,
                scenario=scenario,
                simulator_state=state,
                context=dialogue,
                digest=digest,
            )
            candidates = _distinct(_version_candidates(moment, versions))
            described = describe_state(state, persona)
            if not candidates:
                candidates = [
                    _Candidate(
                        scripted_reply(played_move, persona.dialect, described),
                        Reply.Source.SIMULATOR,
                        played_move,
                    )
                ]
            if len(candidates) < 2:
                taken = {candidates[0].text}
                for index in rng.permutation(len(MOVES)):
                    other = MOVES[int(index)]
                    text = scripted_reply(other, persona.dialect, described)
                    if text not in taken:
                        candidates.append(_Candidate(text, Reply.Source.SIMULATOR, other))
                        break
            previous_move = episode.moves[turn - 1] if turn else ""
            draft = _draft(judge, moment, scenario, dialogue, previous_move, candidates)
            if draft is not None:
                drafts.append(draft)
    known = set(
        Moment.objects.filter(
            world=world, digest__in=[d.moment.digest for d in drafts]
        ).values_list("digest", flat=True)
    )
    return [draft for draft in drafts if draft.moment.digest not in known][:count]


def _drafts_save(world: World, drafts: list[_PairDraft]) -> list[DuelPair]:
    """Everything of a batch in five bulk inserts: moments, replies, judgements, pairs."""
    Moment.objects.bulk_create([draft.moment for draft in drafts if draft.moment.pk is None])
    replies = []
    for draft in drafts:
        for candidate in draft.candidates:
            candidate.reply = Reply(
                moment=draft.moment,
                text=candidate.text,
                source=candidate.source,
                move=candidate.move or "",
            )
            replies.append(candidate.reply)
    Reply.objects.bulk_create(replies)
    # Which version wrote which reply is the registry's to keep.
    written = [
        (candidate.reply, candidate.version)
        for draft in drafts
        for candidate in draft.candidates
        if candidate.version is not None
    ]
    if written:
        agents().replies_written(written)
    Judgement.objects.bulk_create(
        Judgement(
            reply=candidate.reply,
            judge_model=candidate.judgement.judge_model,
            scores=dict(candidate.judgement.scores),
            reasons=dict(candidate.judgement.reasons),
            total=candidate.judgement.total,
        )
        for draft in drafts
        for candidate in draft.candidates
    )
    made_before = DuelPair.objects.filter(world=world).count()
    pairs = []
    for number, draft in enumerate(drafts, start=made_before + 1):
        # Sides are drawn here and kept on the pair: nothing the client sends can move them.
        first, second = (draft.best, draft.worst)
        if secrets.randbelow(2):
            first, second = second, first
        pairs.append(
            DuelPair(
                world=world,
                moment=draft.moment,
                scenario=draft.scenario,
                reply_a=first.reply,
                reply_b=second.reply,
                dialogue=preference_format.dialogue_json(draft.dialogue),
                judge_model=first.judgement.judge_model,
                judge_total=round((first.judgement.total + second.judgement.total) / 2, 4),
                judge_gap=abs(first.judgement.total - second.judgement.total),
                move_a=first.move or "",
                move_b=second.move or "",
                previous_move=draft.previous_move,
                picks_wanted=2 if number % SECOND_OPINION_EVERY == 0 else 1,
            )
        )
    return DuelPair.objects.bulk_create(pairs)


def duel_pairs_generate(
    *,
    world: World,
    count: int = PAIR_BATCH,
    scenario: str | None = None,
    versions: Sequence[Any] | None = None,
) -> int:
    """Make up to `count` new pairs for the world's queue; returns how many were made.

    Real-call worlds: a moment in a real call; the compared versions answer, the real agent's
    reply is a third candidate, the judge scores all, and the pair is its best against its
    worst. Simulated worlds: moments from simulator episodes of the world's scenarios.
    """
    if count < 1:
        raise DuelBadInput("Make at least one pair.")
    chosen_versions = duel_versions(world=world, versions=versions)
    with transaction.atomic():
        # Two reviewers running the queue dry at once must not pair the same moments twice.
        _advisory_lock(f"duel-generate-{world.pk}")
        if world.calls.exists():
            drafts = _real_drafts(world, count, chosen_versions)
        else:
            drafts = _synthetic_drafts(world, count, chosen_versions, scenario)
        return len(_drafts_save(world, drafts)) if drafts else 0


# --- asking for pairs: now, or as a job with its progress --------------------------------

SLOW_BATCH = 2
"""Pairs written at a time when a version answers from a model or the judge reads with a base
(seconds per reply on a CPU): at most this many while an API caller waits, the rest by a job,
this many a step."""

# The job that writes pairs in the worker (registered in arena.apps): it needs the database,
# so it is a function in the worker, not a trainer process.
DUEL_PAIRS_KIND = "duel-pairs"
DUEL_PAIRS_TRAINER = "duel-pairs"


def _answers_from_a_model(versions: Sequence[Any]) -> bool:
    return any(getattr(version, "provider", "simulator") != "simulator" for version in versions)


@dataclass(frozen=True)
class PairsRequested:
    made: int
    """Pairs in the queue now."""
    later: int
    """Pairs a job is writing (a model answers or the judge reads with a base: seconds a
    reply), joining the queue as they come."""
    job: Any = None
    """That job (levers9.jobs.models.Job), whose progress pages follow; None when none."""


def duel_pairs_request(
    *,
    world: World,
    count: int = PAIR_BATCH,
    scenario: str | None = None,
    versions: Sequence[Any] | None = None,
    now: int = SLOW_BATCH,
    started_by=None,
    on_request: bool = False,
) -> PairsRequested:
    """Make `count` pairs. The simulator answers in microseconds, so all are written now;
    when a version answers from a model, or the world's judge reads each reply with a base,
    at most `now` are written while the caller waits and the rest by a job with its progress
    (the Duel page's "Make pairs" waits for none: `now=0`).

    `on_request`: a person asked for these pairs (the page's button, the API's generate), so
    the job counts against the workspace's job limits. Otherwise (the queue topping itself up
    when it runs dry) nobody clicked: a pairs job of the world already on its way is enough,
    and nothing is written while the caller waits; with none on its way, the job it starts
    is refused by no limit (refusing it would fail the reviewer's next pair)."""
    # Chosen once here (the default choice reconciles endpoints) and handed on as is.
    chosen = duel_versions(world=world, versions=versions)
    slow = _answers_from_a_model(chosen) or judge_reads_with_a_base(world)
    if not slow or count <= now:
        made = duel_pairs_generate(world=world, count=count, scenario=scenario, versions=chosen)
        return PairsRequested(made=made, later=0)
    if not on_request:
        on_its_way = duel_pairs_jobs_active(world).first()
        if on_its_way is not None:
            return PairsRequested(made=0, later=0, job=on_its_way)
    made = (
        duel_pairs_generate(world=world, count=now, scenario=scenario, versions=chosen)
        if now > 0
        else 0
    )
    later = count - made
    # Named versions stay named; the default choice is made again when the job runs.
    numbers = [version.number for version in versions] if versions else []
    job = _duel_pairs_job_start(
        world=world,
        count=later,
        scenario=scenario or "",
        version_numbers=numbers,
        started_by=started_by,
        on_request=on_request,
    )
    return PairsRequested(made=made, later=later, job=job)


def _duel_pairs_job_start(
    *,
    world: World,
    count: int,
    scenario: str,
    version_numbers: list[int],
    started_by,
    on_request: bool,
) -> Job:
    """A job in the worker on the CPU pool (where the judge's base reads on this machine)."""
    try:
        pool = pool_default(gpu=False)
    except GpuPool.DoesNotExist as error:
        raise DuelConflict(f"No pairs can be made in the background: {error}") from None
    return arena_job_start(
        # The platform's job names no world: the arena's row does, with what was asked.
        about=JobWorld(
            world=world,
            pairs_count=count,
            pairs_scenario=scenario,
            pairs_versions=version_numbers,
        ),
        kind=DUEL_PAIRS_KIND,
        trainer=DUEL_PAIRS_TRAINER,
        spec={
            "world": world.slug,
            "count": count,
            "scenario": scenario,
            "versions": version_numbers,
        },
        pool=pool,
        title=f"Make {count} pairs for the {world.name} Duel",
        started_by=started_by,
        within_workspace_limits=on_request,
    )


def duel_pairs_jobs_active(world: World) -> QuerySet[Job]:
    """The world's pairs jobs waiting or running, oldest first (what the Duel page follows)."""
    return Job.objects.filter(
        kind=DUEL_PAIRS_KIND, arena_world__world=world, state__in=Job.ACTIVE_STATES
    ).order_by("id")


def duel_pairs_job_run(job_id: int, progress: Callable[..., None]) -> dict[str, Any]:
    """The job's work, in the worker and the job's workspace: write the pairs a few at a time,
    each few in its own transaction so reviewers get them as they come, and say how far it
    is after each few."""
    asked = Job.objects.select_related("arena_world__world").get(pk=job_id).arena_world
    world = asked.world
    count = asked.pairs_count or 0
    numbers = [int(number) for number in asked.pairs_versions or []]
    versions = policy_versions_numbered(numbers=numbers, world=world) if numbers else None
    made = 0
    progress(0, count, pairs=0)
    while made < count:
        new = duel_pairs_generate(
            world=world,
            count=min(SLOW_BATCH, count - made),
            scenario=asked.pairs_scenario or None,
            versions=versions,
        )
        if not new:
            break  # no moment left that makes a pair
        made += new
        progress(made, count, pairs=made)
    return {"made": made, "asked": count}
