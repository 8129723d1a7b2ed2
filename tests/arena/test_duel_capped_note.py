"""The Duel says why the on-topic guard capped a reply: a pair made with another business's
line keeps the guard's sentence in that reply's judgement, and duel/next (`on_topic` per
reply, null where the guard did not cap) and the Duel page show it beside that reply only —
never in another workspace."""

from __future__ import annotations

import re
from unittest import mock

import pytest
from django_tenants.utils import schema_context

from arena.models import DuelPair, Judgement, Reply, World
from arena.services.pairs import _Candidate, duel_pairs_generate
from tests.conftest import api_token, client_for, make_user, token_client
from trainers.judge.topic_guard import ON_TOPIC

# A line from another business (car insurance): the lettings world's guard caps it.
INSURANCE = "Your car insurance renewal covers windscreen repairs and breakdown recovery."


def _insurance_answers(moment, versions):
    """Every version answers with the insurance line; the simulator adds a lettings reply."""
    return [_Candidate(INSURANCE, Reply.Source.POLICY, "")]


@pytest.fixture
def capped_pair(workspace, settings, tmp_path):
    """One lettings pair made with the real world's judge and guard: the insurance line
    against the simulator's on-topic reply. Returns (pair id, the guard's sentence, side)."""
    settings.DATASETS_DIR = tmp_path
    with schema_context(workspace.schema_name):
        world = World.objects.get(slug="lettings")
        with mock.patch("arena.services.pairs._version_candidates", _insurance_answers):
            assert duel_pairs_generate(world=world, count=1) == 1
        pair = DuelPair.objects.select_related("reply_a", "reply_b").get(world=world)
        side = "a" if pair.reply_a.text == INSURANCE else "b"
        capped_reply = pair.reply_a if side == "a" else pair.reply_b
        note = Judgement.objects.get(reply=capped_reply).reasons.get(ON_TOPIC)
        assert note, "the guard should have capped the insurance line"
        other = pair.reply_b if side == "a" else pair.reply_a
        assert ON_TOPIC not in Judgement.objects.get(reply=other).reasons
        return pair.pk, note, side


def test_duel_next_gives_the_guards_reason_beside_the_capped_reply_only(workspace, capped_pair):
    pair_id, note, side = capped_pair
    make_user(workspace, "rita@acme.test", "reviewer")
    client = client_for(workspace, "rita@acme.test")
    response = client.get("/api/rl/duel/next/", {"pack": "lettings"})
    assert response.status_code == 200, response.content
    item = response.json()["item"]
    assert item["pair"] == pair_id
    other = "b" if side == "a" else "a"
    assert item[side]["text"] == INSURANCE
    assert item[side]["on_topic"] == note
    assert item[other]["on_topic"] is None


def test_the_duel_page_shows_the_reason_beside_the_capped_reply(workspace, capped_pair):
    _pair_id, note, side = capped_pair
    make_user(workspace, "rita@acme.test", "reviewer")
    page = client_for(workspace, "rita@acme.test").get("/duel/", {"world": "lettings"})
    assert page.status_code == 200
    html = page.content.decode()
    shown, hidden = (side.upper(), "B" if side == "a" else "A")
    capped = re.search(
        rf'<p class="capped" id="capped-{shown}"(?P<attrs>[^>]*)>(?P<body>.*?)</p>', html, re.S
    )
    assert capped is not None
    assert "hidden" not in capped["attrs"]
    # The guard's sentence, escaped as the page escapes any text.
    assert "Judge capped this reply:" in capped["body"]
    assert note.replace("'", "&#x27;") in capped["body"]
    other = re.search(rf'<p class="capped" id="capped-{hidden}"(?P<attrs>[^>]*)>', html)
    assert other is not None
    assert "hidden" in other["attrs"]


def test_another_workspace_never_sees_the_note(workspace, other_workspace, capped_pair):
    _pair_id, note, _side = capped_pair
    make_user(other_workspace, "rob@rival.test", "reviewer")
    token = api_token(other_workspace, "rob@rival.test")
    # The rival's token is refused on acme's host...
    assert token_client(workspace, token).get("/api/rl/duel/next/?pack=lettings").status_code == (
        401
    )
    # ...and on its own host it is served its own pairs, none with acme's capped line.
    own = token_client(other_workspace, token).get("/api/rl/duel/next/?pack=lettings")
    assert own.status_code == 200, own.content
    item = own.json()["item"]
    assert item is not None
    assert INSURANCE not in {item["a"]["text"], item["b"]["text"]}
    assert item["a"]["on_topic"] is None
    assert item["b"]["on_topic"] is None
    page = client_for(other_workspace, "rob@rival.test").get("/duel/", {"world": "lettings"})
    assert note.replace("'", "&#x27;") not in page.content.decode()
    with schema_context(workspace.schema_name):
        assert not DuelPair.objects.filter(reserved_by__isnull=False).exists()
