"""The wording route end to end on a running demo, through the REST API only.

    make run                                   # in one terminal
    .venv/bin/python -m bench.wording_demo     # in another

What it does, as a reviewer, a manager and an owner would (every step is an API call):

1. picks in the Duel until the workspace has `--dpo-picks` picks, then freezes them;
2. Benchmark · DPO on that preference version (CPU default base), waits for the job, for the
   version's endpoint to serve and for its checkpoint against its parent on the world's
   held-out calls (win rate with its interval, the judge that scored it and that judge's
   measured agreement), and finds it answering in the Duel;
3. Wording · RLHF on the same preference version and base with the reward model fitted on the
   real-call world's outcome labels; reads the version's numbers (held-out AUC by call, KL,
   reward before/after on held-out openings, the did-not-learn mark) and waits for its
   checkpoints: against its parent, and against the DPO version of the same picks and base;
4. releases the DPO version and checks the Duel's new pairs fall back to the newest version
   that answers; serves it again (a serve job) and finds it answering again.

Every wording version is also checkpointed against its own base untrained (no adapter, the same
decoding, on the same held-out moments, by the world's judge with the guard on): the table
prints that measure beside the trainers' own figures, and the did-not-learn mark it gives.

The world where a win is possible: the demo's "Helpful and harmless" world, whose picks are the
shared human preference pairs (already frozen as its v1, 160 of them held out for Evaluate):

    .venv/bin/python -m bench.wording_demo --pack human-preferences --preference-version 1 \
        --rlhf-reward picks

(no Duel there: its picks are the imported pairs, so the Duel and release stages are skipped).

Reviewer stand-in: no person sits at the Duel here, so the picks are made by a scripted reviewer
who prefers the reply the rubric judge scores higher (ties: A) — the point is the pipeline, not
the taste. Prints a table of wall seconds and figures per stage.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from trainers.judge.rubric import RubricJudge, Turn
from trainers.registry import DPO, RLHF


class DemoError(RuntimeError):
    pass


CHECKPOINT_PURPOSES = ("checkpoint", "against_base")


@dataclass
class Api:
    url: str
    host: str
    token: str

    def call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        if not self.url.startswith(("http://", "https://")):
            raise DemoError(f"--url must be http(s)://…, not {self.url!r}")
        request = urllib.request.Request(  # noqa: S310 - scheme checked just above
            f"{self.url}{path}",
            data=data,
            method=method,
            headers={
                "Host": self.host,
                "Authorization": f"Token {self.token}",
                "Content-Type": "application/json",
                "Accept": "application/json",
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=600) as response:  # noqa: S310
                raw = response.read()
        except urllib.error.HTTPError as error:
            said = error.read().decode()[:400]
            raise DemoError(f"{method} {path}: {error.code} {said}") from error
        return json.loads(raw) if raw else None


@dataclass
class Row:
    stage: str
    seconds: float
    figure: str


def say(text: str) -> None:
    print(text, flush=True)  # noqa: T201


def picks_count(api: Api) -> int:
    return int(api.call("GET", "/api/rl/picks/?page_size=1").get("count", 0))


def pick_once(api: Api, pack: str, judge: RubricJudge) -> dict[str, Any] | None:
    """One Duel round: take the next pair, pick the side the rubric prefers; the reveal."""
    item = api.call("GET", f"/api/rl/duel/next/?pack={pack}")["item"]
    if item is None:
        return None
    context = [Turn(turn["speaker"], turn["text"]) for turn in item["moment"]["dialogue"]]
    score_a = judge.score(context, item["a"]["text"]).total
    score_b = judge.score(context, item["b"]["text"]).total
    chosen = "A" if score_a >= score_b else "B"
    return api.call("POST", "/api/rl/picks/", {"pair": item["pair"], "chosen": chosen})["reveal"]


def pick_until(
    api: Api, pack: str, target: int, judge: RubricJudge, *, versions: list[int] | None = None
) -> int:
    have = picks_count(api)
    if versions and have < target:
        # Pairs written up front by the versions named (the simulator answers in microseconds):
        # a trained version on a CPU would take seconds for every pair the queue refills.
        body = {"pack": pack, "count": min(500, target - have + 10), "versions": versions}
        api.call("POST", "/api/rl/duel/generate/", body)
    while have < target:
        if pick_once(api, pack, judge) is None:
            raise DemoError(f"The {pack} Duel ran dry at {have} picks.")
        have += 1
        if have % 50 == 0:
            say(f"  {have} picks")
    return have


def freeze(api: Api) -> dict[str, Any]:
    return api.call("POST", "/api/rl/preferences/freeze/", {})


def wait_job(api: Api, job_id: int, *, limit_s: float) -> dict[str, Any]:
    started, shown = time.monotonic(), -1.0
    while True:
        job = api.call("GET", f"/api/rl/jobs/{job_id}/")
        fraction = job.get("progress_fraction") or 0.0
        if fraction - shown >= 0.1:
            shown = fraction
            say(f"  job {job_id} {job['state']} {fraction:.0%}")
        if job["state"] == "done":
            return job
        if job["state"] in ("failed", "cancelled"):
            raise DemoError(f"Job {job_id} {job['state']}: {job['error']}")
        if time.monotonic() - started > limit_s:
            raise DemoError(f"Job {job_id} still {job['state']} after {limit_s:.0f} s")
        time.sleep(3)


def version_by_number(api: Api, number: int, *, pack: str) -> dict[str, Any]:
    # Each world numbers its own versions: a number names a version of one pack.
    for version in api.call("GET", f"/api/rl/policies/?page_size=200&pack={pack}")["results"]:
        if version["number"] == number:
            return version
    raise DemoError(f"No version v{number}")


def wait_answering(api: Api, number: int, *, pack: str, limit_s: float) -> dict[str, Any]:
    """The version once its endpoint serves: a trained version arrives "starting" and its
    serve job loads the weights before the Duel may ask it (the Duel asks only versions that
    can answer)."""
    started = time.monotonic()
    while True:
        version = version_by_number(api, number, pack=pack)
        if version["can_answer"]:
            return version
        if time.monotonic() - started > limit_s:
            raise DemoError(f"v{number} still {version['status']} after {limit_s:.0f} s")
        time.sleep(3)


def newest_answering(api: Api, *, pack: str) -> dict[str, Any]:
    versions = api.call("GET", f"/api/rl/policies/?page_size=200&pack={pack}")["results"]
    answering = [version for version in versions if version["can_answer"]]
    return max(answering, key=lambda version: version["number"])


def duel_answers(api: Api, pack: str, judge: RubricJudge, label: str, *, pairs: int) -> int:
    """Make fresh pairs between the versions the Duel picks by default and pick through the
    queue until a reply by `label` is revealed; how many picks that took (0: never seen)."""
    api.call("POST", "/api/rl/duel/generate/", {"pack": pack, "count": pairs})
    # The new pairs sit among older ones in the queue (weakest first).
    for picks in range(1, 120):
        reveal = pick_once(api, pack, judge)
        if reveal is None:
            return 0
        if label in {side["version"] for side in reveal.values()}:
            return picks
    return 0


def checkpoints_done(api: Api, version: dict[str, Any], *, limit_s: float) -> list[dict]:
    """The version's checkpoints once every one has ended (against its parent and against its
    own base untrained; for RLHF also against the DPO version of the same picks and base)."""
    started = time.monotonic()
    while True:
        rows = api.call("GET", "/api/rl/evaluations/?page_size=100")["results"]
        mine = [
            row
            for row in rows
            if row["candidate"] == version["id"] and row.get("purpose") in CHECKPOINT_PURPOSES
        ]
        if mine and all(row["state"] in ("done", "failed", "cancelled") for row in mine):
            return [api.call("GET", f"/api/rl/evaluations/{row['id']}/") for row in mine]
        if time.monotonic() - started > limit_s:
            raise DemoError(f"{version['label']}'s checkpoints did not end in {limit_s:.0f} s")
        time.sleep(5)


def checkpoint_words(evaluation: dict[str, Any]) -> str:
    """One checkpoint as the Train page shows it: win rate [interval], verdict, the judge and
    its held-out agreement, and how many moments each side answered."""
    against = (
        "its base untrained"
        if evaluation.get("purpose") == "against_base"
        else evaluation["baseline_label"]
    )
    if evaluation["state"] != "done":
        return f"vs {against}: {evaluation['state']} {evaluation['error']}"
    summary = evaluation.get("summary") or {}
    ci = summary.get("ci")
    agreement = summary.get("judge_agreement") or {}
    measured = "not measured"
    if agreement.get("measured"):
        parts = []
        if agreement.get("pair_accuracy") is not None:
            parts.append(
                f"pairs {_figure(agreement['pair_accuracy'], agreement.get('pair_accuracy_ci'))}"
            )
        if agreement.get("outcome_auc") is not None:
            parts.append(
                f"outcome AUC {_figure(agreement['outcome_auc'], agreement.get('outcome_auc_ci'))}"
            )
        measured = ", ".join(parts) + (" (at chance)" if agreement.get("at_chance") else "")
    candidate = summary.get("candidate") or {}
    return (
        f"vs {against}: won {_figure(summary.get('win_rate'), ci)} of "
        f"{summary.get('compared')} moments → {summary.get('verdict') or '—'} · judged by "
        f"{summary.get('judge_model')} (held-out agreement: {measured}) · answered "
        f"{candidate.get('answered')} of {summary.get('moments')}"
    )


def _figure(value: float | None, bounds: list[float] | None) -> str:
    if value is None:
        return "—"
    return f"{value:.3f}" + (f" [{bounds[0]:.3f}, {bounds[1]:.3f}]" if bounds else "")


def learned(version: dict[str, Any], *keys: str) -> str:
    learned_from = version.get("learned_from") or {}
    facts = {**(learned_from.get("metrics") or {}), **learned_from}
    return " · ".join(f"{key} {facts[key]}" for key in keys if facts.get(key) is not None)


class Stages(list):
    """The table printed at the end: one row per stage, timed from `started`."""

    def add(self, name: str, started: float, figure: str) -> None:
        self.append(Row(name, time.monotonic() - started, figure))
        say(f"{name}: {figure}")


def freeze_picks(api: Api, args: argparse.Namespace, judge: RubricJudge, target: int, stages):
    started = time.monotonic()
    have = pick_until(api, args.pack, target, judge, versions=args.duel_versions)
    frozen = freeze(api)
    stages.add(
        "Duel + freeze",
        started,
        f"{have} picks → preference v{frozen['number']} ({frozen['row_count']} rows)",
    )
    return frozen


def train_card(api: Api, args: argparse.Namespace, body: dict[str, Any]) -> dict[str, Any]:
    """Start a wording card and wait for its version; the version."""
    job = api.call("POST", "/api/rl/train/wording/", {"pack": args.pack, **body})
    job = wait_job(api, job["id"], limit_s=args.job_limit)
    return version_by_number(api, job["produced_version"], pack=args.pack)


def dpo_stage(api: Api, args: argparse.Namespace, judge: RubricJudge, stages) -> dict[str, Any]:
    """DPO on frozen picks, its checkpoint, and its version answering in the Duel."""
    started = time.monotonic()
    if args.dpo_job:
        job = wait_job(api, args.dpo_job, limit_s=args.job_limit)
        dpo = version_by_number(api, job["produced_version"], pack=args.pack)
    elif args.preference_version:
        body = {"method": DPO, "preference_version": args.preference_version}
        dpo = train_card(api, args, {**body, "epochs": args.dpo_epochs})
    else:
        frozen = freeze_picks(api, args, judge, args.dpo_picks, stages)
        started = time.monotonic()
        body = {"method": DPO, "preference_version": frozen["number"]}
        dpo = train_card(api, args, {**body, "epochs": args.dpo_epochs})
    stages.add(
        f"DPO → {dpo['label']}",
        started,
        learned(dpo, "held_out_accuracy", "pairs", "base")
        + marked(dpo)
        + f" · status {dpo['status']}",
    )
    checkpoint_rows(api, args, dpo, stages)
    if not args.duel:
        return dpo

    started = time.monotonic()
    dpo = wait_answering(api, dpo["number"], pack=args.pack, limit_s=args.job_limit)
    picks = duel_answers(api, args.pack, judge, dpo["label"], pairs=3)
    if not picks:
        raise DemoError(f"{dpo['label']} wrote none of the Duel's new replies")
    stages.add("Duel with the DPO version", started, f"{dpo['label']} revealed after {picks} picks")
    return dpo


def checkpoint_rows(api: Api, args: argparse.Namespace, version: dict[str, Any], stages) -> None:
    started = time.monotonic()
    for evaluation in checkpoints_done(api, version, limit_s=args.job_limit):
        stages.add(f"Checkpoint of {version['label']}", started, checkpoint_words(evaluation))
    # The version as the registry holds it once its checkpoints ended: the measure against
    # its base untrained, and the mark that measure gives.
    version = version_by_number(api, version["number"], pack=args.pack)
    stages.add(f"{version['label']} against its base", started, against_base_words(version))


def against_base_words(version: dict[str, Any]) -> str:
    """The independent measure as the version's API row gives it: win rate [interval] over
    held-out calls, each side's guard caps, length and repeat rate, and the mark."""
    measure = version.get("against_base")
    if not measure:
        return "not measured" + marked(version)
    sides = measure.get("replies") or {}
    habits = " · ".join(
        f"{side}: capped {facts.get('capped_share', 0):.0%}, {facts.get('mean_words', 0):.0f} "
        f"words, repeats {facts.get('repeat_share', 0):.0%}"
        for side, facts in sides.items()
        if isinstance(facts, dict)
    )
    notes = "; ".join(measure.get("notes") or [])
    return (
        f"preferred {_figure(measure.get('win_rate'), measure.get('interval'))} over "
        f"{measure.get('base')} untrained on {measure.get('calls')} held-out calls "
        f"({measure.get('verdict') or 'no verdict'})"
        + (f" · {habits}" if habits else "")
        + (f" · {notes}" if notes else "")
        + marked(version)
    )


