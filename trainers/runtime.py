"""The contract between a trainer process and the job platform that runs it.

A trainer is `python -m trainers.<group>.<name> --spec spec.json [--out result.json]`:
  * it reads the spec (plain JSON) and calls `run(spec, progress=...)`;
  * while it works, it reports progress as one JSON line per update on stdout:
        {"levers9": "progress", "step": 120, "total": 1000, "metrics": {"return": 3.2}}
    (any other output line is kept as log text);
  * it returns a dict of plain values, written to --out (and printed as the last line
        {"levers9": "result", "result": {...}}).
The platform streams the progress lines into the job and the workspace's websocket group.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

PROGRESS_MARK = "levers9"


class Progress(Protocol):
    def __call__(self, step: int, total: int, **metrics: float | int | str) -> None: ...


def silent_progress(step: int, total: int, **metrics: float | int | str) -> None:
    """For calls from Python (tests, benchmarks) that do not watch progress."""


class LineProgress:
    """Writes progress lines to a stream, at most every `min_interval` seconds (and the last,
    and each change of stage: a stage that starts right after another may last minutes, and
    the page would name the one before all that time)."""

    def __init__(self, stream=None, min_interval: float = 0.25):
        self.stream = stream or sys.stdout
        self.min_interval = min_interval
        self._last = 0.0
        self._stage: object = None

    def __call__(self, step: int, total: int, **metrics: float | int | str) -> None:
        now = time.monotonic()
        stage = metrics.get("stage")
        if step < total and now - self._last < self.min_interval and stage == self._stage:
            return
        self._last, self._stage = now, stage
        line = {"levers9": "progress", "step": int(step), "total": int(total), "metrics": metrics}
        self.stream.write(json.dumps(line) + "\n")
        self.stream.flush()


def parse_progress_line(line: str) -> dict[str, Any] | None:
    """The progress or result record in a line of trainer output, or None for log text."""
    line = line.strip()
    if not line.startswith("{") or f'"{PROGRESS_MARK}"' not in line:
        return None
    try:
        record = json.loads(line)
    except json.JSONDecodeError:
        return None
    if isinstance(record, dict) and record.get(PROGRESS_MARK) in {"progress", "result"}:
        return record
    return None


def trainer_main(
    run: Callable[..., Mapping[str, Any]], argv: list[str] | None = None, *, description: str
) -> int:
    """`main()` of every trainer: parse, run on the spec, write the plain-value result."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--spec", required=True, type=Path, help="the JSON spec to train on")
    parser.add_argument("--out", type=Path, help="where to write the result JSON")
    arguments = parser.parse_args(argv)
    try:
        spec = json.loads(arguments.spec.read_text())
    except (OSError, json.JSONDecodeError) as error:
        parser.error(f"cannot read the spec {arguments.spec}: {error}")
    try:
        result = dict(run(spec, progress=LineProgress()))
    except ValueError as error:
        # A bad spec or knob: the message says what is wrong; a traceback would bury it.
        sys.stderr.write(f"error: {error}\n")
        return 2
    text = json.dumps(result)
    if arguments.out:
        arguments.out.write_text(text)
    sys.stdout.write(json.dumps({"levers9": "result", "result": result}) + "\n")
    sys.stdout.flush()
    return 0
