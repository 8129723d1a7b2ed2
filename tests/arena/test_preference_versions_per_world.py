"""Preference versions belong to a world (issue 40, point 1): a freeze in a world freezes that
world's picks only, numbered per world; Train, the API and the admin offer a world's own
versions; no other world's pick reaches a wording spec; an old mixed version stays readable,
marked mixed, and each world gets its own versions split from it."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from arena import preference_format
from arena.models import DuelPair, Pick, PreferenceVersion, World
from arena.selectors import (
    duel_stats,
    picks_frozen,
    preference_version_get,
    preference_version_path,
    preference_version_read,
)
from arena.services.freeze import preference_freeze
from arena.services.pairs import duel_pairs_generate
from arena.services.queue import duel_next, pick_submit
from policies.models import PolicyVersion
from tests.arena.duel_helpers import real_world
from tests.conftest import client_for, make_user
from tests.migration_state import migrate_to, migrate_to_latest
from tests.training.wording_choices import dpo_choice
from training.wording import (
    WordingCardError,
    wording_choice_from,
    wording_spec_build,
)


@pytest.fixture
def datasets(settings, tmp_path):
    settings.DATASETS_DIR = tmp_path
    return tmp_path


@pytest.fixture
def owner(in_workspace):
    return get_user_model().objects.get(username="owner@acme.test")


def _picks(world: World, reviewer, count: int) -> list[Pick]:
    duel_pairs_generate(world=world, count=count + 2)
    picks = []
    for _ in range(count):
        pair = duel_next(world=world, reviewer=reviewer, generate=False)
        picks.append(
            pick_submit(pair_id=pair.pk, reviewer=reviewer, chosen="A", reasons=["respect"])
        )
    return picks


@pytest.fixture
def two_worlds(owner, datasets):
    """Lettings (simulated) and a world of real calls, each with picks, interleaved by id."""
    lettings = World.objects.get(slug="lettings")
    market = real_world("market")
    _picks(lettings, owner, 2)
    _picks(market, owner, 3)
    _picks(lettings, owner, 1)
    return lettings, market


def test_a_freeze_holds_its_worlds_picks_only_numbered_per_world(two_worlds, owner):
    lettings, market = two_worlds
    version = preference_freeze(world=market, by=owner)
    assert (version.world, version.number, version.row_count) == (market, 1, 3)
    rows = list(preference_version_read(version=version))
    assert {row.pack for row in rows} == {"market"}
    assert [row.pick_id for row in rows] == list(
        Pick.objects.filter(world=market).order_by("pk").values_list("pk", flat=True)
    )
    # Lettings' picks, older and newer than the market's, are not frozen by it.
    assert duel_stats(lettings)["unfrozen_picks"] == 3
    assert duel_stats(market)["unfrozen_picks"] == 0
    assert not picks_frozen(Pick.objects.filter(world=lettings)).exists()
    # Each world numbers its own: Lettings' first version is its v1 too.
    first_lettings = preference_freeze(world=lettings, by=owner)
    assert (first_lettings.number, first_lettings.row_count) == (1, 3)
    assert {row.pack for row in preference_version_read(version=first_lettings)} == {"lettings"}
    assert preference_version_path(first_lettings).parent.name == "lettings"
    # A pair of one world is closed by its own world's freeze only.
    assert not DuelPair.objects.filter(world=lettings, frozen_in=version).exists()
    assert preference_version_get(world=lettings, number=1) == first_lettings
    assert preference_version_get(world=market, number=1) == version


def test_a_wording_spec_holds_no_other_worlds_pair(two_worlds, owner):
    lettings, market = two_worlds
    market_version = preference_freeze(world=market, by=owner)
    lettings_version = preference_freeze(world=lettings, by=owner)
    parent = PolicyVersion.objects.get(world=lettings, number=1)
    choice = wording_choice_from(
        method="dpo", preference=lettings_version, pool_name="", parent=parent, world=lettings
    )
    spec = wording_spec_build(choice, job_folder_hint="versions/x")
    assert spec["pack"] == "lettings"
    assert len(spec["pairs"]) == 3
    market_texts = set(
        Pick.objects.filter(world=market).values_list("chosen_reply__text", flat=True)
    )
    assert not market_texts & {pair["chosen"] for pair in spec["pairs"]}
    assert all("system" not in pair for pair in spec["pairs"])
    # Another world's version is refused in Lettings, naming the field.
    with pytest.raises(WordingCardError, match="preference_version: .*belongs to Real calls"):
        wording_choice_from(
            method="dpo", preference=market_version, pool_name="", parent=parent, world=lettings
        )


def test_a_spec_refuses_a_file_holding_another_worlds_picks(two_worlds, owner):
    """Were a world's file ever to hold a stranger's pick, training would refuse it."""
    lettings, market = two_worlds
    version = preference_freeze(world=lettings, by=owner)
    path = preference_version_path(version)
    text = path.read_text().replace("\tlettings\t", "\tmarket\t", 1)
    path.chmod(0o644)
    path.write_text(text)
    version.sha256 = preference_format.file_sha256(path)
    choice = dpo_choice(version)
    with pytest.raises(WordingCardError, match="holds picks of other worlds \\(market\\)"):
        wording_spec_build(choice, job_folder_hint="versions/x")


def test_the_api_offers_a_worlds_own_versions(workspace, other_workspace, two_worlds, owner):
    lettings, market = two_worlds
    client = client_for(workspace, "owner@acme.test")
    # Several worlds and none named: 400 naming pack, nothing frozen.
    refused = client.post("/api/rl/preferences/freeze/")
    assert refused.status_code == 400, refused.content
    assert "pack" in refused.json()["detail"]
    assert not PreferenceVersion.objects.exists()
    made = client.post("/api/rl/preferences/freeze/?pack=market")
    assert made.status_code == 201, made.content
    assert (made.json()["pack"], made.json()["number"]) == ("market", 1)
    assert client.get("/api/rl/preferences/", {"pack": "lettings"}).json()["results"] == []
    listed = client.get("/api/rl/preferences/", {"pack": "market"}).json()["results"]
    assert [(row["pack"], row["number"]) for row in listed] == [("market", 1)]
    assert client.get("/api/rl/preferences/").status_code == 400
    download = client.get(made.json()["download"])
    assert download.status_code == 200
    body = b"".join(download.streaming_content).decode()
    assert "\tmarket\t" in body
    assert "\tlettings\t" not in body
    assert client.get("/api/rl/preferences/1/download/?pack=lettings").status_code == 404
    # Another workspace never sees it, whatever it names.
    rival = client_for(other_workspace, "owner@rival.test")
    assert rival.get("/api/rl/preferences/", {"pack": "market"}).status_code == 404
    rival.defaults["HTTP_HOST"] = f"{workspace.slug}.localhost"
    assert rival.get("/api/rl/preferences/", {"pack": "market"}).status_code in {401, 403}


def test_train_offers_the_world_in_views_versions_only(workspace, two_worlds, owner):
    lettings, market = two_worlds
    preference_freeze(world=market, by=owner)
    lettings_version = preference_freeze(world=lettings, by=owner)
    make_user(workspace, "max@acme.test", "manager")
    client = client_for(workspace, "max@acme.test")
    page = client.get("/train/", {"world": "lettings"})
    offered = page.context["preference_versions"]
    assert [version.pk for version in offered] == [lettings_version.pk]


@pytest.fixture
def before_split(in_workspace, datasets):
    """Two mixed versions as the freeze wrote them before versions were per world: the picks
    made first, then the schema taken back to that state and the versions laid out in it."""
    from django.db import connection

    owner = get_user_model().objects.get(username="owner@acme.test")
    lettings = World.objects.get(slug="lettings")
    market = real_world("market")
    first = _picks(lettings, owner, 2) + _picks(market, owner, 1)
    second = _picks(market, owner, 2)
    apps = migrate_to([("arena", "0011_duelpair_judge_gap")])
    old_version = apps.get_model("arena", "PreferenceVersion")
    old_pair = apps.get_model("arena", "DuelPair")
    files = {}
    folder = datasets / connection.schema_name / "preferences"
    folder.mkdir(parents=True, exist_ok=True)
    for number, picks in ((1, first), (2, second)):
        (folder / f"v{number}.tsv").write_text(f"mixed v{number}\n")
        files[number] = preference_format.file_sha256(folder / f"v{number}.tsv")
        version = old_version.objects.create(
            number=number,
            extends=old_version.objects.filter(number=number - 1).first(),
            last_pick_id=picks[-1].pk,
            row_count=3 if number == 1 else 5,
            picks_added=3 if number == 1 else 2,
            sha256=files[number],
            file_path=f"{connection.schema_name}/preferences/v{number}.tsv",
        )
        old_pair.objects.filter(pk__in=[pick.pair_id for pick in picks]).update(frozen_in=version)
    return lettings, market, files


def test_the_migration_keeps_mixed_versions_and_splits_them_by_world(before_split):
    lettings, market, files = before_split
    migrate_to_latest()
    mixed = PreferenceVersion.objects.filter(is_mixed=True).order_by("number")
    assert [(v.number, v.world_id, v.sha256) for v in mixed] == [
        (1, None, files[1]),
        (2, None, files[2]),
    ]
    for version in mixed:  # file unchanged, still readable by its number
        assert preference_format.file_sha256(preference_version_path(version)) == version.sha256
        assert preference_version_get(world=None, number=version.number) == version
    lettings_versions = list(PreferenceVersion.objects.filter(world=lettings))
    market_versions = list(PreferenceVersion.objects.filter(world=market).order_by("number"))
    # New numbers, after the mixed ones: Lettings had picks in v1 only, the market in both.
    assert [(v.number, v.row_count) for v in lettings_versions] == [(3, 2)]
    assert [(v.number, v.row_count, v.picks_added) for v in market_versions] == [
        (3, 1, 1),
        (4, 3, 2),
    ]
    assert market_versions[1].extends == market_versions[0]
    for version in lettings_versions + market_versions:
        rows = list(preference_version_read(version=version))
        assert {row.pack for row in rows} == {version.world.slug}
        assert len(rows) == version.row_count
    assert not DuelPair.objects.filter(frozen_in__is_mixed=True).exists()
    # The next freeze goes on from the world's own split.
    owner = get_user_model().objects.get(username="owner@acme.test")
    _picks(market, owner, 1)
    assert preference_freeze(world=market, by=owner).number == 5
