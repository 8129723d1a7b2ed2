"""Every wording model loads on the spec's device and every pass runs there.

This machine has no GPU, so a spec that says `cuda` runs on a fake card: `torch.cuda` says a
card is there, and a TorchFunctionMode sends every tensor asked onto `cuda` to the CPU instead,
marks it, and reports it (and everything computed from it) as on `cuda:0`. Like a real card,
an op that mixes a marked tensor with an unmarked one (a batch left on the host, a model left
there) is an error the fake records: a pass that silently falls back to the CPU fails here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten

from trainers import bases
from trainers.bases import TINY_BASE, base_dir, device_for, load_base, tiny_base
from trainers.runtime import silent_progress
from trainers.wording import common, dpo, rlhf
from trainers.wording.policy_measures import completion_logps, greedy_replies, held_out_reward
from trainers.wording.ppo_update import PolicyConfig
from trainers.wording.reward_model import fit_reward_model, score
from trainers.wording.spec import StageProgress, parse_wording_spec

FAKE_FREE = 40 << 30
_DEVICE = torch._C.TensorBase.__dict__["device"]
_DATA = torch._C.TensorBase.__dict__["data"]
# Ops that may take tensors from both sides, as on a real card: copies and moves between the
# host and the card, and indexing with host-side indices.
_CROSSING = {"to", "cpu", "copy_", "__getitem__", "__setitem__", "__get__", "__set__"}
# Ops that make a tensor from nothing: on the host unless told a device.
_FACTORIES = {
    "tensor",
    "as_tensor",
    "from_numpy",
    "full",
    "zeros",
    "ones",
    "empty",
    "arange",
    "rand",
    "randn",
    "randint",
    "full_like",
    "zeros_like",
    "ones_like",
    "empty_like",
}
_CARD, _HOST = "_fake_card", "_fake_host"


def _on_card(tensor: Any) -> bool:
    return isinstance(tensor, torch.Tensor) and getattr(tensor, _CARD, False)


def _on_host(tensor: Any) -> bool:
    return isinstance(tensor, torch.Tensor) and getattr(tensor, _HOST, False)


def _mark(value: Any, side: str) -> None:
    other = _HOST if side == _CARD else _CARD
    for item in tree_flatten(value)[0]:
        if isinstance(item, torch.Tensor):
            with contextlib.suppress(AttributeError, RuntimeError):
                setattr(item, side, True)
                if getattr(item, other, False):
                    delattr(item, other)


class FakeCard(TorchFunctionMode):
    """The fake card. Tensors sent to it are marked as on it; tensors made on the host (made
    from nothing without a device, or moved back) as on the host; what an op computes is
    marked as its inputs are. `placed` counts the tensors sent to the card (by op); `mixed`
    names every op that took tensors from both sides, which a real card refuses. (Tensors
    transformers makes inside vmap lose their mark and count for neither side.)"""

    def __init__(self) -> None:
        super().__init__()
        self.placed: dict[str, int] = {}
        self.mixed: list[str] = []
        self.memory_asked: list[Any] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        name = getattr(func, "__name__", str(func))
        owner = getattr(func, "__self__", None)
        if func is torch.device or name == "_parse_to":
            return func(*args, **kwargs)  # names a device, makes no tensor
        if owner is _DEVICE:
            return torch.device("cuda", 0) if _on_card(args[0]) else func(*args, **kwargs)
        if owner is _DATA and name == "__set__":  # Module.to replaces each param.data
            out = func(*args, **kwargs)
            if _on_card(args[1]) or _on_host(args[1]):
                _mark(args[0], _CARD if _on_card(args[1]) else _HOST)
            return out
        target = self._target(name, args, kwargs)
        args = tuple(torch.device("cpu") if _is_cuda(a) else a for a in args)
        if _is_cuda(kwargs.get("device")):
            kwargs["device"] = torch.device("cpu")
        tensors = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        card_in = any(_on_card(t) for t in tensors if t.dim() > 0)
        host_in = any(_on_host(t) for t in tensors if t.dim() > 0)
        if card_in and host_in and name not in _CROSSING:
            self.mixed.append(name)
        out = func(*args, **kwargs)
        if target == "cuda":
            self.placed[name] = self.placed.get(name, 0) + 1
        if name.endswith("_") and target is None:
            return out  # in place: the tensor stays where it is
        if target == "cuda" or (target is None and card_in):
            _mark(out, _CARD)
        elif target == "cpu" or (target is None and host_in):
            _mark(out, _HOST)
        return out

    @staticmethod
    def _target(name: str, args: tuple, kwargs: dict) -> str | None:
        """Where the op puts its result: "cuda", "cpu", or None (where its inputs are)."""
        if name in {"cpu", "numpy", "tolist", "item"}:
            return "cpu"
        for value in (*args[1:], kwargs.get("device")):
            if isinstance(value, str | torch.device) and value != "meta":
                return torch.device(value).type
            if name == "to" and isinstance(value, torch.Tensor):
                return "cuda" if _on_card(value) else "cpu"
        device = kwargs.get("device")
        if device is not None:
            return torch.device(device).type
        return "cpu" if name in _FACTORIES else None


def _is_cuda(value: Any) -> bool:
    return (
        isinstance(value, str | torch.device)
        and value != "meta"
        and torch.device(value).type == "cuda"
    )


@pytest.fixture
def card(monkeypatch) -> Iterator[FakeCard]:
    fake = FakeCard()

    def mem_get_info(device=None):
        fake.memory_asked.append(torch.device(device).type if device is not None else "cuda")
        return FAKE_FREE, 2 * FAKE_FREE

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    monkeypatch.setattr(torch.cuda, "set_device", lambda device: None)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    monkeypatch.setattr(torch.cuda, "manual_seed_all", lambda seed: None)
    monkeypatch.setattr(torch.cuda, "mem_get_info", mem_get_info)
    with fake:
        yield fake


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("models")
    tiny_base(base_dir(TINY_BASE, folder))
    return folder


PROMPTS = [
    [{"role": "user", "content": "Is the flat still available?"}],
    [{"role": "user", "content": "How much is the rent, and can I see it on Saturday?"}],
    [{"role": "user", "content": "Pets?"}],
]


def _spec(models_dir: Path, trainer: str, **extra: Any) -> dict[str, Any]:
    pairs = [
        {
            "dialogue": [{"speaker": "customer", "text": PROMPTS[index % 3][0]["content"]}],
            "chosen": "Yes, certainly, happy to help.",
            "rejected": "No." * (1 + index % 4),
            "call_id": f"call-{index // 2}",
        }
        for index in range(40)
    ]
    return {
        "pack": "lettings",
        "version": 1,
        "base": TINY_BASE,
        "gpu": {"type": "h200", "count": 1},
        "pairs": pairs,
        "models_dir": str(models_dir),
        "min_pairs": 10,
        "max_steps": 1,
        **extra,
    }


def _on_the_card(model: Any) -> bool:
    """No parameter on the host, and the base's on the card (a copy PEFT makes of the reward
    head by deepcopy loses its mark: on a real card it stays where it was)."""
    parameters = list(model.parameters())
    return not any(map(_on_host, parameters)) and _on_card(parameters[0])


# --- the seam itself ----------------------------------------------------------------------------


def test_a_gpu_spec_without_a_gpu_is_refused_not_run_on_the_cpu():
    assert device_for("cpu") == torch.device("cpu")
    with pytest.raises(RuntimeError, match="asks for a GPU"):
        device_for("cuda")


def test_the_fake_card_catches_a_pass_left_on_the_cpu(models_dir, card, monkeypatch):
    model, tokenizer = load_base(TINY_BASE, models_dir=models_dir, device=device_for("cuda"))
    assert _on_the_card(model)
    # A pass that takes the CPU instead of the model's device mixes the two: the fake says so.
    monkeypatch.setattr(common, "model_device", lambda model: torch.device("cpu"))
    completion_logps(model, tokenizer, PROMPTS, ["Yes.", "Nine hundred.", "No."])
    assert card.mixed


# --- loaders and passes -------------------------------------------------------------------------


def test_the_spec_names_the_device_every_model_loads_on(models_dir, card):
    wording = parse_wording_spec(_spec(models_dir, "dpo"), trainer="dpo")
    assert wording.device_type == "cuda"
    cpu_spec = parse_wording_spec(_spec(models_dir, "dpo", gpu={"type": "cpu"}), trainer="dpo")
    assert cpu_spec.device_type == "cpu"
    device = device_for(wording.device_type)
    for head in ("causal", "reward"):
        model, _ = load_base(TINY_BASE, models_dir=models_dir, head=head, device=device)
        assert _on_the_card(model), head
    assert card.placed.get("to", 0) > 0
    assert not card.mixed


class Stop(Exception):
    """Ends a run where the TRL Trainer would start (it needs a real card)."""


def test_dpo_measures_the_base_and_sizes_memory_on_the_card(models_dir, card, monkeypatch):
    seen: dict[str, Any] = {}

    def train_dpo(model, *args, **kwargs):
        seen["model"] = model
        raise Stop

    monkeypatch.setattr(dpo, "train_dpo", train_dpo)
    with pytest.raises(Stop):
        dpo.run(_spec(models_dir, "dpo"))
    assert _on_the_card(seen["model"])
    assert not card.mixed, card.mixed  # the base's held-out log-probabilities ran on the card
    assert "cuda" in card.memory_asked  # the checkpointing decision read the card's memory


def test_rlhf_fits_the_reward_model_and_writes_the_bases_replies_on_the_card(
    models_dir, card, monkeypatch
):
    seen: dict[str, Any] = {}

    def ppo_update(model, tokenizer, fit, prompts, **kwargs):
        seen.update(model=model, fit=fit)
        raise Stop

    monkeypatch.setattr(rlhf, "ppo_update", ppo_update)
    spec = _spec(models_dir, "rlhf", reward_model={"fine_tune": False})
    with pytest.raises(Stop):
        rlhf.run(spec)
    # The probe's read, its held-out pass and the base's greedy replies all ran on the card.
    assert _on_the_card(seen["model"])
    assert _on_the_card(seen["fit"].model)
    assert seen["fit"].probe is not None
    assert not card.mixed, card.mixed
    assert "cuda" in card.memory_asked


def test_rewards_and_the_policys_replies_run_on_the_card(models_dir, card):
    from peft import get_peft_model

    device = device_for("cuda")
    wording = parse_wording_spec(
        _spec(models_dir, "rlhf", reward_model={"fine_tune": False}), trainer="rlhf"
    )
    stages = StageProgress(silent_progress, {"reward_model": 1, "policy": 1})
    fit = fit_reward_model(wording, stages=stages)
    model, tokenizer = load_base(TINY_BASE, models_dir=models_dir, device=device)
    policy = get_peft_model(model, PolicyConfig(batch_size=4).lora())
    assert _on_the_card(policy)
    replies = greedy_replies(policy, tokenizer, PROMPTS, max_new_tokens=4)
    rewards = score(
        fit.model,
        fit.tokenizer,
        [[*p, {"role": "assistant", "content": r}] for p, r in zip(PROMPTS, replies, strict=True)],
    )
    assert len(rewards) == len(PROMPTS)
    measured = held_out_reward(
        policy,
        tokenizer,
        fit,
        PROMPTS,
        config=PolicyConfig(max_reply_tokens=4),
        score_batch_size=2,
    )
    assert measured["held_out_prompts"] == len(PROMPTS)
    assert np.isfinite(measured["reward_gain"])
    assert not card.mixed, card.mixed


def test_memory_decisions_read_the_devices_free_memory(card):
    assert bases.free_memory(device_for("cuda")) == FAKE_FREE
    assert card.memory_asked == ["cuda"]
    assert bases.free_memory(torch.device("cpu")) != FAKE_FREE
