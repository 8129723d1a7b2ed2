"""A wording version against its own base untrained, scored by a judge that trained nothing in
the run: the trainer-level measure of whether DPO and RLHF learn on this machine.

    python -m bench.wording_vs_base [--stages dpo,rlhf] [--budget 600] [--held-out 150]
                                   [--judge-share 0.4] [--pairs N] [--max-new-tokens 160]
                                   [--seed 0] [--train-seed S]
                                   [--dpo '{"learning_rate": 5e-4}'] [--policy '{...}']
                                   [--reward-model '{...}'] [--label lever] [--out table.jsonl]

The shared hh-rlhf harmless pairs (real human preferences, TRL's format) are split by the
conversation's opening, so no prompt is in two parts:
  * judge-fit pairs: the world's judge is fitted on these alone, as the product's judge-fit job
    fits a world's judge from its picks (`trainers.judge.fit.fit`, the CPU default base reading
    every reply, the default rubric's dimensions); it holds out a fifth of them to measure
    itself, as a world's fit does;
  * trainer pairs: the only rows DPO and RLHF read (each still holds out its own tenth for its
    own figures);
  * held-out prompts: the base untrained and the trained version each answer them greedily with
    the product's decoding (`trainers.wording.policy_measures.greedy_replies`: the chat
    template the version is served with, AGENT_MAX_TOKENS new tokens), and the judge scores
    both.
The win rate counts a tie (the same reply, or the same score) as half, with its 95% bootstrap
interval by prompt; beside it each side's mean reply length in words and repeat rate (the share
of a reply's word trigrams that repeat an earlier one), so a win by length or repetition shows,
and the figures each trainer reports of itself (DPO's held-out pair accuracy, RLHF's reward
model, KL and own reward before → after). Each stage's result is appended as one JSON line to
`--out`, the lever table.

Read the judge's own held-out accuracy first: a judge at chance can show no win. Measured on
2 loaded cores (load 5-11): at --judge-share 0.4 (--held-out 100) the judge trained on 342
pairs chose words + base (out-of-fold 0.626) but scored 0.500 [0.397, 0.603] on its 78
held-out pairs (the base alone 0.577, the words 0.551); the base read 24 tokens/s, 34 minutes
for 448 replies. Give the judge more of the pairs before reading any win rate.

The judge and the base's replies are kept in `--work-dir` (keyed by the split and the decoding),
so levers compare on the same judge and the same base replies. Wall times are on whatever shares
the machine: pin threads (OMP_NUM_THREADS=2) for every lever so they compare.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from levers9.shipped_data import HH_RLHF_PAIRS
from trainers.bases import SMOLLM2_BASE
from trainers.judge.rubric import DIMENSIONS
from trainers.registry import DPO, RLHF

AGENT_MAX_TOKENS = 160
"""policies.agents.AGENT_MAX_TOKENS: what a version may say at a moment (not imported: policies
needs Django)."""
JUDGE_DIMENSIONS = DIMENSIONS
"""The default rubric's dimensions: an imported world that ticks no reasons has these."""


# --- the data and its split -------------------------------------------------------------------


@dataclass(frozen=True)
class Split:
    """The judge's fit rows, the trainers' spec pairs and the held-out rows (judge-row format:
    context turns, chosen, rejected, group), each from its own conversations."""

    judge: list[dict[str, Any]]
    trainer: list[dict[str, Any]]
    held: list[dict[str, Any]]

    def key(self) -> str:
        """A short name of the split: the same split reads the same judge and base replies."""
        ids = [[row["group"] for row in part] for part in (self.judge, self.trainer, self.held)]
        return hashlib.sha256(json.dumps(ids).encode()).hexdigest()[:10]


def hh_rows(path: Path = HH_RLHF_PAIRS) -> list[dict[str, Any]]:
    """The shared pairs as judge-fit rows (`trainers.judge.fitted_judge.preference_rows`)."""
    from trainers.judge.fitted_judge import preference_rows

    with open(path, encoding="utf-8") as handle:
        records = [json.loads(line) for line in handle if line.strip()]
    return preference_rows(records)


