"""Make live (with its history), the canary on live calls, and the won rate each version caused."""

from __future__ import annotations

import pytest
from django_tenants.utils import schema_context

from arena.models import World
from policies.canary import (
    canary_promote,
    canary_roll_back,
    canary_start,
    caused_won_rates,
    live_call_route,
)
from policies.live import LiveError, live_call_record, live_version, version_make_live
from policies.models import LivePeriod, PolicyVersion
from policies.services import version_register


@pytest.fixture
def lettings(in_workspace):
    return World.objects.get(slug="lettings")


@pytest.fixture
def v2(lettings):
    return version_register(
        world=lettings,
        name="trained",
        parent=PolicyVersion.objects.get(world__slug="lettings", number=1),
        move_strategy={"kind": "scripted"},
        learned_from={},
    )


def test_it_keeps_the_history_of_who_was_live_when(v2, lettings):
    assert live_version(world=lettings).number == 1
    version_make_live(version=v2)
    assert live_version(world=lettings) == v2
    with pytest.raises(LiveError, match="already live"):
        version_make_live(version=v2)
    version_make_live(version=PolicyVersion.objects.get(world__slug="lettings", number=1))
    periods = list(LivePeriod.objects.order_by("id").values_list("version__number", "current"))
    assert periods == [(2, False), (1, True)]


def test_it_refuses_to_make_a_released_version_live(v2):
    v2.status = PolicyVersion.Status.RELEASED
    v2.save()
    with pytest.raises(LiveError, match="answers nothing"):
        version_make_live(version=v2)


def test_it_splits_live_calls_by_share_and_counts_the_won_rate_each_caused(v2, lettings):
    canary = canary_start(candidate=v2, share=0.3)
    routed = [live_call_route(call_id=f"call-{n}", world=lettings) for n in range(400)]
    to_candidate = sum(call.version == v2 for call in routed)
    assert 80 < to_candidate < 160  # a deterministic hash split near 30%
    # The same call, the same way.
    assert live_call_route(call_id="call-7", world=lettings).version == routed[7].version
    for n, call in enumerate(routed):
        live_call_record(call_id=call.external_id, outcome="won" if n % 3 == 0 else "lost")
    rates = {rate.version.number: rate for rate in caused_won_rates(world=lettings, canary=canary)}
    assert rates[2].decided == to_candidate
    assert rates[1].decided == 400 - to_candidate
    assert rates[1].won + rates[2].won == len(range(0, 400, 3))
    canary_promote(canary=canary)
    assert live_version(world=lettings) == v2
    with pytest.raises(LiveError, match="ended"):
        canary_roll_back(canary=canary)


def test_it_refuses_bad_canaries_and_unknown_calls(v2, lettings):
    with pytest.raises(LiveError, match="more than 0 and less than 1"):
        canary_start(candidate=v2, share=1.5)
    with pytest.raises(LiveError, match="live version"):
        canary_start(
            candidate=PolicyVersion.objects.get(world__slug="lettings", number=1), share=0.1
        )
    canary = canary_start(candidate=v2, share=0.1)
    with pytest.raises(LiveError, match="already running"):
        canary_start(candidate=v2, share=0.2)
    canary_roll_back(canary=canary)
    assert live_version(world=lettings).number == 1
    with pytest.raises(LiveError, match="route it first"):
        live_call_record(call_id="never-routed", outcome="won")
    with pytest.raises(LiveError, match="use won, lost or unknown"):
        live_call_record(call_id="x", outcome="maybe")


def test_it_runs_the_canary_through_the_api(owner_client, workspace):
    with schema_context(workspace.schema_name):
        v2 = version_register(
            world=World.objects.get(slug="lettings"),
            name="trained",
            parent=PolicyVersion.objects.get(world__slug="lettings", number=1),
            move_strategy={"kind": "scripted"},
            learned_from={},
        )
    started = owner_client.post(
        "/api/rl/canary/start/",
        {"candidate": v2.number, "share": 0.5},
        content_type="application/json",
    )
    assert started.status_code == 201, started.content
    call = owner_client.post(
        "/api/rl/live/calls/", {"call_id": "c-1"}, content_type="application/json"
    ).json()
    assert call["version"] in {1, 2}
    outcome = owner_client.post(
        "/api/rl/live/calls/c-1/outcome/", {"outcome": "won"}, content_type="application/json"
    )
    assert outcome.json()["outcome"] == "won"
    rates = owner_client.get("/api/rl/canary/").json()["won_rates"]
    assert sum(rate["won"] for rate in rates) == 1
    promoted = owner_client.post("/api/rl/canary/promote/")
    assert promoted.status_code == 200
    assert owner_client.get("/release/").status_code == 200
    assert b"v2 \xc2\xb7 trained" in owner_client.get("/").content  # named live on the home page


