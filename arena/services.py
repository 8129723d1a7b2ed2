"""Writes of the arena: worlds and their scenarios, real-call import, the Duel (pairs,
reservations, picks, overrides, rescoring) and freezing picks into preference versions."""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import tempfile
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import (
    Case,
    Exists,
    F,
    Max,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.db.models import CharField as CharFieldType
from django.db.models.functions import MD5, Cast
from django.utils import timezone

from arena import preference_format
from arena.agents import AgentCannotAnswer, agents
from arena.errors import DuelBadInput, DuelConflict, DuelNotFound, EmptyFreeze
from arena.held_out import held_out_call_ids, held_out_calls_ensure
from arena.judges import judge_for_world
from arena.judging import DIMENSION_WEIGHTS, DIMENSIONS
from arena.judging import Turn as JudgeTurn
from arena.models import (
    Call,
    DuelPair,
    Judgement,
    JudgeOverride,
    Moment,
    PairSkip,
    Pick,
    PreferenceVersion,
    Reply,
    Scenario,
    Turn,
    World,
)
from arena.selectors import (
    QueueSelection,
    duel_pair_get,
    duel_pairs_shown,
    judge_agreement,
    policy_versions_numbered,
    preferences_dir,
    reply_judgements,
    reply_source_label,
)
from levers9.tasks import enqueue_in_workspace
from trainers.simulator import (
    DEFAULT_SCENARIOS,
    MOVES,
    LettingsWorld,
    Persona,
    describe_state,
    episode_dialogue,
    run_episode,
    scripted_reply,
)

LETTINGS_WORLD_SLUG = "lettings"
MAX_CALL_ID_LENGTH = 200
OUTCOMES = {choice for choice, _label in Call.Outcome.choices}
SPEAKERS = {choice for choice, _label in Turn.Speaker.choices}


# --- worlds ----------------------------------------------------------------------------


def world_create_lettings(*, slug: str = LETTINGS_WORLD_SLUG, name: str = "Lettings") -> World:
    """The default world every workspace gets: lettings calls played by the simulator."""
    world, created = World.objects.get_or_create(
        slug=slug,
        defaults={
            "name": name,
            "description": "A letting agent on the phone with people looking to rent. "
            "Customers are simulated personas on fixed seeds.",
        },
    )
    if created:
        Scenario.objects.bulk_create(
            Scenario(
                world=world,
                slug=scenario.slug,
                name=scenario.name,
                seed=scenario.seed,
                **scenario.persona.to_dict(),
            )
            for scenario in DEFAULT_SCENARIOS
        )
    return world


def world_create(*, slug: str, name: str, description: str = "") -> World:
    world, _created = World.objects.get_or_create(
        slug=slug, defaults={"name": name, "description": description}
    )
    return world


SYSTEM_PROMPT_MAX = 4000


def world_system_prompt_set(*, world: World, system_prompt: str) -> World:
    """Set the agent's system prompt of a world (blank: the default naming the world). The
    next training and every reply served from now on open with it."""
    text = (system_prompt or "").strip()
    if len(text) > SYSTEM_PROMPT_MAX:
        raise DuelBadInput(
            f"system_prompt is {len(text)} characters; keep it under {SYSTEM_PROMPT_MAX}."
        )
    World.objects.filter(pk=world.pk).update(system_prompt=text)
    world.refresh_from_db()
    return world


# --- real-call import ------------------------------------------------------------------


@dataclass(frozen=True)
class ImportProblem:
    line: int
    reason: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.reason}"


class CallImportError(ValueError):
    """The file had bad lines; nothing was imported."""

    def __init__(self, problems: list[ImportProblem]):
        self.problems = problems
        shown = "; ".join(str(problem) for problem in problems[:20])
        more = f" (and {len(problems) - 20} more)" if len(problems) > 20 else ""
        super().__init__(
            f"Nothing was imported: {len(problems)} bad line(s). {shown}{more}. "
            "Each line must be a JSON object like "
            '{"id": "...", "outcome": "won"|"lost"|"unknown", '
            '"turns": [{"speaker": "agent"|"customer", "text": "..."}]}.'
        )


@dataclass
class ImportReport:
    created: int = 0
    unchanged: int = 0
    turns_created: int = 0
    problems: list[ImportProblem] = field(default_factory=list)

    def as_dict(self) -> dict[str, int]:
        return {
            "created": self.created,
            "unchanged": self.unchanged,
            "turns_created": self.turns_created,
        }


