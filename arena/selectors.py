"""Reads of the arena: worlds, the Duel's queue items and reveals, its map and agreement
figures, the picks as the Picks page filters them, and frozen preference versions."""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import Count, Exists, Max, OuterRef, Q, QuerySet, Subquery

from arena.errors import DuelBadInput, DuelNotFound
from arena.models import (
    DuelPair,
    Judgement,
    Moment,
    Pick,
    PreferenceVersion,
    Reply,
    World,
)
from arena.moves import move_label
from arena.preference_format import PreferencePair, PreferenceRow, read_pairs, read_rows
from trainers.judge.topic_guard import ON_TOPIC


def world_list_with_counts() -> QuerySet[World]:
    return World.objects.annotate(
        call_count=Count("calls", distinct=True),
        won_count=Count("calls", filter=Q(calls__outcome="won"), distinct=True),
        scenario_count=Count("scenarios", distinct=True),
    )


def world_has_real_calls(world: World) -> bool:
    return world.calls.exists()


# What a world is, by who plays the customer there (WorldDescription.kind): the simulator's
# scripted customers, its real recorded calls, or nothing yet (a business world before its
# calls are imported).
WORLD_SIMULATED = "simulated"
WORLD_RECORDED = "recorded"
WORLD_NO_CALLS = "no-calls"


def _calls(count: int) -> str:
    return f"{count} real recorded call" + ("" if count == 1 else "s")


@dataclass(frozen=True)
class WorldDescription:
    """What a world is, said the same way on every page (the header, Home, the World page,
    Policies): who plays the customer there, and what to do where nothing does yet.

    `kind` follows World.has_simulator, the test policies.agents answers by: a world with
    scenarios plays scripted customers; without, only its recorded calls are customers."""

    world: World
    kind: str
    call_count: int

    @property
    def customer(self) -> str:
        """Who plays the customer, named after the world's business (never a model)."""
        name = self.world.name
        if self.kind == WORLD_SIMULATED:
            also = f" and its {_calls(self.call_count)}" if self.call_count else ""
            return f"simulated customers of {name}{also}"
        if self.kind == WORLD_RECORDED:
            return f"{_calls(self.call_count)} of {name}"
        return f"no calls yet: {name} has no simulator; import its recorded calls"

    @property
    def customers_short(self) -> str:
        """The same in a table cell (Home's list of worlds)."""
        if self.kind == WORLD_SIMULATED:
            return "simulated customers" + (
                f" and {_calls(self.call_count)}" if self.call_count else ""
            )
        if self.kind == WORLD_RECORDED:
            return _calls(self.call_count)
        return "no calls yet: import them"

    @property
    def next_step(self) -> str:
        """What to do before anything can happen here; "" where the world can be played."""
        if self.kind != WORLD_NO_CALLS:
            return ""
        return (
            f"Import {self.world.name}'s recorded calls (JSON lines, one call each): the admin's "
            f"Import real calls on this world, POST /api/rl/packs/{self.world.slug}/calls/import/, "
            f"or manage.py import_calls FILE --workspace <workspace> --pack {self.world.slug}. "
            "The Duel, Train and Evaluate have nothing to play until then."
        )


def world_description(world: World) -> WorldDescription:
    """The one answer to "what is this world": its kind and how many real calls it holds.
    Reads the counts a list annotated (world_rows_described), else asks the database."""
    scenario_count = getattr(world, "scenario_count", None)
    simulated = world.has_simulator if scenario_count is None else scenario_count > 0
    call_count = getattr(world, "call_count", None)
    if call_count is None:
        call_count = world.calls.count()
    if simulated:
        kind = WORLD_SIMULATED
    elif call_count:
        kind = WORLD_RECORDED
    else:
        kind = WORLD_NO_CALLS
    return WorldDescription(world=world, kind=kind, call_count=call_count)


def world_rows_described() -> list[WorldDescription]:
    """Every world with its counts (calls, won calls, scenarios) and its description, for
    Home's list of worlds."""
    return [world_description(world) for world in world_list_with_counts().order_by("name")]


