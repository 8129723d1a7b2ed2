"""TRL's fused LM head, made to score only the labelled positions on a CPU too: the same
log-probabilities as a plain forward, and the trainers say how many tokens they trained on."""

from __future__ import annotations

import pytest
import torch

from trainers.bases import (
    TINY_BASE,
    base_dir,
    conversation_ids,
    load_base,
    tiny_base,
)
from trainers.wording.fused_head import fused_head_for_the_cpu
from trainers.wording.policy_measures import completion_logps


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    models_dir = tmp_path_factory.mktemp("models")
    tiny_base(base_dir(TINY_BASE, models_dir), texts=["Is the flat free? Yes, come on Saturday."])
    return load_base(TINY_BASE, models_dir=models_dir)


def test_the_cpu_now_compacts_to_the_labelled_positions_and_folds_in_place():
    import trl.trainer.utils as trl_utils
    from trl.kernels.chunked_logprob import ChunkedLogProbFunction

    fused_head_for_the_cpu()
    fused_head_for_the_cpu()  # twice wraps once
    assert trl_utils._use_triton(torch.device("cpu")) is True
    assert trl_utils._use_triton.compacts_on_cpu
    assert trl_utils._ChunkedLogProbFunction.folds_in_place_on_cpu
    assert trl_utils._ChunkedLogProbFunction is not ChunkedLogProbFunction


def test_compacted_log_probs_equal_a_plain_forward(tiny):
    from trl.trainer.utils import add_fused_lm_head

    model, tokenizer = tiny
    prompts = [
        [{"role": "user", "content": "Is the flat free?"}],
        [{"role": "user", "content": "Can I come on Saturday, or is it taken already?"}],
    ]
    replies = ["Yes.", "It is free, come on Saturday."]
    expected = completion_logps(model, tokenizer, prompts, replies)

    fused_head_for_the_cpu()
    add_fused_lm_head(model)
    rows = []
    for prompt, reply in zip(prompts, replies, strict=True):
        start = len(conversation_ids(tokenizer, prompt, add_generation_prompt=True))
        ids = conversation_ids(tokenizer, [*prompt, {"role": "assistant", "content": reply}])
        rows.append((ids, start))
    width = max(len(ids) for ids, _ in rows)
    input_ids = torch.full((len(rows), width), tokenizer.pad_token_id)
    labels = torch.full((len(rows), width), -100)
    attention = torch.zeros((len(rows), width), dtype=torch.long)
    for row, (ids, start) in enumerate(rows):
        input_ids[row, : len(ids)] = torch.tensor(ids)
        attention[row, : len(ids)] = 1
        labels[row, start : len(ids)] = torch.tensor(ids[start:])
    with torch.no_grad():
        out = model(
            input_ids=input_ids, attention_mask=attention, labels=labels, fused_lm_head=True
        )
    assert out.log_probs.sum(-1).tolist() == pytest.approx(expected, abs=1e-3)
