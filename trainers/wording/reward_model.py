"""The wording reward model: the base with a LoRA and a scalar head on the last token.

Two ways to fit it, chosen on the RLHF card ("reward source"):
  * picks: TRL's `RewardTrainer`, Bradley-Terry on the frozen pairs, a tenth of them held out
    (whole calls, where the picks name them); held-out accuracy is computed here over the whole
    held-out set (TRL's `eval_accuracy` is a mean of per-batch means);
  * outcomes: every agent turn in the opening of every labelled real call as
    (call so far, reply, won), fitted with the logistic loss by a plain `transformers.Trainer`
    (one label, `problem_type="multi_label_classification"`: TRL has no trainer for it), held
    out by call (no call on both sides), AUC reported.

Either way the head starts from a linear probe on the base's frozen last-token features
(`trainers.wording.reward_probe`); on a CPU time budget that probe is the head and no step follows.

The reward is read at the last non-pad token, so the pad token always differs from eos
(`trainers.wording.bases.ensure_distinct_pad`). RLHF uses `score()` to rate the policy's replies.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from trainers.wording.bases import (
    CHAT_TEMPLATE_KWARGS,
    conversation_ids,
    inference_precision,
    load_base,
    lora_config,
    quiet_deprecations,
    train_quietly,
    training_arguments,
)
from trainers.wording.measures import outcome_measure, pair_measure, positions_in_call
from trainers.wording.spec import (
    Message,
    OutcomeExample,
    Pair,
    StageProgress,
    WordingSpec,
    config_with,
    held_out_split,
    pair_groups,
    trim_prompt,
)


@dataclass(frozen=True)
class RewardModelConfig:
    learning_rate: float = 1e-4
    """AdamW step size on the picks (Bradley-Terry), TRL's default for reward models."""
    outcome_learning_rate: float = 3e-4
    """Step size on outcome labels (logistic): touchy; 3e-3 diverged on the tiny model."""
    epochs: float = 1.0
    """Passes over the training rows (the spec's epochs)."""
    max_steps: int | None = None
    """Stop after this many optimizer steps (tests, benchmarks); None runs the epochs."""
    batch_size: int = 8
    """Pairs (or outcome rows) per card per step."""
    gradient_accumulation_steps: int = 1
    """Steps whose gradients are summed before one optimizer update."""
    max_length: int = 1024
    """Tokens per conversation; the oldest turns of a longer call are dropped."""
    held_out_fraction: float = 0.1
    """Share of the rows held out (whole calls at a time) to measure the fit."""
    held_out_minimum: int = 0
    """Hold out at least this many calls (pairs where a pick names no call), up to half of
    them, when a tenth is too few to measure (100 give an interval of about ±0.1)."""
    lora_r: int = 16
    """LoRA rank of the reward adapter."""
    lora_alpha: int = 32
    """LoRA scale (alpha / r multiplies the update)."""
    lora_dropout: float = 0.0
    """Dropout on the LoRA input."""
    score_batch_size: int = 16
    """Conversations scored per forward pass (held-out set, policy replies)."""
    seed: int = 0
    """Seeds the split, the head's initialisation and the data order."""
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
    return lora_config(
        task_type="SEQ_CLS",
        r=config.lora_r,
        alpha=config.lora_alpha,
        dropout=config.lora_dropout,
        modules_to_save=["score"],
    )


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
    import torch

    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    ids = [conversation_ids(tokenizer, conversation) for conversation in conversations]
    rewards: list[float] = []
    with torch.no_grad(), inference_precision(model):
        for start in range(0, len(ids), batch_size):
            batch = ids[start : start + batch_size]
            width = max(len(row) for row in batch)
            input_ids = torch.full((len(batch), width), tokenizer.pad_token_id, dtype=torch.long)
            attention_mask = torch.zeros((len(batch), width), dtype=torch.long)
            for row, tokens in enumerate(batch):
                input_ids[row, : len(tokens)] = torch.tensor(tokens)
                attention_mask[row, : len(tokens)] = 1
            logits = model(
                input_ids=input_ids.to(device), attention_mask=attention_mask.to(device)
            ).logits
            rewards.extend(logits[:, 0].float().cpu().tolist())
    if was_training:
        model.train()
    return rewards


def _fitted(tokenizer: Any, prompt: Sequence[Message], replies: Sequence[str], max_length: int):
    return trim_prompt(
        lambda messages: len(conversation_ids(tokenizer, messages)),
        prompt,
        replies,
        max_tokens=max_length,
    )