def opening(row: Mapping[str, Any]) -> str:
    """What a conversation is grouped by: its first customer turn (two pairs that open alike are
    the same prompt to a trainer that trims old turns, so they stay in one part)."""
    first = next((turn["text"] for turn in row["context"] if turn["speaker"] == "customer"), "")
    return " ".join(first.lower().split())


def split_rows(
    rows: Sequence[dict[str, Any]], *, held_out: int, judge_share: float, seed: int, pairs: int = 0
) -> Split:
    """Whole openings to each part, in a seeded order: `held_out` rows' worth of openings held
    out, then `judge_share` of the rest to the judge, the remainder (at most `pairs`, when set)
    to the trainers. A held-out row must end with the customer speaking (the version answers)."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(opening(row), []).append(row)
    names = sorted(groups)
    np.random.default_rng(seed).shuffle(names)
    held: list[dict[str, Any]] = []
    rest: list[str] = []
    for name in names:
        answerable = all(
            row["context"] and row["context"][-1]["speaker"] == "customer" for row in groups[name]
        )
        if len(held) < held_out and answerable:
            held.extend(groups[name])
        else:
            rest.append(name)
    judge_rows = math.ceil(judge_share * sum(len(groups[name]) for name in rest))
    judge: list[dict[str, Any]] = []
    trainer: list[dict[str, Any]] = []
    for name in rest:
        (judge if len(judge) < judge_rows else trainer).extend(groups[name])
    if pairs:
        trainer = trainer[:pairs]
    return Split(judge, trainer, held)


def spec_pairs(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Judge rows as a trainer spec's pairs (the format `bench.wording.hh_pairs` gives)."""
    return [
        {
            "dialogue": row["context"],
            "chosen": row["chosen"],
            "rejected": row["rejected"],
            "call_id": row["group"],
        }
        for row in rows
    ]


def held_prompts(
    rows: Sequence[Mapping[str, Any]], *, base: str, models_dir: Path, max_tokens: int = 384
) -> list[list[dict[str, str]]]:
    """The held-out rows' conversations as the trainers read them (the spec's parser, the one
    conversation builder, no system prompt beyond the pairs' own), their oldest turns dropped to
    `max_tokens` as the CPU trainers' window drops them: what each side answers."""
    from trainers.bases import load_tokenizer
    from trainers.wording.common import trimmed
    from trainers.wording.spec import parse_wording_spec

    parsed = parse_wording_spec(
        {
            "pack": "bench",
            "version": 1,
            "base": SMOLLM2_BASE,
            "pairs": spec_pairs(rows),
            "min_pairs": 1,
        },
        trainer=DPO,
    )
    tokenizer = load_tokenizer(base, models_dir=models_dir)
    return [trimmed(tokenizer, pair.prompt, ("",), max_tokens) for pair in parsed.pairs]


