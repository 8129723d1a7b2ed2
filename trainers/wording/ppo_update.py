"""RLHF's PPO update on the wording: a second LoRA on the base samples replies to openings, the
fitted reward model (`trainers.wording.reward_model`) scores them, and PPO's clipped per-token
update moves the policy toward higher scores with a KL penalty to the base (the reference is the
base with the adapter disabled, no second copy). Advantages are normalised within each batch in
place of a learned value head: a reply's reward less the mean reward of the replies sampled to
the same opening in that batch (what a value head would learn to expect there), divided by the
batch's spread of those differences.

TRL 1.16 has no PPOTrainer: the update is TRL's `GRPOTrainer` with `beta > 0` (the KL),
`num_iterations > 1` (several updates per batch of samples, so the ratio moves and the clip
bites) and one small subclass for batch-level advantages. The run around it (the reward model
first, the measures and the merge after) is `trainers.wording.rlhf`.

Rollouts (the replies the policy samples) are generated batched: every reply of
`rollout_steps` optimizer steps in one call, left-padded, with the KV cache, by the LoRA policy
in bf16 where the device has it. On a GPU worker where `vllm` imports, a colocated vLLM engine
samples instead (`vllm_sampling`), its weights synced after each update; elsewhere
transformers' own `generate`. The stage reports sampled tokens/s apart from update tokens/s
(`Rollouts`).
"""

from __future__ import annotations

import importlib.util
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainers.bases import (
    CHAT_TEMPLATE_KWARGS,
    inference_precision,
    model_device,
    preloaded_name,
)
from trainers.wording.common import FitSettings, train_in_scratch
from trainers.wording.fused_head import fused_head_for_the_cpu
from trainers.wording.reward_model import RewardModelFit, score
from trainers.wording.spec import Message, WordingSpec

ADVANTAGE_BASELINES = ("opening", "batch")


@dataclass(frozen=True)
class PolicyConfig(FitSettings):
    """The PPO update's settings (the spec's "policy"), beside the schedule every fit has."""

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
    """Replies sampled per opening (TRL samples in groups)."""
    advantage_baseline: str = "opening"
    """What a reply's reward is measured against: "opening", the mean of the replies sampled
    to the same opening in the batch (a value head's job: the reward model reads the whole
    call, so most of a batch's spread is between openings, not between replies); "batch", the
    whole batch's mean, which rewards every reply to an opening the reward model happens to
    like. Measured on the shared hh-rlhf pairs (bench.wording_vs_base, 10 minutes at lr 1e-3):
    the policy's own held-out reward stayed put with "batch" and rose beyond its interval with
    "opening"; about half of a batch's spread was between openings."""
    best_of_group: bool = False
    """Push up only each opening's best-scored reply (its advantage kept, the others' set to
    0): the reward model's best of `replies_per_prompt` samples, inside the clipped update.
    Nothing is pushed down, and pushing sampled replies down moves their probability onto the
    replies the policy already likes most, which greedy decoding then repeats."""
    batch_size: int = 8
    """Replies per card per optimizer step."""
    max_prompt_length: int = 768
    """Tokens of opening; the oldest turns of a longer call are dropped."""
    max_reply_tokens: int = 96
    """Longest reply sampled."""
    temperature: float = 1.0
    """Sampling temperature of the replies."""
    held_out_prompts: int = 100
    """Held-out openings the policy answers (greedy) before and after the update, scored by
    the reward model: reward_before / reward_after are measured there, not on training rows.
    A hundred or more, or the paired interval of the gain is too wide to say anything."""
    gradient_checkpointing: bool | None = None
    """Recompute activations in the backward pass (less memory, about a third more time);
    None decides by whether a batch's activations fit in half the memory free."""
    rollout_steps: int | None = None
    """Optimizer steps whose replies one batched generation samples (TRL's
    steps_per_generation): decoding is bound by latency, so a card samples many replies
    nearly as fast as a few. None: 1 on the CPU (as before), 4 on a GPU."""
    vllm_memory_share: float = 0.3
    """Share of the card's memory a colocated vLLM engine takes, where `vllm` imports."""

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
        if self.advantage_baseline not in ADVANTAGE_BASELINES:
            raise ValueError(
                f"advantage_baseline must be one of {', '.join(ADVANTAGE_BASELINES)}, "
                f"not {self.advantage_baseline!r}."
            )
        if self.updates_per_batch < 2:
            raise ValueError(
                "updates_per_batch must be 2 or more: with one update per batch "
                "the PPO ratio is always 1 and the clip never acts."
            )


