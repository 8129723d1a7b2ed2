"""RLHF on the wording: the route the Arena ships.

Two fits on the same base:
  1. the reward model (`trainers.wording.reward_model`): a LoRA and a scalar head,
     from the Duel's picks
     (Bradley-Terry) or from the real calls' outcome labels (logistic), measured on held-out
     pairs or calls;
  2. the policy, a second LoRA: it samples replies to the pairs' real-call openings, the reward
     model scores them, and PPO's clipped per-token update (`trainers.wording.ppo_update`) moves
     it toward higher scores with a KL penalty to the base.
Then the base and the policy answer held-out openings, the reward model scores both, and the
policy LoRA is merged into the base and saved on the models volume, the reward adapter beside
it. `run` is that pipeline, one named stage at a time.

    python -m trainers.wording.rlhf --spec spec.json --out result.json
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trainers.bases import (
    device_for,
    load_base,
    quiet_transformers,
    reference_kind,
)
from trainers.registry import RLHF
from trainers.runtime import Progress, silent_progress, trainer_main
from trainers.wording.common import (
    Stopwatch,
    keep_time_to_measure,
    measured_within,
    measuring_seconds,
    report_done,
    run_result,
    save_version,
    size_the_steps,
    trimmed,
)
from trainers.wording.measures import did_not_learn
from trainers.wording.policy_measures import GENERATION_BATCH, greedy_replies, held_out_reward
from trainers.wording.ppo_update import PolicyConfig, policy_config, ppo_update
from trainers.wording.reward_model import (
    RewardModelConfig,
    RewardModelFit,
    fit_reward_model,
    reward_model_config,
)
from trainers.wording.spec import (
    Message,
    StageProgress,
    WordingSpec,
    curve,
    last_value,
    mean_value,
    pair_groups,
    parse_wording_spec,
)


def check_spec(spec: Mapping[str, Any]) -> tuple[WordingSpec, RewardModelConfig, PolicyConfig]:
    """The spec and both configs, or ValueError saying what is wrong; loads no model (the
    Train step can call it before starting a job)."""
    wording = parse_wording_spec(spec, trainer=RLHF)
    return wording, reward_model_config(wording), policy_config(wording)


def run(spec: Mapping[str, Any], progress: Progress = silent_progress) -> dict[str, Any]:
    """Fit the reward model, then the policy; measure, merge and save; the version's plain
    record."""
    from transformers import set_seed

    clock = Stopwatch()
    wording, reward_config, config = check_spec(spec)
    quiet_transformers()
    set_seed(wording.seed)
    wording.output_dir.mkdir(parents=True, exist_ok=True)
    split = split_the_data(wording, reward_config)
    stages = plan_the_stages(progress, wording, split, reward_config, config)
    fit = fit_the_reward_model(wording, stages, reward_config)
    clock.lap("reward_model")
    policy = train_the_policy(wording, fit, split, config, reward_config, stages)
    clock.lap("policy")
    held_out = held_out_reward(
        policy.policy,
        policy.tokenizer,
        fit,
        policy.held_openings,
        config=config,
        score_batch_size=reward_config.score_batch_size,
        base_replies=policy.base_replies,
    )
    clock.lap("held_out_reward")
    saved = save_version(
        policy.trainer,
        policy.policy,
        policy.tokenizer,
        wording.output_dir,
        reward_adapter=(fit.model, fit.tokenizer),
    )
    clock.lap("merge")
    metrics = policy_metrics(fit, policy, held_out)
    report_done(policy.trainer, stages, metrics)
    return run_result(
        wording,
        metrics,
        clock,
        split=(split.pairs_train, split.pairs_held),
        held_out=(fit.held_out_accuracy, fit.held_out_auc),
        saved=saved,
        outcome_examples=outcome_counts(wording, fit),
    )


# --- 1. what each fit reads -------------------------------------------------------------------


@dataclass
class RlhfSplit:
    """The pairs' split (the same DPO holds out), and the openings the policy answers: those
    it trains on and the held-out ones its reward is measured on."""

    pairs_train: list[int]
    pairs_held: list[int]
    prompts: list[Sequence[Message]]
    held_prompts: list[Sequence[Message]]


def split_the_data(wording: WordingSpec, reward_config: RewardModelConfig) -> RlhfSplit:
    """The held-out tenth of the pairs stays unseen by both fits; from outcome labels alone
    there are no picks to hold out."""
    pairs_train, pairs_held = (
        reward_config.held_out(pair_groups(wording.pairs)) if wording.pairs else ([], [])
    )
    prompts, held_prompts = _policy_prompts(wording, reward_config, pairs_train, pairs_held)
    return RlhfSplit(pairs_train, pairs_held, prompts, held_prompts)


def plan_the_stages(
    progress: Progress,
    wording: WordingSpec,
    split: RlhfSplit,
    reward_config: RewardModelConfig,
    config: PolicyConfig,
) -> StageProgress:
    """The bar's plan; each stage's Trainer corrects its own count when it starts."""
    reward_rows = (
        len(wording.outcome_examples)
        if wording.reward_source == "outcomes"
        else len(split.pairs_train)
    )
    openings_count = len({_opening_key(prompt) for prompt in split.prompts})
    # GRPO repeats each opening per reply and each batch per update.
    samples = openings_count * config.replies_per_prompt * config.updates_per_batch
    return StageProgress(
        progress,
        {
            "reward_model": reward_config.planned_steps(reward_rows),
            "policy": config.planned_steps(samples),
        },
        budget_seconds=wording.stage_budget_seconds,
    )


def _policy_prompts(
    wording: WordingSpec,
    reward_config: RewardModelConfig,
    pairs_train: Sequence[int],
    pairs_held: Sequence[int],
) -> tuple[list[Sequence[Message]], list[Sequence[Message]]]:
    """(training openings, held-out openings) for the policy.

    The policy answers the training pairs' openings (from outcome labels alone: the openings
    of the calls the reward model trains on). Its reward is measured on openings neither fit
    saw: the held-out pairs', or with an outcome reward the reward model's held-out calls'
    (the same split it holds out), which are many more than a tenth of a few hundred picks."""
    if wording.reward_source == "outcomes":
        examples = wording.outcome_examples
        train, held = reward_config.held_out([example.call_id for example in examples])
        if not wording.pairs:
            return [examples[i].prompt for i in train], [examples[i].prompt for i in held]
        trained = [wording.pairs[i].prompt for i in pairs_train]
        seen = {_opening_key(prompt) for prompt in trained}
        held_prompts = [examples[i].prompt for i in held]
        return trained, [p for p in held_prompts if _opening_key(p) not in seen]
    return (
        [wording.pairs[i].prompt for i in pairs_train],
        [wording.pairs[i].prompt for i in pairs_held],
    )


def openings(
    conversations: Sequence[Sequence[Message]], tokenizer: Any, *, max_tokens: int
) -> list[list[Message]]:
    """The distinct openings (the call so far), once each, trimmed to fit: what the policy
    answers."""
    seen: set[tuple[tuple[str, str], ...]] = set()
    prompts = []
    for prompt in conversations:
        key = _opening_key(prompt)
        if key in seen:
            continue
        seen.add(key)
        prompts.append(trimmed(tokenizer, prompt, ("",), max_tokens))
    return prompts


def _opening_key(prompt: Sequence[Message]) -> tuple[tuple[str, str], ...]:
    return tuple((message["role"], message["content"]) for message in prompt)


# --- 2. the reward model, then the policy -------------------------------------------------------


def fit_the_reward_model(
    wording: WordingSpec, stages: StageProgress, reward_config: RewardModelConfig
) -> RewardModelFit:
    """The reward model from the spec's reward source; its trainer's optimizer state is freed
    before the policy loads."""
    fit = fit_reward_model(wording, stages=stages, config=reward_config)
    _release_memory()
    return fit


def _release_memory() -> None:
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


@dataclass
class PolicyRun:
    """What the policy stage leaves: the PPO update's trainer, the policy (a PeftModel), the
    tokenizer, the logged history, how much of the planned steps ran, the held-out openings
    and the base's greedy replies to them (written before the update, for reward_before), and
    where its time went (`ppo_update.Rollouts`: sampled and update tokens/s apart)."""

    trainer: Any
    policy: Any
    tokenizer: Any
    history: list[dict[str, float]]
    data_seen: dict[str, Any]
    base_replies: list[str]
    held_openings: list[list[Message]]
    rollouts: dict[str, Any]


def train_the_policy(
    wording: WordingSpec,
    fit: RewardModelFit,
    split: RlhfSplit,
    config: PolicyConfig,
    reward_config: RewardModelConfig,
    stages: StageProgress,
) -> PolicyRun:
    """The base loads again; it answers the held-out openings first (the base's half of the
    held-out measuring, before the adapter exists); then the PPO update on the training
    openings. On a budget the Trainer gets what is left less twice as long again as the base's
    answers took, for the policy's replies and the scoring of both after it, so the stage as a
    whole ends near its budget."""
    # The reward model's tokenizer is the same base's: it trims the held-out openings.
    held_openings = openings(
        split.held_prompts, fit.tokenizer, max_tokens=config.max_prompt_length
    )[: config.held_out_prompts]
    started = time.monotonic()
    model, tokenizer = load_base(
        wording.base, models_dir=wording.models_dir, device=device_for(wording.device_type)
    )
    prompts = openings(split.prompts, tokenizer, max_tokens=config.max_prompt_length)
    writing = time.monotonic()
    stages.step("policy", 0, phase="the base answers the held-out openings")
    # Within a budget, a seeded sample of them, as many as its measuring share allows.
    positions, base_replies = measured_within(
        held_openings,
        lambda part: greedy_replies(model, tokenizer, part, max_new_tokens=config.max_reply_tokens),
        seconds=measuring_seconds(stages.budget_seconds),
        chunk=GENERATION_BATCH,
        seed=wording.seed,
    )
    held_openings = [held_openings[position] for position in positions]
    written = time.monotonic()
    config, checkpointing = size_the_steps(
        config,
        model,
        longest=config.max_prompt_length + config.max_reply_tokens,
        sequences_per_row=1,
        multiple=config.replies_per_prompt,  # replies are sampled in whole groups
        choice=config.gradient_checkpointing,
    )
    callback = stages.callback("policy")
    keep_time_to_measure(callback, spent=written - started, reserved=2 * (written - writing))
    trainer = ppo_update(
        model,
        tokenizer,
        fit,
        prompts,
        config=config,
        callback=callback,
        checkpointing=checkpointing,
        work_dir=wording.output_dir,
        score_batch_size=reward_config.score_batch_size,
    )
    policy = trainer.accelerator.unwrap_model(trainer.model)
    return PolicyRun(
        trainer,
        policy,
        tokenizer,
        callback.history,
        callback.data_seen,
        base_replies,
        held_openings,
        trainer.rollouts.figures(),
    )


# --- 4. the record ------------------------------------------------------------------------------


def policy_metrics(
    fit: RewardModelFit, policy: PolicyRun, held_out: Mapping[str, Any]
) -> dict[str, Any]:
    """The run's metrics: the reward model's summary, the update's KL, clip and advantages,
    and the held-out reward; then whether either fit learned anything."""
    history, trainer = policy.history, policy.trainer
    metrics = {
        "reward_model": fit.summary(),
        "kl": mean_value(history, "kl"),
        "kl_last": last_value(history, "kl"),
        "clip_fraction": mean_value(history, "clip_ratio/region_mean"),
        "clip_fraction_max": _max(history, "clip_ratio/region_mean"),
        # On held-out openings, scored by the reward model: what the update taught.
        **held_out,
        # On the batches it trained on, for the curve only.
        "train_reward_first": _first(history, "reward"),
        "train_reward_last": last_value(history, "reward"),
        "advantage_mean": mean_value(history, "advantages/mean"),
        "advantage_std": mean_value(history, "advantages/std"),
        # How much of the reward's spread was between replies to the same opening: the part
        # the update learns from (the rest is which opening the reward model likes).
        "within_opening_share": mean_value(history, "rewards/within_opening_share"),
        "policy_steps": int(trainer.state.global_step),
        "policy_data_seen": policy.data_seen,
        # Sampling and updating apart: generation bounds the stage on a card.
        "policy_rollouts": policy.rollouts,
        "sampled_tokens_per_second": policy.rollouts["sampled_tokens_per_second"],
        "update_tokens_per_second": policy.rollouts["update_tokens_per_second"],
        "reference": reference_kind(trainer),
        "curve": curve(history, ("loss", "reward", "kl", "clip_ratio/region_mean")),
    }
    metrics["did_not_learn"] = did_not_learn(
        reward_model=metrics["reward_model"], policy=metrics, seen=policy.data_seen
    )
    return metrics


def outcome_counts(wording: WordingSpec, fit: RewardModelFit) -> dict[str, int] | None:
    """The outcome examples an outcome reward model read, trained on and held out; None for
    picks."""
    if fit.source != "outcomes":
        return None
    return {
        "total": len(wording.outcome_examples),
        "train": fit.train_rows,
        "held_out": fit.held_out_rows,
        "held_out_calls": len(fit.held_out_groups),
    }


def _values(history: Sequence[Mapping[str, float]], key: str) -> list[float]:
    return [float(row[key]) for row in history if key in row and row[key] == row[key]]


def _max(history: Sequence[Mapping[str, float]], key: str) -> float | None:
    values = _values(history, key)
    return max(values) if values else None


def _first(history: Sequence[Mapping[str, float]], key: str) -> float | None:
    values = _values(history, key)
    return values[0] if values else None


def main(argv: list[str] | None = None) -> int:
    return trainer_main(run, argv, description=__doc__.splitlines()[0])


if __name__ == "__main__":
    raise SystemExit(main())
