"""How a trained wording policy is measured on held-out rows, against the base it started from:
  * DPO's preference accuracy: how often the implicit reward β·log(π/π_ref) ranks a held-out
    pair's chosen reply above the rejected one, and how often the policy's own and the base's
    log-probabilities do (`preference_accuracy`);
  * RLHF's held-out reward: the base's and the policy's greedy replies to held-out openings,
    scored by the reward model (`held_out_reward`).
Both are computed over the whole held-out set, the base's half before the adapter exists where
the run can (`trainers.wording.dpo`, `trainers.wording.rlhf`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from trainers.bases import conversation_ids, inference_precision
from trainers.stats.intervals import bootstrap_interval
from trainers.wording.common import as_reply, by_length, evaluating, padded_batch
from trainers.wording.measures import pair_measure
from trainers.wording.ppo_update import PolicyConfig
from trainers.wording.reward_model import RewardModelFit, score
from trainers.wording.spec import Message, Pair

# --- DPO: preference accuracy -------------------------------------------------------------------


def completion_logps(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[Sequence[Message]],
    replies: Sequence[str],
    *,
    batch_size: int = 8,
    max_length: int | None = None,
) -> list[float]:
    """Sum of log-probabilities of each reply's tokens after its prompt (as DPO counts them).
    With `max_length`, a longer conversation loses its oldest prompt tokens, never the reply's,
    so held-out pairs are measured on what training saw."""
    import torch

    rows = [
        _reply_tokens(tokenizer, prompt, reply, max_length)
        for prompt, reply in zip(prompts, replies, strict=True)
    ]
    sums: dict[int, float] = {}
    # Rows of about the same length share a batch (less padding); sums return in row order.
    # Float32 throughout: a young policy's margins over the base are small enough for bf16's
    # rounding to flip their sign.
    with evaluating(model) as device:
        for positions in by_length([len(ids) for ids, _ in rows], batch_size):
            batch = [rows[index] for index in positions]
            input_ids, attention = padded_batch([ids for ids, _ in batch], tokenizer.pad_token_id)
            counted = torch.zeros((len(batch), input_ids.shape[1] - 1), dtype=torch.bool)
            for row, (ids, start) in enumerate(batch):
                counted[row, start - 1 : len(ids) - 1] = True  # position t predicts token t + 1
            logits = model(
                input_ids=input_ids.to(device), attention_mask=attention.to(device)
            ).logits.float()
            logps = torch.log_softmax(logits[:, :-1], dim=-1)
            token_logps = logps.gather(-1, input_ids[:, 1:].to(device).unsqueeze(-1)).squeeze(-1)
            totals = (token_logps * counted.to(device)).sum(-1).cpu().tolist()
            sums.update(zip(positions, totals, strict=True))
    return [sums[index] for index in range(len(rows))]


def _reply_tokens(
    tokenizer: Any, prompt: Sequence[Message], reply: str, max_length: int | None
) -> tuple[list[int], int]:
    """(the conversation's token ids, where the reply's start): the prompt's oldest tokens cut
    where the whole is longer than `max_length`."""
    prompt_ids = conversation_ids(tokenizer, prompt, add_generation_prompt=True)
    full_ids = conversation_ids(tokenizer, [*prompt, *as_reply(reply)])
    start = 0
    while start < min(len(prompt_ids), len(full_ids)) and prompt_ids[start] == full_ids[start]:
        start += 1
    if max_length is not None and len(full_ids) > max_length:
        cut = min(len(full_ids) - max_length, max(0, start - 1))
        full_ids, start = full_ids[cut:], start - cut
    return full_ids, max(1, start)


def pair_logps(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[Sequence[Message]],
    pairs: Sequence[Pair],
    *,
    batch_size: int,
    max_length: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(chosen, rejected): each pair's replies' summed log-probabilities under `model`."""

    def logps(replies: list[str]) -> np.ndarray:
        return np.asarray(
            completion_logps(
                model, tokenizer, prompts, replies, batch_size=batch_size, max_length=max_length
            )
        )

    return logps([pair.chosen for pair in pairs]), logps([pair.rejected for pair in pairs])


