"""The wording trainers' spec (RLHF and DPO): parsed and checked before any model loads.

The Train step writes one JSON spec per job:

    {"pack": "lettings", "version": 3,            # version = the frozen preference version
     "base": "Qwen/Qwen3-14B", "gpu": {"type": "rtx-pro-6000", "count": 4},
     "epochs": 1, "system": "You are ...", "seed": 0,   # system: the world's system prompt
     "pairs": [{"dialogue": [{"speaker": "customer", "text": ...}, ...]   # or "prompt": messages
                "chosen": "...", "rejected": "...", "reasons": ["respect"], "call_id": "...",
                "system": "..."}],                 # optional: this pair's world's prompt
     "reward_source": "picks" | "outcomes",        # RLHF only
     "outcome_examples": [{"call_id", "dialogue": [...], "reply", "won"}],
     "output_dir": "versions/lettings/v7",          # relative: under models_dir
     "models_dir": "var/models", "base_allowlist": "listed" | "a/b,c/d" | null,
     "max_steps": 4, "min_pairs": 8,                # optional, for tests and benchmarks
     "reward_model": {...}, "policy": {...}, "dpo": {...}}   # optional config overrides

This module stays light (no torch, no transformers at import) so the Django side can refuse a
bad spec at Train time with the same messages. It also holds the data helpers both routes share:
outcome examples from real calls, the held-out split, prompt trimming. Dialogues become chat
messages in the one conversation builder (trainers.conversation), the one serving uses too.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from trainers.bases import FREE_HEAP_BOUND, return_freed_memory, validate_base
from trainers.conversation import Message, conversation_messages
from trainers.registry import DPO, RLHF, trainer_label
from trainers.runtime import Progress

# The wording trainers (trainers.registry: RLHF, DPO), spelt out as a type can only spell them.
Trainer = Literal["rlhf", "dpo"]

MIN_PAIRS: dict[str, int] = {RLHF: 500, DPO: 200}
"""Pairs each route asks for: a reward model needs about twice DPO's to generalise."""
REWARD_SOURCES = ("picks", "outcomes")
OPENING_AGENT_TURNS = 4
"""An outcome example is each of the first four agent turns of a call (as Evaluate replays)."""
CPU_STAGE_SECONDS = 600.0
"""On a CPU, a spec that sets no steps gives each stage about ten minutes: the stage reads how
fast this machine is by running, and stops at the budget having seen the rows it could afford
(in the seeded order); the result says how much of the data that was. GPU pools run the
spec's epochs as given."""


@dataclass(frozen=True)
class Pair:
    """One frozen pick: the conversation so far, the reply preferred and the one passed over."""

    prompt: tuple[Message, ...]
    chosen: str
    rejected: str
    reasons: tuple[str, ...] = ()
    call_id: str | None = None


@dataclass(frozen=True)
class OutcomeExample:
    """One agent turn of a labelled real call: the call so far, what the agent said, and
    whether the call was won."""

    call_id: str
    prompt: tuple[Message, ...]
    reply: str
    won: bool


@dataclass(frozen=True)
class WordingSpec:
    trainer: Trainer
    pack: str
    preference_version: int
    base: str
    gpu_type: str
    gpu_count: int
    epochs: float
    system: str
    pairs: tuple[Pair, ...]
    reward_source: str
    outcome_examples: tuple[OutcomeExample, ...]
    seed: int
    models_dir: Path
    output_dir: Path
    max_steps: int | None
    job: int | str | None
    overrides: Mapping[str, Mapping[str, Any]]
    time_budget_s: float | None = None

    @property
    def stage_budget_seconds(self) -> float | None:
        """Seconds each stage may run: the spec's budget, else ten minutes on a CPU when no
        steps are set; None (the epochs as given) on a GPU or with max_steps."""
        if self.time_budget_s is not None:
            return self.time_budget_s
        if self.max_steps is not None or self.gpu_type not in {"", "cpu"}:
            return None
        return CPU_STAGE_SECONDS

    @property
    def runs_to_a_budget(self) -> bool:
        """A CPU stage with no steps set: it stops at its time budget, and the trainers use
        their CPU defaults (shorter windows, a larger step size) unless the spec sets them."""
        return self.max_steps is None and self.gpu_type in {"", "cpu"}

    @property
    def device_type(self) -> Literal["cpu", "cuda"]:
        """Where every model of the run loads and every pass runs: the CPU for a CPU spec, the
        card otherwise (`trainers.bases.device_for`)."""
        return "cpu" if self.gpu_type in {"", "cpu"} else "cuda"

    def section(self, name: str) -> Mapping[str, Any]:
        """The config overrides the spec gives for one part ("reward_model", "policy", "dpo")."""
        return self.overrides.get(name, {})


