"""A trainer's progress lines: at most one every quarter second, but never a change of stage
dropped (the page would name the stage before for as long as the new one lasts)."""

from __future__ import annotations

import io
import json

from trainers.runtime import LineProgress


def _lines(stream: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_a_new_stage_gets_through_where_a_repeat_inside_the_interval_does_not():
    stream = io.StringIO()
    progress = LineProgress(stream, min_interval=60.0)
    progress(15, 100, stage="outcome head")
    progress(15, 100, stage="outcome head", turns=3)  # the same stage, too soon: dropped
    progress(15, 100, stage="reading the world's own turns with the base")
    progress(100, 100, stage="reading the world's own turns with the base")  # the last: kept
    stages = [(line["step"], line["metrics"]["stage"]) for line in _lines(stream)]
    assert stages == [
        (15, "outcome head"),
        (15, "reading the world's own turns with the base"),
        (100, "reading the world's own turns with the base"),
    ]
