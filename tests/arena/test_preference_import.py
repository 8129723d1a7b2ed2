"""Worlds and preference data over the API: a world created over the API, filled with real calls
and real human preference pairs (TRL's format), fits its judge with one call; a file with one
bad line imports nothing and names it; the same ids twice change nothing; a frozen version
downloads in the same format; another workspace can do none of it."""

from __future__ import annotations

import json
from pathlib import Path

from django_tenants.utils import schema_context

from arena.judge.fit_job import judge_fit_finish
from arena.models import JudgeVersion, Pick, World
from levers9.jobs.models import Job
from levers9.shipped_data import HH_RLHF_PAIRS, PERSUASION_CALLS
from trainers.judge import fit as judge_fit

# Enough for the fit to hold some out; the flow, not the judge's strength, is checked here.
PAIRS = 120


def _lines(path: Path, count: int) -> str:
    return "\n".join(path.read_text().splitlines()[:count])


def _create(client, slug="charity"):
    return client.post(
        "/api/rl/packs/",
        {
            "slug": slug,
            "name": "Charity donations",
            "description": "Asking for donations to Save the Children.",
            "system_prompt": "You ask politely for a donation to Save the Children.",
        },
        content_type="application/json",
    )


def _import(client, text, slug="charity"):
    return client.post(
        f"/api/rl/packs/{slug}/preferences/import/", text, content_type="application/jsonl"
    )


def test_a_world_made_over_the_api_imports_pairs_and_calls_and_fits_its_judge(
    owner_client, workspace, django_capture_on_commit_callbacks
):
    created = _create(owner_client)
    assert created.status_code == 201, created.content
    assert created.json()["system_prompt"].startswith("You ask politely")
    assert created.json()["scenarios"] == []
    calls = owner_client.post(
        "/api/rl/packs/charity/calls/import/",
        _lines(PERSUASION_CALLS, 60),
        content_type="application/jsonl",
    )
    assert calls.status_code == 200, calls.content
    imported = _import(owner_client, _lines(HH_RLHF_PAIRS, PAIRS))
    assert imported.status_code == 200, imported.content
    assert imported.json() == {"created": PAIRS, "unchanged": 0}
    assert _import(owner_client, _lines(HH_RLHF_PAIRS, PAIRS)).json() == {
        "created": 0,
        "unchanged": PAIRS,
    }

    with django_capture_on_commit_callbacks(execute=False):
        frozen = owner_client.post("/api/rl/preferences/freeze/?pack=charity")
    assert frozen.status_code in (200, 201), frozen.content
    with django_capture_on_commit_callbacks(execute=False):
        started = owner_client.post("/api/rl/packs/charity/judge/fit/")
    assert started.status_code == 202, started.content
    with schema_context(workspace.schema_name):
        job = Job.objects.get(pk=started.json()["id"])
        spec = json.loads(Path(job.spec_path).read_text())
        assert len(spec["pairs"]) == PAIRS
        assert spec["outcomes"]
        judge_fit_finish(job, judge_fit.run(spec))
        version = JudgeVersion.objects.get(world__slug="charity")
        assert version.report["held_out"]["pairs"] > 0
        assert {pick.source for pick in Pick.objects.filter(world__slug="charity")} == {
            "imported:api"
        }

    scored = owner_client.post(
        "/api/rl/packs/charity/judge/score/",
        {"items": [{"dialogue": [{"speaker": "customer", "text": "Why?"}], "reply": "Because."}]},
        content_type="application/json",
    )
    assert scored.status_code == 200
    assert scored.json()["judge"] == f"{version.label} of charity"

    number = frozen.json()["number"]
    download = owner_client.get(f"/api/rl/preferences/{number}/download/?pack=charity&part=jsonl")
    assert download.status_code == 200
    rows = [json.loads(line) for line in download.content.decode().splitlines()]
    assert len(rows) == PAIRS
    assert {"prompt", "chosen", "rejected"} <= set(rows[0])
    assert rows[0]["chosen"][0]["role"] == "assistant"