def _reply(text: str) -> list[Message]:
    return [{"role": "assistant", "content": text}]


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


def _as_adapter(model: Any, config: RewardModelConfig, peft_config: Any) -> Any:
    """The probed model in the saved format without any step: the LoRA starts as a no-op
    (PEFT zeroes its second matrix) and the probed head is the saved `score`."""
    from peft import get_peft_model

    with quiet_deprecations():
        return get_peft_model(
            model, peft_config if peft_config is not None else reward_lora_config(config)
        )


def _probe_only_fit(
    model: Any,
    tokenizer: Any,
    source: str,
    probe: dict[str, Any],
    scores: dict[str, list[float]] | None,
    *,
    groups: Sequence[str],
    train: Sequence[int],
    held: Sequence[int],
    seconds: float,
    budget_seconds: float | None,
) -> RewardModelFit:
    """The fit when the probe is the head (no LoRA step): its held-out figures are the fit's."""
    measured = probe["held_out"]
    return RewardModelFit(
        model=model,
        tokenizer=tokenizer,
        source=source,
        measured=measured,
        probe=probe,
        train_rows=len(train),
        held_out_rows=len(held),
        held_out_accuracy=measured.get("accuracy") if source == "picks" else None,
        held_out_auc=measured.get("auc_by_call") if source == "outcomes" else None,
        train_groups=sorted({groups[index] for index in train}),
        held_out_groups=sorted({groups[index] for index in held}),
        seconds=seconds,
        held_out_scores=scores,
        data_seen={
            "steps": 0,
            "planned_steps": 0,
            "probe_rows": probe["rows_read"],
            "share_of_planned": probe["share_read"],
            "stopped_by_budget": probe["rows_read"] < probe["rows_asked"],
            "budget_seconds": budget_seconds,
            "fine_tuned": False,
        },
    )


def _leave_to_trainer(callbacks: Sequence[Any], spent: float) -> None:
    """The Trainer's budget is what the probe left of the stage's (at least a minute)."""
    for callback in callbacks:
        if getattr(callback, "budget_seconds", None) is not None:
            callback.budget_seconds = max(60.0, callback.budget_seconds - spent)


def _seeded_order(indices: Sequence[int], seed: int) -> list[int]:
    order = list(indices)
    np.random.default_rng(seed).shuffle(order)
    return order


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


def _probe_pairs(
    model: Any,
    tokenizer: Any,
    conversations: Sequence[tuple[list[Message], list[Message]]],
    train: Sequence[int],
    held: Sequence[int],
    groups: Sequence[str],
    *,
    config: RewardModelConfig,
    budget_seconds: float | None,
    fine_tunes: bool,
    stage_started: float,
    on_chunk: Any = None,
) -> tuple[dict[str, Any] | None, dict[str, list[float]] | None]:
    """Fit the head on chosen-minus-rejected features of the training pairs it can afford,
    write it into the model; its own held-out accuracy comes from the same frozen features."""
    from trainers.wording.reward_probe import fit_pair_probe, last_token_features, set_head

    order = _seeded_order(train, config.seed)
    rows = [conversation_ids(tokenizer, conversations[i][side]) for i in order for side in (0, 1)]
    held_rows = [conversation_ids(tokenizer, conversations[i][s]) for i in held for s in (0, 1)]
    # The read, the head's fit and the held-out pass share one deadline (the fit's grid stops
    # trying strengths once its share has passed), so the stage ends near its budget.
    deadline = _probe_deadline(
        config, budget_seconds, fine_tunes=fine_tunes, stage_started=stage_started
    )
    held_tokens = sum(map(len, held_rows))
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
    complete = read.rows_read // 2
    read.rows_read, read.rows_asked = complete, len(order)
    if complete < 10:
        return None, None
    weights, strength = fit_pair_probe(
        read.features[0 : 2 * complete : 2],
        read.features[1 : 2 * complete : 2],
        [groups[i] for i in order[:complete]],
        deadline=_fit_deadline(deadline, read, held_tokens),
    )
    set_head(model, weights)
    fitted = time.monotonic()
    held_features = last_token_features(
        model, held_rows, pad_token_id=tokenizer.pad_token_id, batch_size=config.score_batch_size
    ).features
    chosen, rejected = held_features[0::2] @ weights, held_features[1::2] @ weights
    measured = pair_measure(chosen, rejected, seed=config.seed)
    record = _probe_record(read, strength, measured, fitted=fitted, measured_at=time.monotonic())
    return record, {"chosen": chosen.tolist(), "rejected": rejected.tolist()}


