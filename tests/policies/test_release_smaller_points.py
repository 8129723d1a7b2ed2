"""The smaller points of issue 40 (point 9): the canary's share errors speak the unit the user
typed (percent on the page and in the admin, a fraction in the API); a candidate number the
world lacks is a 400 naming `candidate`; the admin's release refusal names the version once;
Policies' Make live warns "not evaluated" as the admin does, from one function."""

from __future__ import annotations

import pytest
from django_tenants.utils import schema_context

from arena.models import World
from policies.canary import canary_share_from_percent
from policies.live import LiveError, make_live_warnings
from policies.models import Canary, PolicyVersion
from policies.services import version_register

VERSIONS = "/admin/policies/policyversion/"


def _second(world: World) -> PolicyVersion:
    return version_register(
        world=world,
        name="trained",
        parent=PolicyVersion.objects.get(world=world, number=1),
        move_strategy={"kind": "scripted"},
        learned_from={"algorithm": "q-learning-online"},
    )


@pytest.fixture
def candidate(workspace):
    with schema_context(workspace.schema_name):
        return _second(World.objects.get(slug="lettings"))


def _messages(response) -> list[str]:
    return [str(message) for message in response.wsgi_request._messages]


def test_the_share_in_percent_is_refused_in_percent():
    assert canary_share_from_percent(10) == pytest.approx(0.1)
    for percent in (0, 100, 150, -5):
        with pytest.raises(LiveError, match="percent") as refused:
            canary_share_from_percent(percent)
        assert "between 0 and 1" not in str(refused.value)


def test_the_release_page_speaks_percent(owner_client, candidate, workspace):
    response = owner_client.post(
        "/release/canary/start/",
        {"world": "lettings", "candidate": str(candidate.pk), "share_percent": "150"},
    )
    page = owner_client.get(response["Location"]).content.decode()
    assert "100 percent" in page
    assert "between 0 and 1" not in page
    with schema_context(workspace.schema_name):
        assert not Canary.objects.exists()


def test_the_admin_speaks_percent(owner_client, candidate):
    response = owner_client.post(
        VERSIONS,
        {
            "action": "canary",
            "_selected_action": [candidate.pk],
            "post": "yes",
            "share_percent": "150",
        },
    )
    said = " ".join(_messages(response))
    assert "100 percent" in said
    assert "between 0 and 1" not in said


def test_the_api_speaks_a_fraction_and_names_the_field(owner_client, candidate, workspace):
    refused = owner_client.post(
        "/api/rl/canary/start/", {"candidate": candidate.number, "share": 10}, "application/json"
    )
    assert refused.status_code == 400
    assert "0.1 for 10%" in refused.json()["share"][0]
    missing = owner_client.post(
        "/api/rl/canary/start/", {"candidate": 99, "share": 0.1}, "application/json"
    )
    assert missing.status_code == 400
    assert "v99" in missing.json()["candidate"][0]
    assert "v2" in missing.json()["candidate"][0]  # the versions it could have named
    with schema_context(workspace.schema_name):
        assert not Canary.objects.exists()


def test_another_workspace_starts_no_canary(outsider_client, candidate, workspace):
    response = outsider_client.post(
        "/api/rl/canary/start/", {"candidate": candidate.number, "share": 0.1}, "application/json"
    )
    assert response.status_code in {401, 403}
    with schema_context(workspace.schema_name):
        assert not Canary.objects.exists()


def test_the_admin_release_refusal_names_the_version_once(owner_client, candidate):
    response = owner_client.post(
        VERSIONS, {"action": "release", "_selected_action": [candidate.pk]}
    )
    said = [message for message in _messages(response) if "release" in message]
    assert said, _messages(response)
    assert all(message.count(candidate.label) == 1 for message in said), said
    assert all(message.lower().count("v2") == 1 for message in said), said


def test_policies_make_live_warns_as_the_admin_does(owner_client, candidate, workspace):
    page = owner_client.get("/policies/?world=lettings").content.decode()
    with schema_context(workspace.schema_name):
        warnings = make_live_warnings(version=candidate, evaluation=None)
    assert any("not been evaluated" in warning for warning in warnings)
    step = owner_client.post(
        VERSIONS, {"action": "make_live", "_selected_action": [candidate.pk]}
    ).content.decode()
    for warning in warnings:
        assert warning in page
        assert warning in step


def test_another_workspace_sees_no_warning_nor_release(outsider_client, candidate, workspace):
    assert outsider_client.get("/policies/?world=lettings").status_code in {302, 403}
    response = outsider_client.post(
        VERSIONS, {"action": "release", "_selected_action": [candidate.pk]}
    )
    assert response.status_code in {302, 403}
    assert not any("release" in message for message in _messages(response))
