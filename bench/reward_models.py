"""The wording reward models with the CPU defaults a user gets, next to the fitted judge on the
same held-out rows.

    python -m bench.reward_models [--budget 600] [--parts pairs,outcomes]

pairs     the shared hh-rlhf harmless pairs (real human preferences): the Bradley–Terry reward
          model, a fifth of the pairs held out;
outcomes  the shared PersuasionForGood calls (real outcomes), every agent turn of each call's
          opening: the logistic reward model, 15% of the calls held out whole, AUC by call (a
          call's score is the mean over its opening turns).

Each reward model is fitted exactly as the RLHF card fits it on a CPU
(`trainers.wording.reward_model`
with the spec's time budget and no steps set), then the world's default judge
(`trainers.judge.fit`) is fitted on the same training rows and scores the same held-out rows.
Prints both with 95% bootstrap intervals, their paired difference, how much of the data the
reward model read, wall time and peak memory (this process's maximum RSS).
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.judge_agreement import (
    _auc_gap,
    _lines,
    _paired_interval,
    judge_totals,
    judge_won_probability_by_call,
)
from levers9.shipped_data import HH_RLHF_PAIRS, PERSUASION_CALLS
from trainers.bases import SMOLLM2_BASE, quiet_transformers
from trainers.judge.fit import (
    JudgeFitSpec,
    fit,
    outcome_agreement,
    pair_agreement,
    per_call_scores,
)
from trainers.judge.fitted_judge import outcome_rows, preference_rows
from trainers.judge.rubric import DIMENSIONS
from trainers.registry import RLHF
from trainers.stats.auc import auc
from trainers.wording.reward_model import fit_reward_model, reward_model_config
from trainers.wording.spec import (
    StageProgress,
    held_out_split,
    outcome_examples_from_calls,
    pair_groups,
    parse_wording_spec,
)

HELD_OUT = {"pairs": 0.2, "outcomes": 0.15}


def _spec(part: str, *, base: str, models_dir: Path, budget: float, out: Path) -> dict:
    common = {
        "pack": "bench",
        "version": 1,
        "base": base,
        "min_pairs": 1,
        "models_dir": str(models_dir),
        "seed": 0,
        "output_dir": str(out / part),
        "time_budget_s": budget,
        "reward_model": {"held_out_fraction": HELD_OUT[part]},
    }
    if part == "pairs":
        pairs = [
            {
                "dialogue": row["context"],
                "chosen": row["chosen"],
                "rejected": row["rejected"],
                "call_id": row["group"],
            }
            for row in preference_rows(_lines(HH_RLHF_PAIRS))
        ]
        return {**common, "pairs": pairs}
    examples = outcome_examples_from_calls(_lines(PERSUASION_CALLS))
    common.pop("min_pairs")  # outcome labels alone need no picks
    return {**common, "pairs": [], "reward_source": "outcomes", "outcome_examples": examples}


def _progress(done: int, total: int, **metrics: Any) -> None:
    if metrics.get("phase") == "probe" and done % max(1, total // 10) == 0:
        print(f"  probe {done}/{total}", flush=True)  # noqa: T201


def _judge(train_pairs: list, train_outcomes: list) -> Any:
    """The default judge fitted on these training rows only (it holds out 5% of them for its
    own figures, which are not used here)."""
    spec = JudgeFitSpec(
        dimensions=list(DIMENSIONS),
        pairs=train_pairs,
        overrides=[],
        outcomes=train_outcomes,
        held_out_fraction=0.05,
    )
    model, _report = fit(spec)
    return model


def bench_pairs(fit_result: Any, spec: Any, config: Any) -> dict[str, Any]:
    rows = preference_rows(_lines(HH_RLHF_PAIRS))
    train, held = held_out_split(
        pair_groups(spec.pairs), fraction=config.held_out_fraction, seed=config.seed
    )
    judge = _judge([rows[i] for i in train], [])
    held_rows = [rows[i] for i in held]
    judged_c, judged_r = (judge_totals(judge, held_rows, side) for side in ("chosen", "rejected"))
    reward_c = np.asarray(fit_result.held_out_scores["chosen"])
    reward_r = np.asarray(fit_result.held_out_scores["rejected"])
    gap = _paired_interval(
        np.column_stack([(reward_c > reward_r).astype(float), (judged_c > judged_r).astype(float)]),
        lambda sample: float(sample[:, 0].mean() - sample[:, 1].mean()),
        seed=0,
    )
    return {
        "held_out": f"{len(held)} pairs",
        "reward_model": pair_agreement(reward_c, reward_r, seed=0),
        "judge": pair_agreement(judged_c, judged_r, seed=0),
        "figure": "accuracy",
        "gap": gap,
    }


def bench_outcomes(fit_result: Any, spec: Any, config: Any) -> dict[str, Any]:
    rows = outcome_rows(_lines(PERSUASION_CALLS))
    groups = [example.call_id for example in spec.outcome_examples]
    assert [row["group"] for row in rows] == groups  # the same turns, in the same order
    train, held = held_out_split(groups, fraction=config.held_out_fraction, seed=config.seed)
    judge = _judge([], [rows[i] for i in train])
    held_rows = [rows[i] for i in held]
    judge_calls, won = judge_won_probability_by_call(judge, held_rows)
    reward_calls, _ = per_call_scores(held_rows, np.asarray(fit_result.held_out_scores["scores"]))
    gap = _paired_interval(
        np.column_stack([reward_calls, judge_calls, won.astype(float)]), _auc_gap, seed=0
    )
    return {
        "held_out": f"{len(won)} calls ({int(won.sum())} won), {len(held)} turns",
        "reward_model": outcome_agreement(reward_calls, won, seed=0),
        "judge": outcome_agreement(judge_calls, won, seed=0),
        "figure": "auc",
        "gap": gap,
        "length_only": auc(
            per_call_scores(held_rows, np.asarray([len(r["reply"]) for r in held_rows]))[0], won
        ),
    }


def _length_only(measured: dict[str, Any]) -> dict[str, Any]:
    if measured.get("length_only") is None:
        return {}
    return {"length-only AUC": round(measured["length_only"], 3)}


def _figure(block: dict[str, Any], key: str) -> str:
    interval = block.get(f"{key}_ci")
    value = block.get(key)
    if value is None:
        return "—"
    return f"{value:.3f}" + (f" [{interval[0]:.3f}, {interval[1]:.3f}]" if interval else "")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=600.0, help="seconds per stage (CPU)")
    parser.add_argument("--parts", default="pairs,outcomes")
    parser.add_argument("--base", default=SMOLLM2_BASE)
    parser.add_argument("--models-dir", type=Path, default=Path("var/models"))
    parser.add_argument("--out", type=Path, default=Path("var/bench/reward_models"))
    args = parser.parse_args(argv)
    quiet_transformers()
    lines = []
    for part in (name.strip() for name in args.parts.split(",") if name.strip()):
        raw = _spec(
            part, base=args.base, models_dir=args.models_dir, budget=args.budget, out=args.out
        )
        spec = parse_wording_spec(raw, trainer=RLHF)
        config = reward_model_config(spec)
        stages = StageProgress(
            _progress, {"reward_model": 100}, budget_seconds=spec.stage_budget_seconds
        )
        started = time.monotonic()
        fit_result = fit_reward_model(spec, stages=stages, config=config)
        seconds = time.monotonic() - started
        measured = (bench_pairs if part == "pairs" else bench_outcomes)(fit_result, spec, config)
        summary = fit_result.summary()
        probe = summary.get("probe") or {}
        value, low, high = measured["gap"]
        verdict = "beyond the interval" if low > 0 else "within the interval"
        lines.append(
            {
                "data": part,
                "held out": measured["held_out"],
                "reward model": _figure(measured["reward_model"], measured["figure"]),
                "fitted judge, same rows": _figure(measured["judge"], measured["figure"]),
                "reward − judge": f"{value:+.3f} [{low:+.3f}, {high:+.3f}] {verdict}",
                "rows read": f"{probe.get('rows_read')} of {probe.get('rows_asked')}",
                "tokens/s (forward)": probe.get("tokens_per_second"),
                # Where the stage's time went: the read, the head's fit, the held-out pass.
                "seconds read · fit · held out": (
                    f"{probe.get('seconds')} · {probe.get('fit_seconds')} · "
                    f"{probe.get('held_out_seconds')}"
                ),
                "LoRA steps": summary.get("steps"),
                "stage seconds": round(seconds),
                "peak RSS GB": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 2),
                **_length_only(measured),
            }
        )
        print(json.dumps(lines[-1], ensure_ascii=False), flush=True)  # noqa: T201
    print()  # noqa: T201
    for line in lines:
        print(" · ".join(f"{key}: {value}" for key, value in line.items()))  # noqa: T201


if __name__ == "__main__":
    main()