# --- Bradley-Terry on the picks ------------------------------------------------------------


def fit_on_pairs(
    model: Any,
    tokenizer: Any,
    pairs: Sequence[Pair],
    *,
    config: RewardModelConfig,
    peft_config: Any = None,
    callbacks: Sequence[Any] = (),
    work_dir: Path | str | None = None,
    budget_seconds: float | None = None,
    on_probe: Any = None,
    stage_started: float | None = None,
) -> RewardModelFit:
    """Fit `model` (a base with `head="reward"`) on the pairs with TRL's RewardTrainer, its
    head started from the probe (`config.probe`)."""
    from datasets import Dataset
    from trl import RewardConfig, RewardTrainer

    started = time.perf_counter()
    stage_started = time.monotonic() if stage_started is None else stage_started
    groups = pair_groups(pairs)
    train, held = held_out_split(
        groups,
        fraction=config.held_out_fraction,
        seed=config.seed,
        minimum_groups=config.held_out_minimum,
    )
    prompts = [
        _fitted(tokenizer, pair.prompt, (pair.chosen, pair.rejected), config.max_length)
        for pair in pairs
    ]
    fine_tunes = _fine_tunes(config, budget_seconds)
    probe, probe_scores = None, None
    if config.probe:
        probe, probe_scores = _probe_pairs(
            model,
            tokenizer,
            [
                (prompt + _reply(pair.chosen), prompt + _reply(pair.rejected))
                for prompt, pair in zip(prompts, pairs, strict=True)
            ],
            train,
            held,
            groups,
            config=config,
            budget_seconds=budget_seconds,
            fine_tunes=fine_tunes,
            stage_started=stage_started,
            on_chunk=on_probe,
        )
        _leave_to_trainer(callbacks, time.monotonic() - stage_started)
    if probe is not None and not fine_tunes:
        return _probe_only_fit(
            _as_adapter(model, config, peft_config),
            tokenizer,
            "picks",
            probe,
            probe_scores,
            groups=groups,
            train=train,
            held=held,
            seconds=time.perf_counter() - started,
            budget_seconds=budget_seconds,
        )
    dataset = Dataset.from_list(
        [
            {
                "prompt": prompts[index],
                "chosen": _reply(pairs[index].chosen),
                "rejected": _reply(pairs[index].rejected),
                "chat_template_kwargs": CHAT_TEMPLATE_KWARGS,
            }
            for index in train
        ]
    )
    with tempfile.TemporaryDirectory(dir=work_dir) as scratch, quiet_deprecations():
        arguments = training_arguments(
            RewardConfig,
            output_dir=scratch,
            batch_size=config.batch_size,
            gradient_accumulation_steps=config.gradient_accumulation_steps,
            epochs=config.epochs,
            max_steps=config.max_steps,
            learning_rate=config.learning_rate,
            seed=config.seed,
            max_length=None,  # trimmed above: RewardTrainer would drop long pairs instead
        )
        trainer = RewardTrainer(
            model=model,
            args=arguments,
            train_dataset=dataset,
            processing_class=tokenizer,
            peft_config=peft_config if peft_config is not None else reward_lora_config(config),
            callbacks=list(callbacks),
        )
        train_quietly(trainer)
    fitted = trainer.accelerator.unwrap_model(trainer.model)

    # Over the WHOLE held-out set: RewardTrainer's eval_accuracy averages per-batch means.
    chosen = score(
        fitted,
        tokenizer,
        [prompts[index] + _reply(pairs[index].chosen) for index in held],
        batch_size=config.score_batch_size,
    )
    rejected = score(
        fitted,
        tokenizer,
        [prompts[index] + _reply(pairs[index].rejected) for index in held],
        batch_size=config.score_batch_size,
    )
    measured = pair_measure(chosen, rejected, seed=config.seed)
    return RewardModelFit(
        held_out_scores={"chosen": list(chosen), "rejected": list(rejected)},
        model=fitted,
        tokenizer=tokenizer,
        source="picks",
        measured=measured,
        probe=probe,
        train_rows=len(train),
        held_out_rows=len(held),
        held_out_accuracy=measured["accuracy"],
        held_out_auc=None,
        train_groups=sorted({groups[index] for index in train}),
        held_out_groups=sorted({groups[index] for index in held}),
        seconds=time.perf_counter() - started,
        history=_history(callbacks),
        data_seen=_data_seen(callbacks),
    )


# --- logistic loss on the outcome labels ------------------------------------------------------


