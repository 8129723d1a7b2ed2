"""The wording reward model: the base with a LoRA and a scalar head on the last token.

One fit (`fit`), two losses, chosen on the RLHF card ("reward source"):
  * picks, `bradley_terry`: TRL's `RewardTrainer` on the frozen pairs, a tenth of them held out
    (whole calls, where the picks name them); held-out accuracy is computed here over the whole
    held-out set (TRL's `eval_accuracy` is a mean of per-batch means);
  * outcomes, `logistic`: every agent turn in the opening of every labelled real call as
    (call so far, reply, won), fitted with the logistic loss by a plain `transformers.Trainer`
    (one label, `problem_type="multi_label_classification"`: TRL has no trainer for it), held
    out by call (no call on both sides), AUC reported.

Either way the head starts from a linear probe on the base's frozen last-token features
(`trainers.wording.reward_probe`); on a CPU time budget that probe is the head and no step follows.

The reward is read at the last non-pad token, so the pad token always differs from eos
(`trainers.bases.ensure_distinct_pad`). RLHF uses `score()` to rate the policy's replies.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from trainers.bases import (
    conversation_ids,
    device_for,
    inference_precision,
    load_base,
    quiet_deprecations,
)
from trainers.wording.common import (
    HeldOutSettings,
    as_reply,
    by_length,
    evaluating,
    padded_batch,
    preference_rows,
    size_the_steps,
    train_in_scratch,
    trimmed,
)
from trainers.wording.measures import outcome_measure, pair_measure, positions_in_call
from trainers.wording.spec import (
    Message,
    OutcomeExample,
    Pair,
    StageProgress,
    WordingSpec,
    length_grouped_order,
    pair_groups,
)


@dataclass(frozen=True)
class RewardModelConfig(HeldOutSettings):
    """The reward model's settings (the spec's "reward_model"), beside the held-out split and
    the schedule every fit has."""

    learning_rate: float = 1e-4
    """AdamW step size on the picks (Bradley-Terry), TRL's default for reward models."""
    outcome_learning_rate: float = 3e-4
    """Step size on outcome labels (logistic): touchy; 3e-3 diverged on the tiny model."""
    max_length: int = 1024
    """Tokens per conversation; the oldest turns of a longer call are dropped."""
    score_batch_size: int = 16
    """Conversations scored per forward pass (held-out set, policy replies)."""
    probe: bool = True
    """Start the head from a linear probe on the base's frozen features
    (trainers.wording.reward_probe)
    before the LoRA steps; False starts from a random head."""
    probe_share: float = 0.6
    """Share of a time-budgeted stage the probe may spend reading training rows when LoRA
    steps follow it; the Trainer gets the rest. Without a budget the probe reads every row."""
    fine_tune: bool | None = None
    """LoRA steps after the probe. None: take them unless the stage runs on a time budget (a
    CPU), where a forward-only probe over more rows beats a few backward passes (measured on
    the shared hh-rlhf pairs: 0.609 held out after the probe, 0.591 after four steps more);
    True or False forces it."""


def reward_lora_config(config: RewardModelConfig) -> Any:
    """A LoRA on the projections, with the scalar head trained in full."""
    return config.lora("SEQ_CLS", modules_to_save=["score"])


@dataclass
class RewardModelFit:
    """A fitted reward model and what it measured."""

    model: Any
    tokenizer: Any
    source: str
    train_rows: int
    held_out_rows: int
    held_out_accuracy: float | None
    held_out_auc: float | None
    train_groups: list[str]
    held_out_groups: list[str]
    seconds: float
    history: list[dict[str, float]] = field(default_factory=list)
    # The held-out figures with their intervals (trainers.wording.measures).
    measured: dict[str, Any] = field(default_factory=dict)
    # How much of the planned passes ran before a time budget ended the stage.
    data_seen: dict[str, Any] = field(default_factory=dict)
    # The head's starting probe: rows it read, its speed, and its own held-out figure.
    probe: dict[str, Any] | None = None
    # The held-out rows' rewards, in held-out order (benchmarks compare judges on them):
    # {"chosen", "rejected"} for picks, {"scores"} for outcomes. Not in the summary.
    held_out_scores: dict[str, list[float]] | None = None

    def summary(self) -> dict[str, Any]:
        """Plain values for the version record. Training losses are a running mean over the
        logged steps: one batch's loss says nothing beside a held-out figure."""
        losses = [row["loss"] for row in self.history if "loss" in row]
        return {
            "source": self.source,
            "train_rows": self.train_rows,
            "held_out_rows": self.held_out_rows,
            "held_out_calls": len(self.held_out_groups),
            "held_out_accuracy": self.held_out_accuracy,
            "held_out_accuracy_ci": self.measured.get("accuracy_ci"),
            "held_out_auc": self.held_out_auc,
            "held_out_auc_ci": self.measured.get("auc_by_call_ci"),
            "held_out": self.measured,
            "mean_train_loss": round(float(np.mean(losses)), 4) if losses else None,
            "data_seen": self.data_seen,
            "probe": self.probe,
            "steps": int(self.history[-1]["step"]) if self.history else 0,
            "seconds": round(self.seconds, 3),
        }