def marked(version: dict[str, Any]) -> str:
    reasons = version.get("did_not_learn") or []
    return (" · DID NOT LEARN: " + " ".join(reasons)) if reasons else " · learned"


def release_round_trip(api: Api, args: argparse.Namespace, judge: RubricJudge, dpo, stages):
    """Released, the Duel falls back to the newest version that answers; served again, the
    version answers again."""
    started = time.monotonic()
    api.call("POST", f"/api/rl/policies/{dpo['id']}/release", {})
    released = version_by_number(api, dpo["number"], pack=args.pack)
    fallback = newest_answering(api, pack=args.pack)
    if released["can_answer"] or fallback["number"] == dpo["number"]:
        raise DemoError(f"Released {dpo['label']} still counts as answering")
    made = api.call("POST", "/api/rl/duel/generate/", {"pack": args.pack, "count": 3})["made"]
    stages.add(
        "Release",
        started,
        f"{dpo['label']} {released['status']}; new Duel pairs ({made}) come from "
        f"{fallback['label']}",
    )

    started = time.monotonic()
    endpoint = api.call("POST", f"/api/rl/policies/{dpo['id']}/serve", {"gpu_count": 1})
    if endpoint.get("job_id"):
        wait_job(api, endpoint["job_id"], limit_s=args.job_limit)
    wait_answering(api, dpo["number"], pack=args.pack, limit_s=args.job_limit)
    picks = duel_answers(api, args.pack, judge, dpo["label"], pairs=3)
    if not picks:
        raise DemoError(f"{dpo['label']} served again but wrote no Duel reply")
    stages.add("Serve again", started, f"{dpo['label']} answering; revealed after {picks} picks")


