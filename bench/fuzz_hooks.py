"""Schemathesis hooks for bench.fuzz_api (loaded through SCHEMATHESIS_HOOKS).

- The imports take JSONL bodies, which schemathesis sends as text once told so.
- Where an operation also takes JSON, its form encodings are left out: daphne's HTTP layer
  (Twisted) parses a multipart body itself and refuses a malformed one with a bare 400 before
  the application runs, so those cases test Twisted, not Levers9 (found by this fuzzing; see
  tests/levers9/test_hardening_inputs.py for the forms the application does see).
"""

from __future__ import annotations

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
