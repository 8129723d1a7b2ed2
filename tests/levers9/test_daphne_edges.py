"""What reaches our code through a real daphne on loopback, and what it answers: a body sent
chunked (Transfer-Encoding: chunked, no Content-Length) is read by every endpoint that takes a
body, up to the upload limit, with a JSON 413 past it; an over-long request line is a 414 and an
over-long header a 431 (levers9.daphne_limits), where the connection was closed unanswered.

The limit is 1 MiB in this server (LEVERS9_UPLOAD_MAX_MB=1), so a body past it is small."""

from __future__ import annotations

import contextlib
import http.client
import io
import json
import os
import signal
import socket
import subprocess

import pytest
from django_tenants.utils import schema_context

from levers9.middleware import UPLOAD_LIMIT_NAME
from tests.conftest import database_url_for_workers
from tests.e2e.workspaces import fresh_workspace
from tests.processes import free_port, start_daphne, wait_until
from tests.recorded_calls import two_turn_call

pytestmark = pytest.mark.slow

LIMIT = 1024 * 1024


@pytest.fixture(scope="module")
def server(django_db_setup, tmp_path_factory):
    """daphne on a free port, on this test run's database; its log is shown when it fails."""
    port = free_port()
    log = tmp_path_factory.mktemp("daphne") / "daphne.log"
    env = {
        **os.environ,
        "DATABASE_URL": database_url_for_workers(),
        "LEVERS9_UPLOAD_MAX_MB": str(LIMIT // (1024 * 1024)),
    }
    env.pop("REDIS_URL", None)
    with open(log, "wb") as output:
        process = start_daphne(port, env=env, output=output)

    def answers() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"daphne exited: {log.read_text()[-3000:]}")
        try:
            return _send(port, "localhost", "GET", "/").status < 500
        except OSError:
            return False

    wait_until(answers, timeout=60, what="daphne to answer")
    yield port
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def workspace_with_token(django_db_setup, django_db_blocker):
    """One committed workspace for the module (making one costs seconds): each test makes
    worlds of its own names in it."""
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    with django_db_blocker.unblock(), fresh_workspace("chunked") as created:
        workspace = created.workspace
        with schema_context(workspace.schema_name):
            owner = get_user_model().objects.get(username=f"owner@{workspace.slug}.test")
            token = Token.objects.create(user=owner).key
        yield f"{workspace.slug}.localhost", token


class Answer:
    def __init__(self, response: http.client.HTTPResponse) -> None:
        self.status = response.status
        self.headers = response.headers
        self.body = response.read()

    def json(self):
        return json.loads(self.body)