# --- scoring ---------------------------------------------------------------------------


def score(
    model: Any,
    tokenizer: Any,
    conversations: Sequence[Sequence[Message]],
    *,
    batch_size: int = 16,
) -> list[float]:
    """The reward of each conversation (its last message the reply), read at its last token."""
    ids = [conversation_ids(tokenizer, conversation) for conversation in conversations]
    rewards: dict[int, float] = {}
    with evaluating(model) as device, inference_precision(model):
        # Conversations of about the same length share a batch (less padding); the rewards
        # come back in the caller's order.
        for rows in by_length([len(row) for row in ids], batch_size):
            input_ids, attention_mask = padded_batch(
                [ids[index] for index in rows], tokenizer.pad_token_id
            )
            logits = model(
                input_ids=input_ids.to(device), attention_mask=attention_mask.to(device)
            ).logits
            rewards.update(zip(rows, logits[:, 0].float().cpu().tolist(), strict=True))
    return [rewards[index] for index in range(len(ids))]


# --- the rows a fit reads, and its two losses -----------------------------------------------------


@dataclass
class RewardRows:
    """The rows one fit reads (pairs or outcome examples), what they are held out by (calls, or
    pairs), the training and held-out indices, and each row's conversation(s), trimmed."""

    rows: Sequence[Any]
    groups: list[str]
    train: list[int]
    held: list[int]
    conversations: list[Any]


@dataclass
class TrainerRun:
    """What a loss hands the fit's one Trainer run (`trainers.wording.common.train_in_scratch`):
    the Trainer and its arguments' types, the step size, the loss's own arguments, and the
    Trainer's inputs (the model, the dataset, ...)."""

    trainer_type: Any
    arguments_type: type
    learning_rate: float
    arguments: dict[str, Any]
    inputs: dict[str, Any]


