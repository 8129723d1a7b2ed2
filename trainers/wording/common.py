"""What the wording fits share beyond the base (`trainers.bases`): the settings every
fit has, prompts trimmed to a window, padded batches for the measuring passes, one Trainer run
in a scratch folder, the time a budgeted stage keeps for measuring, and a run's end (the merged
version saved on the main process, the last progress line, the seconds each stage took).

The reward model (`trainers.wording.reward_model`), RLHF's policy (`trainers.wording.rlhf`,
`trainers.wording.ppo_update`) and DPO (`trainers.wording.dpo`) each use it. Pure Python (torch
and transformers inside functions), never Django.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence, Sized
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Self

import numpy as np

from trainers.bases import (
    ACTIVATION_SHARE_OF_FREE_MEMORY,
    CHAT_TEMPLATE_KWARGS,
    activation_bytes,
    activations_fit,
    conversation_ids,
    free_memory,
    lora_config,
    model_device,
    quiet_deprecations,
    save_adapter,
    save_merged,
    train_quietly,
    training_arguments,
)
from trainers.wording.spec import (
    Message,
    Pair,
    StageProgress,
    WordingSpec,
    config_with,
    held_out_split,
    planned_steps,
    trim_prompt,
    version_record,
)

# --- settings -------------------------------------------------------------------------------


@dataclass(frozen=True)
class FitSettings:
    """The settings every wording fit has (the reward model, the policy, DPO), with the same
    defaults; each fit's own settings add the rest."""

    epochs: float = 1.0
    """Passes over the training rows (the spec's epochs)."""
    max_steps: int | None = None
    """Stop after this many optimizer steps (tests, benchmarks); None runs the epochs."""
    batch_size: int = 8
    """Rows (pairs, outcome rows, sampled replies) per card per step."""
    gradient_accumulation_steps: int = 1
    """Steps whose gradients are summed before one optimizer update."""
    lora_r: int = 16
    """LoRA rank of the fit's adapter."""
    lora_alpha: int = 32
    """LoRA scale (alpha / r multiplies the update)."""
    lora_dropout: float = 0.0
    """Dropout on the LoRA input."""
    seed: int = 0
    """Seeds the held-out split and the data order, and a fresh head or the sampling."""
    sized_to_memory: bool = False
    """Choose the rows per step (and whether to checkpoint activations) from the card's free
    memory and the rows' lengths (`size_the_steps`): a GPU spec that sets no batch_size."""

    def lora(
        self,
        task_type: Literal["CAUSAL_LM", "SEQ_CLS"] = "CAUSAL_LM",
        *,
        modules_to_save: Sequence[str] | None = None,
    ) -> Any:
        """The LoRA these settings describe (`trainers.bases.lora_config`)."""
        return lora_config(
            task_type=task_type,
            r=self.lora_r,
            alpha=self.lora_alpha,
            dropout=self.lora_dropout,
            modules_to_save=modules_to_save,
        )

    def planned_steps(self, rows: int) -> int:
        """The optimizer steps a Trainer will take over `rows`: max_steps where set."""
        return self.max_steps or planned_steps(
            rows,
            batch_size=self.batch_size,
            accumulation=self.gradient_accumulation_steps,
            epochs=self.epochs,
        )

    @classmethod
    def from_spec(
        cls,
        spec: WordingSpec,
        section: str,
        *,
        where: str,
        cpu_defaults: Mapping[str, Any] | None = None,
    ) -> Self:
        """The settings a spec asks for: the spec's epochs, steps and seed; on a CPU stage
        that runs to a time budget, `cpu_defaults`; then the spec's own `section`, which wins
        (unknown names are refused, saying `where`)."""
        settings = cls(epochs=spec.epochs, max_steps=spec.max_steps, seed=spec.seed)
        if cpu_defaults and spec.runs_to_a_budget:
            settings = config_with(settings, cpu_defaults, where=where)
        if spec.device_type == "cuda" and "batch_size" not in spec.section(section):
            settings = dataclasses.replace(settings, sized_to_memory=True)
        return config_with(settings, spec.section(section), where=where)


@dataclass(frozen=True)
class HeldOutSettings(FitSettings):
    """The settings of a fit measured on rows it holds out (the reward model, DPO): both hold
    out the same split of the same pairs when set alike."""

    held_out_fraction: float = 0.1
    """Share of the rows held out (whole calls at a time) to measure the fit."""
    held_out_minimum: int = 0
    """Hold out at least this many calls (pairs where a pick names no call), up to half of
    them, when a tenth is too few to measure: a tenth of 200 picks is 20, whose interval spans
    ±0.2 (100 give about ±0.1)."""

    def held_out(self, groups: Sequence[str]) -> tuple[list[int], list[int]]:
        """(train, held-out) row indices: whole groups (calls) on one side or the other."""
        return held_out_split(
            groups,
            fraction=self.held_out_fraction,
            seed=self.seed,
            minimum_groups=self.held_out_minimum,
        )


