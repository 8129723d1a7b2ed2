"""RLHF on the wording: the route the Arena ships.

Two fits on the same base:
  1. the reward model (`trainers.wording.reward_model`): a LoRA and a scalar head,
     from the Duel's picks
     (Bradley-Terry) or from the real calls' outcome labels (logistic), measured on held-out
     pairs or calls;
  2. the policy, a second LoRA: it samples replies to the pairs' real-call openings, the reward
     model scores them, and PPO's clipped per-token update moves it toward higher scores with a
     KL penalty to the base (the reference is the base with the adapter disabled, no second
     copy). Advantages are normalised within each batch in place of a learned value head.
Then the policy LoRA is merged into the base and saved on the models volume, the reward adapter
beside it.

TRL 1.16 has no PPOTrainer: the policy update is TRL's `GRPOTrainer` with `beta > 0` (the KL),
`num_iterations > 1` (several updates per batch of samples, so the ratio moves and the clip
bites) and one small subclass for batch-level advantages.

    python -m trainers.wording.rlhf --spec spec.json --out result.json
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from trainers.runtime import Progress, silent_progress, trainer_main
from trainers.wording.bases import (
    CHAT_TEMPLATE_KWARGS,
    activations_fit,
    conversation_ids,
    fused_head_for_the_cpu,
    inference_precision,
    load_base,
    lora_config,
    make_readable,
    quiet_deprecations,
    quiet_transformers,
    save_merged,
    train_quietly,
    training_arguments,
)
from trainers.wording.measures import did_not_learn, interval
from trainers.wording.reward_model import (
    RewardModelConfig,
    RewardModelFit,
    fit_reward_model,
    reward_model_config,
    score,
)
from trainers.wording.spec import (
    Message,
    StageProgress,
    WordingSpec,
    config_with,
    curve,
    held_out_split,
    last_value,
    mean_value,
    pair_groups,
    parse_wording_spec,
    planned_steps,
    trim_prompt,
    version_record,
)


@dataclass(frozen=True)
class PolicyConfig:
    learning_rate: float = 2e-5
    """AdamW step size on the policy LoRA."""
    beta: float = 0.04
    """KL penalty to the base: how hard the policy is held near it (must be above 0)."""
    clip_epsilon: float = 0.2
    """PPO clip: a token's probability ratio counts only within 1 ± epsilon."""
    updates_per_batch: int = 2
    """Optimizer passes over each batch of sampled replies (PPO epochs); above 1, or the
    ratio stays 1 and the clip never bites."""
    replies_per_prompt: int = 4
    """Replies sampled per opening (TRL samples in groups; the advantage ignores them)."""
    batch_size: int = 8
    """Replies per card per optimizer step."""
    gradient_accumulation_steps: int = 1
    """Steps whose gradients are summed before one optimizer update."""
    max_prompt_length: int = 768
    """Tokens of opening; the oldest turns of a longer call are dropped."""
    max_reply_tokens: int = 96
    """Longest reply sampled."""
    temperature: float = 1.0
    """Sampling temperature of the replies."""
    epochs: float = 1.0
    """Passes over the openings (the spec's epochs)."""
    max_steps: int | None = None
    """Stop after this many optimizer steps (tests, benchmarks); None runs the epochs."""
    lora_r: int = 16
    """LoRA rank of the policy adapter."""
    lora_alpha: int = 32
    """LoRA scale (alpha / r multiplies the update)."""
    lora_dropout: float = 0.0
    """Dropout on the LoRA input."""
    held_out_prompts: int = 100
    """Held-out openings the policy answers (greedy) before and after the update, scored by
    the reward model: reward_before / reward_after are measured there, not on training rows.
    A hundred or more, or the paired interval of the gain is too wide to say anything."""
    gradient_checkpointing: bool | None = None
    """Recompute activations in the backward pass (less memory, about a third more time);
    None decides by whether a batch's activations fit in half the memory free."""
    seed: int = 0
    """Seeds sampling and the data order."""

    def __post_init__(self) -> None:
        if self.beta <= 0:
            raise ValueError(
                "The policy's KL penalty (beta) must be above 0: it holds the policy near the base."
            )
        if self.batch_size % self.replies_per_prompt:
            raise ValueError(
                f"batch_size ({self.batch_size}) must be a multiple of replies_per_prompt "
                f"({self.replies_per_prompt}): replies are sampled in whole groups."
            )
        if self.updates_per_batch < 2:
            raise ValueError(
                "updates_per_batch must be 2 or more: with one update per batch "
                "the PPO ratio is always 1 and the clip never acts."
            )