class BradleyTerry:
    """Bradley-Terry on the picks: a row is a pair, its conversations (chosen, rejected) share
    one prompt, trimmed so the longer reply fits; measured by held-out accuracy."""

    source = "picks"
    sequences_per_row = 2  # a batch pads chosen and rejected together

    def groups(self, pairs: Sequence[Pair]) -> list[str]:
        return pair_groups(pairs)

    def train_lengths(self, tokenizer: Any, data: RewardRows) -> list[int]:
        """Tokens of each training pair's longer conversation, in `data.train` order."""
        return [
            max(len(conversation_ids(tokenizer, side)) for side in data.conversations[index])
            for index in data.train
        ]

    def conversations(
        self, tokenizer: Any, pairs: Sequence[Pair], config: RewardModelConfig
    ) -> list[tuple[list[Message], list[Message]]]:
        prompts = [
            trimmed(tokenizer, pair.prompt, (pair.chosen, pair.rejected), config.max_length)
            for pair in pairs
        ]
        return [
            (prompt + as_reply(pair.chosen), prompt + as_reply(pair.rejected))
            for prompt, pair in zip(prompts, pairs, strict=True)
        ]

    def probe_conversations(self, data: RewardRows, indices: Sequence[int]) -> list[Any]:
        """Both sides of each pair, chosen then rejected: the probe's rows come in twos."""
        return [data.conversations[index][side] for index in indices for side in (0, 1)]

    def fit_head(
        self, read: Any, data: RewardRows, order: Sequence[int], *, deadline: float | None
    ) -> tuple[np.ndarray, float] | None:
        """The head on chosen-minus-rejected features of the whole pairs read (at least ten)."""
        from trainers.wording.reward_probe import fit_pair_probe

        complete = read.rows_read // 2
        read.rows_read, read.rows_asked = complete, len(order)
        if complete < 10:
            return None
        return fit_pair_probe(
            read.features[0 : 2 * complete : 2],
            read.features[1 : 2 * complete : 2],
            [data.groups[index] for index in order[:complete]],
            deadline=deadline,
            device=read.device,
        )

    def probe_measure(
        self, held_features: np.ndarray, weights: np.ndarray, data: RewardRows, seed: int
    ) -> tuple[dict[str, Any], dict[str, list[float]]]:
        chosen, rejected = held_features[0::2] @ weights, held_features[1::2] @ weights
        measured = pair_measure(chosen, rejected, seed=seed)
        return measured, {"chosen": chosen.tolist(), "rejected": rejected.tolist()}

    def trainer_run(
        self,
        model: Any,
        tokenizer: Any,
        data: RewardRows,
        config: RewardModelConfig,
        peft: Any,
        order: Sequence[int],
    ) -> TrainerRun:
        """TRL's RewardTrainer on (prompt, chosen, rejected) in `order`, the LoRA its own to
        add."""
        from datasets import Dataset
        from trl import RewardConfig, RewardTrainer

        prompts = [chosen[:-1] for chosen, _ in data.conversations]
        dataset = Dataset.from_list(preference_rows(prompts, data.rows, order))
        return TrainerRun(
            RewardTrainer,
            RewardConfig,
            config.learning_rate,
            # Trimmed above: RewardTrainer would drop long pairs instead.
            arguments={"max_length": None},
            inputs={
                "model": model,
                "train_dataset": dataset,
                "processing_class": tokenizer,
                "peft_config": peft if peft is not None else reward_lora_config(config),
            },
        )

    def measure(
        self, fitted: Any, tokenizer: Any, data: RewardRows, config: RewardModelConfig
    ) -> tuple[dict[str, Any], dict[str, list[float]]]:
        """Over the WHOLE held-out set: RewardTrainer's eval_accuracy averages per-batch
        means."""
        chosen, rejected = (
            score(
                fitted,
                tokenizer,
                [data.conversations[index][side] for index in data.held],
                batch_size=config.score_batch_size,
            )
            for side in (0, 1)
        )
        measured = pair_measure(chosen, rejected, seed=config.seed)
        return measured, {"chosen": list(chosen), "rejected": list(rejected)}


class Logistic:
    """The logistic loss on outcome labels: a row is one agent turn of a labelled real call,
    its conversation the call so far and the reply; measured by AUC by call."""

    source = "outcomes"
    sequences_per_row = 1

    def groups(self, examples: Sequence[OutcomeExample]) -> list[str]:
        return [example.call_id for example in examples]

    def train_lengths(self, tokenizer: Any, data: RewardRows) -> list[int]:
        """Tokens of each training turn's conversation, in `data.train` order."""
        return [len(conversation_ids(tokenizer, data.conversations[i])) for i in data.train]

    def conversations(
        self, tokenizer: Any, examples: Sequence[OutcomeExample], config: RewardModelConfig
    ) -> list[list[Message]]:
        return [
            trimmed(tokenizer, example.prompt, (example.reply,), config.max_length)
            + as_reply(example.reply)
            for example in examples
        ]

    def probe_conversations(self, data: RewardRows, indices: Sequence[int]) -> list[Any]:
        return [data.conversations[index] for index in indices]

    def fit_head(
        self, read: Any, data: RewardRows, order: Sequence[int], *, deadline: float | None
    ) -> tuple[np.ndarray, float] | None:
        """The head on won/lost of the turns read, when they hold both labels and five calls."""
        from trainers.wording.reward_probe import fit_outcome_probe

        seen = [data.rows[index] for index in order[: read.rows_read]]
        if len({row.won for row in seen}) < 2 or len({row.call_id for row in seen}) < 5:
            return None
        return fit_outcome_probe(
            read.features,
            [row.won for row in seen],
            [row.call_id for row in seen],
            deadline=deadline,
            device=read.device,
        )

    def probe_measure(
        self, held_features: np.ndarray, weights: np.ndarray, data: RewardRows, seed: int
    ) -> tuple[dict[str, Any], dict[str, list[float]]]:
        held_scores = (held_features @ weights).tolist()
        return _by_call(held_scores, data, seed), {"scores": held_scores}

    def trainer_run(
        self,
        model: Any,
        tokenizer: Any,
        data: RewardRows,
        config: RewardModelConfig,
        peft: Any,
        order: Sequence[int],
    ) -> TrainerRun:
        """A plain Trainer on (conversation, won) in `order` with the logistic loss, on the
        model already wrapped in its LoRA."""
        from datasets import Dataset
        from transformers import DataCollatorWithPadding, Trainer, TrainingArguments, set_seed

        # Tokenised for the Trainer only once it is known to run (the probe reads its own ids).
        rows = []
        for index in order:
            ids = conversation_ids(tokenizer, data.conversations[index])
            won = 1.0 if data.rows[index].won else 0.0
            rows.append({"input_ids": ids, "attention_mask": [1] * len(ids), "labels": [won]})
        set_seed(config.seed)
        # One logit read through a sigmoid: BCE-with-logits, i.e. the logistic loss on won/lost.
        model.config.problem_type = "multi_label_classification"
        return TrainerRun(
            Trainer,
            TrainingArguments,
            config.outcome_learning_rate,
            arguments={"remove_unused_columns": False},
            inputs={
                "model": _as_adapter(model, config, peft),
                "train_dataset": Dataset.from_list(rows),
                "data_collator": DataCollatorWithPadding(tokenizer),
            },
        )

    def measure(
        self, fitted: Any, tokenizer: Any, data: RewardRows, config: RewardModelConfig
    ) -> tuple[dict[str, Any], dict[str, list[float]]]:
        held_scores = score(
            fitted,
            tokenizer,
            [data.conversations[index] for index in data.held],
            batch_size=config.score_batch_size,
        )
        return _by_call(held_scores, data, config.seed), {"scores": list(held_scores)}