def _send(port: int, host: str, method: str, path: str, body=None, **headers: str) -> Answer:
    """One request on a fresh connection. A body given as a list of byte strings is sent
    chunked, a chunk each, with no Content-Length."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        chunked = isinstance(body, list)
        connection.request(
            method,
            path,
            body=iter(body) if chunked else body,
            headers={"Host": host, **headers},
            encode_chunked=chunked,
        )
        return Answer(connection.getresponse())
    finally:
        connection.close()


def _chunks(data: bytes, size: int = 1000) -> list[bytes]:
    return [data[start : start + size] for start in range(0, len(data), size)]


def _api(token: str, content_type: str = "application/json") -> dict[str, str]:
    return {"Authorization": f"Token {token}", "Content-Type": content_type}


# --- chunked bodies --------------------------------------------------------------------------


def test_a_chunked_json_body_makes_a_world(server, workspace_with_token):
    host, token = workspace_with_token
    body = json.dumps({"slug": "chunked-world", "name": "Sent in chunks"}).encode()
    answer = _send(server, host, "POST", "/api/rl/packs/", _chunks(body, 10), **_api(token))
    assert answer.status == 201, answer.body
    assert answer.json()["slug"] == "chunked-world"


def test_a_chunked_import_imports_its_call(server, workspace_with_token):
    host, token = workspace_with_token
    world = json.dumps({"slug": "chunked-calls", "name": "Chunked calls"}).encode()
    assert _send(server, host, "POST", "/api/rl/packs/", world, **_api(token)).status == 201
    line = (json.dumps(two_turn_call("chunked-call")) + "\n").encode()
    answer = _send(
        server,
        host,
        "POST",
        "/api/rl/packs/chunked-calls/calls/import/",
        _chunks(line, 7),
        **_api(token, "application/jsonl"),
    )
    assert answer.status == 200, answer.body
    assert answer.json()["created"] == 1
    # The same bytes with a Content-Length: the same call, nothing new.
    again = _send(
        server,
        host,
        "POST",
        "/api/rl/packs/chunked-calls/calls/import/",
        line,
        **_api(token, "application/jsonl"),
    )
    assert again.status == 200, again.body
    assert again.json()["unchanged"] == 1


def test_a_chunked_body_over_the_limit_is_a_json_413(server, workspace_with_token):
    host, token = workspace_with_token
    body = b"x" * (LIMIT + 1)
    answer = _send(
        server,
        host,
        "POST",
        "/api/rl/packs/lettings/calls/import/",
        _chunks(body, 64 * 1024),
        **_api(token, "application/jsonl"),
    )
    assert answer.status == 413, answer.body
    assert answer.headers["Content-Type"].startswith("application/json")
    assert answer.json()["limit"] == UPLOAD_LIMIT_NAME
    assert answer.json()["limit_value"] == LIMIT


def test_a_chunked_body_at_the_limit_is_read(server, workspace_with_token):
    host, token = workspace_with_token
    # A world padded with spaces to the limit exactly.
    start = b'{"slug": "padded-world", "name": "Padded"'
    body = start + b" " * (LIMIT - len(start) - 1) + b"}"
    answer = _send(server, host, "POST", "/api/rl/packs/", _chunks(body, 64 * 1024), **_api(token))
    assert answer.status == 201, answer.body
    assert answer.json()["slug"] == "padded-world"


def test_a_chunked_multipart_form_is_read(server, workspace_with_token):
    host, token = workspace_with_token
    boundary = "chunkedboundary"
    form = (
        f"--{boundary}\r\n"
        'Content-Disposition: form-data; name="slug"\r\n\r\n'
        "chunked-form\r\n"
        f"--{boundary}\r\n"
        'Content-Disposition: form-data; name="name"\r\n\r\n'
        "A form in chunks\r\n"
        f"--{boundary}--\r\n"
    ).encode()
    content_type = f"multipart/form-data; boundary={boundary}"
    answer = _send(
        server, host, "POST", "/api/rl/packs/", _chunks(form, 20), **_api(token, content_type)
    )
    assert answer.status == 201, answer.body
    assert answer.json()["name"] == "A form in chunks"


def test_a_chunked_body_from_a_stream_that_cannot_seek_is_read_too(settings):
    """Another server's stream (WSGI's cannot seek) is copied, not read twice."""
    from django.core.handlers.asgi import ASGIRequest
    from django.http import HttpResponse

    from levers9.middleware import UploadLimitMiddleware

    class Unseekable(io.RawIOBase):
        def __init__(self, data: bytes) -> None:
            self.data = io.BytesIO(data)

        def readable(self) -> bool:
            return True

        def readinto(self, buffer) -> int:
            chunk = self.data.read(len(buffer))
            buffer[: len(chunk)] = chunk
            return len(chunk)

    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    scope = {"type": "http", "method": "POST", "path": "/", "headers": [], "query_string": b""}
    seen = {}

    def view(request):
        seen["length"] = request.META["CONTENT_LENGTH"]
        seen["body"] = request.body
        return HttpResponse()

    UploadLimitMiddleware(view)(ASGIRequest(scope, Unseekable(b"y" * 1000)))
    assert seen == {"length": "1000", "body": b"y" * 1000}


# --- over-long request lines and headers ---------------------------------------------------


def _raw(port: int, request: bytes) -> tuple[str, bytes]:
    """Sends `request` as it is and reads the answer to its end: (status line, body). The server
    may answer before the request is all sent; what it says is read all the same."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as connection:
        # Answered and closed before the rest was sent: the answer is there all the same.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            connection.sendall(request)
        received = b""
        while chunk := connection.recv(65536):
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    return head.split(b"\r\n")[0].decode(), body


@pytest.mark.parametrize(
    "target", ["/api/rl/packs/" + "a" * 100_000, "/duel/?scenario=" + "a" * 100_000]
)
def test_a_100_kb_address_is_a_414(server, target):
    request = f"GET {target} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode()
    status, body = _raw(server, request)
    assert status == "HTTP/1.1 414 URI Too Long", (status, body[:200])
    assert json.loads(body)["limit_bytes"] == 16384


def test_a_100_kb_header_is_a_431(server):
    request = f"GET / HTTP/1.1\r\nHost: localhost\r\nX-Long: {'a' * 100_000}\r\n\r\n".encode()
    status, body = _raw(server, request)
    assert status == "HTTP/1.1 431 Request Header Fields Too Large", (status, body[:200])
    assert "header" in json.loads(body)["detail"]


def test_headers_too_long_together_are_a_431(server):
    headers = "".join(f"X-Part-{number}: {'a' * 1000}\r\n" for number in range(20))
    request = f"GET / HTTP/1.1\r\nHost: localhost\r\n{headers}\r\n".encode()
    status, _ = _raw(server, request)
    assert status == "HTTP/1.1 431 Request Header Fields Too Large", status


def test_an_address_within_the_limit_is_served(server):
    request = f"GET /?q={'a' * 8000} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    status, _ = _raw(server, request.encode())
    assert status.startswith("HTTP/1.1 200"), status