# On a CPU stage that runs to a time budget: a window that lets a few dozen updates fit in
# ten minutes (each sampled reply costs a generation and three passes), and a step size a LoRA
# moves at in that many updates. Measured on the shared hh-rlhf pairs (reward model held out at
# 0.617 [0.530, 0.704]), 300 s of policy each, reward on 100 held-out openings: 2e-4 took 15
# steps to KL 0.009 and a gain of +0.20 [-0.18, +0.59] (within its interval); 1e-3 took 23
# steps to KL 0.10, clip 0.11 and +1.15 [+0.76, +1.59]. (2e-5, the GPU default, left KL at
# 0.000.)
# The replies sampled are as long as a served reply may be (SERVED_REPLY_TOKENS): against its
# base untrained, by a judge that trained nothing (bench.wording_vs_base, 150 held-out
# prompts, 600 s a stage), 48-token samples made a version worse than its base, 0.413 [0.340,
# 0.493], 117 words against the base's 86 and a repeat rate of 0.63 against 0.37 (the reward
# model read only cut-off replies, and what it favoured there did not carry to whole ones);
# 160-token samples, 17-18 steps instead of 38, came out above it on two training seeds, 0.610
# [0.537, 0.687] (85 words, repeat 0.42) and 0.553 [0.473, 0.630] (87 words, 0.53).
# Those ran on a 2-core CPU with bf16 units. On a 2-core AVX2 CPU without them (float32, about
# a third of the rate) the same 600 s took 5 policy steps and lost, 0.370 [0.297, 0.447] (train
# seed 2; 103 words, repeat 0.50): the stage then says how far its budget let it get.
# The spec's own "policy" settings still win.
SERVED_REPLY_TOKENS = 160
"""policies.agents.AGENT_MAX_TOKENS, the most a served version says at a moment (not imported:
trainers may not import policies)."""
CPU_POLICY_DEFAULTS = {
    "learning_rate": 1e-3,
    "max_reply_tokens": SERVED_REPLY_TOKENS,
    "max_prompt_length": 384,
}


def policy_config(spec: WordingSpec) -> PolicyConfig:
    return PolicyConfig.from_spec(
        spec, "policy", where="the policy", cpu_defaults=CPU_POLICY_DEFAULTS
    )


# --- rollouts -------------------------------------------------------------------------------

GPU_ROLLOUT_STEPS = 4


def rollout_arguments(
    config: PolicyConfig, device: Any, *, from_memory: bool = False
) -> dict[str, Any]:
    """GRPOConfig arguments for how the policy samples on `device`: how many steps' replies one
    generation holds, the KV cache on, and vLLM where `vllm_sampling` takes it."""
    on_gpu = _device_type(device) == "cuda"
    steps = config.rollout_steps or (GPU_ROLLOUT_STEPS if on_gpu else 1)
    arguments: dict[str, Any] = {"steps_per_generation": steps}
    vllm = vllm_sampling(config, device, from_memory=from_memory)
    if not vllm:
        arguments["generation_kwargs"] = {"use_cache": True}
    return {**arguments, **vllm}


def vllm_sampling(
    config: PolicyConfig, device: Any, *, from_memory: bool = False
) -> dict[str, Any]:
    """TRL's colocated vLLM engine for the rollouts, on a GPU worker where `vllm` imports (and
    LEVERS9_VLLM_ROLLOUTS is not "0"); {} elsewhere, and transformers' `generate` samples.
    Never for a base held in memory (`from_memory`, `bases.preloaded_base`): TRL's engine
    loads its weights from the base's folder, and there is none.

    TRL runs the engine inside this process on the same card and, after each optimizer step,
    syncs the policy into it (the LoRA merged into a copy of each weight, pushed, unmerged).
    Untested here: no machine this project tests on has vLLM (it is kept out of the default
    install, 3.5 GB), and `bench.gpu_check` holds its random bases in memory, so it samples
    with transformers even where vLLM imports."""
    if from_memory or _device_type(device) != "cuda" or importlib.util.find_spec("vllm") is None:
        return {}
    if os.environ.get("LEVERS9_VLLM_ROLLOUTS", "").strip() == "0":
        return {}
    return {
        "use_vllm": True,
        "vllm_mode": "colocate",
        "vllm_gpu_memory_utilization": config.vllm_memory_share,
        "vllm_max_model_length": config.max_prompt_length + config.max_reply_tokens,
        "vllm_enable_sleep_mode": False,
    }


def _device_type(device: Any) -> str:
    return getattr(device, "type", str(device).split(":")[0])