def test_it_refuses_another_workspace_the_live_api(outsider_client, workspace):
    for path in ("/api/rl/canary/", "/api/rl/live/calls/"):
        response = outsider_client.post(path, {"call_id": "x"}, content_type="application/json")
        assert response.status_code in {401, 403, 405}
    assert outsider_client.post("/api/rl/policies/1/make-live/").status_code in {401, 403}
    assert outsider_client.get("/release/").status_code == 302


def test_it_ranks_versions_on_the_leaderboard_from_evaluations(v2):
    from arena.models import World
    from evaluation.models import Evaluation, EvaluationCallSet
    from policies.leaderboard import leaderboard

    world = World.objects.get(slug="lettings")
    call_set = EvaluationCallSet.objects.create(world=world, kind="scripted")
    Evaluation.objects.create(
        world=world,
        call_set=call_set,
        candidate=v2,
        baseline=PolicyVersion.objects.get(world__slug="lettings", number=1),
        state="done",
        summary={"wins": 30, "losses": 10, "ties": 0},
    )
    ratings = leaderboard(world=world)
    assert [rating.player for rating in ratings] == ["v2 · trained", "v1 · baseline"]
    assert ratings[0].wins == 30
    assert ratings[0].low <= ratings[0].strength <= ratings[0].high


def _decided(canary, version, *, won: int, lost: int, prefix: str) -> None:
    from policies.models import LiveCall

    for n in range(won + lost):
        LiveCall.objects.create(
            external_id=f"{prefix}-{n}",
            version=version,
            canary=canary,
            outcome="won" if n < won else "lost",
        )


def test_it_gives_each_caused_won_rate_its_interval(v2, lettings):
    canary = canary_start(candidate=v2, share=0.5)
    _decided(canary, v2, won=30, lost=70, prefix="a")
    _decided(canary, canary.live, won=1, lost=0, prefix="b")
    rates = {rate.version.number: rate for rate in caused_won_rates(world=lettings)}
    low, high = rates[2].interval
    assert low < 0.3 < high
    assert 0.15 < high - low < 0.25  # about ±9 points on 100 calls
    assert rates[1].interval is None  # one decided call says nothing


def test_it_says_whether_the_candidates_difference_is_beyond_chance(v2, lettings):
    from policies.canary import canary_comparison

    canary = canary_start(candidate=v2, share=0.5)
    _decided(canary, v2, won=6, lost=4, prefix="a")
    _decided(canary, canary.live, won=5, lost=5, prefix="b")
    close = canary_comparison(canary=canary, rates=caused_won_rates(world=lettings, canary=canary))
    assert close.beyond_chance is False
    assert close.interval[0] < 0 < close.interval[1]
    assert "at chance, not beyond its 95% interval" in close.sentence
    assert "10.0 points above" in close.sentence

    _decided(canary, v2, won=60, lost=20, prefix="c")
    _decided(canary, canary.live, won=20, lost=60, prefix="d")
    clear = canary_comparison(canary=canary, rates=caused_won_rates(world=lettings, canary=canary))
    assert clear.beyond_chance is True
    assert clear.interval[0] > 0
    assert "beyond its 95% interval" in clear.sentence
    assert "at chance" not in clear.sentence


def test_the_release_page_and_api_show_the_interval_and_the_sentence(v2, lettings, owner_client):
    canary = canary_start(candidate=v2, share=0.5)
    _decided(canary, v2, won=6, lost=4, prefix="a")
    _decided(canary, canary.live, won=5, lost=5, prefix="b")
    page = owner_client.get("/release/?world=lettings").content.decode()
    assert "95% interval" in page
    assert "at chance, not beyond its 95% interval" in page
    body = owner_client.get("/api/rl/canary/?pack=lettings").json()
    assert body["comparison"]["beyond_chance"] is False
    assert all(len(rate["interval"]) == 2 for rate in body["won_rates"])


def test_it_says_too_few_calls_before_any_is_decided(v2, lettings):
    from policies.canary import canary_comparison

    canary = canary_start(candidate=v2, share=0.5)
    said = canary_comparison(canary=canary, rates=caused_won_rates(world=lettings, canary=canary))
    assert (said.difference, said.beyond_chance) == (None, False)
    assert said.sentence.startswith("Too few decided calls")