RewardLoss = BradleyTerry | Logistic
bradley_terry = BradleyTerry()
logistic = Logistic()


def _by_call(held_scores: Sequence[float], data: RewardRows, seed: int) -> dict[str, Any]:
    """The held-out outcome figures: by call, within turn position, and beside position- and
    length-only predictors (a pooled AUC over turn rows mostly measures how many turns a call
    has)."""
    held_calls = [data.groups[index] for index in data.held]
    return outcome_measure(
        held_scores,
        [data.rows[index].won for index in data.held],
        held_calls,
        positions=positions_in_call(held_calls),
        reply_lengths=[len(data.rows[index].reply) for index in data.held],
        seed=seed,
    )


# --- the fit ----------------------------------------------------------------------------------


def fit(
    model: Any,
    tokenizer: Any,
    rows: Sequence[Any],
    *,
    loss: RewardLoss,
    config: RewardModelConfig,
    peft_config: Any = None,
    callbacks: Sequence[Any] = (),
    work_dir: Path | str | None = None,
    budget_seconds: float | None = None,
    on_probe: Callable[[int, int], None] | None = None,
    stage_started: float | None = None,
) -> RewardModelFit:
    """Fit `model` (a base with `head="reward"`) on `rows` with `loss` (`bradley_terry` on
    pairs, `logistic` on outcome examples), held out by call; its head starts from the probe
    (`config.probe`), which on a time budget may be the whole fit (`config.fine_tune`).
    `stage_started` (time.monotonic()) is when the stage's budget began counting."""
    started = time.perf_counter()
    stage_started = time.monotonic() if stage_started is None else stage_started
    data = reward_rows(rows, tokenizer, loss=loss, config=config)
    fine_tunes = _fine_tunes(config, budget_seconds)
    probe, probe_scores = None, None
    if config.probe:
        probe, probe_scores = probe_head(
            model,
            tokenizer,
            data,
            loss=loss,
            config=config,
            budget_seconds=budget_seconds,
            fine_tunes=fine_tunes,
            stage_started=stage_started,
            on_chunk=on_probe,
        )
        _leave_to_trainer(callbacks, time.monotonic() - stage_started)
    if probe is not None and not fine_tunes:
        # The probe is the head and no step follows: its held-out figures are the fit's.
        adapter = _as_adapter(model, config, peft_config)
        seen = _probe_data_seen(probe, budget_seconds)
        held_out = probe["held_out"], probe_scores
        return _fitted(
            adapter, tokenizer, loss, data, held_out, started, probe=probe, data_seen=seen
        )
    fitted = _fine_tune(model, tokenizer, data, loss, config, peft_config, callbacks, work_dir)
    held_out = loss.measure(fitted, tokenizer, data, config)
    found = {"probe": probe, "history": _history(callbacks), "data_seen": _data_seen(callbacks)}
    return _fitted(fitted, tokenizer, loss, data, held_out, started, **found)


