"""Bad text and badly typed import lines are a 400 (or an import error) that names the field
and the line, never a 500 and never half an import: lone surrogates, wrong JSON types, invalid
UTF-8, and live-call turns held to the same rules as imported ones."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import ValidationError
from django_tenants.utils import schema_context

from arena.models import Call, Pick, World
from arena.services.calls import CallImportError, calls_import
from arena.services.preferences import PreferenceImportError, preferences_import
from policies.canary import live_call_route
from policies.live import live_call_record
from policies.models import LiveCall
from tests.recorded_calls import two_turn_call

GOOD_CALL = two_turn_call("good-call")
GOOD_PAIR = {
    "id": "pair-1",
    "prompt": [{"role": "user", "content": "Is the flat still free?"}],
    "chosen": [{"role": "assistant", "content": "It is: shall I book you a viewing?"}],
    "rejected": [{"role": "assistant", "content": "Dunno."}],
}


def _jsonl(*records) -> str:
    return "\n".join(json.dumps(record) for record in records) + "\n"


@pytest.fixture
def world(in_workspace):
    return World.objects.get(slug="lettings")


# --- lone surrogates anywhere in a JSON body or a query --------------------------------


def test_it_refuses_a_lone_surrogate_in_a_json_string_naming_the_field(owner_client, workspace):
    # Written by hand: json.dumps of a str holding "\ud800" writes the same escape.
    body = '{"outcome": "won", "turns": [{"speaker": "agent", "text": "hi \\ud800"}]}'
    response = owner_client.post(
        "/api/rl/live/calls/any/outcome/", body, content_type="application/json"
    )
    assert response.status_code == 400, response.content
    assert "turns[0].text" in response.json()
    assert "surrogate" in response.json()["turns[0].text"][0]


def test_it_refuses_a_lone_surrogate_in_a_json_key(owner_client):
    response = owner_client.post(
        "/api/rl/engines/runs/",
        '{"algorithm": "ppo", "pack": "lettings", "knobs": {"\\udfff": 1}}',
        content_type="application/json",
    )
    assert response.status_code == 400, response.content
    assert "knobs.\\udfff" in response.json()


def test_it_accepts_real_non_ascii_text_in_json(owner_client, workspace):
    response = owner_client.post(
        "/api/rl/live/calls/", {"call_id": "ça-va-😀"}, content_type="application/json"
    )
    assert response.status_code == 200, response.content
    assert response.json()["call_id"] == "ça-va-😀"


# --- call import: wrong types named with their line ------------------------------------


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"outcome": ["won"]}, '"outcome" is a JSON list'),
        ({"outcome": {"won": True}}, '"outcome" is a JSON object'),
        ({"turns": {"speaker": "agent"}}, '"turns" is missing or empty'),
        ({"turns": [{"speaker": ["agent"], "text": "hi"}]}, 'turn 1: "speaker" is a JSON list'),
        ({"turns": [{"speaker": {"a": 1}, "text": "hi"}]}, 'turn 1: "speaker" is a JSON object'),
        ({"turns": [{"speaker": "agent", "text": 7}]}, 'turn 1: "text" is 7'),
        ({"turns": [{"speaker": "agent", "text": ["hi"]}]}, 'turn 1: "text" is a JSON list'),
        ({"id": "bad\u0000id"}, '"id": Null characters'),
    ],
)
def test_it_names_the_line_of_a_call_of_the_wrong_type(world, change, words):
    bad = {**GOOD_CALL, "id": "bad-call", **change}
    with pytest.raises(CallImportError) as raised:
        calls_import(world=world, text=_jsonl(GOOD_CALL, bad), source="test")
    assert [problem.line for problem in raised.value.problems] == [2]
    assert words in raised.value.problems[0].reason
    assert Call.objects.filter(world=world).count() == 0


def test_it_names_a_lone_surrogate_in_an_imported_turn(world):
    line = json.dumps(GOOD_CALL).replace("Elm Street.", "Elm \\udc00Street.")
    with pytest.raises(CallImportError) as raised:
        calls_import(world=world, text=f"{json.dumps({**GOOD_CALL, 'id': 'x'})}\n{line}\n")
    problem = raised.value.problems[0]
    assert problem.line == 2
    assert "turns[1].text" in problem.reason
    assert "surrogate" in problem.reason
    assert Call.objects.filter(world=world).count() == 0


def test_it_names_a_json_array_item_of_the_wrong_type(world):
    array = json.dumps([GOOD_CALL, {**GOOD_CALL, "id": "two", "outcome": [1]}])
    with pytest.raises(CallImportError) as raised:
        calls_import(world=world, text=array)
    assert [problem.line for problem in raised.value.problems] == [2]


def test_it_names_a_line_nested_too_deeply_or_with_a_huge_number(world):
    deep = "[" * 100_000 + "]" * 100_000
    huge = '{"id": "h", "outcome": "won", "turns": [], "n": ' + "9" * 5000 + "}"
    with pytest.raises(CallImportError) as raised:
        calls_import(world=world, text=f"{json.dumps(GOOD_CALL)}\n{deep}\n{huge}\n")
    assert [problem.line for problem in raised.value.problems] == [2, 3]
    assert "nested too deeply" in raised.value.problems[0].reason


def test_it_refuses_invalid_utf8_naming_the_line(world):
    data = _jsonl(GOOD_CALL, {**GOOD_CALL, "id": "two"}).encode() + b'{"id": "\xff\xfe"}\n'
    with pytest.raises(CallImportError) as raised:
        calls_import(world=world, text=data, source="test")
    assert [problem.line for problem in raised.value.problems] == [3]
    assert "not valid UTF-8" in raised.value.problems[0].reason
    assert Call.objects.filter(world=world).count() == 0


def test_it_imports_utf8_bytes_with_a_byte_order_mark(world):
    data = "\ufeff".encode() + _jsonl({**GOOD_CALL, "id": "café"}).encode()
    assert calls_import(world=world, text=data, convert=True).created == 1


def test_it_answers_invalid_utf8_in_the_api_with_the_line(owner_client, workspace):
    body = _jsonl(GOOD_CALL).encode() + b'{"id": "caf\xe9"}\n'
    response = owner_client.post(
        "/api/rl/packs/lettings/calls/import/", body, content_type="application/jsonl"
    )
    assert response.status_code == 400, response.content
    assert response.json()["problems"][0]["line"] == 2
    assert "UTF-8" in response.json()["problems"][0]["reason"]
    with schema_context(workspace.schema_name):
        assert Call.objects.count() == 0


def test_it_answers_a_call_of_the_wrong_type_in_the_api(owner_client, workspace):
    body = _jsonl(GOOD_CALL, {**GOOD_CALL, "id": "two", "outcome": {"a": 1}})
    response = owner_client.post(
        "/api/rl/packs/lettings/calls/import/", body, content_type="application/jsonl"
    )
    assert response.status_code == 400, response.content
    assert response.json()["problems"] == [
        {"line": 2, "reason": response.json()["problems"][0]["reason"]}
    ]
    assert "outcome" in response.json()["problems"][0]["reason"]


# --- preference import: the same rules --------------------------------------------------


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"reasons": [{"a": 1}]}, "'reasons' must list the world's rubric dimensions"),
        ({"reasons": [["dialect"]]}, "'reasons' must list the world's rubric dimensions"),
        ({"prompt": [{"role": ["user"], "content": "hi"}]}, "'prompt[0]' must be"),
        ({"prompt": [{"role": "user", "content": {"t": 1}}]}, "'prompt[0]' must be"),
        ({"chosen": {"role": "assistant"}}, "'chosen' must be text"),
        ({"reviewer": ["me"]}, "'reviewer' must be a label"),
        ({"chosen": "ok \ud83d"}, '"chosen": Lone surrogates'),
    ],
)
def test_it_names_the_line_of_a_preference_of_the_wrong_type(world, change, words):
    bad = {**GOOD_PAIR, "id": "pair-2", **change}
    with pytest.raises(PreferenceImportError) as raised:
        preferences_import(world=world, text=_jsonl(GOOD_PAIR, bad))
    assert [problem.line for problem in raised.value.problems] == [2]
    assert words in raised.value.problems[0].reason
    assert Pick.objects.filter(world=world).count() == 0


def test_it_refuses_a_preference_file_that_is_not_utf8(world):
    data = _jsonl(GOOD_PAIR).encode() + b"\n\n" + '{"id": "é"}'.encode("latin-1")
    with pytest.raises(PreferenceImportError) as raised:
        preferences_import(world=world, text=data)
    assert [problem.line for problem in raised.value.problems] == [4]
    assert Pick.objects.filter(world=world).count() == 0


# --- live-call turns: validated like imported turns -------------------------------------


@pytest.mark.parametrize(
    "turns",
    [
        [{"speaker": "robot", "text": "hi"}],
        [{"speaker": ["agent"], "text": "hi"}],
        [{"speaker": "agent", "text": ""}],
        [{"speaker": "agent", "text": {"t": 1}}],
        [{"speaker": "agent"}],
        ["hello"],
        {"speaker": "agent", "text": "hi"},
        [{"speaker": "agent", "text": "x" * 50_001}],
    ],
)
def test_it_refuses_live_call_turns_of_the_wrong_shape(owner_client, workspace, turns):
    with schema_context(workspace.schema_name):
        live_call_route(call_id="live-1", world=World.objects.get(slug="lettings"))
    response = owner_client.post(
        "/api/rl/live/calls/live-1/outcome/",
        {"outcome": "won", "turns": turns},
        content_type="application/json",
    )
    assert response.status_code == 400, response.content
    assert "turns" in response.json()
    with schema_context(workspace.schema_name):
        call = LiveCall.objects.get(external_id="live-1")
        assert (call.outcome, call.turns) == ("unknown", [])


def test_it_stores_live_call_turns_of_the_right_shape(owner_client, workspace):
    with schema_context(workspace.schema_name):
        live_call_route(call_id="live-2", world=World.objects.get(slug="lettings"))
    turns = [{"speaker": "agent", "text": "Hello"}, {"speaker": "customer", "text": "Hi"}]
    response = owner_client.post(
        "/api/rl/live/calls/live-2/outcome/",
        {"outcome": "won", "turns": turns},
        content_type="application/json",
    )
    assert response.status_code == 200, response.content
    with schema_context(workspace.schema_name):
        assert LiveCall.objects.get(external_id="live-2").turns == turns


def test_the_live_call_service_checks_turns_too(in_workspace):
    live_call_route(call_id="live-3", world=World.objects.get(slug="lettings"))
    with pytest.raises(ValidationError, match="speaker"):
        live_call_record(call_id="live-3", outcome="won", turns=[{"speaker": 1, "text": "x"}])
    assert LiveCall.objects.get(external_id="live-3").outcome == "unknown"


def test_a_body_django_cannot_parse_under_the_csrf_check_is_a_json_400(workspace):
    """A signed-in session with CSRF checks on: the check reads the form, the multipart body
    is broken, and Django itself answers 400 — as JSON under /api/, never an empty page."""
    from tests.conftest import client_for

    client = client_for(workspace, "owner@acme.test")  # signed in through the login page
    client.handler.enforce_csrf_checks = True
    boundary = "c637e12e2b1a998d80d1b087531af51c"
    response = client.generic(
        "POST",
        "/api/rl/packs/lettings/judge/score/",
        f"--{boundary}--\r\n".encode(),
        content_type=f"multipart/form-data; boundary={boundary}",
    )
    assert response.status_code in {400, 403}
    assert response["Content-Type"].startswith("application/json")
    assert response.json()["detail"]
