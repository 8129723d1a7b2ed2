"""The policy's rollouts: every reply of a generation sampled in one batched, left-padded call
with the KV cache; vLLM only on a GPU worker where it imports; sampled tokens/s reported apart
from update tokens/s."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from tests.trainers.test_device import PROMPTS as SOME_PROMPTS
from tests.trainers.test_device import models_dir  # noqa: F401 (a fixture)
from trainers.bases import TINY_BASE, load_base
from trainers.wording import ppo_update
from trainers.wording.ppo_update import PolicyConfig, rollout_arguments, vllm_sampling

CPU, CUDA = torch.device("cpu"), torch.device("cuda", 0)
# A generation of two steps' replies holds four openings (2 steps x 4 replies / 2 per opening).
PROMPTS = [*SOME_PROMPTS, [{"role": "user", "content": "Is there a garden for the kids?"}]]


@pytest.fixture
def vllm_importable(monkeypatch):
    real = ppo_update.importlib.util.find_spec

    def find_spec(name, *args, **kwargs):
        return SimpleNamespace(name=name) if name == "vllm" else real(name, *args, **kwargs)

    monkeypatch.setattr(ppo_update.importlib.util, "find_spec", find_spec)
    monkeypatch.delenv("LEVERS9_VLLM_ROLLOUTS", raising=False)


def test_on_the_cpu_one_steps_replies_are_sampled_at_a_time_with_the_cache():
    arguments = rollout_arguments(PolicyConfig(), CPU)
    assert arguments == {"steps_per_generation": 1, "generation_kwargs": {"use_cache": True}}


def test_on_a_card_several_steps_replies_are_sampled_together():
    if ppo_update.importlib.util.find_spec("vllm") is not None:
        pytest.skip("vllm imports here: the card would sample with it")
    assert rollout_arguments(PolicyConfig(), CUDA)["steps_per_generation"] == 4
    assert rollout_arguments(PolicyConfig(rollout_steps=2), CUDA)["steps_per_generation"] == 2


def test_vllm_samples_only_on_a_card_where_it_imports(vllm_importable, monkeypatch):
    assert vllm_sampling(PolicyConfig(), CPU) == {}
    on_card = rollout_arguments(PolicyConfig(max_prompt_length=300, max_reply_tokens=20), CUDA)
    assert on_card["use_vllm"] is True
    assert on_card["vllm_mode"] == "colocate"
    assert on_card["vllm_max_model_length"] == 320
    assert "generation_kwargs" not in on_card
    monkeypatch.setenv("LEVERS9_VLLM_ROLLOUTS", "0")
    assert vllm_sampling(PolicyConfig(), CUDA) == {}


def test_without_vllm_the_card_samples_with_transformers(monkeypatch):
    real = ppo_update.importlib.util.find_spec
    monkeypatch.setattr(
        ppo_update.importlib.util,
        "find_spec",
        lambda name, *a, **k: None if name == "vllm" else real(name, *a, **k),
    )
    assert vllm_sampling(PolicyConfig(), CUDA) == {}


def test_the_policy_samples_each_generation_in_one_left_padded_call(
    models_dir,  # noqa: F811 (the fixture imported above)
    tmp_path,
    monkeypatch,
):
    from peft import PeftModelForCausalLM
    from transformers import TrainerCallback

    calls = []
    generate = PeftModelForCausalLM.generate

    def spy(self, *args, **kwargs):
        mask = kwargs["attention_mask"]
        config = kwargs.get("generation_config") or self.generation_config
        calls.append(
            {
                "rows": int(mask.shape[0]),
                "left_padded": bool((mask[:, 0] == 0).any() and (mask[:, -1] == 1).all()),
                "cache": getattr(config, "use_cache", None) is not False,
            }
        )
        return generate(self, *args, **kwargs)

    monkeypatch.setattr(PeftModelForCausalLM, "generate", spy)  # the LoRA policy samples
    torch.manual_seed(0)
    model, tokenizer = load_base(TINY_BASE, models_dir=models_dir)
    reward_model, reward_tokenizer = load_base(TINY_BASE, models_dir=models_dir, head="reward")
    fit = SimpleNamespace(model=reward_model, tokenizer=reward_tokenizer)
    config = PolicyConfig(
        batch_size=4, replies_per_prompt=2, max_reply_tokens=6, max_steps=4, rollout_steps=2
    )
    trainer = ppo_update.ppo_update(
        model,
        tokenizer,
        fit,
        PROMPTS,
        config=config,
        callback=TrainerCallback(),
        checkpointing=False,
        work_dir=tmp_path,
        score_batch_size=8,
    )
    # Two steps' replies (2 x 4) in each call: 4 steps, 2 updates per batch -> one generation.
    assert trainer.state.global_step == 4
    assert calls
    assert all(call["rows"] == 8 for call in calls)
    assert any(call["left_padded"] for call in calls)
    assert all(call["cache"] for call in calls)
    figures = trainer.rollouts.figures()
    assert figures["generations"] == len(calls)
    assert figures["sampled_replies"] == 8 * len(calls)
    assert figures["sampled_tokens_per_second"] > 0
    assert figures["update_tokens_per_second"] > 0
    assert figures["sampler"] == "transformers"
