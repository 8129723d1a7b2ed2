"""Where RLHF measures its policy: openings neither fit saw, as many as there are to measure
on (with an outcome reward, the reward model's held-out calls, not a tenth of the picks)."""

from __future__ import annotations

from trainers.wording import rlhf
from trainers.wording.spec import held_out_split, outcome_examples_from_calls


def _calls(count: int) -> list[dict]:
    return [
        {
            "id": f"c{index}",
            "outcome": "won" if index % 2 else "lost",
            "turns": [
                {"speaker": "customer", "text": f"hello {index}"},
                {"speaker": "agent", "text": f"hi {index}"},
                {"speaker": "customer", "text": f"price {index}?"},
                {"speaker": "agent", "text": f"ten {index}"},
            ],
        }
        for index in range(count)
    ]


def _spec(tmp_path, *, pairs: list[dict]) -> dict:
    return {
        "pack": "persuasion",
        "version": 1,
        "base": "smollm2-135m-instruct",
        "pairs": pairs,
        "reward_source": "outcomes",
        "outcome_examples": outcome_examples_from_calls(_calls(400)),
        "models_dir": str(tmp_path),
    }


def test_an_outcome_reward_measures_the_policy_on_the_reward_models_held_out_calls(tmp_path):
    pairs = [
        {"dialogue": call["turns"][:1], "chosen": "yes", "rejected": "no", "call_id": call["id"]}
        for call in _calls(40)
    ]
    wording, reward_config, _ = rlhf.check_spec(_spec(tmp_path, pairs=pairs))
    pairs_train, pairs_held = held_out_split(
        [pair.call_id for pair in wording.pairs], fraction=0.1, seed=0
    )
    trained, held = rlhf._policy_prompts(wording, reward_config, pairs_train, pairs_held)
    assert len(trained) == len(pairs_train)
    # Far more than the four held-out picks: the reward model's forty held-out calls' openings.
    assert len(held) > 10 * len(pairs_held)
    examples = wording.outcome_examples
    _, held_rows = held_out_split([example.call_id for example in examples], fraction=0.1, seed=0)
    held_out_calls = {examples[index].call_id for index in held_rows}
    held_openings = {rlhf._opening_key(examples[index].prompt) for index in held_rows}
    assert {rlhf._opening_key(prompt) for prompt in held} <= held_openings
    # No opening the policy trains on is measured.
    assert not {rlhf._opening_key(p) for p in trained} & {rlhf._opening_key(p) for p in held}
    assert len(held_out_calls) == 40


def test_picks_alone_measure_on_the_held_out_picks(tmp_path):
    spec = _spec(tmp_path, pairs=[])
    spec.update(reward_source="picks", min_pairs=1, outcome_examples=None)
    spec["pairs"] = [
        {"dialogue": [{"speaker": "customer", "text": f"q{i}"}], "chosen": "a", "rejected": "b"}
        for i in range(50)
    ]
    wording, reward_config, _ = rlhf.check_spec(spec)
    train, held = held_out_split([f"pair-{i}" for i in range(50)], fraction=0.1, seed=0)
    trained, measured = rlhf._policy_prompts(wording, reward_config, train, held)
    assert len(measured) == len(held) == 5
    assert len(trained) == 45