# --- parsing ----------------------------------------------------------------------------


def parse_wording_spec(raw: Mapping[str, Any], *, trainer: Trainer) -> WordingSpec:
    """The spec, checked; ValueError with a message a person can act on. The checks run in
    the spec's order (the world and version, the base, the machine, the data, where it saves,
    the limits, the overrides), so the first thing wrong is the one reported."""
    if not isinstance(raw, Mapping):
        raise ValueError("The spec must be a JSON object.")
    pack, version = _pack_and_version(raw)
    base = validate_base(raw.get("base"), allowlist=raw.get("base_allowlist") or None)
    gpu_type, gpu_count = _gpu(raw)
    epochs = raw.get("epochs", 1)
    if isinstance(epochs, bool) or not isinstance(epochs, int | float) or not epochs > 0:
        raise ValueError(f"'epochs' must be a positive number, not {epochs!r}.")
    system = raw.get("system") or ""
    if not isinstance(system, str):
        raise ValueError("'system' must be text.")
    pairs = _pairs(raw, trainer=trainer, version=version, system=system)
    reward_source, outcome_examples = _reward_source(raw, trainer=trainer, system=system)
    seed = raw.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"'seed' must be a whole number, not {seed!r}.")
    models_dir, output_dir = _folders(raw, pack=pack, trainer=trainer, version=version)
    max_steps = raw.get("max_steps")
    if max_steps is not None:
        max_steps = _positive_int(max_steps, "max_steps")
    time_budget = _time_budget(raw)
    return WordingSpec(
        trainer=trainer,
        pack=pack.strip(),
        preference_version=version,
        base=base,
        gpu_type=gpu_type,
        gpu_count=gpu_count,
        epochs=float(epochs),
        system=system,
        pairs=pairs,
        reward_source=reward_source,
        outcome_examples=outcome_examples,
        seed=seed,
        models_dir=models_dir,
        output_dir=output_dir,
        max_steps=max_steps,
        job=raw.get("job"),
        overrides=_overrides(raw),
        time_budget_s=time_budget,
    )


def _pack_and_version(raw: Mapping[str, Any]) -> tuple[str, int]:
    """The world (pack) as written, and the frozen preference version it trains on."""
    pack = raw.get("pack")
    if not isinstance(pack, str) or not pack.strip():
        raise ValueError("The spec names no pack (world).")
    version = raw.get("version")
    if version is None:
        raise ValueError(
            "The spec names no preference version ('version'): freeze the picks first and "
            "train on a frozen version."
        )
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ValueError(f"The preference version must be a number from 1 up, not {version!r}.")
    return pack, version


def _gpu(raw: Mapping[str, Any]) -> tuple[str, int]:
    """(card type, card count); no "gpu" is one CPU."""
    gpu = raw.get("gpu") or {}
    if not isinstance(gpu, Mapping):
        raise ValueError('\'gpu\' must be an object: {"type": ..., "count": ...}.')
    return str(gpu.get("type") or "cpu"), _positive_int(gpu.get("count", 1), "gpu.count")


def _pairs(
    raw: Mapping[str, Any], *, trainer: Trainer, version: int, system: str
) -> tuple[Pair, ...]:
    """The frozen picks, at least as many as the route asks for (min_pairs where the spec
    sets it)."""
    pairs = tuple(
        _parse_pair(item, index, system) for index, item in enumerate(_list(raw, "pairs"))
    )
    # A reward model from outcome labels needs no picks: the policy answers the calls' openings.
    outcomes_only = trainer == RLHF and raw.get("reward_source") == "outcomes"
    minimum = 0 if outcomes_only else MIN_PAIRS[trainer]
    if raw.get("min_pairs") is not None:
        minimum = _positive_int(raw["min_pairs"], "min_pairs")
    if len(pairs) < minimum:
        route = trainer_label(trainer)
        raise ValueError(
            f"{route} asks for at least {minimum} pairs and preference version {version} has "
            f"{len(pairs)}: collect more picks in the Duel and freeze a new version."
        )
    return pairs