def world_customer_label(world: World) -> str:
    """Who plays the customer, named after the world's business: never a model — its real
    recorded calls, the simulator's personas, or none yet (WorldDescription.customer)."""
    return world_description(world).customer


def world_by_slug(slug: str) -> World:
    world = World.objects.filter(slug=slug).first()
    if world is None:
        raise DuelNotFound(f"No world (pack) '{slug}' in this workspace.")
    return world


def world_named(slug: str | None) -> World:
    """The world an API call names by `pack`: that one, or where it names none, the
    workspace's only world. With several worlds a call that names none is refused (400
    naming `pack`), never sent to whichever sorts first."""
    if slug:
        return world_by_slug(str(slug))
    only = world_only()
    if only is not None:
        return only
    first = World.objects.order_by("slug").values_list("slug", flat=True).first()
    if first is None:
        raise DuelNotFound("This workspace has no world yet: make one first.")
    raise DuelBadInput(
        f"pack: this workspace has several worlds; name one with pack (e.g. ?pack={first}). "
        "The worlds are listed at /api/rl/packs/."
    )


def world_only() -> World | None:
    """The workspace's world when it has exactly one (None: none, or several)."""
    worlds = list(World.objects.all()[:2])
    return worlds[0] if len(worlds) == 1 else None


# --- the review queue --------------------------------------------------------------------

# The queue's orders, as the API's `order` takes them and the Duel page describes them:
# the lowest judge total first, or the pairs whose judge totals lie closest together first
# (the judge least sure which reply is better: a reviewer's pick teaches it most there).
QUEUE_ORDERS: dict[str, str] = {
    "weakest": "weakest first",
    "informative": "most informative first",
}


@dataclass(frozen=True)
class QueueSelection:
    """What preloads the queue: a scenario, or a move / transition picked on the world's map.

    `move` alone picks the pairs that stand under that move on the map (pair_move_is: their
    reply A's move, or B's where A has none); with `previous_move` it picks the transition:
    the agent's previous move was `previous_move` and the pair stands under `move`.
    """

    scenario: str = ""
    move: str = ""
    previous_move: str = ""
    # Which pair comes first: one of QUEUE_ORDERS (arena.services.queue orders by it).
    order: str = "weakest"

    @classmethod
    def from_params(cls, params: Mapping[str, Any], *, world: World) -> QueueSelection:
        selection = cls(
            scenario=str(params.get("scenario") or "").strip(),
            move=str(params.get("move") or "").strip(),
            previous_move=str(params.get("from") or "").strip(),
            order=str(params.get("order") or "weakest").strip(),
        )
        selection.validate(world)
        return selection

    def validate(self, world: World) -> None:
        if self.order not in QUEUE_ORDERS:
            raise DuelBadInput(
                f"Unknown order '{self.order}': 'order' is one of {', '.join(QUEUE_ORDERS)}."
            )
        moves = world.move_names
        for name, value in (("move", self.move), ("from", self.previous_move)):
            if value and value not in moves:
                raise DuelBadInput(
                    f"Unknown {name} '{value}': this world's moves are {', '.join(moves)}."
                )
        if self.previous_move and not self.move:
            raise DuelBadInput("A transition needs both ends: give 'move' with 'from'.")
        if self.scenario and not world.scenarios.filter(slug=self.scenario).exists():
            raise DuelBadInput(f"Unknown scenario '{self.scenario}' in world '{world.slug}'.")

    def apply(self, pairs: QuerySet[DuelPair]) -> QuerySet[DuelPair]:
        if self.scenario:
            pairs = pairs.filter(scenario__slug=self.scenario)
        if self.move:
            pairs = pairs.filter(pair_move_is(self.move))
        if self.previous_move:
            pairs = pairs.filter(previous_move=self.previous_move)
        return pairs

    def as_params(self) -> dict[str, str]:
        params = {"scenario": self.scenario, "move": self.move, "from": self.previous_move}
        if self.order != "weakest":
            params["order"] = self.order
        return {key: value for key, value in params.items() if value}

    def describe(self) -> str:
        parts = []
        if self.scenario:
            parts.append(f"scenario {self.scenario}")
        if self.previous_move:
            parts.append(f"{move_label(self.previous_move)} → {move_label(self.move)}")
        elif self.move:
            parts.append(move_label(self.move))
        first = QUEUE_ORDERS.get(self.order, "weakest first")
        if not parts:
            return f"everything, {first}"
        return " · ".join(parts) + ("" if self.order == "weakest" else f", {first}")


