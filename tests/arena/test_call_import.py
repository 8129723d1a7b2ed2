"""Real-call import: one service behind the command, the API and the admin upload. A world
of recorded calls takes them; a simulated world with none refuses them (nothing imported, a
400 naming `convert`) unless the sender converts it on purpose."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django_tenants.utils import schema_context

from arena.models import Call, Turn, World
from arena.services.calls import CallImportError, CallImportRefused, calls_import
from arena.services.worlds import world_create
from levers9.shipped_data import PERSUASION_CALLS
from tests.recorded_calls import recorded_call


def _call(call_id: str, outcome: str = "won") -> dict:
    return recorded_call(call_id, f"Hello from {call_id}", "Hi there", outcome=outcome)


def _jsonl(*records) -> str:
    return "\n".join(r if isinstance(r, str) else json.dumps(r) for r in records) + "\n"


@pytest.fixture
def world(in_workspace):
    return world_create(slug="dealer", name="Car dealer")


@pytest.fixture
def dealer(workspace):
    """A world made for a business's own calls (no simulator), in the acme workspace."""
    with schema_context(workspace.schema_name):
        return world_create(slug="dealer", name="Car dealer")


def test_it_imports_a_good_file_and_changes_nothing_the_second_time(world):
    text = _jsonl(_call("a"), _call("b", "lost"))
    first = calls_import(world=world, text=text)
    rows = list(Turn.objects.order_by("id").values_list("call__external_id", "index", "text"))
    second = calls_import(world=world, text=text)
    assert (first.created, first.turns_created) == (2, 4)
    assert (second.created, second.unchanged) == (0, 2)
    assert (
        list(Turn.objects.order_by("id").values_list("call__external_id", "index", "text")) == rows
    )
    assert Call.objects.get(external_id="b").outcome == "lost"


def test_it_imports_nothing_when_one_line_is_bad_and_names_it(world):
    bad = _call("c")
    bad["turns"][1]["speaker"] = "robot"
    text = _jsonl(_call("a"), _call("b"), bad, '{"id": "d", "outcome": "maybe", "turns": []}')
    with pytest.raises(CallImportError) as raised:
        calls_import(world=world, text=text)
    problems = {problem.line: problem.reason for problem in raised.value.problems}
    assert set(problems) == {3, 4}
    assert "speaker" in problems[3]
    assert "robot" in problems[3]
    assert "outcome" in problems[4]
    assert "line 3" in str(raised.value)
    assert Call.objects.count() == 0


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("{not json\n", "not valid JSON"),
        ('{"outcome": "won", "turns": []}\n', '"id"'),
        (_jsonl(_call("x"), _call("x")), "already appears on line 1"),
        ("[1, 2]", "must be a JSON object"),
        ("\n\n", "no calls"),
    ],
)
def test_it_says_what_is_wrong(world, text, reason):
    with pytest.raises(CallImportError, match=reason):
        calls_import(world=world, text=text)
    assert Call.objects.count() == 0


def test_it_accepts_a_json_array(world):
    report = calls_import(world=world, text=json.dumps([_call("a"), _call("b")]))
    assert report.created == 2


def test_it_keeps_what_was_there_when_a_later_file_is_bad(world):
    calls_import(world=world, text=_jsonl(_call("kept")))
    with pytest.raises(CallImportError):
        calls_import(world=world, text=_jsonl(_call("new"), "oops"))
    assert list(Call.objects.values_list("external_id", flat=True)) == ["kept"]


def test_it_imports_the_shared_real_calls(world):
    report = calls_import(world=world, text=PERSUASION_CALLS.read_text(), source="calls.jsonl")
    assert report.created == 1017
    assert Call.objects.filter(outcome="won").count() == 545
    assert Turn.objects.count() == report.turns_created > 10_000