def _reward_source(
    raw: Mapping[str, Any], *, trainer: Trainer, system: str
) -> tuple[str, tuple[OutcomeExample, ...]]:
    """(reward source, outcome examples): RLHF's reward model learns from the picks or from
    labelled real calls, won and lost, from at least two calls; DPO always reads the picks."""
    if trainer != RLHF:
        return "picks", ()
    reward_source = raw.get("reward_source") or "picks"
    if reward_source not in REWARD_SOURCES:
        raise ValueError(
            f"Unknown reward source {reward_source!r}: 'picks' (the Duel's picks) or "
            "'outcomes' (the real calls' won/lost labels)."
        )
    if reward_source != "outcomes":
        return reward_source, ()
    outcome_examples = tuple(
        _parse_outcome(item, index, system)
        for index, item in enumerate(_list(raw, "outcome_examples"))
    )
    calls = {example.call_id for example in outcome_examples}
    labels = {example.won for example in outcome_examples}
    if len(calls) < 2 or len(labels) < 2:
        raise ValueError(
            "A reward model from outcome labels needs labelled real calls, won and lost, "
            f"from at least two calls; the spec has {len(outcome_examples)} examples "
            f"from {len(calls)} calls. Import real calls with outcomes into the world."
        )
    return reward_source, outcome_examples


def _folders(
    raw: Mapping[str, Any], *, pack: str, trainer: Trainer, version: int
) -> tuple[Path, Path]:
    """(models folder, output folder): a relative output folder lies under the models'."""
    models_dir = Path(raw.get("models_dir") or os.environ.get("LEVERS9_MODELS_DIR", "var/models"))
    output_dir = raw.get("output_dir") or f"versions/{pack}/{trainer}-preferences-v{version}"
    output_dir = Path(output_dir)
    if not output_dir.is_absolute():
        output_dir = models_dir / output_dir
    return models_dir, output_dir


def _time_budget(raw: Mapping[str, Any]) -> float | None:
    """The seconds each stage may run, where the spec sets them."""
    time_budget = raw.get("time_budget_s")
    if time_budget is not None and (
        isinstance(time_budget, bool)
        or not isinstance(time_budget, int | float)
        or not 0 < time_budget <= 7 * 24 * 3600
    ):
        raise ValueError(
            f"'time_budget_s' must be seconds per stage, above 0 and at most a week, not "
            f"{time_budget!r}."
        )
    return None if time_budget is None else float(time_budget)


def _overrides(raw: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The spec's own settings for each part, each an object (checked by name later)."""
    overrides = {}
    for name in ("reward_model", "policy", DPO):
        section = raw.get(name) or {}
        if not isinstance(section, Mapping):
            raise ValueError(f"'{name}' must be an object of settings.")
        overrides[name] = dict(section)
    return overrides


def config_with(config: Any, overrides: Mapping[str, Any], *, where: str) -> Any:
    """A frozen config dataclass with the spec's overrides; unknown names are refused."""
    names = {field.name for field in dataclasses.fields(config)}
    unknown = sorted(set(overrides) - names)
    if unknown:
        raise ValueError(
            f"Unknown setting(s) {', '.join(unknown)} for {where}: choose from "
            f"{', '.join(sorted(names))}."
        )
    return dataclasses.replace(config, **overrides)


def _list(raw: Mapping[str, Any], key: str) -> list[Any]:
    value = raw.get(key)
    if value is None:
        raise ValueError(f"The spec has no '{key}'.")
    if not isinstance(value, list):
        raise ValueError(f"'{key}' must be a list.")
    return value


def _positive_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"'{name}' must be a whole number from 1 up, not {value!r}.")
    return value


def _text(item: Mapping[str, Any], key: str, where: str) -> str:
    value = item.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{where} has no '{key}' text.")
    return value