def world_in_view(request, *, first_if_none: bool = True) -> World | None:
    """The one answer to "which world is in view": ?world= (in the query or a form), else the
    one the session remembers (the header's badge remembers it), else the first by name. A
    read: remembering is the page frame's (policies.context_processors)."""
    data = getattr(request, "POST", None) or {}
    session = getattr(request, "session", None) or {}
    wanted = request.GET.get("world") or data.get("world") or session.get("world")
    world = World.objects.filter(slug=wanted).first() if wanted else None
    if world is None and first_if_none:
        world = World.objects.order_by("name").first()
    return world


def policy_versions_numbered(*, numbers: list[int], world: World) -> list[Any]:
    """`world`'s policy versions with these numbers (each world numbers its own), or
    DuelNotFound naming the missing ones."""
    from arena.agents import agents

    versions = agents().numbered(numbers, world=world)
    missing = sorted(set(numbers) - {version.number for version in versions})
    if missing:
        raise DuelNotFound(
            f"No version {', '.join(f'v{n}' for n in missing)} in {world.name}: each world "
            "numbers its own versions."
        )
    return versions


def moment_at_label(moment: Moment) -> str:
    if moment.kind == Moment.Kind.REAL:
        return f"call {moment.call.external_id}, turn {moment.turn_index}"
    return f"scenario {moment.scenario.slug}, state {moment.simulator_state}"


def duel_pairs_shown() -> QuerySet[DuelPair]:
    """Pairs with all a page or the API shows of them, in one query."""
    return DuelPair.objects.select_related(
        "world",
        "moment__call",
        "moment__scenario",
        "frozen_in",
    )


def duel_pair_get(*, pair_id: Any) -> DuelPair:
    try:
        pair_id = int(pair_id)
    except (TypeError, ValueError):
        raise DuelBadInput(f"'pair' must be a pair id (a number), not {pair_id!r}.") from None
    pair = duel_pairs_shown().filter(pk=pair_id).first()
    if pair is None:
        raise DuelNotFound(f"No duel pair {pair_id} in this workspace.")
    return pair


def pair_capped_notes(pair: DuelPair) -> dict[int, str]:
    """Why the world's on-topic guard capped a reply of the pair, by reply id (a reply it did
    not cap is absent): the sentence the guard added to the verdict of the pair's own judge
    when it made the pair — the newest of that judge's judgements that is not a rescoring's,
    the same verdict the queue's gap was taken from."""
    notes: dict[int, str] = {}
    for reply_id, reasons in (
        Judgement.objects.filter(
            reply_id__in=[pair.reply_a_id, pair.reply_b_id],
            judge_model=pair.judge_model,
            overruled=False,
        )
        .order_by("created_at", "id")
        .values_list("reply_id", "reasons")
    ):
        note = (reasons or {}).get(ON_TOPIC)
        if note:
            notes[reply_id] = str(note)
        else:
            notes.pop(reply_id, None)
    return notes


def duel_item(pair: DuelPair) -> dict[str, Any]:
    """What a reviewer sees before the pick: the moment and two unlabelled replies, each with
    the on-topic guard's sentence where it capped the reply (null where it did not)."""
    capped = pair_capped_notes(pair)
    return {
        "pair": pair.pk,
        "pack": pair.world.slug,
        "moment": {
            "kind": pair.moment.kind,
            "at": moment_at_label(pair.moment),
            "dialogue": json.loads(pair.dialogue),
        },
        "a": {"text": pair.reply_a.text, "on_topic": capped.get(pair.reply_a_id)},
        "b": {"text": pair.reply_b.text, "on_topic": capped.get(pair.reply_b_id)},
        "reserved_until": pair.reserved_until,
        "picks_wanted": pair.picks_wanted,
        "pick_count": pair.pick_count,
    }


