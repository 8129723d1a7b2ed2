"""The Duel's API: next item, pick, skip, stats, generate, overrule, rescore, freeze, list
and download versions — each scoped to the workspace and refused to an outsider."""

from __future__ import annotations

import pytest
from django_tenants.utils import schema_context
from rest_framework.authtoken.models import Token

from arena.judge.agreement import judge_agreement
from arena.models import DuelPair, Pick, PreferenceVersion, World
from arena.services.pairs import duel_pairs_generate
from tests.conftest import api_token, client_for, make_user, token_client


@pytest.fixture(autouse=True)
def datasets(settings, tmp_path):
    settings.DATASETS_DIR = tmp_path
    return tmp_path


@pytest.fixture
def pairs(workspace):
    with schema_context(workspace.schema_name):
        duel_pairs_generate(world=World.objects.get(slug="lettings"), count=6)


@pytest.fixture
def reviewer(workspace, pairs):
    make_user(workspace, "rita@acme.test", "reviewer")
    return client_for(workspace, "rita@acme.test")


@pytest.fixture
def second_reviewer(workspace, pairs):
    make_user(workspace, "rob@acme.test", "reviewer")
    return client_for(workspace, "rob@acme.test")


def _next(client, **params):
    response = client.get("/api/rl/duel/next/", {"pack": "lettings", **params})
    assert response.status_code == 200, response.content
    return response.json()["item"]


def _pick(client, item, chosen="A", reasons=("respect",)):
    return client.post(
        "/api/rl/picks/",
        {"pair": item["pair"], "chosen": chosen, "reasons": list(reasons)},
        content_type="application/json",
    )


def test_it_serves_a_pair_without_saying_who_wrote_it(reviewer):
    item = _next(reviewer)
    assert set(item) == {
        "pair",
        "pack",
        "moment",
        "a",
        "b",
        "reserved_until",
        "picks_wanted",
        "pick_count",
    }
    # Beside its text, only why the on-topic guard capped it (these scripted replies: never).
    assert set(item["a"]) == {"text", "on_topic"}
    assert item["a"]["on_topic"] is None
    assert item["b"]["on_topic"] is None
    assert item["moment"]["kind"] == "synthetic"
    assert item["moment"]["dialogue"][0]["speaker"] == "customer"
    assert _next(reviewer)["pair"] == item["pair"]


def test_it_records_a_pick_and_reveals_sources_and_scores(reviewer, workspace):
    item = _next(reviewer)
    response = _pick(reviewer, item, "B", ["dialect", "timing"])
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["chosen_side"] == "B"
    assert body["reasons"] == ["dialect", "timing"]
    assert body["reviewer_name"] == "rita@acme.test"
    assert {body["reveal"]["A"]["source"], body["reveal"]["B"]["source"]} == {
        "policy",
        "simulator",
    }
    assert set(body["reveal"]["A"]["judge"]["scores"]) >= {"dialect", "compliance"}
    listed = reviewer.get("/api/rl/picks/", {"mine": "1"}).json()
    assert [row["id"] for row in listed["results"]] == [body["id"]]


def test_it_refuses_bad_picks_with_the_reason(reviewer, second_reviewer, workspace):
    item = _next(reviewer)
    unknown = _pick(reviewer, item, "A", ["respect", "charm"])
    assert unknown.status_code == 400
    assert "Unknown reason(s): 'charm'" in unknown.json()["detail"]
    not_held = _pick(second_reviewer, item)
    assert not_held.status_code == 409
    assert "You do not hold pair" in not_held.json()["detail"]
    missing = _pick(reviewer, {"pair": 10**9})
    assert missing.status_code == 404
    assert "No duel pair" in missing.json()["detail"]
    wrong_side = _pick(reviewer, item, "left")
    assert wrong_side.status_code == 400
    assert _pick(reviewer, item).status_code == 201
    twice = _pick(reviewer, item)
    assert twice.status_code == 409
    with schema_context(workspace.schema_name):
        assert Pick.objects.count() == 1