@dataclass
class Rollouts:
    """Where the policy stage's time went, on this process (card): sampling the replies, then
    scoring them (rewards, old and reference log-probabilities), then the updates."""

    sampled_tokens: int = 0
    sampling_seconds: float = 0.0
    generations: int = 0
    sampled_replies: int = 0
    scoring_seconds: float = 0.0
    updated_tokens: int = 0
    step_seconds: float = 0.0
    sampler: str = "transformers"

    def figures(self) -> dict[str, Any]:
        """Plain values: sampled tokens/s and update tokens/s apart (the update's seconds are
        the steps' less the sampling and scoring inside them)."""
        update_seconds = max(0.0, self.step_seconds - self.sampling_seconds - self.scoring_seconds)
        return {
            "sampler": self.sampler,
            "generations": self.generations,
            "sampled_replies": self.sampled_replies,
            "sampled_tokens": self.sampled_tokens,
            "sampling_seconds": round(self.sampling_seconds, 3),
            "sampled_tokens_per_second": _rate(self.sampled_tokens, self.sampling_seconds),
            "scoring_seconds": round(self.scoring_seconds, 3),
            "updated_tokens": self.updated_tokens,
            "update_seconds": round(update_seconds, 3),
            "update_tokens_per_second": _rate(self.updated_tokens, update_seconds),
        }


def _rate(tokens: int, seconds: float) -> float | None:
    return round(tokens / seconds, 1) if seconds > 0 and tokens else None


def _now(device: Any) -> float:
    """time.perf_counter() once the device has finished what it was given."""
    import torch

    if _device_type(device) == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter()


# --- the update -------------------------------------------------------------------------------


def batch_normalised(rewards: Any, *, group_size: int = 1) -> Any:
    """PPO-style advantages, one per reply: the reward less its baseline, over the batch's
    spread of the same differences. The baseline is the mean of each run of `group_size`
    replies (those sampled to one opening; 1 takes the whole batch's mean instead)."""
    centred = opening_centred(rewards, group_size) if group_size > 1 else rewards - rewards.mean()
    return centred / (centred.std() + 1e-4)


def opening_centred(rewards: Any, group_size: int) -> Any:
    """Each reward less the mean of its run of `group_size` (the replies to one opening)."""
    grouped = rewards.view(-1, group_size)
    return (grouped - grouped.mean(dim=1, keepdim=True)).reshape(-1)


def best_of_group(advantages: Any, rewards: Any, *, group_size: int) -> Any:
    """`advantages` with only each run of `group_size` replies' best-rewarded one kept (where
    it is above 0); every other reply's set to 0."""
    grouped = rewards.view(-1, group_size)
    best = grouped == grouped.max(dim=1, keepdim=True).values
    # A tie keeps the first best only: one reply per opening is pushed up.
    first = best & (best.cumsum(dim=1) == 1)
    return (advantages * first.reshape(-1)).clamp(min=0)


def reply_advantages(rewards: Any, *, group_size: int, baseline: str, best: bool) -> Any:
    """The advantages the clipped update reads, one per reply of a batch sampled in runs of
    `group_size` replies per opening: `batch_normalised` against the `baseline` the policy's
    settings name, then, where `best`, only each opening's best reply kept."""
    advantages = batch_normalised(rewards, group_size=group_size if baseline == "opening" else 1)
    if best:
        advantages = best_of_group(advantages, rewards, group_size=group_size)
    return advantages


def within_opening_share(rewards: Any, *, group_size: int) -> float:
    """The share of a batch's reward variance that lies between replies to the same opening
    (1: the openings all score alike; near 0: the opening, not the reply, sets the reward)."""
    total = float(((rewards - rewards.mean()) ** 2).sum())
    if total <= 0:
        return 0.0
    return float((opening_centred(rewards, group_size) ** 2).sum()) / total


def advantage_figures(advantages: Any, rewards: Any, group_size: int) -> dict[str, float]:
    """What the record logs of a batch's advantages and rewards."""
    return {
        "advantages/mean": advantages.mean().item(),
        "advantages/std": advantages.std().item(),
        "rewards/within_opening_share": within_opening_share(rewards, group_size=group_size),
    }