def reply_authors(replies: list[Reply]) -> dict[int, Any]:
    """The version that wrote each policy reply, by reply id: the registry above the arena
    keeps who wrote what, and says it through the agent directory."""
    from arena.agents import agents

    reply_ids = [reply.pk for reply in replies if reply.source == Reply.Source.POLICY]
    return agents().reply_authors(reply_ids) if reply_ids else {}


def reply_source_label(reply: Reply, authors: dict[int, Any]) -> str:
    """Who wrote a reply, as the reveal and the TSV say it (`authors`: its reply_authors)."""
    if reply.source == Reply.Source.POLICY:
        version = authors.get(reply.pk)
        return version.label if version else "a deleted version"
    if reply.source == Reply.Source.REAL_AGENT:
        return "real agent"
    return f"simulator ({move_label(reply.move)})" if reply.move else "simulator"


def reply_judgements(reply_ids: list[int]) -> dict[int, Judgement]:
    """The judgement in force per reply: the newest, a rescoring's if there was one."""
    judgements: dict[int, Judgement] = {}
    for judgement in Judgement.objects.filter(reply_id__in=reply_ids).order_by("created_at", "id"):
        judgements[judgement.reply_id] = judgement
    return judgements


def _judgement_dict(judgement: Judgement | None) -> dict[str, Any] | None:
    if judgement is None:
        return None
    return {
        "judge_model": judgement.judge_model,
        "total": judgement.total,
        "scores": judgement.scores,
        "reasons": judgement.reasons,
        "overruled": judgement.overruled,
    }


def pair_reveal(pair: DuelPair) -> dict[str, Any]:
    """After the pick: who wrote A and B, and what the judge made of each."""
    judgements = reply_judgements([pair.reply_a_id, pair.reply_b_id])
    authors = reply_authors([pair.reply_a, pair.reply_b])
    reveal = {}
    for side, reply in (("A", pair.reply_a), ("B", pair.reply_b)):
        author = authors.get(reply.pk)
        reveal[side] = {
            "reply": reply.pk,
            "source": reply.source,
            "label": reply_source_label(reply, authors),
            "version": author.label if author is not None else None,
            "move": reply.move,
            "judge": _judgement_dict(judgements.get(reply.pk)),
            "can_overrule": True,
        }
    return reveal


# --- the world's map ---------------------------------------------------------------------


def pair_move_is(move: str) -> Q:
    """The pairs that stand under `move` on the world's map: each pair stands under one move,
    its reply A's (A is drawn at random, so a pair of two moves stands under either as often),
    or B's where A has none. One rule for the map's counts and the queue a click preloads, so
    the counts add up to the open pairs and each is the queue its click gives."""
    return Q(move_a=move) | Q(move_a="", move_b=move)