def policy_lora_config(config: PolicyConfig) -> Any:
    return lora_config(
        task_type="CAUSAL_LM",
        r=config.lora_r,
        alpha=config.lora_alpha,
        dropout=config.lora_dropout,
    )


# --- the policy update ----------------------------------------------------------------------


def batch_normalised(rewards: Any) -> Any:
    """PPO-style advantages: (reward - batch mean) / batch spread, one per reply."""
    return (rewards - rewards.mean()) / (rewards.std() + 1e-4)


def policy_trainer_class() -> type:
    """TRL's GRPOTrainer with batch-normalised advantages (built lazily: TRL imports slowly)."""
    from trl import GRPOTrainer

    class BatchNormalisedGRPOTrainer(GRPOTrainer):
        """Why a subclass: the description asks for advantages normalised within each batch in
        place of a learned value head, and GRPO always subtracts the mean of the replies to
        the same prompt (`scale_rewards="batch"` changes only the divisor). Sampling, the
        clipped per-token ratio and the KL to the adapter-disabled base stay TRL's own."""

        def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
            # TRL returns the rewards of the whole batch, gathered from every process.
            self._batch_rewards = super()._calculate_rewards(
                inputs, prompts, completions, completion_ids_list
            )
            return self._batch_rewards

        def _generate_single_turn(self, *args, **kwargs):
            # TRL samples without autocast, so on a CPU the prompts' prefill ran in float32
            # at a third of the bf16 rate; the ratio's old log-probabilities are recomputed
            # under the Trainer's own precision either way.
            with inference_precision(self.model):
                return super()._generate_single_turn(*args, **kwargs)

        def _generate_and_score_completions(self, inputs):
            output = super()._generate_and_score_completions(inputs)
            weights = self.reward_weights.to(self._batch_rewards.device)
            rewards = (self._batch_rewards * weights.unsqueeze(0)).nansum(dim=1)
            advantages = batch_normalised(rewards)
            local = len(output["advantages"])
            start = self.accelerator.process_index * local
            output["advantages"] = advantages[start : start + local].to(output["advantages"])
            mode = "train" if self.model.training else "eval"
            self._metrics[mode]["advantages/mean"].append(advantages.mean().item())
            self._metrics[mode]["advantages/std"].append(advantages.std().item())
            return output

    BatchNormalisedGRPOTrainer.__module__ = __name__
    return BatchNormalisedGRPOTrainer


class RewardModelScore:
    """The reward function GRPO calls: the fitted reward model's score of prompt + reply."""

    __name__ = "reward_model"

    def __init__(self, fit: RewardModelFit, *, batch_size: int):
        self.fit = fit
        self.batch_size = batch_size

    def __call__(
        self,
        prompts: Sequence[Sequence[Message]],
        completions: Sequence[Sequence[Message]],
        **_: Any,
    ) -> list[float]:
        conversations = [
            [*prompt, *completion] for prompt, completion in zip(prompts, completions, strict=True)
        ]
        return score(self.fit.model, self.fit.tokenizer, conversations, batch_size=self.batch_size)


# On a CPU stage that runs to a time budget: a window and reply length that let a few dozen
# updates fit in ten minutes (each sampled reply costs a generation and three passes), and a
# step size a LoRA moves at in that many updates. Measured on the shared hh-rlhf pairs (reward
# model held out at 0.617 [0.530, 0.704]), 300 s of policy each, reward on 100 held-out
# openings: 2e-4 took 15 steps to KL 0.009 and a gain of +0.20 [-0.18, +0.59] (within its
# interval); 1e-3 took 23 steps to KL 0.10, clip 0.11 and +1.15 [+0.76, +1.59]. (2e-5, the
# GPU default, left KL at 0.000.) The spec's own "policy" settings still win.
CPU_POLICY_DEFAULTS = {"learning_rate": 1e-3, "max_reply_tokens": 48, "max_prompt_length": 384}


def policy_config(spec: WordingSpec) -> PolicyConfig:
    defaults = PolicyConfig(epochs=spec.epochs, max_steps=spec.max_steps, seed=spec.seed)
    if spec.runs_to_a_budget:
        defaults = config_with(defaults, CPU_POLICY_DEFAULTS, where="the policy")
    return config_with(defaults, spec.section("policy"), where="the policy")


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
        prompts.append(
            trim_prompt(
                lambda messages: len(conversation_ids(tokenizer, messages)),
                prompt,
                ("",),
                max_tokens=max_tokens,
            )
        )
    return prompts


