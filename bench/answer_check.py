"""Whether the answer check tells a real reply from a line that does not answer its call, on the
shared real chats with the CPU default base (trainers.judge.answers, read by
trainers.reading.base_features.BaseReader).

    python -m bench.answer_check [--calls 12] [--turn 3] [--seed 0]

At the --turn-th agent turn of the first --calls calls of the charity's real chats
(data/real-calls/persuasionforgood), the real agent's reply and each of two other lines (another
business's question, and a generic line) are scored by how much the call so far raises the
base's likelihood of the reply; so is another call's real agent reply at the same turn (the
world's own words, said in another conversation). The figure is the share of moments where the
real reply scores higher, with a 95% bootstrap interval over calls; 0.5 is chance. It was a
test of `make test` (186 s with the base's conversion and reading); it is a quality figure, so
it lives here.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from levers9.shipped_data import PERSUASION_CALLS
from trainers.bases import convert_smollm2
from trainers.reading.base_features import BaseReader
from trainers.stats.intervals import bootstrap_interval

BASE = "smollm2-135m-instruct"
OTHER_LINES = [
    "Would you like to arrange a viewing of the flat on Saturday?",
    "I understand your concern.",
]


def moments(calls: int, turn: int) -> list[tuple[list[dict], str]]:
    """(the call so far, the real agent's reply) at each call's `turn`-th agent turn."""
    found = []
    for line in PERSUASION_CALLS.read_text().splitlines()[:calls]:
        turns = json.loads(line)["turns"]
        agent = [index for index, each in enumerate(turns) if each["speaker"] == "agent"]
        if len(agent) >= turn:
            at = agent[turn - 1]
            found.append((turns[:at], turns[at]["text"]))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=12)
    parser.add_argument("--turn", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    started = time.monotonic()
    with tempfile.TemporaryDirectory() as folder:
        models = Path(folder) / "models"
        convert_smollm2(models)
        reader = BaseReader(BASE, models_dir=models, features_dir=Path(folder) / "features")
        at = moments(args.calls, args.turn)
        real = reader.answers(at)
        print(f"{len(at)} moments of the charity's real chats, agent turn {args.turn}, {BASE}")
        # Another call's real reply at the same turn: the world's own everyday words, said in
        # a conversation that is not this one (only the answer can tell them apart).
        others = {line: [line] * len(at) for line in OTHER_LINES}
        others["another call's real reply at this turn"] = [
            at[(index + 1) % len(at)][1] for index in range(len(at))
        ]
        for label, lines in others.items():
            other = reader.answers([(c, line) for (c, _reply), line in zip(at, lines, strict=True)])
            wins = (real > other).astype(float)  # one moment per call: resampling rows is by call
            bounds = bootstrap_interval(wins, np.mean, seed=args.seed)
            shown = "n/a" if bounds is None else f"[{bounds[0]:.2f}, {bounds[1]:.2f}]"
            named = repr(label) if label in OTHER_LINES else label
            print(f"  real reply over {named}: {wins.mean():.2f} {shown}")
    print(f"{time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