def world_map(world: World, *, selection: QueueSelection | None = None) -> dict[str, Any]:
    """The world's moves as a graph for an inline SVG: a node per move (the open pairs that
    stand under it, pair_move_is) and an edge per transition seen (previous move → the pair's
    move). The nodes are the world's own moves, with their descriptions as the hover text;
    `unplaced` counts the open pairs under no move of the world (none recorded, or a move the
    world no longer has), so the nodes and it add up to the open pairs."""
    moves = world.move_names
    descriptions = {
        move["name"]: move.get("description", "") for move in world.moves if isinstance(move, dict)
    }
    open_pairs = DuelPair.objects.filter(world=world, is_open=True)
    per_move: Counter[str] = Counter()
    edges: Counter[tuple[str, str]] = Counter()
    for row in open_pairs.values("previous_move", "move_a", "move_b").annotate(n=Count("id")):
        move = row["move_a"] or row["move_b"]
        per_move[move] += row["n"]
        if move and row["previous_move"] and row["previous_move"] != move:
            edges[(row["previous_move"], move)] += row["n"]
    unplaced = sum(count for move, count in per_move.items() if move not in moves)
    size, radius = 460, 150
    nodes = []
    position = {}
    for index, move in enumerate(moves):
        angle = -math.pi / 2 + 2 * math.pi * index / max(len(moves), 1)
        x = round(size / 2 + radius * math.cos(angle), 1)
        y = round(size / 2 + radius * math.sin(angle), 1)
        position[move] = (x, y)
        nodes.append(
            {
                "move": move,
                "label": move_label(move),
                "description": descriptions.get(move, ""),
                "x": x,
                "y": y,
                "count": per_move.get(move, 0),
                "selected": bool(
                    selection and selection.move == move and not selection.previous_move
                ),
            }
        )
    top = max(edges.values(), default=1)
    edge_rows = []
    for (source, target), count in sorted(edges.items()):
        if source not in position or target not in position:
            continue
        (x1, y1), (x2, y2) = position[source], position[target]
        # Stop short of the circles so the arrow heads show.
        length = math.hypot(x2 - x1, y2 - y1) or 1.0
        shrink = 26 / length
        edge_rows.append(
            {
                "source": source,
                "target": target,
                "source_label": move_label(source),
                "target_label": move_label(target),
                "count": count,
                "x1": round(x1 + (x2 - x1) * shrink, 1),
                "y1": round(y1 + (y2 - y1) * shrink, 1),
                "x2": round(x2 - (x2 - x1) * shrink, 1),
                "y2": round(y2 - (y2 - y1) * shrink, 1),
                "width": round(1 + 5 * count / top, 1),
                "selected": bool(
                    selection and selection.previous_move == source and selection.move == target
                ),
            }
        )
    return {"size": size, "nodes": nodes, "edges": edge_rows, "unplaced": unplaced}


# --- agreement -----------------------------------------------------------------------------


def reviewer_agreement(world: World | None = None) -> dict[str, Any]:
    """How often two reviewers of the same pair chose the same reply (over every two picks
    of a pair judged more than once). Two ties agree, as do two both-bad picks (their chosen
    is reply A either way); a tie and a preference for A do not."""
    where = "AND first.world_id = %s" if world is not None else ""
    params = [world.pk] if world is not None else []
    with connection.cursor() as cursor:
        # Only pairs with two or more picks can disagree; the join stays small.
        cursor.execute(
            f"""
            SELECT count(*),
                   count(*) FILTER (WHERE first.chosen_reply_id = second.chosen_reply_id
                                      AND first.kind = second.kind)
            FROM {Pick._meta.db_table} AS first
            JOIN {Pick._meta.db_table} AS second
              ON second.pair_id = first.pair_id AND second.id > first.id
            JOIN {DuelPair._meta.db_table} AS pair
              ON pair.id = first.pair_id AND pair.pick_count >= 2
            WHERE TRUE {where}
            """,  # noqa: S608 - table names come from the models, values are parameters
            params,
        )
        compared, agreed = cursor.fetchone()
    return {
        "compared": compared,
        "agreed": agreed,
        "rate": round(agreed / compared, 4) if compared else None,
    }


def picks_frozen_up_to(world: World) -> int:
    """Every pick of `world` with an id up to this is in one of its frozen versions (0: none
    is)."""
    latest = PreferenceVersion.objects.filter(world=world).aggregate(last=Max("last_pick_id"))
    return latest["last"] or 0


def picks_frozen(picks: QuerySet[Pick], *, frozen: bool = True) -> QuerySet[Pick]:
    """The picks (of any worlds) that are in a version of their own world, or with
    `frozen=False` those that are not yet."""
    in_version = PreferenceVersion.objects.filter(
        world=OuterRef("world_id"), last_pick_id__gte=OuterRef("pk")
    )
    return picks.filter(Exists(in_version)) if frozen else picks.exclude(Exists(in_version))