def test_it_imports_through_the_command(dealer, workspace, tmp_path, capsys):
    path = tmp_path / "calls.jsonl"
    path.write_text(_jsonl(_call("cmd-1")))
    call_command("import_calls", str(path), "--workspace", "acme", "--pack", "dealer")
    assert "1 calls imported" in capsys.readouterr().out
    with schema_context(workspace.schema_name):
        assert Call.objects.filter(external_id="cmd-1").exists()


def test_it_names_the_bad_line_in_the_command(dealer, workspace, tmp_path):
    path = tmp_path / "calls.jsonl"
    path.write_text(_jsonl(_call("ok"), "{}"))
    with pytest.raises(CommandError, match="line 2"):
        call_command("import_calls", str(path), "--workspace", "acme", "--pack", "dealer")
    with pytest.raises(CommandError, match="No world 'nope'"):
        call_command("import_calls", str(path), "--workspace", "acme", "--pack", "nope")


def test_it_imports_through_the_api_and_reports_bad_lines(owner_client, workspace, dealer):
    url = "/api/rl/packs/dealer/calls/import/"
    bad = owner_client.post(url, _jsonl(_call("api-1"), "{}"), content_type="application/jsonl")
    assert bad.status_code == 400
    assert bad.json()["problems"][0]["line"] == 2
    good = owner_client.post(url, _jsonl(_call("api-1")), content_type="application/jsonl")
    assert good.json() == {"created": 1, "unchanged": 0, "turns_created": 2}
    again = owner_client.post(url, json.dumps([_call("api-1")]), content_type="application/json")
    assert again.json()["unchanged"] == 1
    empty = owner_client.post(url, "", content_type="application/jsonl")
    assert empty.status_code == 400
    missing = owner_client.post("/api/rl/packs/nope/calls/import/", "x", content_type="text/plain")
    assert missing.status_code == 404


def test_it_refuses_the_api_import_to_another_workspace(outsider_client, workspace):
    response = outsider_client.post(
        "/api/rl/packs/lettings/calls/import/", _jsonl(_call("x")), content_type="application/jsonl"
    )
    assert response.status_code in {401, 403}
    with schema_context(workspace.schema_name):
        assert not Call.objects.filter(external_id="x").exists()


def test_it_imports_through_the_admin_upload(owner_client, workspace, dealer):
    world_id = dealer.pk
    url = f"/admin/arena/world/{world_id}/import-calls/"
    assert owner_client.get(url).status_code == 200
    bad = SimpleUploadedFile("bad.jsonl", _jsonl(_call("up-1"), "[]").encode())
    response = owner_client.post(url, {"file": bad}, follow=True)
    assert b"line 2" in response.content
    good = SimpleUploadedFile("good.jsonl", _jsonl(_call("up-1")).encode())
    response = owner_client.post(url, {"file": good}, follow=True)
    assert b"1 calls imported" in response.content
    with schema_context(workspace.schema_name):
        assert Call.objects.get(external_id="up-1").source == "good.jsonl"


# --- a simulated world refuses calls unless converted on purpose -------------------------

CAR_DEALER_CALLS = _jsonl(*(_call(f"car-{number}") for number in range(5)))


def test_a_simulated_world_refuses_calls_and_says_how_to_go_on(in_workspace):
    lettings = World.objects.get(slug="lettings")
    with pytest.raises(CallImportRefused) as refused:
        calls_import(world=lettings, text=CAR_DEALER_CALLS)
    assert refused.value.field == "convert"
    message = str(refused.value)
    assert "simulated world" in message
    assert "make a world of its own" in message
    assert "?convert=real-calls" in message
    assert not Call.objects.exists()
    # A bad file is still named line by line first: the refusal is no excuse to skip that.
    with pytest.raises(CallImportError, match="line 2"):
        calls_import(world=lettings, text=_jsonl(_call("ok"), "{}"))