# --- conversations ----------------------------------------------------------------------------


def as_reply(text: str) -> list[Message]:
    """A reply as the one assistant message that ends a conversation."""
    return [{"role": "assistant", "content": text}]


def trimmed(
    tokenizer: Any, prompt: Sequence[Message], replies: Sequence[str], max_tokens: int
) -> list[Message]:
    """`prompt` with its oldest turns dropped until it and its longest reply fit `max_tokens`
    through the chat template (`trainers.wording.spec.trim_prompt`)."""
    return trim_prompt(
        lambda messages: len(conversation_ids(tokenizer, messages)),
        prompt,
        replies,
        max_tokens=max_tokens,
    )


def preference_rows(
    prompts: Sequence[Sequence[Message]], pairs: Sequence[Pair], indices: Sequence[int]
) -> list[dict[str, Any]]:
    """TRL's conversational preference rows (DPO, the reward model's Bradley-Terry) for the
    pairs at `indices`, in that order, each with its trimmed prompt."""
    return [
        {
            "prompt": prompts[index],
            "chosen": as_reply(pairs[index].chosen),
            "rejected": as_reply(pairs[index].rejected),
            "chat_template_kwargs": CHAT_TEMPLATE_KWARGS,
        }
        for index in indices
    ]


# --- measuring passes -------------------------------------------------------------------------


@contextlib.contextmanager
def evaluating(model: Any) -> Iterator[Any]:
    """`model` in eval mode, without gradients, for a measuring pass; it goes back to training
    after if it was training before. Yields the device its parameters are on."""
    import torch

    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            yield model_device(model)
    finally:
        if was_training:
            model.train()


def padded_batch(
    rows: Sequence[Sequence[int]], pad_token_id: int, *, left: bool = False
) -> tuple[Any, Any]:
    """(input_ids, attention_mask) of token rows padded to the longest: on the right for a
    forward pass read at each row's own positions, on the `left` for generation."""
    import torch

    width = max(len(ids) for ids in rows)
    input_ids = torch.full((len(rows), width), pad_token_id, dtype=torch.long)
    attention = torch.zeros((len(rows), width), dtype=torch.long)
    for row, ids in enumerate(rows):
        columns = slice(width - len(ids), width) if left else slice(0, len(ids))
        input_ids[row, columns] = torch.tensor(list(ids))
        attention[row, columns] = 1
    return input_ids, attention


def by_length(lengths: Sequence[int], batch_size: int) -> Iterator[list[int]]:
    """Row indices in batches of about the same length (less padding); the caller puts the
    answers back in row order."""
    order = sorted(range(len(lengths)), key=lambda index: lengths[index])
    for first in range(0, len(order), batch_size):
        yield order[first : first + batch_size]


# --- training -----------------------------------------------------------------------------------


def use_checkpointing(choice: bool | None, model: Any, step_tokens: int) -> bool:
    """Whether to recompute activations in the backward pass: the settings' `choice`, or where
    they leave it open, only when a step's `step_tokens` do not fit (`bases.activations_fit`)."""
    return not activations_fit(model, step_tokens) if choice is None else choice


GPU_STEP_TOKENS = 32_768
"""Padded tokens a card's step aims at. Measured on an H200 (DPO, 8B shape): a step costs
about 0.64 s fixed plus 0.12 ms a padded token, so at 4 pairs a step the fixed part was 60-75%
of it; at 32k tokens it is under a seventh."""
GPU_MOST_ROWS = 128


def checkpointed_bytes(model_config: Any, tokens: int) -> int:
    """An upper estimate of what a step keeps with activation checkpointing: every layer's
    input (4 bytes a unit of width) and one layer's activations, recomputed one at a time."""
    config = (
        model_config.get_text_config() if hasattr(model_config, "get_text_config") else model_config
    )
    layers = max(1, int(getattr(config, "num_hidden_layers", 1)))
    hidden = int(getattr(config, "hidden_size", 0))
    return tokens * 4 * layers * hidden + activation_bytes(model_config, tokens) // layers