def picks_with_version(picks: QuerySet[Pick]) -> QuerySet[Pick]:
    """Annotate `frozen_in_number`: the first version of its world holding each pick (None:
    not frozen)."""
    first_version = (
        PreferenceVersion.objects.filter(
            world=OuterRef("world_id"), last_pick_id__gte=OuterRef("pk")
        )
        .order_by("number")
        .values("number")[:1]
    )
    return picks.annotate(frozen_in_number=Subquery(first_version))


# --- the Picks page ------------------------------------------------------------------------


@dataclass(frozen=True)
class PickFilters:
    """What the Picks page (and GET /api/rl/picks/) narrows the picks to. `world` None: every
    world of the workspace (the API without ?pack=)."""

    world: World | None = None
    reviewer: str = ""
    reason: str = ""
    kind: str = ""
    since: date | None = None
    until: date | None = None

    @classmethod
    def from_params(cls, params: Mapping[str, Any], *, world: World | None) -> PickFilters:
        """The filters as typed; DuelBadInput naming the field that is wrong."""
        kind = str(params.get("kind") or "").strip()
        if kind and kind not in Pick.Kind.values:
            raise DuelBadInput(f"'kind' is one of {', '.join(Pick.Kind.values)}, not {kind!r}.")
        filters = cls(
            world=world,
            reviewer=str(params.get("reviewer") or "").strip(),
            reason=str(params.get("reason") or "").strip(),
            kind=kind,
            since=_date_param(params, "since"),
            until=_date_param(params, "until"),
        )
        if filters.since and filters.until and filters.since > filters.until:
            raise DuelBadInput("'since' is after 'until': give a range that runs forwards.")
        return filters

    def as_params(self) -> dict[str, str]:
        params = {
            "reviewer": self.reviewer,
            "reason": self.reason,
            "kind": self.kind,
            "since": self.since.isoformat() if self.since else "",
            "until": self.until.isoformat() if self.until else "",
        }
        return {name: value for name, value in params.items() if value}

    def apply(self, picks: QuerySet[Pick]) -> QuerySet[Pick]:
        if self.world is not None:
            picks = picks.filter(world=self.world)
        if self.reviewer:
            picks = picks.filter(reviewer_name=self.reviewer)
        if self.reason:
            picks = picks.filter(reasons__contains=[self.reason])
        if self.kind:
            picks = picks.filter(kind=self.kind)
        # Days as the workspace's clock reads them (settings.TIME_ZONE), both ends included.
        if self.since:
            picks = picks.filter(created_at__date__gte=self.since)
        if self.until:
            picks = picks.filter(created_at__date__lte=self.until)
        return picks


def _date_param(params: Mapping[str, Any], name: str) -> date | None:
    value = str(params.get(name) or "").strip()
    if not value:
        return None
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise DuelBadInput(f"'{name}' is a day as YYYY-MM-DD, not {value!r}.") from None


def picks_listed(filters: PickFilters) -> QuerySet[Pick]:
    """The picks the filters leave, newest first, each with the first version holding it
    (`frozen_in_number`)."""
    return picks_with_version(
        filters.apply(Pick.objects.select_related("world", "pair__moment"))
    ).order_by("-id")


def picks_reviewer_counts(picks: QuerySet[Pick]) -> list[dict[str, Any]]:
    """Each reviewer's counts in these picks: picks, ties, both bad and notes, most picks
    first. By the name kept on the pick, so a removed user's picks still count."""
    return list(
        picks.order_by()
        .values("reviewer_name")
        .annotate(
            picks=Count("id"),
            ties=Count("id", filter=Q(kind=Pick.Kind.TIE)),
            both_bad=Count("id", filter=Q(kind=Pick.Kind.BOTH_BAD)),
            notes=Count("id", filter=~Q(note="")),
        )
        .order_by("-picks", "reviewer_name")
    )


