"""What a wording version's held-out numbers mean, and when it is marked "did not learn"."""

from __future__ import annotations

import numpy as np
import pytest

from trainers.stats.intervals import at_chance
from trainers.wording.measures import (
    did_not_learn,
    outcome_measure,
    pair_measure,
    positions_in_call,
)
from trainers.wording.spec import trim_prompt


def test_pair_accuracy_carries_an_interval_that_says_when_it_is_chance():
    rng = np.random.default_rng(0)
    coin = pair_measure(rng.random(200), rng.random(200), seed=0)
    assert coin["at_chance"] is True
    assert coin["accuracy_ci"][0] <= 0.5 <= coin["accuracy_ci"][1]
    chosen = rng.random(200) + 0.6
    clear = pair_measure(chosen, rng.random(200), seed=0)
    assert clear["at_chance"] is False
    assert clear["accuracy_ci"][0] > 0.5


def _calls(count: int, *, seed: int):
    """Calls of 1–4 opening turns where the won calls are the long ones: position alone
    predicts the outcome, the score given is noise."""
    rng = np.random.default_rng(seed)
    calls, won, lengths = [], [], []
    for index in range(count):
        turns = 4 if index % 2 else 1
        calls += [f"c{index}"] * turns
        won += [bool(index % 2)] * turns
        lengths += [20] * turns
    return calls, won, lengths, rng.random(len(calls))


def test_outcome_auc_is_by_call_within_position_and_beside_position_only():
    calls, won, lengths, noise = _calls(120, seed=1)
    measured = outcome_measure(
        noise, won, calls, positions=positions_in_call(calls), reply_lengths=lengths, seed=0
    )
    assert measured["calls"] == 120
    assert measured["rows"] == len(calls)
    assert measured["position_only_auc"] == 1.0  # how many turns a call has gives it away
    assert measured["at_chance"] is True  # the noise score, by call, is a coin
    assert abs(measured["auc_by_call"] - 0.5) < 0.15


def test_positions_count_within_each_call():
    assert positions_in_call(["a", "a", "b", "a", "b"]) == [0, 1, 0, 2, 1]


LEARNED_REWARD = {"held_out_accuracy": 0.7, "held_out_accuracy_ci": [0.62, 0.78]}
MOVED = {"kl": 0.02, "reward_before": -0.1, "reward_after": 0.3}


@pytest.mark.parametrize(
    ("reward_model", "policy", "marked"),
    [
        (LEARNED_REWARD, MOVED, False),
        ({"held_out_accuracy": 0.55, "held_out_accuracy_ci": [0.45, 0.65]}, MOVED, True),
        ({"held_out_auc": 0.58, "held_out_auc_ci": [0.49, 0.66]}, MOVED, True),
        ({"held_out_auc": 0.70, "held_out_auc_ci": [0.61, 0.78]}, MOVED, False),
        (LEARNED_REWARD, {**MOVED, "kl": 0.0}, True),
        (LEARNED_REWARD, {**MOVED, "reward_after": -0.1}, True),
        (LEARNED_REWARD, {**MOVED, "reward_after": None}, True),
        (LEARNED_REWARD, {**MOVED, "reward_gain_ci": [0.1, 0.7]}, False),
        (LEARNED_REWARD, {**MOVED, "reward_gain_ci": [-0.05, 0.7]}, True),
    ],
)
def test_the_mark_appears_exactly_when_chance_or_the_policy_did_not_move(
    reward_model, policy, marked
):
    reasons = did_not_learn(reward_model=reward_model, policy=policy)
    assert bool(reasons) is marked
    assert all(reason.endswith(".") for reason in reasons)


def test_dpo_is_marked_when_its_held_out_accuracy_is_chance():
    assert (
        did_not_learn(preference={"held_out_accuracy": 0.6, "held_out_accuracy_ci": [0.51, 0.7]})
        == []
    )
    assert did_not_learn(preference={"held_out_accuracy": 0.6, "held_out_accuracy_ci": [0.5, 0.7]})
    assert at_chance(None)


def test_a_stage_its_budget_cut_short_says_how_far_it_got_only_when_it_did_not_learn():
    cut = {"steps": 5, "planned_steps": 112, "stopped_by_budget": True, "budget_seconds": 600.0}
    flat = {**MOVED, "reward_after": -0.1}
    reasons = did_not_learn(reward_model=LEARNED_REWARD, policy=flat, seen=cut)
    assert reasons[-1] == (
        "Its time budget (600 s) stopped it after 5 of 112 planned steps on this machine: a "
        "longer time budget (time_budget_s) or a GPU lets it take more."
    )
    assert len(reasons) == 2
    # Learned: nothing to explain. Ran its planned steps: the budget is not why.
    assert did_not_learn(reward_model=LEARNED_REWARD, policy=MOVED, seen=cut) == []
    whole = {**cut, "stopped_by_budget": False}
    assert len(did_not_learn(reward_model=LEARNED_REWARD, policy=flat, seen=whole)) == 1


def test_trimming_drops_old_turns_by_tokens_and_never_cuts_the_reply():
    prompt = [
        {"role": "system", "content": "be kind"},
        {"role": "user", "content": "a" * 10},
        {"role": "assistant", "content": "b" * 10},
        {"role": "user", "content": "latest question"},
    ]

    def count_tokens(messages):  # "ü" costs four tokens, any other character one
        return sum(len(m["content"]) + 3 * m["content"].count("ü") for m in messages)

    # Longer in characters, shorter in tokens: trimming must go by tokens.
    long_in_characters, many_tokens = "a" * 20, "ü" * 10
    kept = trim_prompt(count_tokens, prompt, (long_in_characters, many_tokens), max_tokens=70)
    assert kept[0]["role"] == "system"
    assert kept[-1]["content"] == "latest question"
    assert count_tokens([*kept, {"role": "assistant", "content": many_tokens}]) <= 70
    # The reply is never part of what is trimmed: only prompt turns go.
    assert all(message in prompt for message in kept)


def test_bf16_is_used_on_a_cpu_only_where_it_has_bf16_units(monkeypatch):
    from trainers.bases import cpu_has_bf16

    monkeypatch.delenv("LEVERS9_CPU_BF16", raising=False)
    assert cpu_has_bf16("flags\t\t: fpu sse2 avx2 amx_bf16 amx_tile\n") is True
    assert cpu_has_bf16("flags\t\t: fpu sse2 avx512f avx512_bf16\n") is True
    assert cpu_has_bf16("flags\t\t: fpu sse2 avx2 avx512f\n") is False
    monkeypatch.setenv("LEVERS9_CPU_BF16", "0")
    assert cpu_has_bf16("flags\t\t: amx_bf16\n") is False
