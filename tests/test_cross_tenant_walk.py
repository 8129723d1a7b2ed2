"""Every operation of the OpenAPI schema, walked with another workspace's credentials: the
rival's token and the rival's session on acme's host are refused (401/403: never a 2xx, never a
5xx), and the rival's token on its own host, asked for acme's ids, never shows acme's data.

The walk reads the schema itself, so an operation added later is walked too."""

from __future__ import annotations

import json
import re

import pytest
from django.test import Client
from django_tenants.utils import schema_context
from drf_spectacular.generators import SchemaGenerator

from arena.models import Call, World
from arena.services.calls import calls_import
from arena.services.worlds import world_create
from tests.conftest import api_token, token_client

MARKER = "acme-secret"
SECRET_CALL = {
    "id": f"{MARKER}-call",
    "outcome": "won",
    "turns": [
        {"speaker": "agent", "text": f"Good morning, {MARKER} lettings."},
        {"speaker": "customer", "text": "Hello, I saw the flat on Elm Street."},
    ],
}
METHODS = ("get", "post", "put", "patch", "delete")


def _operations(workspace) -> list[tuple[str, str, dict]]:
    # Inside a workspace: building the schema reads a tenant table or two.
    with schema_context(workspace.schema_name):
        schema = SchemaGenerator().get_schema(request=None, public=True)
    return [
        (method, path, operation)
        for path, item in schema["paths"].items()
        for method, operation in item.items()
        if method in METHODS
    ]


@pytest.fixture
def acme_ids(workspace) -> dict[str, str]:
    """Real ids of acme's rows, for every kind of path parameter the schema names."""
    with schema_context(workspace.schema_name):
        world = world_create(slug=f"{MARKER}-pack", name=f"{MARKER} world", description=MARKER)
        calls_import(world=world, text=json.dumps(SECRET_CALL), source="test")
        call = Call.objects.get(external_id=SECRET_CALL["id"])
        assert World.objects.filter(slug=f"{MARKER}-pack").exists()
    return {
        "id": str(call.pk),
        "pack": world.slug,
        "call_id": SECRET_CALL["id"],
        "number": "1",
        "position": "0",
        "job_id": "1",
        "version_id": "1",
    }


def _url(path: str, ids: dict[str, str]) -> str:
    return re.sub(r"\{(\w+)\}", lambda match: ids.get(match.group(1), "1"), path)


def _call(client: Client, method: str, url: str):
    if method == "get":
        return client.get(url)
    return getattr(client, method)(url, "{}", content_type="application/json")


def test_the_walk_covers_every_operation_of_the_schema(workspace):
    operations = _operations(workspace)
    assert len(operations) >= 40
    assert ("post", "/api/rl/jobs/{id}/resume/") in {(m, p) for m, p, _ in operations}


def test_a_rival_token_is_refused_on_every_operation(
    settings, workspace, other_workspace, acme_ids
):
    # Each operation's own refusal, not the wrong-token allowance's 429 (levers9.throttles).
    settings.LEVERS9_TOKEN_FAILURES_PER_ADDRESS = 10_000
    client = token_client(workspace, api_token(other_workspace, "owner@rival.test"))
    leaks = {}
    for method, path, _operation in _operations(workspace):
        response = _call(client, method, _url(path, acme_ids))
        if response.status_code != 401:
            leaks[f"{method.upper()} {path}"] = response.status_code
    assert leaks == {}


def test_a_rival_session_is_refused_on_every_operation(workspace, outsider_client, acme_ids):
    leaks = {}
    for method, path, _operation in _operations(workspace):
        response = _call(outsider_client, method, _url(path, acme_ids))
        if response.status_code not in {401, 403}:
            leaks[f"{method.upper()} {path}"] = response.status_code
    assert leaks == {}


def test_a_rival_token_on_its_own_host_never_reads_acmes_rows(other_workspace, acme_ids):
    client = token_client(other_workspace, api_token(other_workspace, "owner@rival.test"))
    problems = {}
    for method, path, _operation in _operations(other_workspace):
        if method != "get":
            continue  # the rival's own writes are the rival's business; reads are the leak
        response = _call(client, method, _url(path, acme_ids))
        body = b"".join(response.streaming_content) if response.streaming else response.content
        if response.status_code >= 500 or MARKER.encode() in body:
            problems[f"GET {path}"] = response.status_code
    assert problems == {}
