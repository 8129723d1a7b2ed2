"""Importing existing preference data as picks, in TRL's preference format.

One JSON object per line: {"id", "prompt": [{"role": "system"|"user"|"assistant", "content"}],
"chosen": [{"role": "assistant", "content"}], "rejected": [...], "reasons": [...optional],
"reviewer": "optional label"}; the plain form (prompt, chosen and rejected as strings) too. In
`prompt`, `user` is the customer and `assistant` the agent. The same rules as call import:
every bad line named with its number, a file with any bad line imports nothing, the same ids
again change nothing. Each pair becomes a moment, two replies, a closed Duel pair and one pick
marked with its source: it freezes like any other pick, and the world's judge learns from it —
except the pairs the world holds out for Evaluate (arena.held_out), chosen once it has enough.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from arena import preference_format
from arena.held_out import held_out_pairs_ensure
from arena.judge.world_dimensions import world_dimension_names
from arena.models import DuelPair, Moment, Pick, Reply, World
from arena.services.calls import ImportProblem, import_text_decode, json_line_parse

MAX_ID_LENGTH = 200
MAX_TEXT = 50_000
IMPORTED = "imported"


class PreferenceImportError(ValueError):
    """A file with bad lines: nothing was imported; `problems` names each line."""

    def __init__(self, problems: list[ImportProblem]):
        self.problems = problems
        shown = "; ".join(str(problem) for problem in problems[:5])
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        super().__init__(f"{len(problems)} bad line(s), nothing imported: {shown}{more}")


@dataclass
class PreferenceImportReport:
    created: int = 0
    unchanged: int = 0
    ids: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"created": self.created, "unchanged": self.unchanged}


@dataclass(frozen=True)
class _Record:
    line: int
    id: str
    dialogue: list[dict[str, str]]
    chosen: str
    rejected: str
    reasons: list[str]
    reviewer: str


def _reply(value: Any, name: str) -> str:
    if isinstance(value, str):
        text = value
    elif (
        isinstance(value, list)
        and value
        and all(
            isinstance(m, dict)
            and m.get("role") == "assistant"
            and isinstance(m.get("content"), str)
            for m in value
        )
    ):
        text = "\n".join(m["content"] for m in value)
    else:
        raise ValueError(f"'{name}' must be text or a list of assistant messages")
    if not text.strip():
        raise ValueError(f"'{name}' is empty")
    if len(text) > MAX_TEXT:
        raise ValueError(f"'{name}' is longer than {MAX_TEXT} characters")
    return text.strip()


def _dialogue(prompt: Any) -> list[dict[str, str]]:
    if isinstance(prompt, str):
        return [{"speaker": "customer", "text": prompt}] if prompt.strip() else []
    if not isinstance(prompt, list):
        raise ValueError("'prompt' must be a list of {role, content} messages (or text)")
    turns = []
    for index, message in enumerate(prompt):
        role = message.get("role") if isinstance(message, dict) else None
        if role not in ("system", "user", "assistant") or not isinstance(
            message.get("content"), str
        ):
            raise ValueError(
                f"'prompt[{index}]' must be {{role: system|user|assistant, content: text}}"
            )
        if role == "system":
            continue  # the world's own system prompt is the one used
        speaker = "agent" if role == "assistant" else "customer"
        turns.append({"speaker": speaker, "text": message["content"]})
    return turns


def _record(line: int, raw: str, reasons_allowed: tuple[str, ...]) -> _Record:
    value = json_line_parse(raw)
    if not isinstance(value, dict):
        raise ValueError("a line must be one JSON object")
    pair_id = value.get("id")
    if not isinstance(pair_id, str | int) or isinstance(pair_id, bool) or not str(pair_id).strip():
        raise ValueError("'id' must be a non-empty text or number")
    if len(str(pair_id)) > MAX_ID_LENGTH:
        raise ValueError(f"'id' is longer than {MAX_ID_LENGTH} characters")
    reasons = value.get("reasons") or []
    if not isinstance(reasons, list) or any(
        not isinstance(reason, str) or reason not in reasons_allowed for reason in reasons
    ):
        raise ValueError(
            f"'reasons' must list the world's rubric dimensions ({', '.join(reasons_allowed)})"
        )
    reviewer = value.get("reviewer") or ""
    if not isinstance(reviewer, str) or len(reviewer) > 200:
        raise ValueError("'reviewer' must be a label of at most 200 characters")
    chosen, rejected = (
        _reply(value.get("chosen"), "chosen"),
        _reply(value.get("rejected"), "rejected"),
    )
    if chosen == rejected:
        raise ValueError("'chosen' and 'rejected' are the same words: there is no preference")
    return _Record(
        line=line,
        id=str(pair_id).strip(),
        dialogue=_dialogue(value.get("prompt", [])),
        chosen=chosen,
        rejected=rejected,
        reasons=list(dict.fromkeys(reasons)),
        reviewer=reviewer.strip(),
    )


def preferences_validate(text: str | bytes, *, world: World | None = None) -> list[_Record]:
    """Every line checked; PreferenceImportError naming each bad one (and repeated ids).
    Reasons must be the world's (its rubric's dimensions; the seven without a world)."""
    reasons_allowed = world_dimension_names(world)
    records, problems, seen = [], [], {}
    text = import_text_decode(text, error=PreferenceImportError)
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            record = _record(number, raw, reasons_allowed)
        except ValueError as error:
            problems.append(ImportProblem(number, str(error)))
            continue
        if record.id in seen:
            problems.append(
                ImportProblem(number, f"id '{record.id}' is also on line {seen[record.id]}")
            )
            continue
        seen[record.id] = number
        records.append(record)
    if problems:
        raise PreferenceImportError(problems)
    if not records:
        raise PreferenceImportError([ImportProblem(1, "no preference pairs in the file")])
    return records


def preferences_import(
    *, world: World, text: str | bytes, source: str = ""
) -> PreferenceImportReport:
    """Import preference pairs into `world` as picks: all or nothing, idempotent by id."""
    records = preferences_validate(text, world=world)
    report = PreferenceImportReport()
    label = f"{IMPORTED}:{source}"[:300] if source else IMPORTED
    with transaction.atomic():
        existing = set(
            Pick.objects.filter(world=world, external_id__in=[r.id for r in records]).values_list(
                "external_id", flat=True
            )
        )
        new = [record for record in records if record.id not in existing]
        report.unchanged = len(records) - len(new)
        moments = Moment.objects.bulk_create(
            Moment(world=world, kind=Moment.Kind.IMPORTED, context=record.dialogue)
            for record in new
        )
        replies = Reply.objects.bulk_create(
            Reply(moment=moment, text=text, source=Reply.Source.IMPORTED)
            for moment, record in zip(moments, new, strict=True)
            for text in (record.chosen, record.rejected)
        )
        pairs = DuelPair.objects.bulk_create(
            DuelPair(
                world=world,
                moment=moment,
                reply_a=replies[2 * index],
                reply_b=replies[2 * index + 1],
                dialogue=preference_format.dialogue_json(record.dialogue),
                judge_model=IMPORTED,
                judge_total=0.0,
                picks_wanted=1,
                pick_count=1,
                # Already decided: never served in the Duel's queue.
                is_open=False,
            )
            for index, (moment, record) in enumerate(zip(moments, new, strict=True))
        )
        Pick.objects.bulk_create(
            Pick(
                pair=pair,
                world=world,
                chosen_side="A",
                chosen_reply=pair.reply_a,
                rejected_reply=pair.reply_b,
                chosen_source=IMPORTED,
                rejected_source=IMPORTED,
                reasons=record.reasons,
                reviewer=None,
                reviewer_name=record.reviewer or label,
                source=label,
                external_id=record.id,
            )
            for pair, record in zip(pairs, new, strict=True)
        )
        report.created = len(new)
        report.ids = [record.id for record in new]
        if new:
            # Chosen once the world can spare them, before anything learns from the pairs.
            held_out_pairs_ensure(world=world)
    return report


def preference_imported_ids(pick_ids: list[int]) -> dict[int, str]:
    """The `id` each imported pick's pair carried in its file, by pick id (a read: the TRL
    export names such a pair as its source did, so the file joins back to it)."""
    return dict(
        Pick.objects.filter(pk__in=pick_ids)
        .exclude(external_id="")
        .values_list("pk", "external_id")
    )
