"""A base held in memory (`bases.preloaded_base`, what `bench.gpu_check` uses on the card): the
trainers load it by name without reading a weight file, each load gets its own modules over
the same tensors (the reward model a fresh head on the same backbone), every reference is the
base with its adapter disabled rather than a copy loaded from disk, and no stage writes
weights."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from tests.trainers.test_device import _on_the_card, _spec, card  # noqa: F401 (a fixture)
from tests.trainers.test_rollouts import vllm_importable  # noqa: F401 (a fixture)
from trainers.bases import (
    WEIGHTS_NOT_WRITTEN,
    BaseNotFoundError,
    device_for,
    load_base,
    load_tokenizer,
    preloaded_base,
    preloaded_name,
    tiny_base,
)
from trainers.wording import dpo, rlhf
from trainers.wording.ppo_update import PolicyConfig, vllm_sampling

HELD = "levers9/held-in-memory"
WEIGHT_FILES = ("*.safetensors", "*.bin", "*.pt", "*.pth")


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> tuple[Any, Any]:
    """The tiny base, built (its folder elsewhere: the specs' models_dir stays empty)."""
    return tiny_base(tmp_path_factory.mktemp("built-elsewhere"))


@pytest.fixture
def models_dir(tmp_path) -> Path:
    return tmp_path / "models"  # never created: nothing is there to load


@pytest.fixture
def weight_io(monkeypatch) -> list[str]:
    """Every weight file a model load would read or a save would write, recorded; a load from
    a folder fails outright (TRL builds a reference copy that way when it has no adapter)."""
    import peft.peft_model
    import transformers.modeling_utils
    from peft import PeftModel
    from transformers import PreTrainedModel

    seen: list[str] = []

    def refuse_load(cls, *args, **kwargs):
        seen.append(f"load {args[0] if args else kwargs}")
        raise AssertionError(f"{cls.__name__}.from_pretrained read weights from disk")

    def recorder(name: str, save: Any) -> Any:
        def recorded(*args, **kwargs):
            seen.append(f"{name} {args[1] if len(args) > 1 else kwargs.get('filename')}")
            return save(*args, **kwargs)

        return recorded

    monkeypatch.setattr(PreTrainedModel, "from_pretrained", classmethod(refuse_load))
    monkeypatch.setattr(PeftModel, "from_pretrained", classmethod(refuse_load))
    for module in (transformers.modeling_utils, peft.peft_model):
        monkeypatch.setattr(module, "safe_save_file", recorder("save", module.safe_save_file))
    monkeypatch.setattr(torch, "save", recorder("torch.save", torch.save))
    return seen


def _weights(model: Any) -> dict[str, torch.Tensor]:
    return {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}


def _weight_files(folder: Path) -> list[Path]:
    return [path for pattern in WEIGHT_FILES for path in folder.rglob(pattern)]


def test_it_loads_both_heads_from_memory_over_the_same_tensors(source, models_dir, weight_io):
    built, tokenizer = source
    with preloaded_base(HELD, built, tokenizer):
        causal, loaded_tokenizer = load_base(HELD, models_dir=models_dir)
        reward, _ = load_base(HELD, models_dir=models_dir, head="reward")
        assert load_tokenizer(HELD, models_dir=models_dir).get_vocab() == tokenizer.get_vocab()
    assert not weight_io
    assert not models_dir.exists()
    assert preloaded_name(causal) == preloaded_name(reward) == HELD
    assert loaded_tokenizer is not tokenizer  # a copy: a trainer may change its own

    # The same tensors (no copy on the device), in Parameters of each load's own.
    up = built.model.layers[0].mlp.up_proj.weight
    for model in (causal, reward):
        shared = model.model.layers[0].mlp.up_proj.weight
        assert shared.data_ptr() == up.data_ptr()
        assert shared is not up
    assert causal.lm_head.weight is causal.model.embed_tokens.weight  # still tied
    assert not causal.training  # eval, as from_pretrained returns a model

    ids = tokenizer("Can I see the flat on Saturday?", return_tensors="pt").input_ids
    with torch.no_grad():
        assert torch.equal(causal(ids).logits, built(ids).logits)
        # A fresh scalar head on the same backbone, initialised as a missing weight is.
        assert reward(ids).logits.shape == (1, 1)
    head = reward.score.weight
    assert head.shape == (1, built.config.hidden_size)
    assert 0 < float(head.detach().std()) < 3 * built.config.initializer_range
    tensors = [*causal.parameters(), *causal.buffers(), *reward.parameters(), *reward.buffers()]
    assert not any(tensor.is_meta for tensor in tensors)


def test_each_load_has_its_own_modules(source, models_dir):
    from peft import get_peft_model

    built, tokenizer = source
    with preloaded_base(HELD, built, tokenizer):
        first, _ = load_base(HELD, models_dir=models_dir)
        get_peft_model(first, PolicyConfig().lora())
        second, _ = load_base(HELD, models_dir=models_dir)
    names = {name for name, _ in second.named_modules()} | {n for n, _ in built.named_modules()}
    assert not any("lora" in name for name in names)
    assert all(parameter.requires_grad for parameter in second.parameters())


def test_it_forgets_the_base_after_the_block(source, models_dir):
    built, tokenizer = source
    with preloaded_base(HELD, built, tokenizer):
        assert preloaded_name(load_base(HELD, models_dir=models_dir)[0]) == HELD
        with pytest.raises(ValueError, match="already"), preloaded_base(HELD, built, tokenizer):
            pass
    with pytest.raises(BaseNotFoundError):
        load_base(HELD, models_dir=models_dir)


def test_a_base_held_on_the_host_loads_onto_the_specs_card(source, models_dir, card):  # noqa: F811
    built, tokenizer = source
    with preloaded_base(HELD, built, tokenizer):
        for head in ("causal", "reward"):
            model, _ = load_base(HELD, models_dir=models_dir, head=head, device=device_for("cuda"))
            assert _on_the_card(model), head
    assert card.placed.get("to", 0) > 0
    assert not card.mixed


def test_vllm_never_samples_for_a_base_held_in_memory(vllm_importable):  # noqa: F811
    cuda = torch.device("cuda", 0)
    assert vllm_sampling(PolicyConfig(), cuda)["use_vllm"] is True
    assert vllm_sampling(PolicyConfig(), cuda, from_memory=True) == {}


def test_dpo_and_rlhf_on_a_held_base_load_and_write_no_weights(
    source, models_dir, weight_io, tmp_path
):
    built, tokenizer = source
    before = _weights(built)
    cpu = {"gpu": {"type": "cpu"}}
    with preloaded_base(HELD, built, tokenizer):
        dpo_spec = {**_spec(models_dir, "dpo", **cpu), "base": HELD}
        dpo_spec["output_dir"] = str(tmp_path / "dpo")
        dpo_result = dpo.run(dpo_spec)
        rlhf_spec = {**_spec(models_dir, "rlhf", **cpu), "base": HELD}
        rlhf_spec.update(
            output_dir=str(tmp_path / "rlhf"),
            reward_model={"fine_tune": True, "batch_size": 2},
            policy={"batch_size": 2, "replies_per_prompt": 2, "max_reply_tokens": 4,
                    "held_out_prompts": 2},
        )  # fmt: skip
        rlhf_result = rlhf.run(rlhf_spec)
    # The references are the base with its adapter disabled: a copy would have been loaded
    # from the base's folder, which the fixture refuses (and which does not exist).
    assert dpo_result["metrics"]["reference"] == "base with the adapter disabled"
    assert rlhf_result["metrics"]["reference"] == "base with the adapter disabled"
    assert rlhf_result["metrics"]["policy_steps"] >= 1
    assert not weight_io, weight_io
    assert not _weight_files(tmp_path)
    for folder in (tmp_path / "dpo" / "merged", tmp_path / "rlhf" / "merged"):
        assert (folder / WEIGHTS_NOT_WRITTEN).is_file()
        assert (folder / "tokenizer.json").is_file()
    assert (tmp_path / "rlhf" / "reward_adapter" / WEIGHTS_NOT_WRITTEN).is_file()
    # No stage changed the weights the next one shares (no merge into them).
    after = _weights(built)
    assert all(torch.equal(before[name], after[name]) for name in before)
