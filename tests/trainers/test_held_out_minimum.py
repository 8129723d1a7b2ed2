"""A spec can ask for a held-out set large enough to measure: at least N calls (or pairs),
never more than half of them, and whole calls only."""

from __future__ import annotations

from trainers.wording import dpo, rlhf
from trainers.wording.spec import held_out_split


def _groups(calls: int, rows_per_call: int = 4) -> list[str]:
    return [f"call-{call}" for call in range(calls) for _ in range(rows_per_call)]


def test_a_tenth_is_the_default():
    groups = _groups(200)
    _, held = held_out_split(groups, fraction=0.1, seed=0)
    assert len({groups[index] for index in held}) == 20


def test_a_minimum_holds_out_more_whole_calls():
    groups = _groups(200)
    train, held = held_out_split(groups, fraction=0.1, seed=0, minimum_groups=100)
    held_calls = {groups[index] for index in held}
    assert len(held_calls) == 100
    assert not held_calls & {groups[index] for index in train}
    # The tenth's calls are among them: a larger set only adds calls.
    _, tenth = held_out_split(groups, fraction=0.1, seed=0)
    assert set(tenth) <= set(held)


def test_a_minimum_never_takes_more_than_half():
    groups = _groups(30)
    train, held = held_out_split(groups, fraction=0.1, seed=0, minimum_groups=100)
    assert len({groups[index] for index in held}) == 15
    assert len(train) == len(held)


def _spec(tmp_path, **sections) -> dict:
    return {
        "pack": "lettings",
        "version": 1,
        "base": "smollm2-135m-instruct",
        "pairs": [{"dialogue": [], "chosen": "a", "rejected": "b"}] * 3,
        "min_pairs": 1,
        "models_dir": str(tmp_path),
        **sections,
    }


def test_the_spec_names_the_minimum_for_dpo_and_for_the_reward_model(tmp_path):
    _, settings = dpo.check_spec(_spec(tmp_path, dpo={"held_out_minimum": 100}))
    assert settings.held_out_minimum == 100
    _, reward_config, _ = rlhf.check_spec(_spec(tmp_path, reward_model={"held_out_minimum": 100}))
    assert reward_config.held_out_minimum == 100
    # A spec written before the setting existed still runs, with the tenth alone.
    _, settings = dpo.check_spec(_spec(tmp_path))
    assert settings.held_out_minimum == 0