def _records_from_text(text: str) -> list[tuple[int, Any]]:
    """(line number, parsed value) for a JSON array or a JSONL text; bad JSON raises."""
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            items = json.loads(text)
        except json.JSONDecodeError as error:
            raise CallImportError(
                [ImportProblem(error.lineno, f"not valid JSON ({error.msg})")]
            ) from error
        # In a JSON array, "line" is the item's position, counted from 1.
        return list(enumerate(items, start=1))
    records: list[tuple[int, Any]] = []
    problems: list[ImportProblem] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append((number, json.loads(line)))
        except json.JSONDecodeError as error:
            problems.append(ImportProblem(number, f"not valid JSON ({error.msg})"))
    if problems:
        raise CallImportError(problems)
    return records


def _problem_with(record: Any) -> str | None:
    if not isinstance(record, dict):
        return "a call must be a JSON object"
    call_id = record.get("id")
    if not isinstance(call_id, str) or not call_id.strip():
        return '"id" is missing or not a non-empty string'
    if len(call_id) > MAX_CALL_ID_LENGTH:
        return f'"id" is longer than {MAX_CALL_ID_LENGTH} characters'
    if record.get("outcome") not in OUTCOMES:
        return f'"outcome" is {record.get("outcome")!r}; use one of won, lost, unknown'
    turns = record.get("turns")
    if not isinstance(turns, list) or not turns:
        return '"turns" is missing or empty; give a list of {"speaker", "text"} objects'
    for position, turn in enumerate(turns, start=1):
        if not isinstance(turn, dict):
            return f"turn {position} is not an object"
        if turn.get("speaker") not in SPEAKERS:
            return f'turn {position}: "speaker" is {turn.get("speaker")!r}; use agent or customer'
        if not isinstance(turn.get("text"), str) or not turn["text"].strip():
            return f'turn {position}: "text" is missing or empty'
    return None


def calls_validate(text: str) -> list[tuple[int, dict[str, Any]]]:
    """Every record with its line number, or CallImportError naming every bad line."""
    records = _records_from_text(text)
    problems: list[ImportProblem] = []
    first_line_of: dict[str, int] = {}
    for number, record in records:
        reason = _problem_with(record)
        if reason is None and record["id"] in first_line_of:
            reason = f'"id" {record["id"]!r} already appears on line {first_line_of[record["id"]]}'
        if reason:
            problems.append(ImportProblem(number, reason))
        else:
            first_line_of[record["id"]] = number
    if problems:
        raise CallImportError(problems)
    if not records:
        raise CallImportError([ImportProblem(1, "the file holds no calls")])
    return records


def calls_import(*, world: World, text: str, source: str = "") -> ImportReport:
    """Import real calls into `world`: all or nothing, and idempotent by call id.

    Calls whose id the world already has are left exactly as they are.
    """
    records = calls_validate(text)
    report = ImportReport()
    with transaction.atomic():
        existing = set(
            Call.objects.filter(
                world=world, external_id__in=[record["id"] for _n, record in records]
            ).values_list("external_id", flat=True)
        )
        new_records = [record for _n, record in records if record["id"] not in existing]
        report.unchanged = len(records) - len(new_records)
        calls = Call.objects.bulk_create(
            Call(
                world=world,
                external_id=record["id"],
                outcome=record["outcome"],
                source=source[:300],
                turn_count=len(record["turns"]),
            )
            for record in new_records
        )
        turns = [
            Turn(call=call, index=index, speaker=turn["speaker"], text=turn["text"].strip())
            for call, record in zip(calls, new_records, strict=True)
            for index, turn in enumerate(record["turns"])
        ]
        Turn.objects.bulk_create(turns, batch_size=5000)
        report.created = len(calls)
        report.turns_created = len(turns)
        if calls:
            held_out_calls_ensure(world=world)
    return report


# --- the Duel: making pairs ------------------------------------------------------------------

REASONS: tuple[str, ...] = DIMENSIONS
# How long a served pair stays with its reviewer; after that the queue may serve it again.
RESERVATION = timedelta(minutes=5)
# How many pairs one generation makes: enough for a sitting, quick enough for a request.
PAIR_BATCH = 40
# Every fifth pair asks for a second reviewer, so reviewer agreement can be measured.
SECOND_OPINION_EVERY = 5


