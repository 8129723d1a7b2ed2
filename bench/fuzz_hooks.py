"""Schemathesis hooks for bench.fuzz_api (loaded through SCHEMATHESIS_HOOKS).

- The imports take JSONL bodies. Sent as free text (an alias of text/plain), almost every
  case stopped at "line 1 is not JSON". `jsonl_body` is a serializer of its own: one JSON
  value per line; the fuzz copy of the schema describes a body as a list of lines shaped like
  calls or preference pairs (or any text), so the import's line-by-line checks are fuzzed.
- Every answer is written to `LEVERS9_FUZZ_LOG` (one JSON line: method, path, status,
  seconds) when it is set, so the run's request count and its slowest operations are known.
- Where an operation also takes JSON, its form encodings are left out: the bounded run spends
  its requests on the bodies clients send. (This fuzzing found daphne's Twisted layer refusing
  a malformed multipart body with a bare 400; config.asgi now hands such bodies to Django,
  tested with a real daphne in tests/levers9/test_serve_outlives_the_web_process.py.)
"""

from __future__ import annotations

import json
import os
from typing import Any

import schemathesis

JSONL = "application/jsonl"
FORM_TYPES = ("multipart/form-data", "application/x-www-form-urlencoded")

# --- JSONL bodies ---------------------------------------------------------------------------

_TEXT = {"type": "string"}
_MESSAGES = {
    "anyOf": [
        _TEXT,
        {
            "type": "array",
            "maxItems": 4,
            "items": {
                "type": "object",
                "properties": {"role": {"enum": ["user", "assistant", "system"]}, "content": _TEXT},
            },
        },
    ]
}
# One line of each import, as the API's descriptions spell them. Loose on purpose: no required
# fields and no closed objects, so the fuzzer writes wrong and missing fields as well as right.
JSONL_LINES: dict[str, dict[str, Any]] = {
    "/calls/import/": {
        "type": "object",
        "properties": {
            "id": _TEXT,
            "outcome": {"enum": ["won", "lost", "unknown"]},
            "turns": {
                "type": "array",
                "maxItems": 6,
                "items": {
                    "type": "object",
                    "properties": {"speaker": {"enum": ["agent", "customer"]}, "text": _TEXT},
                },
            },
        },
    },
    "/preferences/import/": {
        "type": "object",
        "properties": {
            "id": _TEXT,
            "prompt": _MESSAGES,
            "chosen": _MESSAGES,
            "rejected": _MESSAGES,
            "reasons": {"type": "array", "maxItems": 3, "items": _TEXT},
            "reviewer": _TEXT,
        },
    },
}


def jsonl_schema(path: str) -> dict[str, Any] | None:
    """The fuzz schema of a JSONL body at `path`: a list of lines, or any text at all."""
    line = next((line for suffix, line in JSONL_LINES.items() if path.endswith(suffix)), None)
    if line is None:
        return None
    return {"anyOf": [{"type": "array", "minItems": 1, "maxItems": 5, "items": line}, _TEXT]}


def jsonl_body(ctx: Any, value: Any) -> bytes:
    """application/jsonl: a list goes one JSON value per line; text and bytes go as they are
    (text may carry lone surrogates, sent as the bytes Python would write for them, which the
    import must name as a line that is not UTF-8)."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, list):
        return "".join(json.dumps(item) + "\n" for item in value).encode()
    if isinstance(value, str):
        return value.encode("utf-8", errors="surrogatepass")
    return (json.dumps(value) + "\n").encode()


schemathesis.serializer(JSONL)(jsonl_body)


@schemathesis.hook
def before_load_schema(ctx, raw_schema: dict) -> None:
    for path, methods in raw_schema.get("paths", {}).items():
        for operation in methods.values():
            if not isinstance(operation, dict):
                continue
            content = (operation.get("requestBody") or {}).get("content") or {}
            if "application/json" in content:
                for form in FORM_TYPES:
                    content.pop(form, None)
            lines = jsonl_schema(path)
            if JSONL in content and lines is not None:
                content[JSONL] = {**content[JSONL], "schema": lines}


# The world every fuzzed workspace has (bench.fuzz_api seeds it with workspace_create).
KNOWN_PACKS = ("lettings",)


@schemathesis.hook
def before_generate_path_parameters(ctx, strategy):
    """A random `pack` is a 404 before any line is read (79 of 80 import cases were): half the
    imports' cases name a world that exists. (A schema `anyOf` of that name and any string
    does not do it: the generator folds it into "any string".)"""
    from hypothesis import strategies

    operation = getattr(ctx, "operation", None)
    if operation is None or jsonl_schema(operation.path) is None:
        return strategy

    def with_a_known_pack(values):
        # Negative cases come wrapped (schemathesis' GeneratedValue, with what was broken on
        # purpose): they test the refusals of a bad path, so they stay as they were drawn.
        if values is not None and not isinstance(values, dict):
            return strategies.just(values)
        return strategies.sampled_from(KNOWN_PACKS).map(
            lambda pack: {**(values or {}), "pack": pack}
        )

    return strategies.one_of(strategy.flatmap(with_a_known_pack), strategy)


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