def test_a_file_with_one_bad_line_imports_nothing_and_names_the_line(owner_client, workspace):
    assert _create(owner_client).status_code == 201
    lines = _lines(HH_RLHF_PAIRS, 5).splitlines()
    bad = json.loads(lines[2])
    bad["rejected"] = [{"role": "user", "content": "not the agent"}]
    lines[2] = json.dumps(bad)
    response = _import(owner_client, "\n".join(lines))
    assert response.status_code == 400
    assert response.json()["problems"] == [
        {"line": 3, "reason": "'rejected' must be text or a list of assistant messages"}
    ]
    with schema_context(workspace.schema_name):
        assert not Pick.objects.filter(world__slug="charity").exists()


def test_the_plain_form_with_strings_is_accepted(owner_client, workspace):
    assert _create(owner_client).status_code == 201
    line = json.dumps(
        {"id": "p1", "prompt": "Hi", "chosen": "Hello, how can I help?", "rejected": "What."}
    )
    assert _import(owner_client, line).json() == {"created": 1, "unchanged": 0}
    with schema_context(workspace.schema_name):
        pick = Pick.objects.get(world__slug="charity")
        assert pick.chosen_reply.text == "Hello, how can I help?"
        assert pick.pair.moment.dialogue() == [{"speaker": "customer", "text": "Hi"}]


def test_a_world_slug_twice_or_a_bad_one_is_refused_naming_the_field(owner_client):
    assert _create(owner_client).status_code == 201
    again = _create(owner_client)
    assert again.status_code == 400
    assert "slug" in again.json()
    bad = owner_client.post("/api/rl/packs/", {"name": "x"}, content_type="application/json")
    assert bad.status_code == 400
    assert "slug" in bad.json()


def test_another_workspace_cannot_create_import_or_download(
    owner_client, outsider_client, workspace
):
    assert _create(owner_client).status_code == 201
    assert _create(outsider_client, slug="stolen").status_code in {401, 403}
    assert _import(outsider_client, _lines(HH_RLHF_PAIRS, 3)).status_code in {401, 403}
    with schema_context(workspace.schema_name):
        assert not World.objects.filter(slug="stolen").exists()
        assert not Pick.objects.filter(world__slug="charity").exists()


def test_the_admin_upload_imports_through_the_same_service(owner_client, workspace):
    from django.core.files.uploadedfile import SimpleUploadedFile

    with schema_context(workspace.schema_name):
        world_id = World.objects.get(slug="lettings").pk
    url = f"/admin/arena/world/{world_id}/import-preferences/"
    assert owner_client.get(url).status_code == 200
    bad = SimpleUploadedFile("bad.jsonl", (_lines(HH_RLHF_PAIRS, 2) + "\n{}").encode())
    response = owner_client.post(url, {"file": bad}, follow=True)
    assert b"line 3" in response.content
    good = SimpleUploadedFile("hh.jsonl", _lines(HH_RLHF_PAIRS, 2).encode())
    response = owner_client.post(url, {"file": good}, follow=True)
    assert b"2 preference pairs imported" in response.content
    with schema_context(workspace.schema_name):
        assert set(Pick.objects.values_list("source", flat=True)) == {"imported:hh.jsonl"}
    admin_list = owner_client.get("/admin/arena/judgeversion/")
    assert admin_list.status_code == 200


def test_imported_pairs_keep_their_ids_through_freeze_and_export(
    owner_client, outsider_client, workspace, django_capture_on_commit_callbacks
):
    """The TRL export named every pair by its pick's id, so an imported file did not join
    back to its source and importing the export again made every pair twice."""
    assert _create(owner_client).status_code == 201
    lines = _lines(HH_RLHF_PAIRS, 4).splitlines()
    ids = [json.loads(line)["id"] for line in lines]
    assert _import(owner_client, "\n".join(lines)).json()["created"] == 4
    with django_capture_on_commit_callbacks(execute=False):
        frozen = owner_client.post("/api/rl/preferences/freeze/?pack=charity")
    number = frozen.json()["number"]
    url = f"/api/rl/preferences/{number}/download/?pack=charity&part=jsonl"
    exported = owner_client.get(url).content.decode()
    assert sorted(json.loads(line)["id"] for line in exported.splitlines()) == sorted(ids)
    again = _import(owner_client, exported)
    assert again.json() == {"created": 0, "unchanged": 4}
    assert outsider_client.get(url).status_code in {401, 403, 404}
