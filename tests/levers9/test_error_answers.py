"""The platform's error answers: the database out of reach is a 503 with Retry-After (JSON under
/api/, a plain page elsewhere, never "Server Error (500)"); a body over the upload limit is a
413 naming it, before anything reads the body; a NUL in a path, an unknown host and a multipart
body without a boundary are 4xx JSON under /api/; every 429 says when to try again.

The database is made unreachable in this process only (its connection raises), never stopped:
other test runs share the server.
"""

from __future__ import annotations

import io
import json
from unittest import mock

import pytest
from django.core.handlers.asgi import ASGIRequest
from django.core.handlers.exception import convert_exception_to_response
from django.db import InterfaceError, OperationalError, connections
from django.http import HttpResponse
from django.test import Client
from django_tenants.utils import schema_context

from arena.models import Call
from levers9.middleware import (
    DATABASE_RETRY_AFTER_S,
    UPLOAD_LIMIT_NAME,
    UploadLimitMiddleware,
)
from levers9.models import Workspace
from tests.conftest import PASSWORD

A_CALL = {
    "id": "limit-call",
    "outcome": "won",
    "turns": [{"speaker": "agent", "text": "Good morning, Acme Lettings."}],
}


def _signed_in(workspace) -> Client:
    """A client that gets the answer, not the exception: Django's test client re-raises what
    a view raised, where a server answers."""
    client = Client(HTTP_HOST=f"{workspace.slug}.localhost", raise_request_exception=False)
    client.post("/login/", {"username": "owner@acme.test", "password": PASSWORD})
    return client


def _database_gone(error: Exception):
    """Every new query of this process fails as with the server stopped."""
    return mock.patch.object(connections["default"], "ensure_connection", side_effect=error)


# --- the database out of reach -------------------------------------------------------------


@pytest.mark.parametrize(
    "error",
    [
        OperationalError('connection to server at "127.0.0.1", port 5432 failed: refused'),
        InterfaceError("connection already closed"),
    ],
)
def test_it_answers_the_api_with_a_json_503_while_the_database_is_gone(workspace, error):
    client = _signed_in(workspace)
    with _database_gone(error):
        response = client.get("/api/rl/jobs/")
    assert response.status_code == 503, response.content
    assert response["Content-Type"].startswith("application/json")
    assert response["Retry-After"] == str(DATABASE_RETRY_AFTER_S)
    assert "database cannot be reached" in response.json()["detail"]


def test_it_answers_a_page_with_a_plain_503_while_the_database_is_gone(workspace):
    client = _signed_in(workspace)
    with _database_gone(OperationalError("connection refused")):
        response = client.get("/")
    assert response.status_code == 503
    assert response["Retry-After"] == str(DATABASE_RETRY_AFTER_S)
    assert response["Content-Type"].startswith("text/html")
    assert b"Briefly unavailable" in response.content
    assert b"Server Error" not in response.content


def test_it_answers_503_when_the_database_goes_in_the_middle_of_an_api_view(workspace):
    # The workspace was found; the view's own query is the one that fails.
    client = _signed_in(workspace)
    with mock.patch(
        "levers9.jobs.api.JobViewSet.get_queryset",
        side_effect=OperationalError("server closed the connection unexpectedly"),
    ):
        response = client.get("/api/rl/jobs/")
    assert response.status_code == 503, response.content
    assert response["Retry-After"] == str(DATABASE_RETRY_AFTER_S)
    assert "detail" in response.json()


def test_it_answers_503_when_the_database_goes_in_the_middle_of_a_page(workspace):
    client = _signed_in(workspace)
    with mock.patch(
        "levers9.game.home_context", side_effect=OperationalError("terminating connection")
    ):
        response = client.get("/")
    assert response.status_code == 503
    assert response["Retry-After"] == str(DATABASE_RETRY_AFTER_S)


def test_any_other_error_stays_a_json_500_with_an_id(workspace):
    client = _signed_in(workspace)
    with mock.patch("levers9.jobs.api.JobViewSet.get_queryset", side_effect=KeyError("bug")):
        response = client.get("/api/rl/jobs/")
    assert response.status_code == 500
    assert "error_id" in response.json()
    assert "Retry-After" not in response


# --- the upload limit ------------------------------------------------------------------------


def test_it_refuses_an_import_over_the_limit_with_a_413_before_parsing(
    settings, owner_client, workspace
):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    body = (json.dumps(A_CALL) + "\n") * 20  # valid calls, over 1,000 bytes
    with mock.patch("arena.api.calls_import") as service:
        response = owner_client.post(
            "/api/rl/packs/lettings/calls/import/", body, content_type="application/jsonl"
        )
    assert response.status_code == 413, response.content
    assert response.json()["limit"] == UPLOAD_LIMIT_NAME
    assert response.json()["limit_value"] == 1000
    assert "1000 bytes" in response.json()["detail"]
    service.assert_not_called()
    with schema_context(workspace.schema_name):
        assert not Call.objects.exists()