def _conversation(item: Mapping[str, Any], where: str, system: str) -> tuple[Message, ...]:
    # An item from another world than the spec's carries that world's system prompt.
    if isinstance(item.get("system"), str) and item["system"]:
        system = item["system"]
    if "prompt" in item:
        prompt = item["prompt"]
        if not isinstance(prompt, list) or not all(
            isinstance(m, Mapping)
            and m.get("role") in {"system", "user", "assistant"}
            and isinstance(m.get("content"), str)
            for m in prompt
        ):
            raise ValueError(f"{where}: 'prompt' must be a list of {{role, content}} messages.")
        # Through the one builder too: the prompt's own system message wins over the spec's.
        own_system = "\n\n".join(m["content"] for m in prompt if m["role"] == "system")
        turns = [
            {"speaker": "agent" if m["role"] == "assistant" else "customer", "text": m["content"]}
            for m in prompt
            if m["role"] != "system"
        ]
        return tuple(conversation_messages(turns, system_prompt=own_system or system))
    if "dialogue" in item:
        dialogue = item["dialogue"]
        if not isinstance(dialogue, list) or not all(
            isinstance(turn, Mapping)
            and turn.get("speaker") in {"agent", "customer"}
            and isinstance(turn.get("text"), str)
            for turn in dialogue
        ):
            raise ValueError(
                f"{where}: 'dialogue' must be a list of {{speaker: agent|customer, text}} turns."
            )
        return tuple(conversation_messages(dialogue, system_prompt=system))
    raise ValueError(f"{where} has neither 'prompt' (messages) nor 'dialogue' (turns).")


def _parse_pair(item: Any, index: int, system: str) -> Pair:
    where = f"Pair {index + 1}"
    if not isinstance(item, Mapping):
        raise ValueError(f"{where} must be an object.")
    reasons = item.get("reasons") or ()
    if isinstance(reasons, str):
        reasons = tuple(reason for reason in reasons.split(",") if reason)
    call_id = item.get("call_id")
    return Pair(
        prompt=_conversation(item, where, system),
        chosen=_text(item, "chosen", where),
        rejected=_text(item, "rejected", where),
        reasons=tuple(str(reason) for reason in reasons),
        call_id=None if call_id is None else str(call_id),
    )


def _parse_outcome(item: Any, index: int, system: str) -> OutcomeExample:
    where = f"Outcome example {index + 1}"
    if not isinstance(item, Mapping):
        raise ValueError(f"{where} must be an object.")
    call_id = item.get("call_id")
    if call_id is None or str(call_id) == "":
        raise ValueError(f"{where} has no 'call_id' (needed to hold out by call).")
    won = item.get("won")
    if not isinstance(won, bool):
        raise ValueError(f"{where}: 'won' must be true or false.")
    return OutcomeExample(
        call_id=str(call_id),
        prompt=_conversation(item, where, system),
        reply=_text(item, "reply", where),
        won=won,
    )


# --- conversations ------------------------------------------------------------------------


def outcome_examples_from_calls(
    calls: Iterable[Mapping[str, Any]], *, agent_turns: int = OPENING_AGENT_TURNS
) -> list[dict[str, Any]]:
    """Every agent turn in the opening of every labelled real call, as spec outcome examples
    ({"call_id", "dialogue", "reply", "won"}). Calls without a won/lost outcome are skipped."""
    examples = []
    for call in calls:
        outcome = call.get("outcome")
        if outcome not in {"won", "lost"}:
            continue
        turns = call.get("turns") or []
        seen = 0
        for index, turn in enumerate(turns):
            if turn.get("speaker") != "agent":
                continue
            seen += 1
            if seen > agent_turns:
                break
            examples.append(
                {
                    "call_id": str(call["id"]),
                    "dialogue": [
                        {"speaker": t["speaker"], "text": t["text"]} for t in turns[:index]
                    ],
                    "reply": turn["text"],
                    "won": outcome == "won",
                }
            )
    return examples


def trim_prompt(
    count_tokens: Callable[[list[Message]], int],
    prompt: Sequence[Message],
    replies: Sequence[str],
    *,
    max_tokens: int,
) -> list[Message]:
    """The prompt with its oldest turns dropped until prompt + the longest reply (in tokens) fits.

    The system message stays, and the kept part still opens with a user turn. `count_tokens`
    counts a whole conversation's tokens (the chat template applied).
    """
    messages = list(prompt)
    start = 1 if messages and messages[0]["role"] == "system" else 0

    def longest() -> int:  # in tokens: a short word count can still be many tokens
        return max(
            count_tokens([*messages, {"role": "assistant", "content": reply}]) for reply in replies
        )

    while longest() > max_tokens:
        if len(messages) - start <= 1:
            break
        del messages[start]
        while len(messages) - start > 1 and messages[start]["role"] != "user":
            del messages[start]
    return messages


# --- held-out splits -----------------------------------------------------------------------