def test_it_refuses_a_pick_on_a_frozen_pair(reviewer, second_reviewer, owner_client, workspace):
    item = _next(reviewer)
    with schema_context(workspace.schema_name):
        DuelPair.objects.filter(pk=item["pair"]).update(picks_wanted=2)
    assert _pick(reviewer, item).status_code == 201
    assert owner_client.post("/api/rl/preferences/freeze/").status_code == 201
    assert _next(second_reviewer)["pair"] != item["pair"]
    frozen = _pick(second_reviewer, item)
    assert frozen.status_code == 409
    assert "frozen into preferences v1" in frozen.json()["detail"]


def test_it_skips_a_pair(reviewer):
    item = _next(reviewer)
    assert reviewer.post(f"/api/rl/duel/{item['pair']}/skip/").status_code == 204
    assert _next(reviewer)["pair"] != item["pair"]
    assert reviewer.post("/api/rl/duel/999999/skip/").status_code == 404


def test_it_preloads_by_move_and_refuses_unknown_ones(reviewer, workspace):
    with schema_context(workspace.schema_name):
        move = DuelPair.objects.first().move_a
    item = _next(reviewer, move=move)
    with schema_context(workspace.schema_name):
        pair = DuelPair.objects.get(pk=item["pair"])
    assert move in {pair.move_a, pair.move_b}
    bad = reviewer.get("/api/rl/duel/next/", {"pack": "lettings", "move": "dance"})
    assert bad.status_code == 400
    assert "Unknown move 'dance'" in bad.json()["detail"]
    assert reviewer.get("/api/rl/duel/next/", {"pack": "nowhere"}).status_code == 404


def test_it_shows_stats_and_makes_pairs(reviewer, workspace):
    stats = reviewer.get("/api/rl/duel/stats/", {"pack": "lettings"}).json()
    assert stats["open"] == 6
    with schema_context(workspace.schema_name):
        expected = judge_agreement(World.objects.get(slug="lettings"))
    assert stats["judge_agreement"] == expected
    assert expected["respect"]["label"] == "Respect"
    made = reviewer.post(
        "/api/rl/duel/generate/",
        {"pack": "lettings", "count": 3, "versions": [1]},
        content_type="application/json",
    )
    assert made.status_code == 201
    assert made.json() == {"made": 3, "later": 0, "job": None}  # the simulator: all now
    missing = reviewer.post(
        "/api/rl/duel/generate/",
        {"pack": "lettings", "versions": [42]},
        content_type="application/json",
    )
    assert missing.status_code == 404
    assert "v42" in missing.json()["detail"]


