"""DPO on the wording: the benchmark an RLHF version has to beat, never a route to ship.

The same frozen picks, the same base and the same held-out tenth as RLHF; TRL's `DPOTrainer`
with a LoRA (the reference is the base with the adapter disabled: no second copy in memory).
Held-out preference accuracy — how often the implicit reward β·log(π/π_ref) ranks the chosen
reply above the rejected one — is computed over the whole held-out set
(`trainers.wording.policy_measures`). The LoRA is then merged into the base and saved on the
models volume, like RLHF's. `run` is that pipeline, one named stage at a time.

    python -m trainers.wording.dpo --spec spec.json --out result.json
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from trainers.bases import (
    conversation_ids,
    device_for,
    load_base,
    model_device,
    quiet_transformers,
    reference_kind,
)
from trainers.registry import DPO
from trainers.runtime import Progress, silent_progress, trainer_main
from trainers.wording.common import (
    HeldOutSettings,
    Stopwatch,
    as_reply,
    keep_time_to_measure,
    measured_within,
    measuring_seconds,
    preference_rows,
    report_done,
    run_result,
    save_version,
    size_the_steps,
    train_in_scratch,
    trimmed,
)
from trainers.wording.fused_head import fused_head_for_the_cpu
from trainers.wording.measures import did_not_learn
from trainers.wording.policy_measures import pair_logps, preference_accuracy
from trainers.wording.spec import (
    Message,
    Pair,
    StageProgress,
    WordingSpec,
    curve,
    last_value,
    length_grouped_order,
    mean_value,
    pair_groups,
    parse_wording_spec,
)


@dataclass(frozen=True)
class DpoSettings(HeldOutSettings):
    """DPO's settings (the spec's "dpo"), beside the held-out split and the schedule every fit
    has."""

    learning_rate: float = 5e-5
    """AdamW step size on the LoRA."""
    beta: float = 0.1
    """How far from the base the preference loss lets the policy move (higher: closer)."""
    batch_size: int = 4
    """Pairs per card per step."""
    max_length: int = 1024
    """Tokens per conversation; the oldest turns of a longer call are dropped."""
    score_batch_size: int = 8
    """Conversations per forward pass when measuring the held-out pairs."""
    gradient_checkpointing: bool | None = None
    """Recompute activations in the backward pass (less memory, about a third more time);
    None decides by whether a batch's activations fit in half the memory free."""


# On a CPU stage that runs to a time budget: a window that lets more pairs through in ten
# minutes (each costs the policy's and the reference's pass over both replies, and a backward
# pass), and a step size a LoRA moves at in the few dozen steps that fit. Measured against the
# base untrained by a judge that trained nothing (bench.wording_vs_base, the shared hh-rlhf
# pairs, 300 trainer pairs, 150 held-out prompts, 10 minutes): the default 5e-5 won 0.543
# [0.477, 0.610], no better than the base; 2e-4 won 0.600 [0.527, 0.677] and, on another
# training seed, 0.623 [0.550, 0.693], both beyond their intervals, with shorter replies. (DPO's
# own implicit-reward accuracy on its few held-out pairs stays at chance either way.) The
# spec's own "dpo" settings still win.
CPU_DPO_DEFAULTS = {"max_length": 384, "learning_rate": 2e-4}


def dpo_settings(spec: WordingSpec) -> DpoSettings:
    return DpoSettings.from_spec(spec, DPO, where="DPO", cpu_defaults=CPU_DPO_DEFAULTS)


def check_spec(spec: Mapping[str, Any]) -> tuple[WordingSpec, DpoSettings]:
    """The spec and its settings, or ValueError saying what is wrong; loads no model (the
    Train step can call it before starting a job)."""
    wording = parse_wording_spec(spec, trainer=DPO)
    return wording, dpo_settings(wording)


