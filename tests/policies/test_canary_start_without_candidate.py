"""Release → Start a canary, when the world has no other answering version: the form's only
option is "no other answering version", and sending it answered a bare 404 page (found by the
every-control browser test). It now comes back to Release saying why."""

from __future__ import annotations

from django_tenants.utils import schema_context

from policies.models import Canary


def test_it_says_why_no_canary_starts_without_a_candidate(owner_client, workspace):
    response = owner_client.post(
        "/release/canary/start/", {"world": "lettings", "candidate": "", "share_percent": "10"}
    )
    assert response.status_code == 302
    page = owner_client.get(response["Location"]).content.decode()
    assert "No candidate chosen: no other version of Lettings can answer yet." in page
    with schema_context(workspace.schema_name):
        assert not Canary.objects.exists()


def test_another_workspace_cannot_start_one(outsider_client, workspace):
    response = outsider_client.post("/release/canary/start/", {"world": "lettings"})
    assert response.status_code in {302, 403, 404}
    with schema_context(workspace.schema_name):
        assert not Canary.objects.exists()


def test_another_worlds_version_is_refused_on_the_page(owner_client, workspace):
    """A candidate of another world (a stale form, a second tab) answered a 404 page."""
    from arena.services.worlds import world_create
    from policies.models import PolicyVersion

    with schema_context(workspace.schema_name):
        world_create(slug="charity", name="Charity")
        theirs = PolicyVersion.objects.get(world__slug="charity", number=1)
    for candidate in (str(theirs.pk), "not-a-number"):
        response = owner_client.post(
            "/release/canary/start/",
            {"world": "lettings", "candidate": candidate, "share_percent": "10"},
        )
        assert response.status_code == 302
        page = owner_client.get(response["Location"]).content.decode()
        assert "That candidate is not a version of Lettings" in page
    with schema_context(workspace.schema_name):
        assert not Canary.objects.exists()
