"""The learned scorer on the shared real data: a world's judge that reads replies with the base,
against its words alone, the base alone and the rubric, on held-out rows, and what it costs.

    python -m bench.learned_scorer [--base smollm2-135m-instruct] [--pairs N] [--calls N]
                                   [--features-dir DIR] [--seed 0] [--figures-only]

(--calls 0 measures the hh-rlhf pairs alone; --figures-only skips the costs below.)

Fits exactly as a world's fit does (trainers.judge.fit with a base) on the hh-rlhf harmless
pairs (real human preferences) and the PersuasionForGood calls (the opening's first four agent
turns, won when the persuadee donated). A fifth of each is held out by group (a pair, a call)
before anything is fitted; the choice between the base, the words and both is made by
cross-validation on the rest; every figure is on the held-out part, with a 95% bootstrap
interval.

Then the costs on this machine: the fit from an empty feature cache (every reply read by the
base), a refit on a warm cache (what a refit after a freeze costs), and scoring 1,000 replies
the fit never read (the calls' later agent turns) through the product's FittedJudge: first
read by the base, then again from the cache. The feature cache is a fresh temporary folder
unless --features-dir names one.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from bench.judge_agreement import _fmt, _lines
from levers9.shipped_data import HH_RLHF_PAIRS, PERSUASION_CALLS
from trainers.bases import SMOLLM2_BASE
from trainers.judge.fit import JudgeFitSpec, fit
from trainers.judge.fitted_judge import FittedJudge, outcome_rows, preference_rows
from trainers.judge.rubric import DIMENSIONS
from trainers.reading.base_features import BaseReader, ReadStats

MODELS_DIR = Path(os.environ.get("LEVERS9_MODELS_DIR", Path(__file__).parent.parent / "var/models"))
NEW_REPLIES = 1000


def _table(report: dict) -> None:
    scorer = report["scorer"]
    print(f"{'held out':<34}{'kept scorer':<24}{'words':<24}{'base':<24}{'rubric':<24}")
    pairs, outcomes = report.get("pairs") or {}, report.get("outcomes") or {}
    if pairs:
        row = [_fmt(pairs.get(who), "accuracy") for who in ("fitted", "words", "base", "rubric")]
        label = f"hh-rlhf pair accuracy (n={pairs['fitted']['pairs']})"
        print(f"{label:<34}" + "".join(f"{cell:<24}" for cell in row))
    if outcomes:
        row = [_fmt(outcomes.get(who), "auc") for who in ("fitted", "words", "base", "rubric")]
        label = f"persuasion AUC by call (n={outcomes['fitted']['calls']})"
        print(f"{label:<34}" + "".join(f"{cell:<24}" for cell in row))
    print(f"kept: total = {scorer.get('total')}, won = {scorer.get('won')} (base {scorer['base']})")
    for name, chosen in (scorer.get("chosen_by") or {}).items():
        if chosen:
            figures = {k: v for k, v in chosen.items() if k.startswith("out_of_fold")}
            print(f"  {name}: chosen by {figures}")
            if chosen.get("against_best"):
                print(f"    best mean {chosen['best']}; against it {chosen['against_best']}")


def _later_turns(calls: list[dict], count: int) -> list[tuple[list[dict], str]]:
    """Agent replies the fit never read: the turns after each call's opening four."""
    items = []
    for call in calls:
        turns, seen = call.get("turns") or [], 0
        for index, turn in enumerate(turns):
            if turn.get("speaker") != "agent":
                continue
            seen += 1
            if seen > 4:
                context = [{"speaker": t["speaker"], "text": t["text"]} for t in turns[:index]]
                items.append((context, turn["text"]))
            if len(items) >= count:
                return items
    return items


def _scoring(model, spec: JudgeFitSpec, calls: list[dict]) -> None:
    reader = BaseReader(spec.base, models_dir=spec.models_dir, features_dir=spec.features_dir)
    judge = FittedJudge(model, model_name="bench", reader=reader)
    items = _later_turns(calls, NEW_REPLIES)
    for label in ("first (the base reads what the cache lacks)", "again (from the cache)"):
        started, stats = time.monotonic(), ReadStats()
        reader.features(items, stats=stats)  # what score_many reads, counted
        judge.score_many(items)
        print(
            f"scoring {len(items)} replies the fit never read, {label}: "
            f"{time.monotonic() - started:.1f} s (the base read {stats.tokens} tokens, "
            f"{stats.spared} more spared by beginnings the replies share)"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default=SMOLLM2_BASE)
    parser.add_argument("--pairs", type=int, default=None, help="the first N pairs (default all)")
    parser.add_argument("--calls", type=int, default=None, help="the first N calls (default all)")
    parser.add_argument("--features-dir", default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--figures-only",
        action="store_true",
        help="the held-out figures alone (no warm refit, no scoring of new replies)",
    )
    arguments = parser.parse_args(argv)

    calls = _lines(PERSUASION_CALLS)[: arguments.calls]
    pairs = preference_rows(_lines(HH_RLHF_PAIRS)[: arguments.pairs])
    outcomes = outcome_rows(calls)
    with tempfile.TemporaryDirectory() as scratch:
        spec = JudgeFitSpec(
            dimensions=list(DIMENSIONS),
            pairs=pairs,
            overrides=[],
            outcomes=outcomes,
            seed=arguments.seed,
            base=arguments.base,
            models_dir=str(MODELS_DIR),
            features_dir=arguments.features_dir or scratch,
        )
        print(f"threads: OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}")
        print(f"rows: {len(pairs)} pairs, {len(outcomes)} outcome turns of {len(calls)} calls")
        started = time.monotonic()
        model, report = fit(spec)
        cold = time.monotonic() - started
        read = report["scorer"]["features"]
        cache = "an empty cache" if not read.get("cached") else "a cache that held some"
        print(f"fit from {cache}: {cold:.0f} s; the base read {read}")
        if not arguments.figures_only:
            started = time.monotonic()
            fit(spec)
            print(f"refit, warm cache: {time.monotonic() - started:.0f} s")
        print()
        _table(report)
        if not arguments.figures_only:
            print()
            _scoring(model, spec, calls)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