GENERATION_BATCH = 16
"""Prompts answered together when measuring (greedy, with the KV cache)."""


def greedy_replies(
    model: Any, tokenizer: Any, prompts: Sequence[Sequence[Message]], *, max_new_tokens: int
) -> list[str]:
    """Each prompt's greedy reply (batched, left-padded, with the KV cache), through the same
    chat template the policy is trained and served with."""
    import torch

    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    encoded = [
        conversation_ids(tokenizer, prompt, add_generation_prompt=True) for prompt in prompts
    ]
    # Prompts of about the same length share a batch (less left padding), answered in the
    # caller's order.
    order = sorted(range(len(prompts)), key=lambda index: len(encoded[index]))
    replies: dict[int, str] = {}
    with torch.no_grad(), inference_precision(model):
        for first in range(0, len(order), GENERATION_BATCH):
            rows = order[first : first + GENERATION_BATCH]
            batch = [encoded[index] for index in rows]
            width = max(len(ids) for ids in batch)
            input_ids = torch.full((len(batch), width), tokenizer.pad_token_id, dtype=torch.long)
            attention = torch.zeros((len(batch), width), dtype=torch.long)
            for row, ids in enumerate(batch):
                input_ids[row, width - len(ids) :] = torch.tensor(ids)
                attention[row, width - len(ids) :] = 1
            generated = model.generate(
                input_ids=input_ids.to(device),
                attention_mask=attention.to(device),
                max_new_tokens=max_new_tokens,
                do_sample=False,
                pad_token_id=tokenizer.pad_token_id,
            )
            texts = tokenizer.batch_decode(generated[:, width:], skip_special_tokens=True)
            replies.update(zip(rows, texts, strict=True))
    if was_training:
        model.train()
    return [replies[index].strip() for index in range(len(prompts))]