def pick_filter_choices(world: World | None) -> dict[str, list[str]]:
    """What the Picks page's lists offer: the reviewers who picked and the reasons ticked in
    the world (the reasons as picks carry them, whatever the world's rubric says today)."""
    picks = Pick.objects.filter(world=world) if world is not None else Pick.objects.all()
    reviewers = list(
        picks.order_by("reviewer_name").values_list("reviewer_name", flat=True).distinct()
    )
    where = "WHERE world_id = %s" if world is not None else ""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT DISTINCT jsonb_array_elements_text(reasons) AS reason "  # noqa: S608
            f"FROM {Pick._meta.db_table} {where} ORDER BY reason",
            [world.pk] if world is not None else [],
        )
        reasons = [row[0] for row in cursor.fetchall()]
    return {"reviewers": reviewers, "reasons": reasons, "kinds": list(Pick.Kind.values)}


def duel_stats(world: World, *, reviewer=None) -> dict[str, Any]:
    """The figures the Duel page and the API show beside the queue. The judge's agreement
    beside them is the doors' to add (arena.judge.agreement): arena.judge reads this folder,
    so asking it from here would make the two folders a circle."""
    pairs = DuelPair.objects.filter(world=world)
    picks = Pick.objects.filter(world=world)
    counts = pairs.aggregate(total=Count("id"), open=Count("id", filter=Q(is_open=True)))
    return {
        "pairs": counts["total"],
        "open": counts["open"],
        "picks": picks.count(),
        "unfrozen_picks": picks.filter(id__gt=picks_frozen_up_to(world)).count(),
        "my_picks": picks.filter(reviewer=reviewer).count() if reviewer is not None else None,
        "reviewer_agreement": reviewer_agreement(world),
    }


# --- frozen preference versions ------------------------------------------------------------


def preference_versions(world: World | None) -> QuerySet[PreferenceVersion]:
    """`world`'s own versions, newest first; with None, the mixed ones frozen before versions
    belonged to a world (readable, never trained on)."""
    versions = PreferenceVersion.objects.select_related("extends", "world")
    mine = versions.filter(world=world) if world is not None else versions.filter(is_mixed=True)
    return mine.order_by("-number")


def preference_version_get(*, world: World | None, number: Any) -> PreferenceVersion:
    """`world`'s version with this number, or the mixed one that bears it (the numbers a world
    gave its own versions start after the mixed ones', so a number names one version)."""
    try:
        number = int(str(number).lstrip("v"))
    except ValueError:
        raise DuelBadInput(f"A preference version is a number (3 or v3), not {number!r}.") from None
    version = (
        PreferenceVersion.objects.filter(Q(world=world) | Q(is_mixed=True), number=number)
        .select_related("world")
        .order_by("is_mixed")
        .first()
    )
    if version is None:
        where = world.name if world is not None else "this workspace's mixed versions"
        raise DuelNotFound(
            f"No preference version v{number} in {where}: each world numbers its own "
            "versions (freeze in the world first)."
        )
    return version


def preference_number_next(world: World) -> int:
    """The number `world`'s next version takes: after its own and after every mixed version,
    so "preferences v3" never names two versions a world can read."""
    highest = PreferenceVersion.objects.filter(Q(world=world) | Q(is_mixed=True)).aggregate(
        highest=Max("number")
    )["highest"]
    return (highest or 0) + 1


def preferences_dir(world: World | None = None) -> Path:
    """This workspace's folder for `world`'s preference versions on the datasets volume (the
    mixed versions lie in the folder above the worlds')."""
    folder = Path(settings.DATASETS_DIR) / connection.schema_name / "preferences"
    return folder / world.slug if world is not None else folder


def preference_version_path(version: PreferenceVersion) -> Path:
    return Path(settings.DATASETS_DIR) / version.file_path


def preference_version_read(
    *, version: PreferenceVersion, verify: bool = True
) -> Iterator[PreferenceRow]:
    """Stream the rows of a frozen version; with `verify`, refuse a file that changed."""
    return read_rows(preference_version_path(version), sha256=version.sha256 if verify else None)


def preference_pairs(*, version: PreferenceVersion) -> Iterator[PreferencePair]:
    """What training reads: (dialogue, chosen, rejected, reasons) for every frozen pick."""
    return read_pairs(preference_version_path(version), sha256=version.sha256)