def test_it_overrules_the_judge_and_rescoring_needs_a_manager(reviewer, owner_client):
    item = _next(reviewer)
    reveal = _pick(reviewer, item).json()["reveal"]
    response = reviewer.post(
        "/api/rl/overrides/",
        {"reply": reveal["A"]["reply"], "scores": {"respect": 0.0}, "note": "curt"},
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    assert response.json()["judge_model"] == "rubric-v1"
    bad = reviewer.post(
        "/api/rl/overrides/",
        {"reply": reveal["A"]["reply"], "scores": {"charm": 1}},
        content_type="application/json",
    )
    assert bad.status_code == 400
    assert "Unknown dimension" in bad.json()["detail"]
    assert reviewer.post("/api/rl/overrides/rescore/").status_code == 403
    report = owner_client.post("/api/rl/overrides/rescore/").json()
    assert report["replies_rescored"] == 1
    assert report["agreement"]["respect"]["reviewed"] == 1


def test_it_freezes_lists_and_downloads_versions(reviewer, owner_client, datasets):
    empty = owner_client.post("/api/rl/preferences/freeze/")
    assert empty.status_code == 409
    assert "no new picks" in empty.json()["detail"]
    item = _next(reviewer)
    _pick(reviewer, item, "A", ["family"])
    assert reviewer.post("/api/rl/preferences/freeze/").status_code == 403
    frozen = owner_client.post("/api/rl/preferences/freeze/")
    assert frozen.status_code == 201
    assert frozen.json()["number"] == 1
    listed = reviewer.get("/api/rl/preferences/").json()["results"]
    assert [row["number"] for row in listed] == [1]
    download = reviewer.get("/api/rl/preferences/1/download/")
    assert download.status_code == 200
    assert download["Content-Type"].startswith("text/tab-separated-values")
    text = b"".join(download.streaming_content).decode()
    header, row = text.splitlines()
    assert header.split("\t")[0] == "pick_id"
    fields = dict(zip(header.split("\t"), row.split("\t"), strict=True))
    assert (fields["reasons"], fields["reviewer"]) == ("family", "rita@acme.test")
    assert (fields["kind"], fields["note"]) == ("preference", "")
    assert download["X-Preferences-SHA256"] == listed[0]["sha256"]
    manifest = reviewer.get("/api/rl/preferences/1/download/?part=manifest")
    assert b'"count": 1' in b"".join(manifest.streaming_content)
    tsv_only = reviewer.get(
        "/api/rl/preferences/1/download/", HTTP_ACCEPT="text/tab-separated-values"
    )
    assert tsv_only.status_code == 200
    assert reviewer.get("/api/rl/preferences/7/download/").status_code == 404


ENDPOINTS = [
    ("get", "/api/rl/duel/next/?pack=lettings"),
    ("get", "/api/rl/duel/stats/?pack=lettings"),
    ("post", "/api/rl/duel/generate/"),
    ("post", "/api/rl/duel/{pair}/skip/"),
    ("get", "/api/rl/picks/"),
    ("post", "/api/rl/picks/"),
    ("get", "/api/rl/overrides/"),
    ("post", "/api/rl/overrides/"),
    ("post", "/api/rl/overrides/rescore/"),
    ("get", "/api/rl/preferences/"),
    ("post", "/api/rl/preferences/freeze/"),
    ("get", "/api/rl/preferences/1/"),
    ("get", "/api/rl/preferences/1/download/"),
]


@pytest.mark.parametrize(("method", "url"), ENDPOINTS)
def test_it_refuses_an_outsider_on_every_duel_endpoint(
    method, url, outsider_client, owner_client, workspace, pairs
):
    with schema_context(workspace.schema_name):
        pair = DuelPair.objects.first()
    url = url.format(pair=pair.pk)
    body = {"pair": pair.pk, "chosen": "A", "pack": "lettings", "reply": pair.reply_a_id}
    if method == "post":
        response = outsider_client.post(url, body, content_type="application/json")
    else:
        response = outsider_client.get(url)
    assert response.status_code in {401, 403}
    with schema_context(workspace.schema_name):
        assert not Pick.objects.exists()
        assert not PreferenceVersion.objects.exists()
        assert DuelPair.objects.filter(reserved_by__isnull=False).count() == 0


def test_it_refuses_a_token_of_another_workspace(workspace, other_workspace, pairs):
    token = api_token(other_workspace, "owner@rival.test")
    client = token_client(workspace, token)
    assert client.get("/api/rl/duel/next/?pack=lettings").status_code == 401
    assert client.post("/api/rl/preferences/freeze/").status_code == 401
    # On its own workspace the same token sees none of acme's pairs.
    own = token_client(other_workspace, token)
    assert own.get("/api/rl/duel/stats/?pack=lettings").json()["pairs"] == 0


def test_it_serves_a_reviewer_by_token(workspace, pairs):
    user = make_user(workspace, "bot@acme.test", "reviewer")
    with schema_context(workspace.schema_name):
        token = Token.objects.create(user=user).key
    client = token_client(workspace, token)
    item = client.get("/api/rl/duel/next/?pack=lettings").json()["item"]
    response = client.post(
        "/api/rl/picks/", {"pair": item["pair"], "chosen": "A"}, content_type="application/json"
    )
    assert response.status_code == 201


def test_it_documents_every_duel_endpoint_in_the_schema(api_schema):
    for path in (
        "/api/rl/duel/next/",
        "/api/rl/duel/{id}/skip/",
        "/api/rl/duel/stats/",
        "/api/rl/duel/generate/",
        "/api/rl/picks/",
        "/api/rl/overrides/",
        "/api/rl/overrides/rescore/",
        "/api/rl/preferences/",
        "/api/rl/preferences/freeze/",
        "/api/rl/preferences/{number}/download/",
    ):
        assert f"{path}:" in api_schema, path