def rlhf_on_outcomes(
    api: Api, args: argparse.Namespace, judge: RubricJudge, stages, *, dpo: dict | None
) -> None:
    """RLHF with the outcome reward (or, with --rlhf-reward picks, the reward model on the
    picks); on DPO's preference version when DPO ran, so its checkpoint against DPO (same
    picks, same base) is made too."""
    if dpo is not None:
        frozen = {"number": dpo["learned_from"]["preference_version"]}
    elif args.preference_version:
        frozen = {"number": args.preference_version}
    else:
        frozen = freeze_picks(api, args, judge, args.rlhf_picks, stages)
    started = time.monotonic()
    body = {
        "method": RLHF,
        "preference_version": frozen["number"],
        "epochs": args.rlhf_epochs,
        "reward_source": args.rlhf_reward,
    }
    if args.rlhf_reward == "outcomes":
        body["outcomes_pack"] = args.outcomes_pack
    rlhf = train_card(api, args, body)
    stages.add(
        f"RLHF ({args.rlhf_reward} reward) → {rlhf['label']}",
        started,
        learned(
            rlhf,
            "reward_source",
            "held_out_auc",
            "outcome_examples",
            "pairs",
            "kl",
            "reward_before",
            "reward_after",
            "reward_gain_ci",
            "held_out_prompts",
            "clip_fraction",
        )
        + marked(rlhf)
        + f" · status {rlhf['status']}",
    )
    checkpoint_rows(api, args, rlhf, stages)