def preference_accuracy(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[Sequence[Message]],
    pairs: Sequence[Pair],
    *,
    beta: float,
    batch_size: int,
    max_length: int | None = None,
    seed: int = 0,
    base_logps: tuple[np.ndarray, np.ndarray] | None = None,
) -> dict[str, Any]:
    """How often the implicit reward ranks chosen over rejected, over ALL the given pairs, with
    its interval; beside it, how often the base's own log-probabilities already do.
    `base_logps` are the base's (chosen, rejected) sums where measured already (before the
    adapter existed); else they are measured with the adapter disabled."""
    if not pairs:
        return {"accuracy": None, "accuracy_ci": None, "margin": None, "base_accuracy": None}
    policy_chosen, policy_rejected = pair_logps(
        model, tokenizer, prompts, pairs, batch_size=batch_size, max_length=max_length
    )
    if base_logps is None:
        with model.disable_adapter():  # the reference: the base itself
            base_logps = pair_logps(
                model, tokenizer, prompts, pairs, batch_size=batch_size, max_length=max_length
            )
    base_chosen, base_rejected = base_logps
    margins = beta * ((policy_chosen - base_chosen) - (policy_rejected - base_rejected))
    measured = pair_measure(margins, np.zeros(len(margins)), seed=seed)
    base = pair_measure(base_chosen, base_rejected, seed=seed)
    # The implicit reward starts at a coin whatever the base knows, so it cannot say whether
    # the version a user serves ranks people's preferred reply higher than the base did; the
    # trained policy's own log-probabilities against the base's, pair by pair, can.
    own = pair_measure(policy_chosen, policy_rejected, seed=seed)
    change = (policy_chosen > policy_rejected).astype(float) - (base_chosen > base_rejected)
    return {
        "accuracy": measured["accuracy"],
        "accuracy_ci": measured["accuracy_ci"],
        "margin": float(np.mean(margins)),
        "base_accuracy": base["accuracy"],
        "base_accuracy_ci": base["accuracy_ci"],
        "policy_accuracy": own["accuracy"],
        "policy_accuracy_ci": own["accuracy_ci"],
        "policy_gain_over_base": round(float(change.mean()), 4),
        "policy_gain_over_base_ci": bootstrap_interval(
            change, lambda sample: float(sample.mean()), seed=seed
        ),
    }


# --- RLHF: the reward of greedy replies ---------------------------------------------------------

GENERATION_BATCH = 16
"""Prompts answered together when measuring (greedy, with the KV cache), on the CPU."""
GPU_GENERATION_BATCH = 64
"""On a card: decoding is bound by latency, so more prompts a call cost little more."""


def greedy_replies(
    model: Any, tokenizer: Any, prompts: Sequence[Sequence[Message]], *, max_new_tokens: int
) -> list[str]:
    """Each prompt's greedy reply (batched, left-padded, with the KV cache), through the same
    chat template the policy is trained and served with."""
    encoded = [
        conversation_ids(tokenizer, prompt, add_generation_prompt=True) for prompt in prompts
    ]
    replies: dict[int, str] = {}
    with evaluating(model) as device, inference_precision(model):
        # Prompts of about the same length share a batch (less left padding), answered in
        # the caller's order.
        batch = GPU_GENERATION_BATCH if device.type == "cuda" else GENERATION_BATCH
        for rows in by_length([len(ids) for ids in encoded], batch):
            input_ids, attention = padded_batch(
                [encoded[index] for index in rows], tokenizer.pad_token_id, left=True
            )
            generated = model.generate(
                input_ids=input_ids.to(device),
                attention_mask=attention.to(device),
                max_new_tokens=max_new_tokens,
                do_sample=False,
                pad_token_id=tokenizer.pad_token_id,
            )
            texts = tokenizer.batch_decode(
                generated[:, input_ids.shape[1] :], skip_special_tokens=True
            )
            replies.update(zip(rows, texts, strict=True))
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
            [*prompt, *as_reply(reply)] for prompt, reply in zip(prompts, replies, strict=True)
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
        "reward_gain_ci": bootstrap_interval(
            gains, lambda sample: float(sample.mean()), seed=config.seed
        ),
        "held_out_prompts": len(prompts),
        "held_out_replies_changed": changed,
    }