def fit_on_outcomes(
    model: Any,
    tokenizer: Any,
    examples: Sequence[OutcomeExample],
    *,
    config: RewardModelConfig,
    peft_config: Any = None,
    callbacks: Sequence[Any] = (),
    work_dir: Path | str | None = None,
    budget_seconds: float | None = None,
    on_probe: Any = None,
    stage_started: float | None = None,
) -> RewardModelFit:
    """Fit `model` (a base with `head="reward"`) to predict whether the call was won, its head
    started from the probe (`config.probe`)."""
    from datasets import Dataset
    from peft import get_peft_model
    from transformers import DataCollatorWithPadding, Trainer, TrainingArguments, set_seed

    started = time.perf_counter()
    stage_started = time.monotonic() if stage_started is None else stage_started
    groups = [example.call_id for example in examples]
    train, held = held_out_split(
        groups,
        fraction=config.held_out_fraction,
        seed=config.seed,
        minimum_groups=config.held_out_minimum,
    )
    conversations = [
        _fitted(tokenizer, example.prompt, (example.reply,), config.max_length)
        + _reply(example.reply)
        for example in examples
    ]
    fine_tunes = _fine_tunes(config, budget_seconds)
    probe, probe_scores = None, None
    if config.probe:
        probe, probe_scores = _probe_outcomes(
            model,
            tokenizer,
            conversations,
            examples,
            train,
            held,
            config=config,
            budget_seconds=budget_seconds,
            fine_tunes=fine_tunes,
            stage_started=stage_started,
            on_chunk=on_probe,
        )
        _leave_to_trainer(callbacks, time.monotonic() - stage_started)
    if probe is not None and not fine_tunes:
        return _probe_only_fit(
            _as_adapter(model, config, peft_config),
            tokenizer,
            "outcomes",
            probe,
            probe_scores,
            groups=groups,
            train=train,
            held=held,
            seconds=time.perf_counter() - started,
            budget_seconds=budget_seconds,
        )

    # Tokenised for the Trainer only once it is known to run (the probe reads its own ids).
    rows = []
    for index in train:
        ids = conversation_ids(tokenizer, conversations[index])
        rows.append(
            {
                "input_ids": ids,
                "attention_mask": [1] * len(ids),
                "labels": [1.0 if examples[index].won else 0.0],
            }
        )

    set_seed(config.seed)
    # One logit read through a sigmoid: BCE-with-logits, i.e. the logistic loss on won/lost.
    model.config.problem_type = "multi_label_classification"
    with quiet_deprecations():
        peft_model = get_peft_model(
            model, peft_config if peft_config is not None else reward_lora_config(config)
        )
    with tempfile.TemporaryDirectory(dir=work_dir) as scratch:
        arguments = training_arguments(
            TrainingArguments,
            output_dir=scratch,
            batch_size=config.batch_size,
            gradient_accumulation_steps=config.gradient_accumulation_steps,
            epochs=config.epochs,
            max_steps=config.max_steps,
            learning_rate=config.outcome_learning_rate,
            seed=config.seed,
            remove_unused_columns=False,
        )
        trainer = Trainer(
            model=peft_model,
            args=arguments,
            train_dataset=Dataset.from_list(rows),
            data_collator=DataCollatorWithPadding(tokenizer),
            callbacks=list(callbacks),
        )
        train_quietly(trainer)
    fitted = trainer.accelerator.unwrap_model(trainer.model)

    held_scores = score(
        fitted,
        tokenizer,
        [conversations[index] for index in held],
        batch_size=config.score_batch_size,
    )
    # By call, within turn position, and beside position- and length-only predictors: a
    # pooled AUC over turn rows mostly measures how many turns a call has.
    held_calls = [groups[index] for index in held]
    measured = outcome_measure(
        held_scores,
        [examples[index].won for index in held],
        held_calls,
        positions=positions_in_call(held_calls),
        reply_lengths=[len(examples[index].reply) for index in held],
        seed=config.seed,
    )
    return RewardModelFit(
        held_out_scores={"scores": list(held_scores)},
        model=fitted,
        tokenizer=tokenizer,
        source="outcomes",
        measured=measured,
        probe=probe,
        train_rows=len(train),
        held_out_rows=len(held),
        held_out_accuracy=None,
        held_out_auc=measured["auc_by_call"],
        train_groups=sorted({groups[index] for index in train}),
        held_out_groups=sorted({groups[index] for index in held}),
        seconds=time.perf_counter() - started,
        history=_history(callbacks),
        data_seen=_data_seen(callbacks),
    )


