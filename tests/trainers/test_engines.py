"""The Engines registry: bad knobs are refused with the knob's name before anything runs, the
form gets each knob's help and range, and every trainer runs headless from a spec."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from trainers.moves.engines import (
    ALGORITHMS,
    KnobError,
    knob_help,
    run_algorithm,
    validate_knobs,
    validate_spec,
)
from trainers.moves.ppo import PPOConfig
from trainers.moves.q_learning import QLearningConfig
from trainers.runtime import parse_progress_line

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("algorithm", "knobs", "knob"),
    [
        ("q-learning-online", {"learning_rate": -0.1}, "learning_rate"),
        ("q-learning-online", {"learning_rate": 0}, "learning_rate"),
        ("q-learning-online", {"episodes": 0}, "episodes"),
        ("q-learning-online", {"episodes": -5}, "episodes"),
        ("q-learning-online", {"episodes": 10.5}, "episodes"),
        ("q-learning-online", {"episodes": "many"}, "episodes"),
        ("q-learning-online", {"episodes": True}, "episodes"),
        ("q-learning-online", {"discount": 0}, "discount"),
        ("q-learning-online", {"discount": 1.5}, "discount"),
        ("q-learning-online", {"epsilon_start": 1.2}, "epsilon_start"),
        ("q-learning-online", {"epsilon_end": -0.1}, "epsilon_end"),
        ("q-learning-online", {"learning_rate": float("nan")}, "learning_rate"),
        ("q-learning-online", {"speed": 3}, "speed"),
        ("ppo", {"clip_range": 0}, "clip_range"),
        ("ppo", {"learning_rate": -1}, "learning_rate"),
        ("ppo", {"iterations": 0}, "iterations"),
        ("ppo", {"discount": 2}, "discount"),
        ("reward-model", {"learning_rate": 0}, "learning_rate"),
        ("reward-model", {"epochs": 0}, "epochs"),
        ("reward-model", {"plan_strategy": "yes"}, "plan_strategy"),
    ],
)
def test_it_refuses_a_bad_knob_naming_it(algorithm, knobs, knob):
    with pytest.raises(KnobError) as caught:
        validate_knobs(algorithm, knobs)
    assert caught.value.knob == knob
    assert knob in str(caught.value)


def test_it_says_the_allowed_range():
    with pytest.raises(KnobError, match=r"discount must be a number > 0 and <= 1; got 1\.5"):
        validate_knobs("q-learning-online", {"discount": 1.5})
    with pytest.raises(KnobError, match="known knobs: episodes, time_budget_s"):
        validate_knobs("q-learning-online", {"speed": 3})


def test_it_refuses_an_unknown_algorithm_listing_the_known_ones():
    with pytest.raises(KnobError, match="known algorithms: q-learning-online, reward-model, ppo"):
        validate_knobs("sarsa", {})
    with pytest.raises(KnobError) as caught:
        run_algorithm({"algorithm": "sarsa"})
    assert caught.value.knob == "algorithm"


def test_it_refuses_bad_spec_fields_before_running():
    with pytest.raises(KnobError, match="unknown scenario 'nobody'") as caught:
        validate_spec({"algorithm": "ppo", "scenarios": ["nobody"]})
    assert caught.value.knob == "scenarios"
    with pytest.raises(KnobError, match="max_turns"):
        validate_spec({"algorithm": "q-learning-online", "max_turns": 1})
    with pytest.raises(KnobError, match="source"):
        validate_spec({"algorithm": "reward-model", "source": "vibes"})
    with pytest.raises(KnobError, match="unknown move") as caught:
        validate_spec(
            {
                "algorithm": "reward-model",
                "source": "outcomes",
                "examples": [{"id": "1", "moves": ["greet", "dance"], "won": True}],
            }
        )
    assert caught.value.knob == "examples"


def test_it_builds_a_config_with_the_spec_seed():
    config = validate_spec({"algorithm": "ppo", "seed": 7, "knobs": {"iterations": 3}})
    assert config == PPOConfig(iterations=3, seed=7)
    assert validate_knobs("q-learning-online", {"episodes": 1e5}) == QLearningConfig(
        episodes=100_000
    )


def test_it_describes_every_knob_for_the_form():
    for algorithm, engine in ALGORITHMS.items():
        rows = knob_help(algorithm)
        assert [row["name"] for row in rows] == list(engine.config.__dataclass_fields__)
        assert all(row["help"] for row in rows)
    learning_rate = next(
        row for row in knob_help("q-learning-online") if row["name"] == "learning_rate"
    )
    assert learning_rate == {
        "name": "learning_rate",
        "type": "float",
        "default": 1.0,
        "help": learning_rate["help"],
        "min": 0,
        "max": 1,
        "exclusive_min": True,
        "exclusive_max": False,
    }


def test_it_dispatches_each_algorithm():
    tiny = {"scenarios": ["retiree-downsizing"], "seed": 1}
    q = run_algorithm({**tiny, "algorithm": "q-learning-online", "knobs": {"episodes": 500}})
    ppo = run_algorithm(
        {**tiny, "algorithm": "ppo", "knobs": {"iterations": 2, "batch_episodes": 64}}
    )
    assert q["algorithm"] == "q-learning-online"
    assert ppo["algorithm"] == "ppo"
    examples = [{"id": str(i), "moves": ["greet", "close"], "won": i % 2 == 0} for i in range(10)]
    model = run_algorithm(
        {**tiny, "algorithm": "reward-model", "source": "outcomes", "examples": examples}
    )
    assert model["algorithm"] == "reward-model"


def test_it_runs_headless_from_a_spec(tmp_path):
    spec = tmp_path / "spec.json"
    out = tmp_path / "result.json"
    spec.write_text(
        json.dumps(
            {
                "algorithm": "q-learning-online",
                "scenarios": ["retiree-downsizing"],
                "knobs": {"episodes": 4000, "batch_episodes": 1000},
                "seed": 0,
            }
        )
    )
    completed = subprocess.run(
        [sys.executable, "-m", "trainers.moves.q_learning", "--spec", str(spec), "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    records = [parse_progress_line(line) for line in completed.stdout.splitlines()]
    progress = [r for r in records if r and r["levers9"] == "progress"]
    assert progress
    assert progress[-1]["step"] == progress[-1]["total"]
    result = json.loads(out.read_text())
    assert result["algorithm"] == "q-learning-online"
    assert result["scenarios"][0]["slug"] == "retiree-downsizing"
    assert records[-1] == {"levers9": "result", "result": result}