def sized_batch(
    model: Any,
    *,
    longest: int,
    sequences_per_row: int,
    multiple: int = 1,
    choice: bool | None = None,
    free_bytes: int | None = None,
) -> tuple[int, bool]:
    """(rows per step, checkpointing) for a card: as many rows as make `GPU_STEP_TOKENS`
    padded tokens (each row is `sequences_per_row` sequences of at most `longest` tokens; a
    multiple of `multiple`, at most `GPU_MOST_ROWS`), kept in half the memory free. Activations
    are recomputed only when that many rows do not fit without it (`choice`, or
    LEVERS9_GRADIENT_CHECKPOINTING, decides instead); then the rows are as many as fit."""
    forced = os.environ.get("LEVERS9_GRADIENT_CHECKPOINTING", "").strip()
    if choice is None and forced in {"0", "1"}:
        choice = forced == "1"
    free = free_memory(model_device(model)) if free_bytes is None else free_bytes
    budget = ACTIVATION_SHARE_OF_FREE_MEMORY * free
    per_row = max(1, sequences_per_row * longest)
    most = max(multiple, min(GPU_MOST_ROWS, GPU_STEP_TOKENS // per_row) // multiple * multiple)

    def largest(cost: Any) -> int:
        rows = most
        while rows > multiple and cost(model.config, rows * per_row) > budget:
            rows = max(multiple, rows // 2 // multiple * multiple)
        return rows

    if choice is False or (
        choice is None and activation_bytes(model.config, most * per_row) <= budget
    ):
        return largest(activation_bytes), False
    return largest(checkpointed_bytes), True


def size_the_steps(
    settings: Any,
    model: Any,
    *,
    longest: int,
    sequences_per_row: int,
    multiple: int = 1,
    choice: bool | None = None,
) -> tuple[Any, bool]:
    """(settings, checkpointing): on a card whose spec left the batch open
    (`sized_to_memory`), the rows per step `sized_batch` chooses; elsewhere the settings' own
    batch, checkpointing where it does not fit (`use_checkpointing`)."""
    if not settings.sized_to_memory:
        step_tokens = sequences_per_row * settings.batch_size * longest
        return settings, use_checkpointing(choice, model, step_tokens)
    rows, checkpointing = sized_batch(
        model,
        longest=longest,
        sequences_per_row=sequences_per_row,
        multiple=multiple,
        choice=choice,
    )
    return dataclasses.replace(settings, batch_size=rows), checkpointing


def keep_time_to_measure(callback: Any, *, spent: float, reserved: float) -> None:
    """On a stage with a time budget, the Trainer gets what is left after `spent` seconds less
    `reserved` for the measuring after it, so the stage as a whole ends near its budget.

    At least half the budget trains: on a loaded machine measuring slows too, and a reserve
    taking the whole budget left one step (seen: DPO and the policy, one step each, while
    another training shared the two cores)."""
    budget = callback.budget_seconds
    if budget is not None:
        callback.budget_seconds = max(budget / 2, budget - spent - reserved)


MEASURING_SHARE = 0.1
"""On a stage with a time budget, the most of it the base's half of a trainer's own held-out
measuring takes (the trained half takes about as long again, kept by keep_time_to_measure).
Measured in the demo's pairs world (891 training pairs, 99 held out, 585 s): DPO's own measuring
took 261 s of the stage and left it 31 steps, where the bench's DPO (30 held out) took 61-68 and
beat its base. Fewer held-out rows only widen the trainer's own interval; the independent
measure against the base untrained reads the world's held-out calls, not these."""


def measured_within(
    items: Sequence[Any],
    measure: Any,
    *,
    seconds: float | None,
    chunk: int,
    seed: int,
    clock: Any = time.monotonic,
) -> tuple[list[int], list[Any]]:
    """(positions, results): `measure` (a list of items -> one result each) over `items` in a
    seeded order, `chunk` at a time, the first chunk always and each next one only while the
    chunks so far say it ends within `seconds` (None: all of them), so the rows measured are a
    fair sample of the held-out ones and not the file's first. The positions index `items`;
    the same positions are measured again after training.
    """
    order = [int(position) for position in np.random.default_rng(seed).permutation(len(items))]
    # Without a time limit, one call: the measure batches as it likes.
    size = max(1, len(order) if seconds is None else chunk)
    started = clock()
    positions: list[int] = []
    results: list[Any] = []
    for done, start in enumerate(range(0, len(order), size), start=1):
        part = order[start : start + size]
        results.extend(measure([items[position] for position in part]))
        positions.extend(part)
        spent = clock() - started
        if seconds is not None and spent + spent / done > seconds:
            break
    return positions, results


def measuring_seconds(budget_seconds: float | None) -> float | None:
    """How long the base's half of a budgeted stage's own measuring may take (None: no budget,
    measure every held-out row)."""
    return None if budget_seconds is None else MEASURING_SHARE * budget_seconds


def train_in_scratch(
    trainer_type: Any,
    arguments_type: type,
    *,
    settings: FitSettings,
    work_dir: Path | str | None,
    learning_rate: float,
    arguments: Mapping[str, Any],
    **trainer_inputs: Any,
) -> Any:
    """Build `trainer_type` on `arguments_type` as every wording fit sets it (the schedule from
    `settings`, plus the fit's own `arguments`, on the device the model is on), train it
    quietly in a scratch folder under
    `work_dir`, and return it. Nothing in the scratch folder is kept: each run saves what it
    keeps itself."""
    with tempfile.TemporaryDirectory(dir=work_dir) as scratch, quiet_deprecations():
        trainer = trainer_type(
            args=training_arguments(
                arguments_type,
                output_dir=scratch,
                batch_size=settings.batch_size,
                gradient_accumulation_steps=settings.gradient_accumulation_steps,
                epochs=settings.epochs,
                max_steps=settings.max_steps,
                learning_rate=learning_rate,
                seed=settings.seed,
                device=model_device(trainer_inputs["model"]),
                **arguments,
            ),
            **trainer_inputs,
        )
        train_quietly(trainer)
    return trainer


# --- the end of a run ---------------------------------------------------------------------------


def save_version(
    trainer: Any,
    policy: Any,
    tokenizer: Any,
    output_dir: Path,
    *,
    reward_adapter: tuple[Any, Any] | None = None,
) -> tuple[Path, Path | None]:
    """(merged folder, reward adapter folder or None): the policy's LoRA merged into its base
    under `output_dir`, and RLHF's reward adapter (model, tokenizer) beside it, written by the
    main process only; every process waits until they are."""
    merged_dir = output_dir / "merged"
    adapter_dir = None if reward_adapter is None else output_dir / "reward_adapter"
    if trainer.accelerator.is_main_process:
        if reward_adapter is not None:
            save_adapter(*reward_adapter, adapter_dir)
        save_merged(policy, tokenizer, merged_dir)
    trainer.accelerator.wait_for_everyone()
    return merged_dir, adapter_dir


def report_done(trainer: Any, stages: StageProgress, metrics: Mapping[str, Any]) -> None:
    """The run's last progress line, with its plain numbers, from the main process only."""
    if trainer.accelerator.is_main_process:
        stages.done(**{key: value for key, value in metrics.items() if isinstance(value, float)})


class Stopwatch:
    """A run's stages timed one after another (time.perf_counter()): `lap` ends the stage under
    way, `seconds` gives each named stage and the total, to the millisecond."""

    def __init__(self) -> None:
        self.started = self.last = time.perf_counter()
        self.laps: dict[str, float] = {}

    def lap(self, name: str | None = None) -> float:
        """End the stage under way and return its seconds; `name` None: a step between stages
        that the result does not report on its own (it still counts in the total)."""
        now = time.perf_counter()
        seconds, self.last = now - self.last, now
        if name is not None:
            self.laps[name] = seconds
        return seconds

    def elapsed(self) -> float:
        """Seconds from the start to the last lap."""
        return self.last - self.started

    def seconds(self) -> dict[str, float]:
        return {
            **{name: round(seconds, 3) for name, seconds in self.laps.items()},
            "total": round(self.elapsed(), 3),
        }


def run_result(
    wording: WordingSpec,
    metrics: dict[str, Any],
    clock: Stopwatch,
    *,
    split: tuple[Sized, Sized],
    held_out: tuple[float | None, float | None],
    saved: tuple[Path, Path | None],
    outcome_examples: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """What a run returns, in plain values: its trainer; the version's record
    (`spec.version_record`) from the pairs it trained on and held out, its held-out (accuracy,
    AUC) and where it saved (the merged weights, the reward adapter); the metrics; and the
    seconds each stage took."""
    (train, held), (accuracy, auc), (merged_dir, adapter_dir) = split, held_out, saved
    return {
        "trainer": wording.trainer,
        "version": version_record(
            wording,
            pairs_train=len(train),
            pairs_held_out=len(held),
            held_out_accuracy=accuracy,
            held_out_auc=auc,
            merged_weights=str(merged_dir),
            reward_adapter=None if adapter_dir is None else str(adapter_dir),
            outcome_examples=outcome_examples,
        ),
        "metrics": metrics,
        "seconds": clock.seconds(),
    }