def run(spec: Mapping[str, Any], progress: Progress = silent_progress) -> dict[str, Any]:
    """Train DPO on the spec's pairs, measure, merge, save; the version's plain-value record."""
    from transformers import set_seed

    clock = Stopwatch()
    wording, settings = check_spec(spec)
    quiet_transformers()
    set_seed(settings.seed)
    model, tokenizer = load_base(
        wording.base, models_dir=wording.models_dir, device=device_for(wording.device_type)
    )
    clock.lap("load")
    pairs = read_the_pairs(wording.pairs, tokenizer, settings)
    settings, checkpointing = size_the_steps(
        settings,
        model,
        longest=min(settings.max_length, pairs.longest),
        sequences_per_row=2,  # chosen and rejected
        choice=settings.gradient_checkpointing,
    )
    pairs = pairs.in_reading_order(settings)
    stages = StageProgress(
        progress,
        {DPO: settings.planned_steps(len(pairs.train))},
        budget_seconds=wording.stage_budget_seconds,
    )
    callback = stages.callback(DPO)
    clock.lap()  # reading the pairs: in the total only
    pairs, base_logps = measure_the_base(
        model, tokenizer, pairs, settings, stages, seconds=measuring_seconds(stages.budget_seconds)
    )
    # On a budget the Trainer gets what is left less as long again as the base's half took,
    # for the trained policy's half after it.
    reserved = clock.lap("base_held_out")
    keep_time_to_measure(callback, spent=clock.elapsed(), reserved=reserved)
    wording.output_dir.mkdir(parents=True, exist_ok=True)
    trainer = train_dpo(
        model, tokenizer, pairs, settings, callback, checkpointing, work_dir=wording.output_dir
    )
    clock.lap("train")
    policy = trainer.accelerator.unwrap_model(trainer.model)
    measured = measure_the_policy(policy, tokenizer, pairs, settings, base_logps)
    clock.lap("held_out")
    saved = save_version(trainer, policy, tokenizer, wording.output_dir)
    clock.lap("merge")
    metrics = dpo_metrics(measured, pairs, trainer, callback, checkpointing)
    metrics["pairs_per_step"] = settings.batch_size
    metrics["padding_free"] = bool(getattr(trainer, "padding_free", False))
    # TRL builds a second copy (from the base's folder) only without a LoRA: say which it used.
    metrics["reference"] = reference_kind(trainer)
    report_done(trainer, stages, metrics)
    held_out = (measured["accuracy"], None)  # the implicit reward's accuracy; no AUC
    return run_result(wording, metrics, clock, split=pairs.split, held_out=held_out, saved=saved)


# --- 1. the pairs as DPO reads them -------------------------------------------------------------


@dataclass
class DpoPairs:
    """The spec's pairs, each with its prompt trimmed to the window; the training ones in their
    length-grouped seeded reading order, the held-out ones as split."""

    pairs: Sequence[Pair]
    prompts: list[list[Message]]
    train: list[int]
    held: list[int]
    longest: int
    """Tokens of the longest training conversation (prompt and its longer reply)."""
    lengths: dict[int, int]
    """Each training pair's tokens (prompt and its longer reply, within the window)."""
    measured: list[int] | None = None
    """The held-out pairs the base's half measured in its share of a budget (None: all)."""

    @property
    def split(self) -> tuple[list[int], list[int]]:
        return self.train, self.held

    @property
    def held_measured(self) -> list[int]:
        return self.held if self.measured is None else self.measured

    def held_out(self, settings: DpoSettings) -> dict[str, Any]:
        """The held-out pairs measured and their prompts, in the training's window."""
        return {
            "prompts": [self.prompts[index] for index in self.held_measured],
            "pairs": [self.pairs[index] for index in self.held_measured],
            "batch_size": settings.score_batch_size,
            "max_length": settings.max_length,
        }

    def step_tokens(self, settings: DpoSettings) -> int:
        """A step holds chosen and rejected for each pair of the batch, at most max_length."""
        return 2 * settings.batch_size * min(settings.max_length, self.longest)

    def in_reading_order(self, settings: DpoSettings) -> DpoPairs:
        """The training pairs in batches of about the same length (a batch pads chosen and
        rejected to its longest) of `settings.batch_size`, read in a seeded order: less
        padding, and a budget sees a fair sample."""
        train = sorted(self.train)
        order = length_grouped_order(
            [self.lengths[index] for index in train],
            batch_size=settings.batch_size,
            seed=settings.seed,
        )
        return dataclasses.replace(self, train=[train[position] for position in order])


