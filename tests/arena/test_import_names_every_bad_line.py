"""Every bad line in one answer (issue 41, point 5): a file with broken-JSON lines and lines with
bad fields names them all, of both kinds, and imports nothing. Before, a call import named only
the broken-JSON lines; the bad fields showed only once those were mended."""

from __future__ import annotations

import json

import pytest
from django_tenants.utils import schema_context

from arena.models import Call, Pick
from arena.services.worlds import world_create
from tests.recorded_calls import recorded_call


def _jsonl(*records) -> str:
    return "\n".join(r if isinstance(r, str) else json.dumps(r) for r in records) + "\n"


def _with_turn(call_id: str, speaker: str, text: str) -> dict:
    call = recorded_call(call_id, "Good morning, Acme Lettings.", "Hello.")
    call["turns"][1] = {"speaker": speaker, "text": text}
    return call


A_FILE_BAD_BOTH_WAYS = _jsonl(
    recorded_call("good-1", "Good morning.", "Hello."),  # 1: good
    '{"id": "broken", "outcome": "won", "turns": [',  # 2: broken JSON
    {**recorded_call("maybe", "Hi.", "Hello."), "outcome": "maybe"},  # 3: outcome
    _with_turn("bot", "bot", "Beep."),  # 4: speaker
    _with_turn("empty", "customer", "   "),  # 5: empty text
    {"outcome": "won", "turns": [{"speaker": "agent", "text": "Hi."}]},  # 6: no id
    "not json at all",  # 7: broken JSON
    recorded_call("good-2", "Good morning.", "Hello."),  # 8: good
)
EXPECTED = {
    2: "not valid JSON",
    3: '"outcome"',
    4: '"speaker"',
    5: '"text"',
    6: '"id"',
    7: "not valid JSON",
}


@pytest.fixture
def dealer(workspace):
    with schema_context(workspace.schema_name):
        return world_create(slug="dealer", name="Car dealer")


def test_a_call_import_names_every_bad_line_of_both_kinds_in_one_answer(
    owner_client, workspace, dealer
):
    response = owner_client.post(
        "/api/rl/packs/dealer/calls/import/", A_FILE_BAD_BOTH_WAYS, content_type="application/jsonl"
    )
    assert response.status_code == 400, response.content
    problems = {problem["line"]: problem["reason"] for problem in response.json()["problems"]}
    assert set(problems) == set(EXPECTED), problems
    for line, named in EXPECTED.items():
        assert named in problems[line], (line, problems[line])
    assert "use one of won, lost, unknown" in problems[3]
    assert "use agent or customer" in problems[4]
    detail = response.json()["detail"]
    assert "Nothing was imported: 6 bad line(s)" in detail
    assert "Each line must be a JSON object like" in detail  # how to mend them
    with schema_context(workspace.schema_name):
        assert not Call.objects.exists()


def test_one_line_names_each_of_its_bad_fields(in_workspace):
    from arena.services.calls import CallImportError, calls_import

    world = world_create(slug="dealer", name="Car dealer")
    text = _jsonl({"id": "", "outcome": "maybe", "turns": [{"speaker": "bot", "text": ""}]})
    with pytest.raises(CallImportError) as raised:
        calls_import(world=world, text=text)
    [problem] = raised.value.problems
    for field in ('"id"', '"outcome"', '"speaker"'):
        assert field in problem.reason


def test_a_json_array_names_bad_text_and_bad_fields_together(in_workspace):
    from arena.services.calls import CallImportError, calls_import

    world = world_create(slug="dealer", name="Car dealer")
    nul_text = _with_turn("nul", "customer", "a\x00b")
    bad_outcome = {**recorded_call("maybe", "Hi.", "Hello."), "outcome": "maybe"}
    with pytest.raises(CallImportError) as raised:
        calls_import(world=world, text=json.dumps([nul_text, bad_outcome]))
    problems = {problem.line: problem.reason for problem in raised.value.problems}
    assert set(problems) == {1, 2}
    assert '"outcome"' in problems[2]


def test_a_preference_import_names_every_bad_line_of_both_kinds(owner_client, workspace):
    good = {"id": "p1", "prompt": "Is it free?", "chosen": "Yes, from May.", "rejected": "No."}
    text = _jsonl(
        good,
        '{"id": "broken", "prompt": ',  # 2: broken JSON
        {**good, "id": "p3", "chosen": ""},  # 3: empty chosen
        {**good, "id": "p4", "reasons": ["vibes"]},  # 4: an unknown reason
        {key: value for key, value in good.items() if key != "id"},  # 5: no id
    )
    response = owner_client.post(
        "/api/rl/packs/lettings/preferences/import/", text, content_type="application/jsonl"
    )
    assert response.status_code == 400, response.content
    problems = {problem["line"]: problem["reason"] for problem in response.json()["problems"]}
    assert set(problems) == {2, 3, 4, 5}, problems
    assert "not valid JSON" in problems[2]
    assert "'chosen'" in problems[3]
    assert "'reasons'" in problems[4]
    assert "'id'" in problems[5]
    with schema_context(workspace.schema_name):
        assert not Pick.objects.exists()