def held_out_split(
    groups: Sequence[str], *, fraction: float, seed: int, minimum_groups: int = 0
) -> tuple[list[int], list[int]]:
    """(train indices, held-out indices): whole groups are held out until `fraction` of the
    rows are, and at least `minimum_groups` groups (calls, or pairs) — but never more than
    half of the groups for a minimum —, so no group (call) is ever on both sides. At least
    one group on each side."""
    order: dict[str, list[int]] = {}
    for index, group in enumerate(groups):
        order.setdefault(group, []).append(index)
    names = sorted(order)
    if len(names) < 2:
        raise ValueError("Holding out needs rows from at least two calls (or pairs).")
    rng = np.random.default_rng(seed)
    rng.shuffle(names)
    wanted = max(1, math.ceil(fraction * len(groups)))
    wanted_groups = min(minimum_groups, len(names) // 2)
    held: list[int] = []
    for taken, name in enumerate(names[:-1]):
        if len(held) >= wanted and taken >= wanted_groups:
            break
        held.extend(order[name])
    held_set = set(held)
    train = [index for index in range(len(groups)) if index not in held_set]
    return train, sorted(held)


def length_grouped_order(
    lengths: Sequence[int], *, batch_size: int, seed: int, group_batches: int = 8
) -> list[int]:
    """The rows in a seeded order whose batches hold rows of about the same length, so a
    batch pads little: the rows are shuffled, cut into groups of `group_batches` batches,
    sorted by length within each group, cut into batches, and the batches shuffled. A trainer
    reads them in this order (sequentially), so a run stopped by its budget has seen a seeded
    sample of the rows, not the shortest ones."""
    rng = np.random.default_rng(seed)
    order = [int(index) for index in rng.permutation(len(lengths))]
    size = max(1, batch_size) * max(1, group_batches)
    batches: list[list[int]] = []
    for first in range(0, len(order), size):
        group = sorted(order[first : first + size], key=lambda index: lengths[index])
        batches += [group[at : at + batch_size] for at in range(0, len(group), batch_size)]
    return [index for position in rng.permutation(len(batches)) for index in batches[position]]


def pair_groups(pairs: Sequence[Pair]) -> list[str]:
    """What the pairs are held out by: their call where the pick names one, else each pair."""
    return [pair.call_id or f"pair-{index}" for index, pair in enumerate(pairs)]


# --- progress --------------------------------------------------------------------------------


class StageProgress:
    """Maps each stage's own steps onto the whole job's bar (e.g. reward model, then policy).

    `planned` is the stages in order with the steps each is expected to take; a stage's real
    count replaces the plan when its Trainer starts."""

    def __init__(
        self,
        progress: Progress,
        planned: Mapping[str, int],
        *,
        budget_seconds: float | None = None,
    ):
        self.progress = progress
        self.planned = {stage: max(1, int(steps)) for stage, steps in planned.items()}
        self.budget_seconds = budget_seconds

    @property
    def total(self) -> int:
        return sum(self.planned.values())

    def start(self, stage: str, steps: int) -> None:
        self.planned[stage] = max(1, int(steps))

    def step(self, stage: str, step: int, **metrics: float | int | str) -> None:
        stages = list(self.planned)
        offset = sum(self.planned[name] for name in stages[: stages.index(stage)])
        self.progress(min(offset + step, self.total), self.total, stage=stage, **metrics)

    def done(self, **metrics: float | int | str) -> None:
        self.progress(self.total, self.total, stage="done", **metrics)

    def callback(self, stage: str) -> Any:
        """A transformers TrainerCallback reporting this stage's steps and its logged metrics."""
        from transformers import TrainerCallback

        stages = self

        class _Callback(TrainerCallback):
            def __init__(self) -> None:
                self.history: list[dict[str, float]] = []
                self.started = self.last_logged = time.monotonic()
                self.planned_steps = 0
                self.stopped_by_budget = False
                # What is left of the stage's budget when its Trainer starts (a probe before
                # it may have spent some: trainers.wording.reward_probe).
                self.budget_seconds = stages.budget_seconds

            def on_train_begin(self, args, state, control, **kwargs):
                stages.start(stage, state.max_steps)
                self.started = self.last_logged = time.monotonic()
                self.planned_steps = int(state.max_steps)

            def on_step_end(self, args, state, control, **kwargs):
                # A step reuses the memory it frees (its LM-head tiles come back many times),
                # but batches differ in length, and a heap kept whole across steps fragments
                # (trainers.bases.return_freed_memory): give it back once 2 GiB lie free.
                return_freed_memory(above_bytes=FREE_HEAP_BOUND)
                budget = self.budget_seconds
                if budget is not None and time.monotonic() - self.started > budget:
                    if state.global_step < state.max_steps:
                        self.stopped_by_budget = True
                    control.should_training_stop = True

            @property
            def data_seen(self) -> dict[str, Any]:
                """How much of the planned passes the stage ran before its budget ended it."""
                steps = int(self.history[-1]["step"]) if self.history else 0
                planned = max(1, self.planned_steps)
                return {
                    "steps": steps,
                    "planned_steps": self.planned_steps,
                    "share_of_planned": round(min(1.0, steps / planned), 4),
                    "stopped_by_budget": self.stopped_by_budget,
                    "budget_seconds": stages.budget_seconds,
                    "trainer_budget_seconds": self.budget_seconds,
                    **self.trained_tokens,
                }

            @property
            def trained_tokens(self) -> dict[str, Any]:
                """Tokens the stage trained on (not padding, every card) and how fast, where
                the Trainer counted them (include_num_input_tokens_seen)."""
                tokens = last_value(self.history, "num_input_tokens_seen")
                seconds = self.last_logged - self.started
                if tokens is None or seconds <= 0:
                    return {}
                return {
                    "trained_tokens": int(tokens),
                    "trained_tokens_per_second": round(tokens / seconds, 1),
                }

            def on_log(self, args, state, control, logs=None, **kwargs):
                # Every step logs (logging_steps=1), and on_log comes after that step's
                # on_step_end: report here so the line carries the step's own metrics.
                numbers = {
                    key: float(value)
                    for key, value in (logs or {}).items()
                    if isinstance(value, int | float) and not isinstance(value, bool)
                }
                self.history.append({"step": float(state.global_step), **numbers})
                self.last_logged = time.monotonic()
                if state.is_world_process_zero:
                    shown = {k: round(v, 5) for k, v in numbers.items() if math.isfinite(v)}
                    stages.step(stage, state.global_step, **shown)

        return _Callback()


def planned_steps(rows: int, *, batch_size: int, accumulation: int, epochs: float) -> int:
    """Optimizer steps a Trainer will take over `rows` (on one process per card)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    per_epoch = max(1, math.ceil(rows / (batch_size * world)) // max(1, accumulation))
    return max(1, math.ceil(per_epoch * epochs))


# --- the result both routes return -------------------------------------------------------------


def version_record(
    spec: WordingSpec,
    *,
    pairs_train: int,
    pairs_held_out: int,
    held_out_accuracy: float | None,
    held_out_auc: float | None,
    merged_weights: str,
    reward_adapter: str | None,
    outcome_examples: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """What the version records (plain values): the same keys for RLHF and DPO."""
    return {
        "method": spec.trainer,
        "pack": spec.pack,
        "preference_version": spec.preference_version,
        "base": spec.base,
        "reward_source": spec.reward_source if spec.trainer == RLHF else None,
        "pairs": {"total": len(spec.pairs), "train": pairs_train, "held_out": pairs_held_out},
        "held_out_accuracy": held_out_accuracy,
        "held_out_auc": held_out_auc,
        "merged_weights": merged_weights,
        "reward_adapter": reward_adapter,
        "gpu": {"type": spec.gpu_type, "count": spec.gpu_count},
        "epochs": spec.epochs,
        "seed": spec.seed,
        "outcome_examples": dict(outcome_examples) if outcome_examples else None,
        "job": spec.job,
    }


def curve(
    history: Sequence[Mapping[str, float]], keys: Sequence[str], *, points: int = 100
) -> list[dict[str, float]]:
    """A logged history thinned to at most `points` rows of (step and the keys it has)."""
    rows = [
        {"step": int(row.get("step", 0)), **{k: float(row[k]) for k in keys if k in row}}
        for row in history
        if any(k in row for k in keys)
    ]
    if len(rows) <= points:
        return rows
    stride = math.ceil(len(rows) / points)
    return [*rows[::stride][: points - 1], rows[-1]]


def mean_value(history: Sequence[Mapping[str, float]], key: str) -> float | None:
    """The running mean of a logged metric over every step that logged it (NaNs left out)."""
    values = [float(row[key]) for row in history if key in row and math.isfinite(row[key])]
    return sum(values) / len(values) if values else None


def last_value(history: Sequence[Mapping[str, float]], key: str) -> float | None:
    for row in reversed(history):
        if key in row and math.isfinite(row[key]):
            return float(row[key])
    return None