def held_out_reward(
    policy: Any,
    tokenizer: Any,
    fit: RewardModelFit,
    prompts: Sequence[Sequence[Message]],
    *,
    config: PolicyConfig,
    score_batch_size: int,
    base_replies: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The reward model's mean score of the base's and the policy's greedy replies to held-out
    openings. `base_replies` are the base's where written already (before the adapter
    existed); else the policy writes them with its adapter disabled."""
    if not prompts:
        return {"reward_before": None, "reward_after": None, "held_out_prompts": 0}

    def rewards(replies: list[str]) -> np.ndarray:
        conversations = [
            [*prompt, {"role": "assistant", "content": reply}]
            for prompt, reply in zip(prompts, replies, strict=True)
        ]
        return np.asarray(
            score(fit.model, fit.tokenizer, conversations, batch_size=score_batch_size)
        )

    if base_replies is None:
        with policy.disable_adapter():
            base_replies = greedy_replies(
                policy, tokenizer, prompts, max_new_tokens=config.max_reply_tokens
            )
    before = list(base_replies)
    after = greedy_replies(policy, tokenizer, prompts, max_new_tokens=config.max_reply_tokens)
    changed = sum(a != b for a, b in zip(before, after, strict=True))
    gains = rewards(after) - (base := rewards(before))
    return {
        "reward_before": round(float(base.mean()), 4),
        "reward_after": round(float((base + gains).mean()), 4),
        # Paired over the same prompts: whether the rise is more than which prompts were drawn.
        "reward_gain": round(float(gains.mean()), 4),
        "reward_gain_ci": interval(gains, lambda sample: float(sample.mean()), seed=config.seed),
        "held_out_prompts": len(prompts),
        "held_out_replies_changed": changed,
    }


def _opening_key(prompt: Sequence[Message]) -> tuple[tuple[str, str], ...]:
    return tuple((message["role"], message["content"]) for message in prompt)


@dataclass
class PolicyRun:
    """What the PPO-style update leaves: its trainer, the policy (a PeftModel), the tokenizer,
    the logged history, how much of the planned steps ran, and the base's greedy replies to
    the held-out openings (written before the update, for reward_before)."""

    trainer: Any
    policy: Any
    tokenizer: Any
    history: list[dict[str, float]]
    data_seen: dict[str, Any]
    base_replies: list[str]


def train_policy(
    spec: WordingSpec,
    fit: RewardModelFit,
    conversations: Sequence[Sequence[Message]],
    *,
    config: PolicyConfig,
    stages: StageProgress,
    held_out: Sequence[Sequence[Message]] = (),
    score_batch_size: int = 16,
) -> PolicyRun:
    """The PPO-style update on `conversations`' openings; the base answers the `held_out`
    openings first."""
    import tempfile

    from datasets import Dataset
    from trl import GRPOConfig

    started = time.monotonic()
    model, tokenizer = load_base(spec.base, models_dir=spec.models_dir)
    prompts = openings(conversations, tokenizer, max_tokens=config.max_prompt_length)
    # The base's half of the held-out measuring, before the adapter exists. On a budget the
    # Trainer gets what is left less twice as long again, for the policy's replies and the
    # scoring of both after it, so the stage as a whole ends near its budget.
    writing = time.monotonic()
    stages.step("policy", 0, phase="the base answers the held-out openings")
    base_replies = greedy_replies(
        model, tokenizer, held_out, max_new_tokens=config.max_reply_tokens
    )
    written = time.monotonic()
    checkpointing = config.gradient_checkpointing
    if checkpointing is None:
        step_tokens = config.batch_size * (config.max_prompt_length + config.max_reply_tokens)
        checkpointing = not activations_fit(model, step_tokens)
    callback = stages.callback("policy")
    if callback.budget_seconds is not None:
        spent, reserved = written - started, 2 * (written - writing)
        # At least half the budget trains: on a loaded machine measuring slows too, and a
        # reserve taking the whole budget left one step (seen: DPO and the policy, one step
        # each, while another training shared the two cores).
        budget = callback.budget_seconds
        callback.budget_seconds = max(budget / 2, budget - spent - reserved)
    scratch = tempfile.TemporaryDirectory(dir=spec.output_dir)
    arguments = training_arguments(
        GRPOConfig,
        output_dir=scratch.name,
        batch_size=config.batch_size,
        gradient_accumulation_steps=config.gradient_accumulation_steps,
        epochs=config.epochs,
        max_steps=config.max_steps,
        learning_rate=config.learning_rate,
        seed=config.seed,
        checkpointing=checkpointing,
        beta=config.beta,
        epsilon=config.clip_epsilon,
        num_iterations=config.updates_per_batch,
        num_generations=config.replies_per_prompt,
        max_completion_length=config.max_reply_tokens,
        temperature=config.temperature,
        chat_template_kwargs=CHAT_TEMPLATE_KWARGS,
        loss_type="grpo",  # per-reply token mean, then the batch mean: PPO's per-token objective
    )
    fused_head_for_the_cpu()
    with quiet_deprecations():
        trainer = policy_trainer_class()(
            model=model,
            reward_funcs=[RewardModelScore(fit, batch_size=score_batch_size)],
            args=arguments,
            train_dataset=Dataset.from_list([{"prompt": prompt} for prompt in prompts]),
            processing_class=tokenizer,
            peft_config=policy_lora_config(config),
            callbacks=[callback],
        )
    with scratch:
        train_quietly(trainer)
    policy = trainer.accelerator.unwrap_model(trainer.model)
    return PolicyRun(trainer, policy, tokenizer, callback.history, callback.data_seen, base_replies)


# --- the run ------------------------------------------------------------------------------------


def check_spec(spec: Mapping[str, Any]) -> tuple[WordingSpec, RewardModelConfig, PolicyConfig]:
    """The spec and both configs, or ValueError saying what is wrong; loads no model (the
    Train step can call it before starting a job)."""
    wording = parse_wording_spec(spec, trainer="rlhf")
    return wording, reward_model_config(wording), policy_config(wording)


def run(spec: Mapping[str, Any], progress: Progress = silent_progress) -> dict[str, Any]:
    """Fit the reward model, then the policy; merge and save; the version's plain record."""
    from transformers import set_seed

    started = time.perf_counter()
    wording, reward_config, config = check_spec(spec)
    quiet_transformers()
    set_seed(wording.seed)
    wording.output_dir.mkdir(parents=True, exist_ok=True)

    # The held-out tenth of the pairs (the same split DPO holds out) stays unseen by both fits.
    pairs_train, pairs_held = (
        held_out_split(
            pair_groups(wording.pairs),
            fraction=reward_config.held_out_fraction,
            seed=reward_config.seed,
            minimum_groups=reward_config.held_out_minimum,
        )
        if wording.pairs
        else ([], [])  # outcome labels alone: no picks to hold out
    )
    # What the policy answers: the training pairs' openings; from outcome labels alone, the
    # openings of the calls the reward model trains on (the held-out calls stay unseen).
    policy_prompts, held_prompts = _policy_prompts(wording, reward_config, pairs_train, pairs_held)

    # The bar's plan; each stage's Trainer corrects its own count when it starts.
    reward_rows = (
        len(wording.outcome_examples) if wording.reward_source == "outcomes" else len(pairs_train)
    )
    openings_count = len({_opening_key(prompt) for prompt in policy_prompts})
    stages = StageProgress(
        progress,
        {
            "reward_model": reward_config.max_steps
            or _planned(reward_rows, reward_config.batch_size, reward_config),
            "policy": config.max_steps
            or _planned(
                # GRPO repeats each opening per reply and each batch per update.
                openings_count * config.replies_per_prompt * config.updates_per_batch,
                config.batch_size,
                config,
            ),
        },
        budget_seconds=wording.stage_budget_seconds,
    )

    # --- 1. the reward model ---
    fit = fit_reward_model(wording, stages=stages, config=reward_config)
    _release_memory()  # the reward trainer's optimizer state, before the policy loads
    rewarded = time.perf_counter()

    # --- 2. the policy ---
    tokenizer = fit.tokenizer  # the same base's tokenizer: trims the held-out openings
    held_openings = openings(held_prompts, tokenizer, max_tokens=config.max_prompt_length)
    held_openings = held_openings[: config.held_out_prompts]
    run = train_policy(
        wording,
        fit,
        policy_prompts,
        config=config,
        stages=stages,
        held_out=held_openings,
        score_batch_size=reward_config.score_batch_size,
    )
    trainer, policy, tokenizer, history = run.trainer, run.policy, run.tokenizer, run.history
    policy_data_seen = run.data_seen
    trained = time.perf_counter()
    held_out = held_out_reward(
        policy,
        tokenizer,
        fit,
        held_openings,
        config=config,
        score_batch_size=reward_config.score_batch_size,
        base_replies=run.base_replies,
    )
    measured = time.perf_counter()

    # --- 3. merge the policy, keep the reward adapter beside it ---
    merged_dir = wording.output_dir / "merged"
    adapter_dir = wording.output_dir / "reward_adapter"
    if trainer.accelerator.is_main_process:
        fit.model.save_pretrained(adapter_dir)
        fit.tokenizer.save_pretrained(adapter_dir)
        make_readable(adapter_dir)
        save_merged(policy, tokenizer, merged_dir)
    trainer.accelerator.wait_for_everyone()
    finished = time.perf_counter()

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
        "policy_steps": int(trainer.state.global_step),
        "policy_data_seen": policy_data_seen,
        "reference": "base with the adapter disabled" if trainer.ref_model is None else "copy",
        "curve": curve(history, ("loss", "reward", "kl", "clip_ratio/region_mean")),
    }
    metrics["did_not_learn"] = did_not_learn(reward_model=metrics["reward_model"], policy=metrics)
    if trainer.accelerator.is_main_process:
        stages.done(**{k: v for k, v in metrics.items() if isinstance(v, float)})
    outcome_counts = None
    if fit.source == "outcomes":
        outcome_counts = {
            "total": len(wording.outcome_examples),
            "train": fit.train_rows,
            "held_out": fit.held_out_rows,
            "held_out_calls": len(fit.held_out_groups),
        }
    return {
        "trainer": "rlhf",
        "version": version_record(
            wording,
            pairs_train=len(pairs_train),
            pairs_held_out=len(pairs_held),
            held_out_accuracy=fit.held_out_accuracy,
            held_out_auc=fit.held_out_auc,
            merged_weights=str(merged_dir),
            reward_adapter=str(adapter_dir),
            outcome_examples=outcome_counts,
        ),
        "metrics": metrics,
        "seconds": {
            "reward_model": round(rewarded - started, 3),
            "policy": round(trained - rewarded, 3),
            "held_out_reward": round(measured - trained, 3),
            "merge": round(finished - measured, 3),
            "total": round(finished - started, 3),
        },
    }


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
        train, held = held_out_split(
            [example.call_id for example in examples],
            fraction=reward_config.held_out_fraction,
            seed=reward_config.seed,
            minimum_groups=reward_config.held_out_minimum,
        )
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


def _release_memory() -> None:
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _planned(rows: int, batch_size: int, config: RewardModelConfig | PolicyConfig) -> int:
    return planned_steps(
        rows,
        batch_size=batch_size,
        accumulation=config.gradient_accumulation_steps,
        epochs=config.epochs,
    )


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