def read_the_pairs(pairs: Sequence[Pair], tokenizer: Any, settings: DpoSettings) -> DpoPairs:
    """The held-out split (RLHF's reward model holds out the same), the prompts trimmed, and
    the training pairs in their reading order for `settings.batch_size`
    (`DpoPairs.in_reading_order`)."""
    train, held = settings.held_out(pair_groups(pairs))
    prompts = [
        trimmed(tokenizer, pair.prompt, (pair.chosen, pair.rejected), settings.max_length)
        for pair in pairs
    ]
    lengths = [
        min(
            settings.max_length,
            max(
                len(conversation_ids(tokenizer, [*prompts[index], *as_reply(reply)]))
                for reply in (pairs[index].chosen, pairs[index].rejected)
            ),
        )
        for index in train
    ]
    read = DpoPairs(
        pairs, prompts, train, held, max(lengths, default=1), dict(zip(train, lengths, strict=True))
    )
    return read.in_reading_order(settings)


# --- 2. measuring (trainers.wording.policy_measures) -------------------------------------------


def measure_the_base(
    model: Any,
    tokenizer: Any,
    pairs: DpoPairs,
    settings: DpoSettings,
    stages: StageProgress,
    *,
    seconds: float | None,
) -> tuple[DpoPairs, tuple[np.ndarray, np.ndarray]]:
    """The base's half of the held-out measuring, before the adapter exists: the pairs with
    those it measured within `seconds` (a seeded sample; None: all), and their (chosen,
    rejected) log-probabilities."""
    stages.step(DPO, 0, phase="measuring the base on the held-out pairs")

    def measure(indices: Sequence[int]) -> list[tuple[float, float]]:
        part = dataclasses.replace(pairs, measured=list(indices))
        chosen, rejected = pair_logps(model, tokenizer, **part.held_out(settings))
        return list(zip(chosen.tolist(), rejected.tolist(), strict=True))

    positions, logps = measured_within(
        pairs.held, measure, seconds=seconds, chunk=settings.score_batch_size, seed=settings.seed
    )
    measured = dataclasses.replace(pairs, measured=[pairs.held[position] for position in positions])
    chosen, rejected = np.asarray(logps, dtype=float).reshape(-1, 2).T
    return measured, (chosen, rejected)


def measure_the_policy(
    policy: Any,
    tokenizer: Any,
    pairs: DpoPairs,
    settings: DpoSettings,
    base_logps: tuple[np.ndarray, np.ndarray],
) -> dict[str, Any]:
    """The trained policy's half: preference accuracy over the whole held-out set."""
    return preference_accuracy(
        policy,
        tokenizer,
        **pairs.held_out(settings),
        beta=settings.beta,
        seed=settings.seed,
        base_logps=base_logps,
    )


# --- 3. training ----------------------------------------------------------------------------------