def test_it_refuses_a_preference_import_over_the_limit(settings, owner_client):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100
    response = owner_client.post(
        "/api/rl/packs/lettings/preferences/import/", "x" * 101, content_type="application/jsonl"
    )
    assert response.status_code == 413
    assert response.json()["limit"] == UPLOAD_LIMIT_NAME


def test_it_takes_a_body_at_the_limit(settings, owner_client, workspace):
    body = json.dumps(A_CALL)
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = len(body.encode())
    response = owner_client.post(
        "/api/rl/packs/lettings/calls/import/?convert=real-calls",
        body,
        content_type="application/jsonl",
    )
    assert response.status_code == 200, response.content
    assert response.json()["created"] == 1


def test_it_refuses_a_page_form_over_the_limit_as_plain_text(settings, owner_client):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100
    response = owner_client.post("/login/", {"username": "x" * 200, "password": "y"})
    assert response.status_code == 413
    assert response["Content-Type"].startswith("text/plain")
    assert UPLOAD_LIMIT_NAME.encode() in response.content


def _chunked_request(body: bytes) -> ASGIRequest:
    """As daphne hands over a chunked body: no Content-Length, the whole body in a file."""
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/api/rl/packs/lettings/calls/import/",
        "headers": [(b"host", b"acme.localhost"), (b"content-type", b"application/jsonl")],
        "query_string": b"",
    }
    return ASGIRequest(scope, io.BytesIO(body))


def _reads_the_body(request) -> HttpResponse:
    return HttpResponse(f"read {len(request.read())} bytes")


def test_it_stops_reading_a_chunked_body_at_the_limit(settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    guarded = UploadLimitMiddleware(convert_exception_to_response(_reads_the_body))
    response = guarded(_chunked_request(b"x" * 5000))
    assert response.status_code == 413
    assert json.loads(response.content)["limit_value"] == 1000
    assert guarded(_chunked_request(b"x" * 1000)).content == b"read 1000 bytes"


def test_a_chunked_read_never_asks_the_stream_for_more_than_the_limit(settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    request = _chunked_request(b"x" * 10_000_000)
    asked: list[int] = []
    stream = request._stream
    original_read = stream.read

    def read(size=-1):
        asked.append(size)
        return original_read(size)

    stream.read = read
    UploadLimitMiddleware(convert_exception_to_response(_reads_the_body))(request)
    assert asked
    assert max(asked) <= 1001


# --- no 5xx on these inputs ----------------------------------------------------------------


def test_a_nul_in_an_api_path_is_a_400_naming_the_path(owner_client):
    response = owner_client.post(
        "/api/rl/live/calls/a%00b/outcome/", {"outcome": "won"}, content_type="application/json"
    )
    assert response.status_code == 400, response.content
    assert "path" in response.json()


def test_a_nul_in_a_page_path_is_a_400(owner_client):
    response = owner_client.get("/calls/a%00b/")
    assert response.status_code == 400


@pytest.mark.parametrize("host", ["ACME.localhost", "acme.localhost.", "nobody.localhost"])
def test_an_unknown_host_under_api_is_a_json_404(host, workspace):
    response = Client(HTTP_HOST=host).get("/api/rl/me/")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("application/json")
    assert "no workspace at this host" in response.json()["detail"]


def test_an_unknown_host_elsewhere_stays_a_page(workspace):
    response = Client(HTTP_HOST="nobody.localhost").get("/")
    assert response.status_code == 404
    assert not response["Content-Type"].startswith("application/json")


@pytest.mark.parametrize(
    "path",
    ["/api/rl/train/move-strategy/", "/api/rl/packs/lettings/calls/import/", "/api/rl/picks/"],
)
def test_multipart_without_a_boundary_is_a_json_4xx(path, owner_client):
    response = owner_client.post(path, b"--x\r\n", content_type="multipart/form-data")
    assert 400 <= response.status_code < 500, response.content
    assert "detail" in response.json()


# --- every 429 says when to try again ------------------------------------------------------


def test_the_job_limits_429_carries_retry_after(owner_client, workspace):
    Workspace.objects.filter(pk=workspace.pk).update(queued_jobs_limit=0)
    response = owner_client.post(
        "/api/rl/train/move-strategy/", {"pack": "lettings"}, content_type="application/json"
    )
    assert response.status_code == 429, response.content
    assert response.json()["limit"] == "queued_jobs_limit"
    assert int(response["Retry-After"]) > 0


def test_the_schema_documents_413_and_503(owner_client):
    schema = owner_client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    imports = schema["paths"]["/api/rl/packs/{pack}/calls/import/"]["post"]["responses"]
    assert "413" in imports
    assert "503" in schema["paths"]["/api/rl/jobs/"]["get"]["responses"]