def reward_rows(
    rows: Sequence[Any], tokenizer: Any, *, loss: RewardLoss, config: RewardModelConfig
) -> RewardRows:
    """The rows split by what `loss` holds them out by, each with its conversation(s)."""
    groups = loss.groups(rows)
    train, held = config.held_out(groups)
    return RewardRows(rows, groups, train, held, loss.conversations(tokenizer, rows, config))


def _fine_tune(
    model: Any,
    tokenizer: Any,
    data: RewardRows,
    loss: RewardLoss,
    config: RewardModelConfig,
    peft_config: Any,
    callbacks: Sequence[Any],
    work_dir: Path | str | None,
) -> Any:
    """The LoRA steps after the probe, with `loss`'s Trainer: the fitted model. The rows are
    read in batches of about the same length, in a seeded order (as DPO's), and on a card the
    batch is sized to its memory; on the CPU activations are recomputed, as before."""
    lengths = loss.train_lengths(tokenizer, data)
    config, checkpointing = size_the_steps(
        config,
        model,
        longest=min(config.max_length, max(lengths, default=1)),
        sequences_per_row=loss.sequences_per_row,
        choice=None if config.sized_to_memory else True,
    )
    order = length_grouped_order(lengths, batch_size=config.batch_size, seed=config.seed)
    run = loss.trainer_run(
        model, tokenizer, data, config, peft_config, [data.train[at] for at in order]
    )
    trainer = train_in_scratch(
        run.trainer_type,
        run.arguments_type,
        settings=config,
        work_dir=work_dir,
        learning_rate=run.learning_rate,
        arguments={
            **run.arguments,
            "checkpointing": checkpointing,
            "train_sampling_strategy": "sequential",  # the length-grouped seeded order
        },
        callbacks=list(callbacks),
        **run.inputs,
    )
    return trainer.accelerator.unwrap_model(trainer.model)


def fit_on_pairs(
    model: Any, tokenizer: Any, pairs: Sequence[Pair], **options: Any
) -> RewardModelFit:
    """`fit` with the Bradley-Terry loss on the picks."""
    return fit(model, tokenizer, pairs, loss=bradley_terry, **options)


def fit_on_outcomes(
    model: Any, tokenizer: Any, examples: Sequence[OutcomeExample], **options: Any
) -> RewardModelFit:
    """`fit` with the logistic loss on the outcome labels."""
    return fit(model, tokenizer, examples, loss=logistic, **options)


def _fitted(
    model: Any,
    tokenizer: Any,
    loss: RewardLoss,
    data: RewardRows,
    held_out: tuple[dict[str, Any], dict[str, list[float]] | None],
    started: float,
    **found: Any,
) -> RewardModelFit:
    """The fit's record: its held-out (figures, scores) (accuracy for picks, AUC by call for
    outcomes) and the calls on each side; `found` holds the probe, history and data seen."""
    measured, scores = held_out
    return RewardModelFit(
        model=model,
        tokenizer=tokenizer,
        source=loss.source,
        measured=measured,
        train_rows=len(data.train),
        held_out_rows=len(data.held),
        held_out_accuracy=measured.get("accuracy") if loss.source == "picks" else None,
        held_out_auc=measured.get("auc_by_call") if loss.source == "outcomes" else None,
        train_groups=sorted({data.groups[index] for index in data.train}),
        held_out_groups=sorted({data.groups[index] for index in data.held}),
        seconds=time.perf_counter() - started,
        held_out_scores=scores,
        **found,
    )


def _data_seen(callbacks: Sequence[Any]) -> dict[str, Any]:
    for callback in callbacks:
        if hasattr(callback, "data_seen"):
            return dict(callback.data_seen)
    return {}


def _history(callbacks: Sequence[Any]) -> list[dict[str, float]]:
    for callback in callbacks:
        if hasattr(callback, "history"):
            return list(callback.history)
    return []