def main(argv: list[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--workspace", default="demo")
    parser.add_argument("--email", default="admin@demo.localhost")
    parser.add_argument("--pack", default="persuasion", help="the world to duel in")
    parser.add_argument("--outcomes-pack", default="persuasion")
    parser.add_argument("--dpo-picks", type=int, default=200, help="0: no DPO stage")
    parser.add_argument(
        "--rlhf-picks",
        type=int,
        default=500,
        help="0: no RLHF stage; after DPO, RLHF trains on DPO's preference version instead",
    )
    parser.add_argument("--dpo-epochs", type=float, default=1.0)
    parser.add_argument(
        "--rlhf-epochs",
        type=float,
        default=1.0,
        help="passes over the pairs' openings and the outcome rows (0.1 is ~40 min on 2 cores)",
    )
    parser.add_argument(
        "--duel-versions",
        type=lambda text: [int(number) for number in text.split(",") if number],
        default=[1],
        help="versions whose pairs the picks are made on (comma list; empty: the Duel's own)",
    )
    parser.add_argument("--dpo-job", type=int, help="follow this DPO job instead of starting one")
    parser.add_argument(
        "--preference-version",
        type=int,
        help="train on this frozen preference version of the pack (no Duel picks, no freeze)",
    )
    parser.add_argument(
        "--rlhf-reward",
        choices=["outcomes", "picks"],
        default="outcomes",
        help="RLHF's reward model: the outcomes pack's call outcomes, or the picks",
    )
    parser.add_argument(
        "--no-duel",
        dest="duel",
        action="store_false",
        help="skip the Duel and release stages (default where --preference-version is given)",
    )
    parser.add_argument("--job-limit", type=float, default=3600, help="seconds per job")
    args = parser.parse_args(argv)
    if args.preference_version:
        # A world whose picks were imported (no Duel of its own to reveal a version in).
        args.duel = False

    token = subprocess.run(  # noqa: S603 - our own manage.py, arguments as a list
        [sys.executable, "manage.py", "api_token", args.workspace, args.email],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    api = Api(args.url, f"{args.workspace}.localhost", token)
    judge = RubricJudge()
    stages = Stages()
    dpo = dpo_stage(api, args, judge, stages) if args.dpo_picks > 0 else None
    if args.rlhf_picks > 0:
        rlhf_on_outcomes(api, args, judge, stages, dpo=dpo)
    if dpo is not None and args.duel:
        release_round_trip(api, args, judge, dpo, stages)
    say("")
    width = max((len(row.stage) for row in stages), default=0)
    for row in stages:
        say(f"{row.stage:<{width}}  {row.seconds:8.1f} s  {row.figure}")
    return stages


if __name__ == "__main__":
    main()
