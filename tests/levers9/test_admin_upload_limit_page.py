"""A body over the upload limit in the admin gets the admin's own page, not bare text (issue 41,
point 5). The middleware refuses such a body before any view: under /admin/ its 413 is
levers9.upload_limit_page's page."""

from __future__ import annotations

from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import RequestFactory
from django_tenants.utils import schema_context

from arena.models import Call
from arena.services.worlds import world_create
from levers9.upload_limit_page import admin_upload_too_large_page

DETAIL = "The body is larger than the upload limit: at most 100 bytes."


def test_it_answers_an_admin_path_with_an_admin_page():
    request = RequestFactory().post("/admin/arena/world/7/import-calls/")
    page = admin_upload_too_large_page(request, DETAIL)
    assert page.status_code == 413
    html = page.content.decode()
    assert 'id="site-name"' in html  # the admin's own frame
    assert "Levers9 Arena" in html
    assert DETAIL in html
    assert 'href="/admin/arena/world/7/import-calls/"' in html  # back to the form
    assert "File too large" in html


def test_it_leaves_other_paths_to_the_caller():
    assert admin_upload_too_large_page(RequestFactory().post("/api/rl/packs/"), DETAIL) is None
    assert admin_upload_too_large_page(RequestFactory().post("/world/new/"), DETAIL) is None


def test_an_admin_upload_over_the_limit_gets_the_admin_page(settings, owner_client, workspace):
    with schema_context(workspace.schema_name):
        world = world_create(slug="dealer", name="Car dealer")
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    upload = SimpleUploadedFile("big.jsonl", b"x" * 2000)
    response = owner_client.post(f"/admin/arena/world/{world.pk}/import-calls/", {"file": upload})
    assert response.status_code == 413
    assert response["Content-Type"].startswith("text/html")
    assert b'id="site-name"' in response.content
    assert b"LEVERS9_UPLOAD_MAX_MB" in response.content
    with schema_context(workspace.schema_name):
        assert not Call.objects.exists()
