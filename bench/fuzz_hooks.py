"""Schemathesis hooks for bench.fuzz_api (loaded through SCHEMATHESIS_HOOKS).

- The imports take JSONL bodies, which schemathesis sends as text once told so.
- Every answer is written to `LEVERS9_FUZZ_LOG` (one JSON line: method, path, status,
  seconds) when it is set, so the run's request count and its slowest operations are known.
- Where an operation also takes JSON, its form encodings are left out: daphne's HTTP layer
  (Twisted) parses a multipart body itself and refuses a malformed one with a bare 400 before
  the application runs, so those cases test Twisted, not Levers9 (found by this fuzzing; see
  tests/levers9/test_hardening_inputs.py for the forms the application does see).
"""

from __future__ import annotations

import json
import os

import schemathesis

schemathesis.serializer.alias("application/jsonl", "text/plain")

FORM_TYPES = ("multipart/form-data", "application/x-www-form-urlencoded")


@schemathesis.hook
def before_load_schema(ctx, raw_schema: dict) -> None:
    for methods in raw_schema.get("paths", {}).values():
        for operation in methods.values():
            if not isinstance(operation, dict):
                continue
            content = (operation.get("requestBody") or {}).get("content") or {}
            if "application/json" in content:
                for form in FORM_TYPES:
                    content.pop(form, None)


@schemathesis.hook
def after_call(ctx, case, response) -> None:
    log = os.environ.get("LEVERS9_FUZZ_LOG")
    if not log:
        return
    elapsed = getattr(response, "elapsed", None)
    seconds = elapsed.total_seconds() if hasattr(elapsed, "total_seconds") else elapsed
    line = {
        "method": case.operation.method.upper(),
        "path": case.operation.path,
        "status": response.status_code,
        "seconds": None if seconds is None else round(float(seconds), 3),
    }
    with open(log, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(line) + "\n")