def _advisory_lock(name: str) -> None:
    """Serialise one kind of write per workspace until the transaction ends."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_advisory_xact_lock(hashtext(%s))", [f"{connection.schema_name}:{name}"]
        )


def duel_versions(*, versions: Sequence[Any] | None = None) -> list[Any]:
    """The versions that answer in the Duel: those the reviewer chose, else the live version
    and the newest version that can answer (one of them when they are the same)."""
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
    live = agents().live()
    chosen = [live] if live is not None and live.can_answer else []
    answering = agents().answering()
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


def _judge_for(world: World) -> Any:
    """The judge the world names under Environment → Judge (the rubric judge by default)."""
    return judge_for_world(world)


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
    for candidate in candidates:
        try:
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
    judge = _judge_for(world)
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
    from trainers.move_strategy import SCRIPTED, strategy_policy_array

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
    judge = _judge_for(world)
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
                policy_version=candidate.version,
                move=candidate.move or "",
            )
            replies.append(candidate.reply)
    Reply.objects.bulk_create(replies)
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
    chosen_versions = duel_versions(versions=versions)
    with transaction.atomic():
        # Two reviewers running the queue dry at once must not pair the same moments twice.
        _advisory_lock(f"duel-generate-{world.pk}")
        if world.calls.exists():
            drafts = _real_drafts(world, count, chosen_versions)
        else:
            drafts = _synthetic_drafts(world, count, chosen_versions, scenario)
        return len(_drafts_save(world, drafts)) if drafts else 0


# --- the Duel: the queue and picks ----------------------------------------------------------


def _claim(world: World, reviewer, selection: QueueSelection, now) -> DuelPair | None:
    """Reserve the weakest free pair for the reviewer: one UPDATE whose subquery locks the
    pair it picks with SKIP LOCKED, so two reviewers claiming at the same instant get two
    different pairs and neither waits for the other."""
    picked = Pick.objects.filter(pair=OuterRef("pk"), reviewer=reviewer)
    skipped = PairSkip.objects.filter(pair=OuterRef("pk"), reviewer=reviewer)
    free = Q(reserved_until__isnull=True) | Q(reserved_until__lte=now)
    weakest_free = (
        selection.apply(DuelPair.objects.filter(world=world, is_open=True))
        .filter(free)
        .filter(~Exists(picked), ~Exists(skipped))
        .order_by("judge_total", "id")
        .select_for_update(skip_locked=True, of=("self",))
        .values("pk")[:1]
    )
    until = now + RESERVATION
    with transaction.atomic():
        claimed = DuelPair.objects.filter(pk__in=Subquery(weakest_free)).update(
            reserved_by=reviewer, reserved_until=until
        )
    if not claimed:
        return None
    # The reservation's own time stamp finds the claimed pair again.
    return duel_pairs_shown().filter(reserved_by=reviewer, reserved_until=until).first()


def duel_next(
    *, world: World, reviewer, selection: QueueSelection | None = None, generate: bool = True
) -> DuelPair | None:
    """Serve the reviewer the weakest open pair nobody else holds, reserved for five minutes.

    Asking again while holding a pair (a reload, a second tab) serves the same pair. When the
    queue has nothing left for this reviewer, a new batch is generated first.
    """
    selection = selection or QueueSelection()
    now = timezone.now()
    mine = DuelPair.objects.filter(
        world=world, reserved_by=reviewer, reserved_until__gt=now, is_open=True
    )
    # Usually nothing (the last pick let the pair go) or the one pair being looked at.
    held = list(mine.order_by().values_list("pk", flat=True)[:10])
    if held:
        matching = (
            selection.apply(duel_pairs_shown().filter(pk__in=held))
            .order_by("judge_total", "id")
            .first()
        )
        if matching is not None:
            matching.reserved_until = now + RESERVATION
            DuelPair.objects.filter(pk=matching.pk, reserved_by=reviewer).update(
                reserved_until=matching.reserved_until
            )
            return matching
        # What the reviewer holds outside this selection is let go, so nobody waits for it.
        DuelPair.objects.filter(pk__in=held, reserved_by=reviewer).update(
            reserved_by=None, reserved_until=None
        )
    pair = _claim(world, reviewer, selection, now)
    if pair is None and generate:
        duel_pairs_request(world=world, scenario=selection.scenario or None)
        pair = _claim(world, reviewer, selection, timezone.now())
    return pair


SLOW_BATCH = 2
"""Pairs written while a reviewer waits when a version answers from a model: a small model on
a CPU takes seconds per reply, so the rest of the batch is written in the background."""


def _answers_from_a_model(versions: Sequence[Any]) -> bool:
    return any(getattr(version, "provider", "simulator") != "simulator" for version in versions)


@dataclass(frozen=True)
class PairsRequested:
    made: int
    """Pairs in the queue now."""
    later: int
    """Pairs a background task is writing (a model answers, seconds per reply)."""


def duel_pairs_request(
    *,
    world: World,
    count: int = PAIR_BATCH,
    scenario: str | None = None,
    versions: Sequence[Any] | None = None,
) -> PairsRequested:
    """Make `count` pairs. The simulator answers in microseconds, so all are written now;
    when a version answers from a model, a few now and the rest by a background task, so no
    request (and no reviewer) waits minutes."""
    # Chosen once here (the default choice reconciles endpoints) and handed on as is.
    chosen = duel_versions(versions=versions)
    if count <= SLOW_BATCH or not _answers_from_a_model(chosen):
        made = duel_pairs_generate(world=world, count=count, scenario=scenario, versions=chosen)
        return PairsRequested(made=made, later=0)
    made = duel_pairs_generate(world=world, count=SLOW_BATCH, scenario=scenario, versions=chosen)
    later = count - made
    # Named versions stay named; the default choice is made again when the task runs.
    numbers = [version.number for version in versions] if versions else []
    transaction.on_commit(
        lambda: enqueue_in_workspace(
            "arena.services.duel_pairs_generate_later",
            world.pk,
            later,
            scenario or "",
            numbers,
            task_name=f"duel-pairs-{world.slug}",
        )
    )
    return PairsRequested(made=made, later=later)


def duel_pairs_generate_later(
    world_id: int, count: int, scenario: str = "", version_numbers: Sequence[int] = ()
) -> int:
    """Background: write `count` pairs a few at a time, each few in its own transaction so
    reviewers get them as they come. Returns how many it wrote."""
    world = World.objects.get(pk=world_id)
    versions = policy_versions_numbered(numbers=list(version_numbers)) if version_numbers else None
    made = 0
    while made < count:
        new = duel_pairs_generate(
            world=world,
            count=min(SLOW_BATCH, count - made),
            scenario=scenario or None,
            versions=versions,
        )
        if not new:
            break  # no moment left that makes a pair
        made += new
    return made


def duel_skip(*, pair: DuelPair, reviewer) -> None:
    """The reviewer passes: the pair goes back to the queue, never again to this reviewer."""
    with transaction.atomic():
        PairSkip.objects.get_or_create(pair=pair, reviewer=reviewer)
        DuelPair.objects.filter(pk=pair.pk, reserved_by=reviewer).update(
            reserved_by=None, reserved_until=None
        )


def pick_reasons_clean(reasons: Any) -> list[str]:
    """The reasons as a list in rubric order, or DuelBadInput naming the unknown ones."""
    if reasons is None or reasons == "":
        return []
    if isinstance(reasons, str):
        reasons = [reason.strip() for reason in reasons.split(",") if reason.strip()]
    if not isinstance(reasons, list | tuple) or not all(isinstance(r, str) for r in reasons):
        raise DuelBadInput("'reasons' must be a list of reason names.")
    unknown = [reason for reason in reasons if reason not in REASONS]
    if unknown:
        raise DuelBadInput(
            f"Unknown reason(s): {', '.join(repr(reason) for reason in unknown)}. "
            f"Reasons are {', '.join(REASONS)}."
        )
    return [reason for reason in REASONS if reason in reasons]


def _side_clean(chosen: Any) -> str:
    side = str(chosen or "").strip().upper()
    if side not in ("A", "B"):
        raise DuelBadInput(f"'chosen' must be 'A' or 'B', not {chosen!r}.")
    return side


def pick_submit(*, pair_id: Any, reviewer, chosen: Any, reasons: Any = None) -> Pick:
    """Record the reviewer's preference on a pair they hold.

    Refused, with nothing written: an unknown reason or side, a pair not in this workspace,
    a frozen pair, a pair the reviewer already picked or does not hold.
    """
    side = _side_clean(chosen)
    cleaned_reasons = pick_reasons_clean(reasons)
    pair = duel_pair_get(pair_id=pair_id)
    if pair.frozen_in_id is not None:
        raise DuelConflict(
            f"Pair {pair.pk} was frozen into {pair.frozen_in.label} and takes no more picks: "
            "ask for the next pair."
        )
    if pair.reserved_by_id != reviewer.pk:
        if Pick.objects.filter(pair=pair, reviewer=reviewer).exists():
            raise DuelConflict(
                f"You already picked pair {pair.pk}; each reviewer picks a pair once."
            )
        held_by_other = (
            pair.reserved_by_id is not None
            and pair.reserved_until is not None
            and pair.reserved_until > timezone.now()
        )
        raise DuelConflict(
            f"You do not hold pair {pair.pk}: "
            + (
                "another reviewer holds it now."
                if held_by_other
                else "ask for the next pair, then pick the one you were served."
            )
        )
    chosen_reply, rejected_reply = (
        (pair.reply_a, pair.reply_b) if side == "A" else (pair.reply_b, pair.reply_a)
    )
    try:
        with transaction.atomic():
            # The pick goes in first: a freeze locks the picks table and then closes pairs,
            # so taking the table before the pair's row keeps the same order (no deadlock).
            pick = Pick.objects.create(
                pair=pair,
                world=pair.world,
                chosen_side=side,
                chosen_reply=chosen_reply,
                rejected_reply=rejected_reply,
                chosen_source=reply_source_label(chosen_reply),
                rejected_source=reply_source_label(rejected_reply),
                reasons=cleaned_reasons,
                reviewer=reviewer,
                reviewer_name=reviewer.get_username(),
            )
            # The claim: only the holder's update matches, and only once (healthchecks-style);
            # otherwise the pick above is rolled back.
            claimed = DuelPair.objects.filter(
                pk=pair.pk, reserved_by=reviewer, frozen_in__isnull=True
            ).update(
                reserved_by=None,
                reserved_until=None,
                pick_count=F("pick_count") + 1,
                # Right-hand sides read the old row: old count + 1 < wanted keeps it open.
                is_open=Case(
                    When(pick_count__lt=F("picks_wanted") - 1, then=Value(True)),
                    default=Value(False),
                ),
            )
            if claimed != 1:
                raise DuelConflict(
                    f"Pair {pair.pk} was frozen or served to someone else while you picked: "
                    "ask for the next pair."
                )
            return pick
    except IntegrityError:
        raise DuelConflict(
            f"You already picked pair {pair.pk}; each reviewer picks a pair once."
        ) from None


def duel_pairs_request_opinion(*, pairs: QuerySet[DuelPair]) -> int:
    """Ask one more reviewer for each of these (not frozen) pairs: back in the queue."""
    return pairs.filter(frozen_in__isnull=True).update(
        picks_wanted=F("pick_count") + 1, is_open=True
    )


def duel_reservations_release(*, pairs: QuerySet[DuelPair]) -> int:
    return pairs.exclude(reserved_by=None).update(reserved_by=None, reserved_until=None)


# --- the Duel: overruling the judge, rescoring ------------------------------------------------


def judge_override_scores_clean(scores: Any) -> dict[str, float]:
    if not isinstance(scores, dict) or not scores:
        raise DuelBadInput(
            "'scores' must name at least one dimension with the reviewer's verdict, "
            'e.g. {"respect": 0.0}.'
        )
    unknown = [name for name in scores if name not in DIMENSIONS]
    if unknown:
        raise DuelBadInput(
            f"Unknown dimension(s): {', '.join(repr(name) for name in unknown)}. "
            f"Dimensions are {', '.join(DIMENSIONS)}."
        )
    cleaned = {}
    for name in DIMENSIONS:
        if name not in scores:
            continue
        value = scores[name]
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
            raise DuelBadInput(
                f"The verdict on {name} must be a number from 0 to 1, not {value!r}."
            )
        cleaned[name] = float(value)
    return cleaned


def judge_override_submit(*, reply_id: Any, reviewer, scores: Any, note: str = "") -> JudgeOverride:
    """The reviewer overrules the judge on some dimensions of a reply; saying it again
    replaces their earlier verdict. Used by the next rescoring."""
    cleaned = judge_override_scores_clean(scores)
    try:
        reply_id = int(reply_id)
    except (TypeError, ValueError):
        raise DuelBadInput(f"'reply' must be a reply id (a number), not {reply_id!r}.") from None
    reply = Reply.objects.filter(pk=reply_id).first()
    if reply is None:
        raise DuelNotFound(f"No reply {reply_id} in this workspace.")
    judged = (
        Judgement.objects.filter(reply=reply, overruled=False, error="")
        .order_by("-created_at", "-id")
        .first()
    )
    if judged is None:
        raise DuelConflict(f"Reply {reply_id} has no judgement to overrule.")
    override, _created = JudgeOverride.objects.update_or_create(
        reply=reply,
        reviewer=reviewer,
        judge_model=judged.judge_model,
        defaults={
            "scores": cleaned,
            "judge_scores": dict(judged.scores),
            "note": str(note or "")[:2000],
            "reviewer_name": reviewer.get_username(),
        },
    )
    return override


@dataclass
class RescoreReport:
    replies_rescored: int
    pairs_reordered: int
    overrides: int
    agreement: dict[str, dict[str, Any]]

    def as_dict(self) -> dict[str, Any]:
        return {
            "replies_rescored": self.replies_rescored,
            "pairs_reordered": self.pairs_reordered,
            "overrides": self.overrides,
            "agreement": self.agreement,
        }


def _weighted_total(scores: dict[str, float]) -> float:
    weighted = sum(DIMENSION_WEIGHTS[name] * float(scores[name]) for name in DIMENSIONS)
    return round(weighted / sum(DIMENSION_WEIGHTS.values()), 4)


def judgements_rescore(*, world: World | None = None) -> RescoreReport:
    """Apply reviewers' overrides: for every overruled reply, a judgement whose overruled
    dimensions carry the reviewers' mean verdict (the rest stay the judge's), the queue
    reordered by the new totals, and how often judge and reviewers agreed per dimension."""
    overrides = JudgeOverride.objects.all()
    replies_with_rescore = Judgement.objects.filter(overruled=True)
    if world is not None:
        overrides = overrides.filter(reply__moment__world=world)
        replies_with_rescore = replies_with_rescore.filter(reply__moment__world=world)
    verdicts: dict[tuple[int, str], list[dict[str, float]]] = defaultdict(list)
    for reply_id, judge_model, scores in overrides.values_list("reply_id", "judge_model", "scores"):
        verdicts[(reply_id, judge_model)].append(scores)
    # Replies rescored before whose overrides were since removed go back to the judge.
    reply_ids = {reply_id for reply_id, _model in verdicts} | set(
        replies_with_rescore.values_list("reply_id", flat=True)
    )
    base: dict[tuple[int, str], Judgement] = {}
    for judgement in Judgement.objects.filter(
        reply_id__in=reply_ids, overruled=False, error=""
    ).order_by("created_at", "id"):
        base[(judgement.reply_id, judgement.judge_model)] = judgement
    in_force = reply_judgements(list(reply_ids))
    new = []
    for (reply_id, judge_model), judged in base.items():
        scores = dict(judged.scores)
        reasons = dict(judged.reasons)
        given = verdicts.get((reply_id, judge_model), [])
        for name in DIMENSIONS:
            values = [float(verdict[name]) for verdict in given if name in verdict]
            if values:
                scores[name] = round(sum(values) / len(values), 4)
                reasons[name] = (
                    f"Overruled by {len(values)} reviewer(s); the judge said "
                    f"{float(judged.scores[name]):.2f}. {judged.reasons.get(name, '')}"
                ).strip()
        current = in_force.get(reply_id)
        if current is not None and current.scores == scores:
            continue  # already in force: rescoring twice changes nothing
        new.append(
            Judgement(
                reply_id=reply_id,
                judge_model=judge_model,
                scores=scores,
                reasons=reasons,
                total=_weighted_total(scores),
                overruled=bool(given),
            )
        )
    with transaction.atomic():
        Judgement.objects.bulk_create(new)
        changed = {judgement.reply_id for judgement in new}
        pairs = list(DuelPair.objects.filter(Q(reply_a_id__in=changed) | Q(reply_b_id__in=changed)))
        totals = {
            reply_id: judgement.total
            for reply_id, judgement in reply_judgements(
                [pair.reply_a_id for pair in pairs] + [pair.reply_b_id for pair in pairs]
            ).items()
        }
        for pair in pairs:
            pair.judge_total = round(
                (totals.get(pair.reply_a_id, 0.0) + totals.get(pair.reply_b_id, 0.0)) / 2, 4
            )
        DuelPair.objects.bulk_update(pairs, ["judge_total"], batch_size=1000)
    return RescoreReport(
        replies_rescored=len(new),
        pairs_reordered=len(pairs),
        overrides=overrides.count(),
        agreement=judge_agreement(world),
    )


# --- freezing picks into preference versions ------------------------------------------------

# The rows of a version, as PostgreSQL's COPY writes them: its text format is exactly the
# TSV's escaping (see arena.preference_format), and COPY streams a million joined rows in a
# few seconds where building them in Python would take minutes. Every column is text and
# never NULL, and the timestamp is formatted in UTC, so the bytes depend on the picks only.
# Reasons are rubric names (checked when the pick is made): their JSON list, stripped of
# brackets, quotes and spaces, is the comma-separated list (twice as fast as unnesting it).
_VERSION_ROWS_SQL = """
COPY (
    SELECT pick.id,
           world.slug,
           pair.moment_id,
           moment.kind,
           CASE WHEN moment.kind = 'real'
                THEN 'call ' || coalesce(call.external_id, '') || ' turn '
                     || coalesce(moment.turn_index::text, '')
                ELSE 'scenario ' || coalesce(scenario.slug, '') || ' state '
                     || coalesce(moment.simulator_state::text, '')
           END,
           pair.dialogue,
           chosen.text,
           rejected.text,
           pick.chosen_source,
           pick.rejected_source,
           chosen.move,
           rejected.move,
           translate(pick.reasons::text, '[]" ', ''),
           pick.reviewer_name,
           to_char(pick.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
    FROM {pick} AS pick
    JOIN {world} AS world ON world.id = pick.world_id
    JOIN {pair} AS pair ON pair.id = pick.pair_id
    JOIN {moment} AS moment ON moment.id = pair.moment_id
    LEFT JOIN {call} AS call ON call.id = moment.call_id
    LEFT JOIN {scenario} AS scenario ON scenario.id = pair.scenario_id
    JOIN {reply} AS chosen ON chosen.id = pick.chosen_reply_id
    JOIN {reply} AS rejected ON rejected.id = pick.rejected_reply_id
    WHERE pick.id <= {last_pick_id}
    ORDER BY pick.id
) TO STDOUT
"""


COPY_BUFFER_BYTES = 1 << 20


@dataclass(frozen=True)
class WrittenVersion:
    path: Path
    manifest_path: Path
    count: int
    sha256: str
    size_bytes: int


def _write_atomically(target: Path, chunks: Iterable[bytes]) -> tuple[str, int]:
    """Write to a temporary file beside `target`, then rename: a reader never sees half a
    version. Returns (sha256, size). The file is left read-only: a version never changes."""
    digest = hashlib.sha256()
    size = 0
    handle = tempfile.NamedTemporaryFile(  # noqa: SIM115 - renamed into place below
        dir=target.parent, prefix=f".{target.name}.", suffix=".tmp", delete=False
    )
    try:
        with handle:
            for chunk in chunks:
                digest.update(chunk)
                size += len(chunk)
                handle.write(chunk)
        os.chmod(handle.name, 0o444)
        os.replace(handle.name, target)
    except BaseException:
        Path(handle.name).unlink(missing_ok=True)
        raise
    return digest.hexdigest(), size


def preference_version_write(
    *, version: PreferenceVersion, directory: Path | None = None
) -> WrittenVersion:
    """Write version N's TSV (every pick up to its last_pick_id, by pick id) and manifest.

    The rows stream from PostgreSQL's COPY straight to the file, block by block, so memory
    stays flat however many picks there are. The bytes depend only on the picks: writing
    the same version twice gives the same file.
    """
    directory = directory or preferences_dir()
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / f"v{version.number}.tsv"
    statement = _VERSION_ROWS_SQL.format(
        last_pick_id=int(version.last_pick_id),
        **{
            name: model._meta.db_table
            for name, model in {
                "pick": Pick,
                "world": World,
                "pair": DuelPair,
                "moment": Moment,
                "call": Call,
                "scenario": Scenario,
                "reply": Reply,
            }.items()
        },
    )
    count = 0

    def chunks() -> Iterable[bytes]:
        nonlocal count
        yield preference_format.header_line().encode()
        # COPY hands over one row at a time: gather about a megabyte before hashing and
        # writing, which costs far less per row than doing both a million times.
        buffer: list[bytes] = []
        size = 0
        with connection.cursor() as cursor, cursor.copy(statement) as copy:
            for row in copy:
                buffer.append(bytes(row))
                size += len(row)
                if size >= COPY_BUFFER_BYTES:
                    chunk = b"".join(buffer)
                    count += chunk.count(b"\n")  # escaped fields hold no raw newline
                    yield chunk
                    buffer.clear()
                    size = 0
        chunk = b"".join(buffer)
        count += chunk.count(b"\n")
        yield chunk

    sha256, size = _write_atomically(target, chunks())
    extends = version.extends.number if version.extends_id else None
    previous_count = version.extends.row_count if version.extends_id else 0
    manifest = preference_format.manifest_text(
        number=version.number,
        file_name=target.name,
        count=count,
        sha256=sha256,
        extends=extends,
        picks_added=count - previous_count,
    )
    manifest_path = directory / f"v{version.number}.manifest.json"
    _write_atomically(manifest_path, [manifest.encode()])
    return WrittenVersion(target, manifest_path, count, sha256, size)


def preference_freeze(*, by=None, up_to_pick_id: int | None = None) -> PreferenceVersion:
    """Freeze the picks not frozen yet (all, or those up to `up_to_pick_id`) into the next
    numbered preference version: v<N>.tsv and its manifest under the workspace's folder on
    the datasets volume. The version extends the one before and holds its picks too.

    Refused with EmptyFreeze when no new pick would be frozen. Pairs still waiting for
    another pick when their picks are frozen leave the queue and take no more picks (unless
    a reviewer holds one right now: they may finish it, and the next freeze closes it).
    """
    with transaction.atomic():
        with connection.cursor() as cursor:
            # SHARE ROW EXCLUSIVE waits for picks being saved right now and holds new ones
            # back until this transaction ends: every pick at or below the watermark is then
            # committed, none can appear below it later, and two freezes never overlap.
            cursor.execute(f"LOCK TABLE {Pick._meta.db_table} IN SHARE ROW EXCLUSIVE MODE")
        previous = PreferenceVersion.objects.order_by("-number").first()
        floor = previous.last_pick_id if previous else 0
        newest = Pick.objects.aggregate(newest=Max("id"))["newest"] or 0
        last = min(newest, int(up_to_pick_id)) if up_to_pick_id is not None else newest
        added = Pick.objects.filter(id__gt=floor, id__lte=last).count()
        if not added:
            raise EmptyFreeze(
                "There are no new picks to freeze"
                + (f": every pick is already in v{previous.number}." if previous else " yet.")
                + " Pick in the Duel first."
            )
        version = PreferenceVersion.objects.create(
            number=previous.number + 1 if previous else 1,
            extends=previous,
            last_pick_id=last,
            picks_added=added,
            row_count=(previous.row_count if previous else 0) + added,
            created_by=by if by is not None and by.pk else None,
            created_by_name=by.get_username() if by is not None else "",
        )
        # A pair still waiting for another opinion whose picks are now frozen takes no more.
        # One a reviewer is looking at right now is left to them; a later freeze closes it.
        frozen_picks = Pick.objects.filter(pair=OuterRef("pk"), id__lte=last)
        DuelPair.objects.filter(is_open=True).exclude(reserved_until__gt=timezone.now()).filter(
            Exists(frozen_picks)
        ).update(frozen_in=version, is_open=False, reserved_by=None, reserved_until=None)
        written = preference_version_write(version=version)
        if written.count != version.row_count:
            raise RuntimeError(
                f"v{version.number} wrote {written.count} rows, expected {version.row_count}"
            )
        version.sha256 = written.sha256
        version.size_bytes = written.size_bytes
        version.file_path = str(written.path.relative_to(Path(settings.DATASETS_DIR)))
        version.save(update_fields=["sha256", "size_bytes", "file_path"])
    return version