@contextlib.contextmanager
def fitting_lock(work_dir: Path) -> Any:
    """One process at a time fits the judge and writes the base's replies; the others wait and
    then read what it kept."""
    import fcntl

    with open(work_dir / ".fitting.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# --- the judge ------------------------------------------------------------------------------------


def fitted_judge(split: Split, *, work_dir: Path, models_dir: Path, base: str, seed: int) -> Any:
    """The world's judge fitted on the judge-fit pairs only, as the product's judge-fit job fits
    it (`trainers.judge.fit.run`), kept in `work_dir` by split; with its own held-out figures."""
    from trainers.judge import fit as judge_fit
    from trainers.judge.fitted_judge import FittedJudge
    from trainers.reading.base_features import BaseReader

    folder = work_dir / f"judge-{split.key()}-{base.replace('/', '--') or 'words'}-s{seed}"
    features = work_dir / "features"
    report_path = folder / "report.json"
    if not report_path.exists():
        started = time.perf_counter()
        report = judge_fit.run(
            {
                "dimensions": list(JUDGE_DIMENSIONS),
                "pairs": split.judge,
                "seed": seed,
                "output_dir": str(folder),
                "base": base,
                "models_dir": str(models_dir),
                "features_dir": str(features),
                "device": "cpu",
            }
        )
        report["wall_seconds"] = round(time.perf_counter() - started, 1)
        report_path.write_text(json.dumps(report, default=str))
    report = json.loads(report_path.read_text())
    judge = FittedJudge.load(
        folder,
        model_name="bench judge",
        reader_for=lambda name: BaseReader(name, models_dir=models_dir, features_dir=features),
    )
    return judge, report


def judge_summary(report: Mapping[str, Any], judge: Any) -> str:
    pairs = (report.get("pairs") or {}).get("fitted") or {}
    return (
        f"judge: {judge.scorer}, fitted on {report.get('trained_on')} · held-out accuracy "
        f"{_interval(pairs.get('accuracy'), pairs.get('accuracy_ci'))} on {pairs.get('pairs')} "
        f"pairs of its own part"
    )


# --- replies and the measure ---------------------------------------------------------------


def base_replies(
    prompts: Sequence[Sequence[Mapping[str, str]]],
    *,
    split: Split,
    base: str,
    models_dir: Path,
    work_dir: Path,
    max_new_tokens: int,
) -> tuple[list[str], float]:
    """The untrained base's greedy replies to the held-out prompts (kept in `work_dir`), and
    the seconds they took when written now."""
    path = work_dir / f"base-replies-{split.key()}-{base.replace('/', '--')}-{max_new_tokens}.json"
    if path.exists():
        return json.loads(path.read_text()), 0.0
    from trainers.bases import load_base
    from trainers.wording.policy_measures import greedy_replies

    started = time.perf_counter()
    model, tokenizer = load_base(base, models_dir=models_dir)
    replies = greedy_replies(model, tokenizer, prompts, max_new_tokens=max_new_tokens)
    path.write_text(json.dumps(replies))
    return replies, time.perf_counter() - started


def version_replies(
    merged: Path,
    prompts: Sequence[Sequence[Mapping[str, str]]],
    *,
    base: str,
    models_dir: Path,
    max_new_tokens: int,
) -> list[str]:
    """The trained version's greedy replies: its merged weights, the base's tokenizer (the one
    both trained with), the same decoding as the base's."""
    from transformers import AutoModelForCausalLM

    from trainers.bases import default_dtype, ensure_distinct_pad, load_tokenizer
    from trainers.wording.policy_measures import greedy_replies

    tokenizer = load_tokenizer(base, models_dir=models_dir)
    model = AutoModelForCausalLM.from_pretrained(
        merged, local_files_only=True, dtype=default_dtype("cpu")
    )
    ensure_distinct_pad(tokenizer, model)
    return greedy_replies(model, tokenizer, prompts, max_new_tokens=max_new_tokens)


def repeat_rate(text: str, n: int = 3) -> float:
    """The share of a reply's word n-grams that repeat an earlier one (0 for a short reply)."""
    words = text.lower().split()
    grams = [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]
    return 0.0 if not grams else 1.0 - len(set(grams)) / len(grams)


def versus(
    judge: Any,
    contexts: Sequence[Sequence[Mapping[str, str]]],
    base: Sequence[str],
    version: Sequence[str],
    *,
    seed: int,
) -> dict[str, Any]:
    """The version against the base on the same prompts: the judge's win rate (ties half) with
    its bootstrap interval by prompt, and each side's length and repeat rate."""
    from trainers.stats.intervals import bootstrap_interval

    def totals(replies: Sequence[str]) -> np.ndarray:
        items = list(zip(contexts, replies, strict=True))
        return np.asarray([s["total"] for s in judge.score_many(items, digits=None)], dtype=float)

    base_totals, version_totals = totals(base), totals(version)
    same = np.asarray([a == b for a, b in zip(base, version, strict=True)])
    difference = np.where(same, 0.0, version_totals - base_totals)
    wins = np.where(np.abs(difference) < 1e-12, 0.5, (difference > 0).astype(float))
    interval = bootstrap_interval(wins, lambda sample: float(sample.mean()), seed=seed)

    def described(replies: Sequence[str]) -> dict[str, float]:
        return {
            "words": round(float(np.mean([len(r.split()) for r in replies])), 1),
            "repeat_rate": round(float(np.mean([repeat_rate(r) for r in replies])), 4),
            "empty": int(sum(not r.strip() for r in replies)),
        }

    return {
        "win_rate": round(float(wins.mean()), 4),
        "win_rate_ci": interval,
        "beats_base": bool(interval is not None and interval[0] > 0.5),
        "prompts": len(wins),
        "replies_changed": int((~same).sum()),
        "judge_total_base": round(float(base_totals.mean()), 4),
        "judge_total_version": round(float(version_totals.mean()), 4),
        "base": described(base),
        "version": described(version),
    }


# --- the stages ----------------------------------------------------------------------------------


def stage_spec(
    stage: str,
    split: Split,
    *,
    base: str,
    models_dir: Path,
    work_dir: Path,
    budget: float,
    seed: int,
    overrides: Mapping[str, Mapping[str, Any]],
    label: str,
) -> dict[str, Any]:
    """The spec a user's CPU job would get (no steps: the CPU defaults, to the budget), on the
    trainer pairs only, with the lever's overrides."""
    spec = {
        "pack": "bench",
        "version": 1,
        "base": base,
        "pairs": spec_pairs(split.trainer),
        "min_pairs": 1,
        "models_dir": str(models_dir),
        "output_dir": str(work_dir / f"{stage}-{label}-s{seed}"),
        "seed": seed,
        "time_budget_s": budget,
    }
    sections = (DPO,) if stage == DPO else ("reward_model", "policy")
    spec.update({name: dict(overrides[name]) for name in sections if overrides.get(name)})
    return spec


def own_figures(stage: str, result: Mapping[str, Any]) -> dict[str, Any]:
    """What the trainer reports of itself, beside the independent measure."""
    metrics = result["metrics"]
    if stage == DPO:
        keys = (
            "held_out_accuracy",
            "held_out_accuracy_ci",
            "base_held_out_accuracy",
            "base_held_out_accuracy_ci",
            "policy_held_out_accuracy",
            "policy_held_out_accuracy_ci",
            "policy_gain_over_base",
            "policy_gain_over_base_ci",
            "steps",
            "did_not_learn",
        )
        figures = {key: metrics.get(key) for key in keys}
        figures["trained_pairs"] = (metrics.get("data_seen") or {}).get("steps")
        return figures
    reward = metrics["reward_model"]
    return {
        "reward_model_accuracy": reward.get("held_out_accuracy"),
        "reward_model_accuracy_ci": reward.get("held_out_accuracy_ci"),
        "reward_model_auc": reward.get("held_out_auc"),
        "reward_model_steps": reward.get("steps"),
        "kl": metrics.get("kl"),
        "reward_before": metrics.get("reward_before"),
        "reward_after": metrics.get("reward_after"),
        "reward_gain_ci": metrics.get("reward_gain_ci"),
        "policy_steps": metrics.get("policy_steps"),
        "within_opening_share": metrics.get("within_opening_share"),
        # Where the policy's time went: sampling the replies against updating on them.
        "rollouts": metrics.get("policy_rollouts"),
        "did_not_learn": metrics.get("did_not_learn"),
    }


def stage_seconds(stage: str, result: Mapping[str, Any]) -> dict[str, float]:
    """Each stage's seconds as the trainer timed it (the budget bounds each one)."""
    seconds = result["seconds"]
    if stage == DPO:
        parts = ("load", "base_held_out", "train", "held_out")
        return {DPO: round(sum(seconds.get(part, 0.0) for part in parts), 1)}
    return {
        "reward_model": round(seconds.get("reward_model", 0.0), 1),
        "policy": round(seconds.get("policy", 0.0) + seconds.get("held_out_reward", 0.0), 1),
    }


def run_stage(
    stage: str,
    split: Split,
    *,
    ready: Any,
    prompts: Sequence[Sequence[Mapping[str, str]]],
    base: str,
    models_dir: Path,
    work_dir: Path,
    budget: float,
    seed: int,
    max_new_tokens: int,
    overrides: Mapping[str, Mapping[str, Any]],
    label: str,
) -> dict[str, Any]:
    from trainers.wording import dpo, rlhf

    spec = stage_spec(
        stage,
        split,
        base=base,
        models_dir=models_dir,
        work_dir=work_dir,
        budget=budget,
        seed=seed,
        overrides=overrides,
        label=label,
    )
    started = time.perf_counter()
    result = (dpo if stage == DPO else rlhf).run(spec)
    wall = time.perf_counter() - started
    writing = time.perf_counter()
    replies = version_replies(
        Path(result["version"]["merged_weights"]),
        prompts,
        base=base,
        models_dir=models_dir,
        max_new_tokens=max_new_tokens,
    )
    written = time.perf_counter() - writing
    # The judge and the base's replies only now: another run may be writing them meanwhile.
    judge, base_side = ready()
    contexts = [row["context"] for row in split.held]
    measured = versus(judge, contexts, base_side, replies, seed=seed)
    return {
        "stage": stage,
        "overrides": {k: v for k, v in overrides.items() if v},
        "budget_s": budget,
        "train_seed": seed,
        "trainer_pairs": len(split.trainer),
        **measured,
        "own": own_figures(stage, result),
        "stage_seconds": stage_seconds(stage, result),
        "run_wall_seconds": round(wall, 1),
        "replies_seconds": round(written, 1),
        # Every reply, so a later judge (the base's reader, say) can score the same pair again.
        "replies": {"base": list(base_side), "version": list(replies)},
        "examples": [
            {
                "prompt": contexts[i][-1]["text"][:200],
                "base": base_side[i][:300],
                "version": replies[i][:300],
            }
            for i in range(3)
        ],
    }


# --- printing -----------------------------------------------------------------------------------


def _interval(value: Any, bounds: Any) -> str:
    if value is None:
        return "—"
    text = f"{float(value):.3f}"
    return text + (f" [{bounds[0]:.3f}, {bounds[1]:.3f}]" if bounds else "")


def described(row: Mapping[str, Any]) -> str:
    own = row["own"]
    if row["stage"] == DPO:
        accuracy = _interval(own["held_out_accuracy"], own["held_out_accuracy_ci"])
        base_accuracy = _interval(own["base_held_out_accuracy"], own["base_held_out_accuracy_ci"])
        served = _interval(
            own.get("policy_held_out_accuracy"), own.get("policy_held_out_accuracy_ci")
        )
        # The paired change counts pairs whose ranking flipped; 0.0 [0.0, 0.0] means no
        # held-out pair flipped, the usual case when a few dozen steps move summed
        # log-probabilities less than the gap between the two replies.
        old = (
            f"own held-out pair accuracy {accuracy} (the version's log-probabilities {served}, "
            f"the base's {base_accuracy}, paired change {own['policy_gain_over_base']} "
            f"{own['policy_gain_over_base_ci']}), {own['steps']} steps"
        )
    else:
        accuracy = _interval(own["reward_model_accuracy"], own["reward_model_accuracy_ci"])
        old = (
            f"reward model accuracy {accuracy} ({own['reward_model_steps']} steps) · KL "
            f"{own['kl']} · own reward {own['reward_before']} → {own['reward_after']} (gain "
            f"{own['reward_gain_ci']}) · {own['policy_steps']} policy steps · share of the "
            f"reward's spread within an opening {own.get('within_opening_share')}"
        )
    base, version = row["base"], row["version"]
    return (
        f"{row['label']} {row['stage'].upper()}: against the base untrained "
        f"{_interval(row['win_rate'], row['win_rate_ci'])} on {row['prompts']} held-out prompts"
        f"{' (BEATS BASE)' if row['beats_base'] else ''}; "
        f"{row['replies_changed']} replies changed; "
        f"words {base['words']} → {version['words']}, repeat rate {base['repeat_rate']} → "
        f"{version['repeat_rate']}; seconds {row['stage_seconds']}\n    old figures: {old}"
        + (f" · DID NOT LEARN: {own['did_not_learn']}" if own.get("did_not_learn") else "")
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stages", default="dpo,rlhf")
    parser.add_argument("--budget", type=float, default=600.0, help="seconds per stage")
    parser.add_argument("--held-out", type=int, default=150, help="held-out prompts")
    parser.add_argument("--judge-share", type=float, default=0.4)
    parser.add_argument("--pairs", type=int, default=0, help="at most this many trainer pairs")
    parser.add_argument("--max-new-tokens", type=int, default=AGENT_MAX_TOKENS)
    parser.add_argument("--base", default=SMOLLM2_BASE, help='"tiny": a plumbing check')
    parser.add_argument("--judge-base", default=SMOLLM2_BASE, help='"" for the words alone')
    parser.add_argument("--seed", type=int, default=0, help="the split's and the judge's seed")
    parser.add_argument(
        "--train-seed", type=int, default=None, help="the trainers' seed (default: --seed)"
    )
    parser.add_argument("--dpo", type=json.loads, default={})
    parser.add_argument("--policy", type=json.loads, default={})
    parser.add_argument("--reward-model", type=json.loads, default={})
    parser.add_argument("--label", default="defaults")
    parser.add_argument("--models-dir", type=Path, default=Path("var/models"))
    parser.add_argument("--work-dir", type=Path, default=Path("var/bench/wording_vs_base"))
    parser.add_argument("--out", type=Path, default=Path("var/bench/wording_vs_base/table.jsonl"))
    parser.add_argument(
        "--judge-only", action="store_true", help="fit the judge, write the base's replies, stop"
    )
    args = parser.parse_args(argv)

    from trainers.bases import quiet_transformers

    quiet_transformers()
    args.work_dir.mkdir(parents=True, exist_ok=True)
    split = split_rows(
        hh_rows(),
        held_out=args.held_out,
        judge_share=args.judge_share,
        seed=args.seed,
        pairs=args.pairs,
    )
    if args.base == "tiny":  # a plumbing check in minutes: a tiny random model, made here
        from trainers.bases import TINY_BASE, base_dir, tiny_base

        texts = [row[side] for row in split.trainer for side in ("chosen", "rejected")]
        tiny_base(base_dir(TINY_BASE, args.models_dir), texts=texts, vocab_size=800)
        args.base = TINY_BASE
    print(  # noqa: T201
        f"split {split.key()}: {len(split.judge)} judge-fit pairs, {len(split.trainer)} trainer "
        f"pairs, {len(split.held)} held-out prompts (by opening, none in two parts)"
    )
    prompts = held_prompts(split.held, base=args.base, models_dir=args.models_dir)

    def ready() -> tuple[Any, list[str]]:
        with fitting_lock(args.work_dir):
            judge, report = fitted_judge(
                split,
                work_dir=args.work_dir,
                models_dir=args.models_dir,
                base=args.judge_base,
                seed=args.seed,
            )
            print(judge_summary(report, judge), flush=True)  # noqa: T201
            base_side, seconds = base_replies(
                prompts,
                split=split,
                base=args.base,
                models_dir=args.models_dir,
                work_dir=args.work_dir,
                max_new_tokens=args.max_new_tokens,
            )
        print(f"the base's replies: {len(base_side)} ({seconds:.0f} s)", flush=True)  # noqa: T201
        return judge, base_side

    if args.judge_only:
        ready()
        return 0
    overrides = {DPO: args.dpo, "policy": args.policy, "reward_model": args.reward_model}
    for stage in [s.strip() for s in args.stages.split(",") if s.strip()]:
        if stage not in (DPO, RLHF):
            parser.error(f"unknown stage {stage!r}: dpo or rlhf")
        row = run_stage(
            stage,
            split,
            ready=ready,
            prompts=prompts,
            base=args.base,
            models_dir=args.models_dir,
            work_dir=args.work_dir,
            budget=args.budget,
            seed=args.seed if args.train_seed is None else args.train_seed,
            max_new_tokens=args.max_new_tokens,
            overrides=overrides,
            label=args.label,
        )
        row = {"label": args.label, "split": split.key(), **row}
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with open(args.out, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(row, default=str) + "\n")
        print(described(row), flush=True)  # noqa: T201
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
