"""A world's judge fit reads every reply with the base LEVERS9_JUDGE_BASE names, caches what it
read in the workspace's own folder, and the version scores with that base; where the base is
not on the machine the version scores with its words alone and its name says so."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from django.conf import settings
from django_tenants.utils import schema_context

from arena.judge import versions
from arena.judge.fit_job import judge_fit_finish, judge_fit_start
from arena.judge.judge_base import _reader
from arena.models import JudgeVersion
from arena.services.calls import calls_import
from arena.services.worlds import world_create
from levers9.shipped_data import PERSUASION_CALLS
from trainers.bases import TINY_BASE, base_dir, tiny_base
from trainers.judge import fit as judge_fit
from trainers.reading.base_server import servers_stop

CALLS = 80


@pytest.fixture
def tiny_judge_base(settings):
    settings.JUDGE_BASE = TINY_BASE
    tiny_base(base_dir(TINY_BASE, settings.MODELS_DIR), texts=["donate", "children"])
    versions._loaded.cache_clear()
    _reader.cache_clear()
    yield settings.MODELS_DIR
    servers_stop(settings.MODELS_DIR)  # the scoring process the test's scores started
    versions._loaded.cache_clear()
    _reader.cache_clear()


@pytest.fixture
def persuasion(in_workspace):
    world = world_create(slug="persuasion", name="Persuasion for good")
    lines = PERSUASION_CALLS.read_text().splitlines()[:CALLS]
    calls_import(world=world, text="\n".join(lines), source="test")
    return world


def _fitted(world, django_capture_on_commit_callbacks) -> JudgeVersion:
    with django_capture_on_commit_callbacks(execute=False):
        job = judge_fit_start(world=world)
    spec = json.loads(Path(job.spec_path).read_text())
    judge_fit_finish(job, judge_fit.run(spec))
    return JudgeVersion.objects.get(world=world)


ITEMS = {
    "items": [
        {
            "dialogue": [{"speaker": "customer", "text": "Hi, what is this about?"}],
            "reply": "Would you give part of your payment to Save the Children?",
        }
    ]
}


def test_the_fit_reads_with_the_base_and_the_version_scores_with_it(
    tiny_judge_base, persuasion, owner_client, django_capture_on_commit_callbacks
):
    version = _fitted(persuasion, django_capture_on_commit_callbacks)
    scorer = version.report["scorer"]
    assert scorer["base"] == TINY_BASE
    assert scorer["features"]["read"] > 0
    # Calls' outcomes and no picks, and 16 held-out calls (too few to show the won head beat
    # chance): the rubric's total ranks replies.
    assert scorer["total"] == "rubric"
    own = Path(settings.DATASETS_DIR) / "ws_acme" / "features"
    assert any(own.rglob("*.npy"))
    for who in ("fitted", "words", "base"):
        assert version.report["outcomes"][who]["calls"] > 0
    # The guard's floor sample was read ahead: the first score after the fit reads nothing.
    from arena.judge.world_topic_guard import topic_guard_for_world
    from trainers.reading.base_features import BaseReader, ReadStats

    sample = topic_guard_for_world(persuasion).floor_sample()
    stats = ReadStats()
    reader = BaseReader(TINY_BASE, models_dir=tiny_judge_base, features_dir=own)
    reader.features([(unit.context, unit.reply) for unit in sample], stats=stats)
    assert sample
    assert (stats.read, stats.cached) == (0, len(sample))
    # The same sample placed the world's floor of "does the reply answer the call", and the
    # guard around the world's judge applies it.
    following = [unit for unit in sample if unit.context]  # an opening line answers nothing
    assert scorer["answers"]["sample"] == len(following) >= 20
    from arena.judge.world_judge import judge_for_world

    check = judge_for_world(persuasion).unguarded.answer_check
    assert check.floor == pytest.approx(scorer["answers"]["floor"])
    # ... and ranks a reply's answer score against those turns' own, for the joint test.
    assert scorer["answers"]["joint"] is True
    assert len(check.own) == len(following)
    assert list(check.own) == sorted(check.own)

    # A pair's candidates read ahead together: scoring each afterwards reads nothing more.
    judge = judge_for_world(persuasion)
    moment = [{"speaker": "customer", "text": "Hi, what is this about?"}]
    candidates = [(moment, f"Would you give {share} to Save the Children?") for share in "ABC"]
    judge.read_ahead(candidates)
    after = ReadStats()
    reader.features(candidates, stats=after)
    reader.answers(candidates, stats=after)
    assert (after.read, after.cached) == (0, 3 + 6)

    scored = owner_client.post(
        "/api/rl/packs/persuasion/judge/score/", ITEMS, content_type="application/json"
    )
    assert scored.status_code == 200, scored.content
    assert "words alone" not in scored.json()["judge"]

    page = owner_client.get("/environment/").content.decode()
    assert f"Reads each reply with {TINY_BASE}; scores a reply" in page
    floor = scorer["answers"]["floor"]
    assert "are together rarer than the world" in page
    assert f"ranked against {len(following)} of its own agent turns after something" in page
    assert "total by the rubric (no picks yet, and its won head did not beat chance" in page
    assert 'data-row="outcome-auc-words"' in page
    assert 'data-row="outcome-auc-base"' in page
    listing = owner_client.get("/admin/arena/judgeversion/").content.decode()
    assert f"{TINY_BASE}: total rubric, won {scorer['won']}, answer floor {floor:.2f}" in listing


def test_without_its_base_the_version_scores_with_its_words_and_says_so(
    tiny_judge_base, persuasion, owner_client, django_capture_on_commit_callbacks
):
    version = _fitted(persuasion, django_capture_on_commit_callbacks)
    scorer = version.report["scorer"]
    needs_base = scorer["won"] != "words" or scorer["answers"]["floor"] is not None
    from arena.services.pairs import SLOW_BATCH, duel_pairs_request

    # Reading each reply with the base takes seconds a batch: most pairs are made later.
    with django_capture_on_commit_callbacks(execute=False):
        requested = duel_pairs_request(world=persuasion, count=6)
    assert requested.made <= SLOW_BATCH
    assert requested.later == (6 - requested.made if needs_base else 0)

    shutil.rmtree(base_dir(TINY_BASE, tiny_judge_base))
    versions._loaded.cache_clear()
    with django_capture_on_commit_callbacks(execute=False):
        assert duel_pairs_request(world=persuasion, count=6).later == 0
    scored = owner_client.post(
        "/api/rl/packs/persuasion/judge/score/", ITEMS, content_type="application/json"
    )
    assert scored.status_code == 200, scored.content
    assert ("words alone" in scored.json()["judge"]) is needs_base
    assert 0 <= scored.json()["results"][0]["total"] <= 1


def test_another_workspace_cannot_score_with_this_worlds_judge_nor_read_its_cache(
    tiny_judge_base, persuasion, outsider_client, django_capture_on_commit_callbacks
):
    with schema_context("ws_acme"):  # the outsider's fixture signed in over there
        _fitted(persuasion, django_capture_on_commit_callbacks)
    scored = outsider_client.post(
        "/api/rl/packs/persuasion/judge/score/", ITEMS, content_type="application/json"
    )
    assert scored.status_code in {401, 403}
    folders = {path.parent.name for path in Path(settings.DATASETS_DIR).glob("*/features")}
    assert folders == {"ws_acme"}


def test_environment_says_when_a_fit_could_not_read_with_its_base():
    from trainers.judge.standing import scorer_text

    missing = {"scorer": {"base": None, "base_missing": "Base 'x/y' is not on this machine."}}
    assert "the base it was to read with is missing. Base 'x/y'" in scorer_text(missing)
    assert "fitted without a base" in scorer_text({"scorer": {"base": None}})
    assert "fitted without a base" in scorer_text({})  # a version from before the scorer


def test_a_judge_base_setting_that_names_no_base_refuses_the_fit_with_a_clear_message(
    settings, persuasion, owner_client
):
    settings.JUDGE_BASE = "not a base id!"
    response = owner_client.post("/api/rl/packs/persuasion/judge/fit/")
    assert 400 <= response.status_code < 500
    assert "LEVERS9_JUDGE_BASE" in response.content.decode()