def _probe_outcomes(
    model: Any,
    tokenizer: Any,
    conversations: Sequence[list[Message]],
    examples: Sequence[OutcomeExample],
    train: Sequence[int],
    held: Sequence[int],
    *,
    config: RewardModelConfig,
    budget_seconds: float | None,
    fine_tunes: bool = True,
    stage_started: float,
    on_chunk: Any = None,
) -> tuple[dict[str, Any] | None, dict[str, list[float]] | None]:
    """Fit the head on won/lost from the features of the training turns it can afford (held
    out by call like everything else), write it into the model, and measure it by call."""
    from trainers.wording.reward_probe import fit_outcome_probe, last_token_features, set_head

    order = _seeded_order(train, config.seed)
    held_rows = [conversation_ids(tokenizer, conversations[i]) for i in held]
    deadline = _probe_deadline(
        config, budget_seconds, fine_tunes=fine_tunes, stage_started=stage_started
    )
    held_tokens = sum(map(len, held_rows))
    read = last_token_features(
        model,
        [conversation_ids(tokenizer, conversations[i]) for i in order],
        pad_token_id=tokenizer.pad_token_id,
        batch_size=config.score_batch_size,
        deadline=deadline,
        reserve_tokens=held_tokens,
        reserve_seconds=_fit_reserve(budget_seconds),
        on_chunk=on_chunk,
    )
    seen = order[: read.rows_read]
    if len({examples[i].won for i in seen}) < 2 or len({examples[i].call_id for i in seen}) < 5:
        return None, None
    weights, strength = fit_outcome_probe(
        read.features,
        [examples[i].won for i in seen],
        [examples[i].call_id for i in seen],
        deadline=_fit_deadline(deadline, read, held_tokens),
    )
    set_head(model, weights)
    fitted = time.monotonic()
    held_features = last_token_features(
        model, held_rows, pad_token_id=tokenizer.pad_token_id, batch_size=config.score_batch_size
    ).features
    held_calls = [examples[i].call_id for i in held]
    held_scores = (held_features @ weights).tolist()
    measured = outcome_measure(
        held_scores,
        [examples[i].won for i in held],
        held_calls,
        positions=positions_in_call(held_calls),
        reply_lengths=[len(examples[i].reply) for i in held],
        seed=config.seed,
    )
    record = _probe_record(read, strength, measured, fitted=fitted, measured_at=time.monotonic())
    return record, {"scores": held_scores}


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


# --- from a spec -------------------------------------------------------------------------------


def reward_model_config(spec: WordingSpec) -> RewardModelConfig:
    defaults = RewardModelConfig(epochs=spec.epochs, max_steps=spec.max_steps, seed=spec.seed)
    return config_with(defaults, spec.section("reward_model"), where="the reward model")


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
    model, tokenizer = load_base(spec.base, models_dir=spec.models_dir, head="reward")
    callbacks = [stages.callback("reward_model")]
    spec.output_dir.mkdir(parents=True, exist_ok=True)
    budget = stages.budget_seconds

    def on_probe(done: int, total: int) -> None:
        # The bar moves while the probe reads (a Trainer, if one follows, re-plans its steps).
        planned = stages.planned.get("reward_model", 1)
        stages.step("reward_model", round(planned * done / max(1, total)), phase="probe")

    if spec.reward_source == "outcomes":
        return fit_on_outcomes(
            model,
            tokenizer,
            spec.outcome_examples,
            config=config,
            callbacks=callbacks,
            work_dir=spec.output_dir,
            budget_seconds=budget,
            on_probe=on_probe,
            stage_started=stage_started,
        )
    return fit_on_pairs(
        model,
        tokenizer,
        spec.pairs,
        config=config,
        callbacks=callbacks,
        work_dir=spec.output_dir,
        budget_seconds=budget,
        on_probe=on_probe,
        stage_started=stage_started,
    )


def load_reward_model(base: str, *, adapter: Path | str, models_dir: Path | str) -> tuple[Any, Any]:
    """(model, tokenizer) of a saved reward adapter on its base, ready for `score()`."""
    from peft import PeftModel
    from transformers import AutoTokenizer

    model, _ = load_base(base, models_dir=models_dir, head="reward")
    with quiet_deprecations():
        model = PeftModel.from_pretrained(model, adapter)
    tokenizer = AutoTokenizer.from_pretrained(adapter, local_files_only=True)
    model.config.pad_token_id = tokenizer.pad_token_id
    return model.eval(), tokenizer
