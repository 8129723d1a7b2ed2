"""The GPU pools in the platform admin (the README sends operators there): a superuser on the
public host lists them with how busy each is and enables or orders them; a workspace's own
owner, on the workspace's host, cannot reach them."""

from __future__ import annotations

from levers9.models import GpuPool
from tests.pages import page_text


def test_an_operator_lists_the_pools_and_what_they_hold(operator_client, workspace):
    html = page_text(operator_client, "/admin/levers9/gpupool/")
    assert "local-cpu" in html
    assert "Cards held" in html
    assert "Waiting requests" in html
    assert operator_client.get("/admin/levers9/cardallocation/").status_code == 200


def test_an_operator_disables_a_pool_from_the_list(operator_client, workspace):
    pool = GpuPool.objects.get(name="local-cpu")
    saved = operator_client.post(
        "/admin/levers9/gpupool/",
        {
            "form-TOTAL_FORMS": "1",
            "form-INITIAL_FORMS": "1",
            "form-0-id": str(pool.pk),
            "form-0-position": "3",
            "_save": "Save",
        },
    )
    assert saved.status_code == 302
    pool.refresh_from_db()
    assert (pool.enabled, pool.position) == (False, 3)


def test_a_workspace_owner_cannot_reach_the_pools(owner_client, outsider_client, workspace):
    for client in (owner_client, outsider_client):
        for url in ("/admin/levers9/gpupool/", "/admin/levers9/cardallocation/"):
            assert client.get(url).status_code in {302, 403, 404}