def policy_trainer_class(advantage_baseline: str = "opening", *, best: bool = False) -> type:
    """TRL's GRPOTrainer with batch-normalised advantages (built lazily: TRL imports slowly)."""
    from trl import GRPOTrainer

    class BatchNormalisedGRPOTrainer(GRPOTrainer):
        """Why a subclass: the description asks for advantages normalised within each batch in
        place of a learned value head. GRPO divides by the spread of the raw rewards (a group's
        or the batch's), which between-opening differences inflate; here the divisor is the
        batch's spread of the rewards less their baseline, and the baseline can be the whole
        batch's mean (`advantage_baseline`). Sampling, the clipped per-token ratio and the KL
        to the adapter-disabled base stay TRL's own."""

        def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
            # TRL returns the rewards of the whole batch, gathered from every process.
            self._batch_rewards = super()._calculate_rewards(
                inputs, prompts, completions, completion_ids_list
            )
            return self._batch_rewards

        @property
        def rollouts(self) -> Rollouts:
            if not hasattr(self, "_rollouts"):
                sampler = "vllm" if getattr(self, "use_vllm", False) else "transformers"
                self._rollouts = Rollouts(sampler=sampler)
            return self._rollouts

        def _generate_single_turn(self, *args, **kwargs):
            # TRL samples without autocast, so on a CPU the prompts' prefill ran in float32
            # at a third of the bf16 rate; the ratio's old log-probabilities are recomputed
            # under the Trainer's own precision either way.
            device = model_device(self.model)
            started = _now(device)
            with inference_precision(self.model):
                completion_ids, logprobs = super()._generate_single_turn(*args, **kwargs)
            self.rollouts.sampling_seconds += _now(device) - started
            self.rollouts.generations += 1
            self.rollouts.sampled_replies += len(completion_ids)
            self.rollouts.sampled_tokens += sum(len(ids) for ids in completion_ids)
            return completion_ids, logprobs

        def training_step(self, *args, **kwargs):
            device = self.accelerator.device
            started = _now(device)
            loss = super().training_step(*args, **kwargs)
            self.rollouts.step_seconds += _now(device) - started
            return loss

        def compute_loss(self, model, inputs, *args, **kwargs):
            masks = (inputs.get("prompt_mask"), inputs.get("completion_mask"))
            self.rollouts.updated_tokens += sum(int(m.sum()) for m in masks if m is not None)
            return super().compute_loss(model, inputs, *args, **kwargs)

        def _generate_and_score_completions(self, inputs):
            device = self.accelerator.device
            started, sampling = _now(device), self.rollouts.sampling_seconds
            output = self._score_with_batch_advantages(inputs)
            sampled = self.rollouts.sampling_seconds - sampling
            self.rollouts.scoring_seconds += _now(device) - started - sampled
            return output

        def _score_with_batch_advantages(self, inputs):
            output = super()._generate_and_score_completions(inputs)
            weights = self.reward_weights.to(self._batch_rewards.device)
            rewards = (self._batch_rewards * weights.unsqueeze(0)).nansum(dim=1)
            group_size = self.num_generations
            advantages = reply_advantages(rewards, group_size=group_size, **self.advantage_kind)
            local = len(output["advantages"])
            start = self.accelerator.process_index * local
            output["advantages"] = advantages[start : start + local].to(output["advantages"])
            mode = "train" if self.model.training else "eval"
            for name, value in advantage_figures(advantages, rewards, group_size).items():
                self._metrics[mode][name].append(value)
            return output

    BatchNormalisedGRPOTrainer.advantage_kind = {"baseline": advantage_baseline, "best": best}
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


def ppo_update(
    model: Any,
    tokenizer: Any,
    fit: RewardModelFit,
    prompts: Sequence[Sequence[Message]],
    *,
    config: PolicyConfig,
    callback: Any,
    checkpointing: bool,
    work_dir: Path,
    score_batch_size: int,
) -> Any:
    """Train a fresh policy LoRA on `model` with PPO's clipped update over the replies it samples
    to `prompts`, rewarded by `fit`; the trained Trainer (its model is the policy)."""
    from datasets import Dataset
    from trl import GRPOConfig

    trainer_type = policy_trainer_class(config.advantage_baseline, best=config.best_of_group)
    fused_head_for_the_cpu()
    return train_in_scratch(
        trainer_type,
        GRPOConfig,
        settings=config,
        work_dir=work_dir,
        learning_rate=config.learning_rate,
        arguments={
            "checkpointing": checkpointing,
            "beta": config.beta,
            "epsilon": config.clip_epsilon,
            "num_iterations": config.updates_per_batch,
            "num_generations": config.replies_per_prompt,
            "max_completion_length": config.max_reply_tokens,
            "temperature": config.temperature,
            "chat_template_kwargs": CHAT_TEMPLATE_KWARGS,
            # Per-reply token mean, then the batch mean: PPO's per-token objective.
            "loss_type": "grpo",
            **rollout_arguments(
                config, model_device(model), from_memory=preloaded_name(model) is not None
            ),
        },
        model=model,
        reward_funcs=[RewardModelScore(fit, batch_size=score_batch_size)],
        train_dataset=Dataset.from_list([{"prompt": prompt} for prompt in prompts]),
        processing_class=tokenizer,
        peft_config=config.lora(),
        callbacks=[callback],
    )