def test_the_api_refuses_calls_to_a_simulated_world_naming_the_field(owner_client, workspace):
    response = owner_client.post(
        "/api/rl/packs/lettings/calls/import/", CAR_DEALER_CALLS, content_type="application/jsonl"
    )
    assert response.status_code == 400, response.content
    assert "simulated world" in response.json()["convert"][0]
    assert "/api/rl/packs/" in response.json()["detail"]
    with schema_context(workspace.schema_name):
        assert not Call.objects.exists()
    unknown = owner_client.post(
        "/api/rl/packs/lettings/calls/import/?convert=yes",
        CAR_DEALER_CALLS,
        content_type="application/jsonl",
    )
    assert unknown.status_code == 400
    assert "real-calls" in unknown.json()["convert"][0]


def test_the_api_converts_a_simulated_world_on_purpose(owner_client, workspace):
    url = "/api/rl/packs/lettings/calls/import/?convert=real-calls"
    response = owner_client.post(url, CAR_DEALER_CALLS, content_type="application/jsonl")
    assert response.status_code == 200, response.content
    assert response.json()["created"] == 5
    # Converted, it is a world with recorded calls: more come without the flag.
    more = owner_client.post(
        "/api/rl/packs/lettings/calls/import/",
        _jsonl(_call("car-9")),
        content_type="application/jsonl",
    )
    assert more.json()["created"] == 1


def test_another_workspace_can_neither_import_nor_convert(outsider_client, workspace):
    for url in (
        "/api/rl/packs/lettings/calls/import/",
        "/api/rl/packs/lettings/calls/import/?convert=real-calls",
    ):
        response = outsider_client.post(url, CAR_DEALER_CALLS, content_type="application/jsonl")
        assert response.status_code in {401, 403, 404}
        assert "simulated" not in response.content.decode()
    with schema_context(workspace.schema_name):
        assert not Call.objects.exists()


def test_the_command_refuses_a_simulated_world_unless_converting(workspace, tmp_path, capsys):
    path = tmp_path / "calls.jsonl"
    path.write_text(CAR_DEALER_CALLS)
    command = ["import_calls", str(path), "--workspace", "acme", "--pack", "lettings"]
    with pytest.raises(CommandError, match="simulated world"):
        call_command(*command)
    with schema_context(workspace.schema_name):
        assert not Call.objects.exists()
    call_command(*command, "--convert", "real-calls")
    assert "5 calls imported" in capsys.readouterr().out


def test_the_admin_upload_refuses_a_simulated_world(owner_client, workspace):
    with schema_context(workspace.schema_name):
        world_id = World.objects.get(slug="lettings").pk
    upload = SimpleUploadedFile("dealer.jsonl", CAR_DEALER_CALLS.encode())
    response = owner_client.post(
        f"/admin/arena/world/{world_id}/import-calls/", {"file": upload}, follow=True
    )
    assert response.status_code == 200
    assert b"simulated world" in response.content
    with schema_context(workspace.schema_name):
        assert not Call.objects.exists()


def test_calls_with_outcomes_refit_the_judge_in_the_background_and_unlabelled_ones_do_not(
    world, django_capture_on_commit_callbacks
):
    from levers9.jobs.models import Job

    def fits() -> list[Job]:
        return list(Job.objects.filter(kind="judge-fit", arena_world__world=world))

    with django_capture_on_commit_callbacks(execute=True):
        calls_import(world=world, text=_jsonl(_call("u1", "unknown"), _call("u2", "unknown")))
    assert fits() == []  # nothing for the judge to learn from
    with django_capture_on_commit_callbacks(execute=True):
        calls_import(world=world, text=_jsonl(_call("w1"), _call("l1", "lost")))
    (fit,) = fits()
    assert fit.background  # work nobody clicked: it yields to jobs a person started
    assert fit.title == "Fit the judge of Car dealer (background)"  # its first: not a refit
    with django_capture_on_commit_callbacks(execute=True):
        calls_import(world=world, text=_jsonl(_call("w2"), _call("l2", "lost")))
    assert fits() == [fit]  # a second import while it waits folds into it