def train_dpo(
    model: Any,
    tokenizer: Any,
    pairs: DpoPairs,
    settings: DpoSettings,
    callback: Any,
    checkpointing: bool,
    *,
    work_dir: Path,
) -> Any:
    """TRL's DPOTrainer with a fresh LoRA on the training pairs, read in their order; the
    trained Trainer (its model is the policy)."""
    from datasets import Dataset
    from trl import DPOConfig, DPOTrainer

    fused_head_for_the_cpu()
    return train_in_scratch(
        DPOTrainer,
        DPOConfig,
        settings=settings,
        work_dir=work_dir,
        learning_rate=settings.learning_rate,
        arguments={
            "beta": settings.beta,
            "max_length": settings.max_length,
            "checkpointing": checkpointing,
            "train_sampling_strategy": "sequential",  # the length-grouped seeded order
            "include_num_input_tokens_seen": "non_padding",
            **padding_free_arguments(model),
        },
        model=model,
        train_dataset=Dataset.from_list(preference_rows(pairs.prompts, pairs.pairs, pairs.train)),
        processing_class=tokenizer,
        peft_config=settings.lora(),
        callbacks=[callback],
    )


FLASH_ATTENTION = ("flash_attention_2", "flash_attention_3")


def padding_free_arguments(model: Any) -> dict[str, Any]:
    """TRL's padding-free batches (a step's sequences packed into one row: no padding at all)
    where they hold: on a card, with an attention kernel that reads packed rows (flash
    attention), and a TRL whose DPOTrainer keeps the setting. TRL 1.16 turns it off with a
    warning ("temporarily unavailable after a refactor"), so there batches stay padded, grouped
    by length."""
    if model_device(model).type != "cuda":
        return {}
    if getattr(model.config, "_attn_implementation", None) not in FLASH_ATTENTION:
        return {}
    return {"padding_free": True} if trl_keeps_padding_free() else {}


@functools.cache
def trl_keeps_padding_free() -> bool:
    import inspect

    from trl import DPOTrainer

    return "temporarily unavailable" not in inspect.getsource(DPOTrainer.__init__)


# --- 4. the record ------------------------------------------------------------------------------


def dpo_metrics(
    measured: Mapping[str, Any],
    pairs: DpoPairs,
    trainer: Any,
    callback: Any,
    checkpointing: bool,
) -> dict[str, Any]:
    """The run's metrics: the held-out figures, the training's running means and how much of
    the planned steps ran; then whether it learned anything."""
    history = callback.history
    metrics = {
        "held_out_accuracy": measured["accuracy"],
        "held_out_accuracy_ci": measured["accuracy_ci"],
        "held_out_pairs": len(pairs.held),
        # Within a budget, the seeded share of them the stage had time to measure.
        "held_out_measured": len(pairs.held_measured),
        "held_out_margin": measured["margin"],
        # What the untrained base's log-probabilities already rank right on the same pairs.
        "base_held_out_accuracy": measured["base_accuracy"],
        "base_held_out_accuracy_ci": measured["base_accuracy_ci"],
        # The trained version's own log-probabilities on the same pairs, and their paired
        # difference from the base's: what serving it changes.
        "policy_held_out_accuracy": measured.get("policy_accuracy"),
        "policy_held_out_accuracy_ci": measured.get("policy_accuracy_ci"),
        "policy_gain_over_base": measured.get("policy_gain_over_base"),
        "policy_gain_over_base_ci": measured.get("policy_gain_over_base_ci"),
        "train_loss": last_value(history, "train_loss"),
        # Running means over the logged steps: the last batch of four pairs says nothing.
        "mean_train_reward_accuracy": _rounded(mean_value(history, "rewards/accuracies")),
        "mean_train_reward_margin": _rounded(mean_value(history, "rewards/margins")),
        "steps": int(trainer.state.global_step),
        "data_seen": callback.data_seen,
        "gradient_checkpointing": checkpointing,
        "curve": curve(history, ("loss", "rewards/accuracies", "rewards/margins")),
    }
    metrics["did_not_learn"] = did_not_learn(preference=metrics, seen=metrics.get("data_seen"))
    return metrics


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def main(argv: list[str] | None = None) -> int:
    return trainer_main(run, argv, description=__doc__.splitlines()[0])


if __name__ == "__main__":
    raise SystemExit(main())