def _leave_to_trainer(callbacks: Sequence[Any], spent: float) -> None:
    """The Trainer's budget is what the probe left of the stage's (at least a minute)."""
    for callback in callbacks:
        if getattr(callback, "budget_seconds", None) is not None:
            callback.budget_seconds = max(60.0, callback.budget_seconds - spent)


def _as_adapter(model: Any, config: RewardModelConfig, peft_config: Any) -> Any:
    """`model` wrapped in the reward LoRA (`peft_config`, or the config's). With no step after,
    it is the probed model in the saved format: the LoRA starts as a no-op (PEFT zeroes its
    second matrix) and the probed head is the saved `score`."""
    from peft import get_peft_model

    with quiet_deprecations():
        return get_peft_model(
            model, peft_config if peft_config is not None else reward_lora_config(config)
        )


# --- the probe the head starts from (trainers.wording.reward_probe) ------------------------------


def _fine_tunes(config: RewardModelConfig, budget_seconds: float | None) -> bool:
    """Whether LoRA steps follow the probe (see RewardModelConfig.fine_tune)."""
    if not config.probe:
        return True
    if config.fine_tune is not None:
        return config.fine_tune
    return budget_seconds is None


# Held back from the probe's read for the head's fit after it: the fit's grid stops at the
# deadline, but the strength under way and the final fit end after it, and both grow with the
# rows read, which grow with the budget (the outcome stage on the shared calls, its deadline
# set after loading and nothing held back for the fit, ended at 620 s of 600).
FIT_RESERVE_SHARE = 0.03


def _probe_deadline(
    config: RewardModelConfig,
    budget_seconds: float | None,
    *,
    fine_tunes: bool,
    stage_started: float,
) -> float | None:
    """When the probe's work ends: a share of the budget when the Trainer follows, else the
    whole budget, counted from `stage_started` (time.monotonic(): the base's load and the
    tokenising count against the stage too). The held-out measuring and the head's fit are
    reserved inside it (trainers.wording.reward_probe; FIT_RESERVE_SHARE)."""
    if budget_seconds is None:
        return None
    return stage_started + budget_seconds * (config.probe_share if fine_tunes else 1.0)


def _fit_reserve(budget_seconds: float | None) -> float:
    return 0.0 if budget_seconds is None else budget_seconds * FIT_RESERVE_SHARE


def _fit_deadline(deadline: float | None, read: Any, held_tokens: int) -> float | None:
    """When the head's grid stops trying strengths: early enough that the held-out rows, read
    at the speed the training rows were, still end by `deadline`."""
    if deadline is None or read.tokens_per_second <= 0:
        return deadline
    return deadline - held_tokens / read.tokens_per_second


def _seeded_order(indices: Sequence[int], seed: int) -> list[int]:
    order = list(indices)
    np.random.default_rng(seed).shuffle(order)
    return order


def probe_head(
    model: Any,
    tokenizer: Any,
    data: RewardRows,
    *,
    loss: RewardLoss,
    config: RewardModelConfig,
    budget_seconds: float | None,
    fine_tunes: bool = True,
    stage_started: float,
    on_chunk: Callable[[int, int], None] | None = None,
) -> tuple[dict[str, Any] | None, dict[str, list[float]] | None]:
    """Fit the head on the base's frozen features of the training rows it can afford (in a
    seeded order; never the held-out rows), write it into the model, and measure it on the
    held-out rows from the same features: (the probe's record, its held-out scores), or
    (None, None) when too few rows were read to fit it."""
    from trainers.reading.passes import shared_rows, tokens_read
    from trainers.wording.reward_probe import last_token_features, set_head

    order = _seeded_order(data.train, config.seed)

    def token_rows(indices: Sequence[int]) -> list[list[int]]:
        return [conversation_ids(tokenizer, c) for c in loss.probe_conversations(data, indices)]

    rows, held_rows = token_rows(order), token_rows(data.held)
    # The read, the head's fit and the held-out pass share one deadline (the fit's grid stops
    # trying strengths once its share has passed), so the stage ends near its budget.
    deadline = _probe_deadline(
        config, budget_seconds, fine_tunes=fine_tunes, stage_started=stage_started
    )
    held_tokens = tokens_read(shared_rows(held_rows))  # what the held-out pass reads
    read = last_token_features(
        model,
        rows,
        pad_token_id=tokenizer.pad_token_id,
        batch_size=config.score_batch_size,
        deadline=deadline,
        reserve_tokens=held_tokens,
        reserve_seconds=_fit_reserve(budget_seconds),
        on_chunk=on_chunk,
    )
    head = loss.fit_head(read, data, order, deadline=_fit_deadline(deadline, read, held_tokens))
    if head is None:
        return None, None
    weights, strength = head
    set_head(model, weights)
    fitted = time.monotonic()
    held_features = last_token_features(
        model, held_rows, pad_token_id=tokenizer.pad_token_id, batch_size=config.score_batch_size
    ).features
    measured, scores = loss.probe_measure(held_features, weights, data, config.seed)
    record = _probe_record(read, strength, measured, fitted=fitted, measured_at=time.monotonic())
    return record, scores


