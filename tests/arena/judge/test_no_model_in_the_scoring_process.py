"""Scoring with a base loads no model in the process that scores (issue 42, point 7): the
scoring API, the pair maker and the answer check ask the machine's one scoring process for the
base (trainers.reading.base_server), and get the scores an in-process reader gives."""

from __future__ import annotations

import gc
import json
import os
from pathlib import Path

import pytest
from django.conf import settings

from arena.judge import judge_base, versions
from arena.judge.fit_job import judge_fit_finish, judge_fit_start
from arena.models import DuelPair, JudgeVersion
from arena.services.calls import calls_import
from arena.services.pairs import duel_pairs_generate
from arena.services.worlds import world_create
from levers9.shipped_data import PERSUASION_CALLS
from trainers import bases
from trainers.bases import TINY_BASE, base_dir, tiny_base
from trainers.judge import fit as judge_fit
from trainers.reading.base_features import BaseReader
from trainers.reading.base_server import address_read, servers_stop

CALLS = 80


@pytest.fixture
def tiny_judge_base(settings):
    settings.JUDGE_BASE = TINY_BASE
    settings.JUDGE_SCORING_IDLE_SECONDS = 120  # a test that fails before its end leaves none
    tiny_base(base_dir(TINY_BASE, settings.MODELS_DIR), texts=["donate", "children"])
    versions._loaded.cache_clear()
    judge_base._reader.cache_clear()
    yield settings.MODELS_DIR
    servers_stop(settings.MODELS_DIR)
    versions._loaded.cache_clear()
    judge_base._reader.cache_clear()


@pytest.fixture
def persuasion(in_workspace, django_capture_on_commit_callbacks):
    world = world_create(slug="persuasion", name="Persuasion for good")
    lines = PERSUASION_CALLS.read_text().splitlines()[:CALLS]
    with django_capture_on_commit_callbacks(execute=False):  # no background refit
        calls_import(world=world, text="\n".join(lines), source="test")
        job = judge_fit_start(world=world)
    spec = json.loads(Path(job.spec_path).read_text())
    judge_fit_finish(job, judge_fit.run(spec))  # here, as the worker's trainer would
    return world


def _models_here() -> int:
    """Models alive in this process (the tests' own tiny ones included)."""
    from transformers import PreTrainedModel

    gc.collect()
    return sum(_is_a_model(thing, PreTrainedModel) for thing in gc.get_objects())


def _is_a_model(thing, model_type) -> bool:
    # A weak proxy whose object is gone raises on any look at it (earlier tests leave some).
    try:
        return isinstance(thing, model_type)
    except ReferenceError:
        return False


ITEMS = [
    {
        "dialogue": [{"speaker": "customer", "text": "Hi, what is this about?"}],
        "reply": f"Would you give {share} of your payment to Save the Children?",
    }
    for share in ("a part", "a dollar", "half")
] + [{"dialogue": [], "reply": "Hello! How are you doing today?"}]


def test_it_scores_with_the_base_in_the_scoring_process_and_loads_none_here(
    tiny_judge_base, persuasion, owner_client, monkeypatch, tmp_path
):
    version = JudgeVersion.objects.get(world=persuasion)
    assert version.report["scorer"]["base"] == TINY_BASE
    loads = []
    real_load_base = bases.load_base
    monkeypatch.setattr(
        bases, "load_base", lambda *a, **k: loads.append(a) or real_load_base(*a, **k)
    )
    before = _models_here()

    url = "/api/rl/packs/persuasion/judge/score/"
    scored = owner_client.post(url, {"items": ITEMS}, content_type="application/json")
    assert scored.status_code == 200, scored.content
    remote = scored.json()
    assert "words alone" not in remote["judge"]
    # The pair maker (here, as the worker's duel-pairs task calls it) reads the same way.
    assert duel_pairs_generate(world=persuasion, count=2) > 0
    assert "words alone" not in DuelPair.objects.filter(world=persuasion).first().judge_model
    # Scored again: from the workspace's cache, through the same process.
    again = owner_client.post(url, {"items": ITEMS}, content_type="application/json").json()

    assert loads == []
    assert _models_here() == before
    process = address_read(settings.MODELS_DIR, TINY_BASE)
    assert process is not None
    assert process.pid != os.getpid()
    assert again["results"] == remote["results"]

    # Today's path, for reference: a reader of the base in this process, its own cache.
    def in_process(base, models_dir, features):
        return BaseReader(base, models_dir=models_dir, features_dir=tmp_path / "own")

    with monkeypatch.context() as patched:
        patched.setattr(judge_base, "_reader", in_process)
        versions._loaded.cache_clear()
        local = owner_client.post(url, {"items": ITEMS}, content_type="application/json").json()
    assert loads  # the reference did load it here
    assert local["judge"] == remote["judge"]
    for there, here in zip(remote["results"], local["results"], strict=True):
        # The API rounds to 4 digits; another process's passes may differ in the last bits.
        assert there["on_topic"] == here["on_topic"]
        assert there["total"] == pytest.approx(here["total"], abs=1e-4)
        assert there["scores"] == pytest.approx(here["scores"], abs=1e-4)
        assert there.get("won_probability") == pytest.approx(here.get("won_probability"), abs=1e-4)
