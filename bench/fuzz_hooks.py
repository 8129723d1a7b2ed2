"""Schemathesis hooks for bench.fuzz_api (loaded through SCHEMATHESIS_HOOKS): the imports take
JSONL bodies, which schemathesis sends as text once told so."""

from __future__ import annotations

import schemathesis

schemathesis.serializer.alias("application/jsonl", "text/plain")