def _probe_record(
    read: Any, strength: float, measured: dict[str, Any], *, fitted: float, measured_at: float
) -> dict[str, Any]:
    """`fitted` and `measured_at` (time.monotonic()) end the head's fit and the held-out pass:
    where the stage's time went after the read."""
    return {
        "rows_read": read.rows_read,
        "rows_asked": read.rows_asked,
        "share_read": round(read.rows_read / max(1, read.rows_asked), 4),
        "tokens_per_second": round(read.tokens_per_second, 1),
        "seconds": round(read.seconds, 1),
        "fit_seconds": round(fitted - read.ended, 1),
        "held_out_seconds": round(measured_at - fitted, 1),
        "strength": strength,
        "held_out": measured,
    }


def _probe_data_seen(probe: dict[str, Any], budget_seconds: float | None) -> dict[str, Any]:
    """How much of the data a fit that is its probe alone read: no step, the probe's rows."""
    return {
        "steps": 0,
        "planned_steps": 0,
        "probe_rows": probe["rows_read"],
        "share_of_planned": probe["share_read"],
        "stopped_by_budget": probe["rows_read"] < probe["rows_asked"],
        "budget_seconds": budget_seconds,
        "fine_tuned": False,
    }


# --- from a spec -------------------------------------------------------------------------------


def reward_model_config(spec: WordingSpec) -> RewardModelConfig:
    return RewardModelConfig.from_spec(spec, "reward_model", where="the reward model")


def fit_reward_model(
    spec: WordingSpec,
    *,
    stages: StageProgress,
    config: RewardModelConfig | None = None,
) -> RewardModelFit:
    """Load the base with a scalar head and fit it from the spec's reward source."""
    from transformers import set_seed

    stage_started = time.monotonic()  # the base's load counts against the stage's budget
    config = config or reward_model_config(spec)
    set_seed(config.seed)  # the fresh head's initial weights
    model, tokenizer = load_base(
        spec.base,
        models_dir=spec.models_dir,
        head="reward",
        device=device_for(spec.device_type),
    )
    callbacks = [stages.callback("reward_model")]
    spec.output_dir.mkdir(parents=True, exist_ok=True)

    def on_probe(done: int, total: int) -> None:
        # The bar moves while the probe reads (a Trainer, if one follows, re-plans its steps).
        planned = stages.planned.get("reward_model", 1)
        stages.step("reward_model", round(planned * done / max(1, total)), phase="probe")

    outcomes = spec.reward_source == "outcomes"
    return fit(
        model,
        tokenizer,
        spec.outcome_examples if outcomes else spec.pairs,
        loss=logistic if outcomes else bradley_terry,
        config=config,
        callbacks=callbacks,
        work_dir=spec.output_dir,
        budget_seconds=stages.budget_seconds,
        on_probe=on_probe,
        stage_started=stage_started,
    )


def load_reward_model(
    base: str, *, adapter: Path | str, models_dir: Path | str, device: Any = None
) -> tuple[Any, Any]:
    """(model, tokenizer) of a saved reward adapter on its base, on `device` (None: the CPU),
    ready for `score()`."""
    from peft import PeftModel
    from transformers import AutoTokenizer

    model, _ = load_base(base, models_dir=models_dir, head="reward", device=device)
    with quiet_deprecations():
        model = PeftModel.from_pretrained(model, adapter)
    tokenizer = AutoTokenizer.from_pretrained(adapter, local_files_only=True)
    model.config.pad_token_id = tokenizer.pad_token_id
    return model.eval(), tokenizer
