"""The CI fuzz run's JSONL serializer (bench.fuzz_hooks): the import endpoints are fuzzed with
bodies of JSON lines shaped like calls and preference pairs, not only free text."""

from __future__ import annotations

import json

import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.transport.requests import REQUESTS_TRANSPORT

from bench import fuzz_hooks

IMPORTS = (
    "/api/rl/packs/{pack}/calls/import/",
    "/api/rl/packs/{pack}/preferences/import/",
)


def test_it_writes_a_list_as_one_json_value_per_line():
    lines = [{"id": "c1", "turns": []}, {"id": "c\ud800"}]
    body = fuzz_hooks.jsonl_body(None, lines)
    assert body.endswith(b"\n")
    assert [json.loads(line) for line in body.decode().splitlines()] == lines


def test_it_sends_text_and_bytes_as_they_are():
    assert fuzz_hooks.jsonl_body(None, b"\xff\x00") == b"\xff\x00"
    assert fuzz_hooks.jsonl_body(None, "not json") == b"not json"
    # A lone surrogate goes as the bytes Python writes for it: a line that is not UTF-8.
    assert fuzz_hooks.jsonl_body(None, "\ud800") == b"\xed\xa0\x80"


def _fuzz_schema(owner_client) -> dict:
    raw = owner_client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    fuzz_hooks.before_load_schema(None, raw)
    return raw


def test_it_describes_both_imports_bodies_as_lines(owner_client):
    raw = _fuzz_schema(owner_client)
    for path in IMPORTS:
        body = raw["paths"][path]["post"]["requestBody"]["content"][fuzz_hooks.JSONL]
        lines = body["schema"]["anyOf"][0]
        assert lines["type"] == "array"
        assert lines["items"] == fuzz_hooks.jsonl_schema(path)["anyOf"][0]["items"]
    calls = raw["paths"][IMPORTS[0]]["post"]["requestBody"]["content"][fuzz_hooks.JSONL]
    assert "turns" in calls["schema"]["anyOf"][0]["items"]["properties"]


def test_schemathesis_sends_the_imports_json_lines(owner_client):
    """Through schemathesis itself: cases for the imports are generated (not skipped) and go on
    the wire through our serializer, as JSON lines."""
    schema = schemathesis.openapi.from_dict(_fuzz_schema(owner_client))
    operations = [
        result.ok()
        for result in schema.get_all_operations()
        if result.ok().path in IMPORTS and result.ok().method.lower() == "post"
    ]
    assert len(operations) == 2
    for operation in operations:
        bodies: list[bytes] = []
        packs: list[str] = []

        @settings(
            max_examples=40,
            derandomize=True,
            deadline=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(case=operation.as_strategy(media_type=fuzz_hooks.JSONL))
        def collect(case) -> None:
            bodies.append(REQUESTS_TRANSPORT.serialize_case(case).get("data", b""))  # noqa: B023
            packs.append(case.path_parameters["pack"])  # noqa: B023

        collect()
        # A world that exists, often: a random one is a 404 before any line is read.
        assert packs.count("lettings") >= 5, packs
        line_bodies = [body for body in bodies if body.startswith(b"{")]
        assert line_bodies, f"no JSON lines for {operation.path}: {bodies[:5]}"
        first_line = line_bodies[0].split(b"\n")[0]
        assert isinstance(json.loads(first_line), dict)


def test_a_negative_path_case_keeps_what_was_broken_on_purpose():
    """Negative cases reach the pack hook wrapped in GeneratedValue: the CI fuzz run stopped
    with "'GeneratedValue' object is not a mapping" on both imports when it took them for a
    dict."""
    from types import SimpleNamespace

    from hypothesis import strategies as st
    from schemathesis.generation.value import GeneratedValue

    broken = GeneratedValue(value={"pack": "\x00"}, meta=None)
    ctx = SimpleNamespace(operation=SimpleNamespace(path="/api/rl/packs/{pack}/calls/import/"))
    hooked = fuzz_hooks.before_generate_path_parameters(ctx, st.just(broken))
    positive = fuzz_hooks.before_generate_path_parameters(ctx, st.just({"pack": "zz"}))
    drawn = []

    @settings(max_examples=30, database=None)
    @given(st.tuples(hooked, positive))
    def draw(values):
        drawn.append(values)

    draw()
    assert {type(negative) for negative, _ in drawn} == {GeneratedValue}
    assert all(negative.value == {"pack": "\x00"} for negative, _ in drawn)
    assert {value["pack"] for _, value in drawn} == {"zz", "lettings"}
