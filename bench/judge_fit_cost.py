"""What a world's judge fit costs on this machine, and what it spends its time on.

    python -m bench.judge_fit_cost [--calls 600] [--base smollm2-135m-instruct]
                                   [--modes quiet,beside,beside-spinning] [--no-refit]

The fit runs as a worker runs it: `python -m trainers.judge.fit --spec ... --out ...` in a
process of its own, with the threads levers9.jobs.runner gives a person's job on the CPU pool
(levers9.jobs.cores), reading every reply with the base from an empty feature cache. Its
spec is what a world of the first N shipped PersuasionForGood calls gives a fit (the opening's
agent turns, won when the persuadee donated; no picks). For each mode it prints the wall time
and the seconds of each stage the trainer reports (features, heads, reading the world's own
turns, reading replies with the base, the base heads, the measure):

- quiet: the fit alone on the machine;
- beside: the fit beside another job's trainer on one thread (what a short or background
  lane's job is), with the threads and the wait policy the runner sets now;
- beside-spinning: the same, with OpenMP's default wait policy (threads spin while they
  wait: how the runner started trainers before).

Then a refit on the warm cache: a refit after new calls or picks reads only what the cache
lacks (here nothing). Run it on a quiet machine: the figures are wall-clock.

Measured on the 2-core demo machine, quiet (load 0.9), 600 calls, SmolLM2-135M: 279 s from an
empty cache, of which 208.8 s reading replies with the base, 43.4 s the outcome head with the
base's loading, 21.9 s the preference heads (target: at most 300 s).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import OrderedDict
from pathlib import Path

from bench.judge_agreement import _lines
from levers9.jobs.cores import trainer_thread_env
from levers9.shipped_data import PERSUASION_CALLS
from trainers.bases import SMOLLM2_BASE
from trainers.judge.fitted_judge import outcome_rows
from trainers.judge.rubric import DIMENSIONS
from trainers.runtime import parse_progress_line

REPO = Path(__file__).resolve().parent.parent
MODELS_DIR = Path(os.environ.get("LEVERS9_MODELS_DIR", REPO / "var/models"))
# Another job's trainer on one thread: torch matrix products, as a reading or a learner does.
COMPETITOR = (
    "import torch\na = torch.randn(384, 384)\nwhile True:\n    a = torch.tanh(a @ a.T / 384)\n"
)


def _spec(calls: int, base: str, features_dir: Path, output_dir: Path) -> dict:
    rows = outcome_rows(_lines(PERSUASION_CALLS)[:calls])
    return {
        "world": "bench",
        "dimensions": list(DIMENSIONS),
        "seed": 0,
        "output_dir": str(output_dir),
        "base": base,
        "also_read": [],
        "models_dir": str(MODELS_DIR),
        "features_dir": str(features_dir),
        "device": "cpu",
        "pairs": [],
        "overrides": [],
        "outcomes": rows,
    }


def _fit(spec_path: Path, env: dict[str, str]) -> tuple[float, OrderedDict[str, float]]:
    """Run the trainer; its wall time and the seconds spent in each stage it named."""
    out = spec_path.with_name("out.json")
    started = time.monotonic()
    process = subprocess.Popen(  # noqa: S603 - our interpreter, our module
        [sys.executable, "-m", "trainers.judge.fit", "--spec", str(spec_path), "--out", str(out)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    stages: OrderedDict[str, float] = OrderedDict()
    stage, since = "starting (imports, loading the base)", started
    for line in process.stdout:
        record = parse_progress_line(line)
        named = ((record or {}).get("metrics") or {}).get("stage")
        if named and named != stage:
            now = time.monotonic()
            stages[stage] = stages.get(stage, 0.0) + now - since
            stage, since = named, now
    process.wait()
    ended = time.monotonic()
    stages[stage] = stages.get(stage, 0.0) + ended - since
    if process.returncode != 0:
        raise SystemExit(f"the fit failed (exit {process.returncode})")
    return ended - started, stages


def _env(*, spinning: bool) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}
    env.pop("OMP_WAIT_POLICY", None)
    env.update(trainer_thread_env(lane_threads=None))
    if spinning:
        env.pop("OMP_WAIT_POLICY", None)
    return env


def _competitor() -> subprocess.Popen:
    env = {**os.environ, **trainer_thread_env(lane_threads=1)}
    return subprocess.Popen([sys.executable, "-c", COMPETITOR], env=env)  # noqa: S603


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=600)
    parser.add_argument("--base", default=SMOLLM2_BASE)
    parser.add_argument("--modes", default="quiet,beside,beside-spinning")
    parser.add_argument("--no-refit", action="store_true")
    arguments = parser.parse_args(argv)
    print(
        f"cores: {os.cpu_count()} on the machine; threads a person's job gets: "
        f"{trainer_thread_env(lane_threads=None)}"
    )
    print(f"load average at the start: {os.getloadavg()[0]:.1f}")
    for mode in arguments.modes.split(","):
        with tempfile.TemporaryDirectory() as scratch:
            folder = Path(scratch)
            spec = _spec(arguments.calls, arguments.base, folder / "features", folder / "model")
            spec_path = folder / "spec.json"
            spec_path.write_text(json.dumps(spec))
            if mode == "quiet":
                print(f"\n{len(spec['outcomes'])} outcome turns of {arguments.calls} calls")
            competitor = _competitor() if mode.startswith("beside") else None
            try:
                seconds, stages = _fit(spec_path, _env(spinning=mode == "beside-spinning"))
            finally:
                if competitor is not None:
                    competitor.kill()
                    competitor.wait()
            print(f"\n{mode}: fit from an empty cache {seconds:.0f} s")
            for stage, spent in stages.items():
                print(f"  {spent:7.1f} s  {stage}")
            if mode == "quiet" and not arguments.no_refit:
                seconds, _ = _fit(spec_path, _env(spinning=False))
                print(f"  refit on the warm cache (nothing new to read): {seconds:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
