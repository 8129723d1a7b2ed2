"""Test set-up: a real PostgreSQL and two workspaces.

The database is the embedded server (the settings start it) unless DATABASE_URL is set.

The two workspaces are created once per test run: `workspace` is the one under test and
`other_workspace` the one that must always be refused. Tests run inside a transaction per
test as usual; schema switches happen with `schema_context`.
"""

from __future__ import annotations

import os

import pytest
from django.db import connection
from django.test import Client
from django_tenants.utils import get_public_schema_name, schema_context

PASSWORD = "correct-horse-battery"
# The tests' stand-in model servers listen on this machine: an operator would allow it the same
# way (levers9.outbound); tests of the refusal pass their own environment.
os.environ.setdefault("LEVERS9_ENDPOINT_ALLOWED_HOSTS", "127.0.0.1,localhost")
# Judge fits read replies with a base only where a test names one (a tiny base); servers and
# workers the tests start inherit this (the default base would cost every fit minutes).
os.environ["LEVERS9_JUDGE_BASE"] = "none"


def pytest_collection_modifyitems(config, items):
    """Browser tests run last: Playwright keeps an event loop running in the test thread,
    and the channel layer's connection pool must not be first opened on it."""
    items.sort(key=lambda item: item.get_closest_marker("e2e") is not None)


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix):
    """A test database per run (test_levers9_<pid>): two suites on one server, a developer's
    and a helper's, never drop each other's database."""
    from pytest_django.fixtures import _set_suffix_to_test_databases

    _set_suffix_to_test_databases(suffix=str(os.getpid()))


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    from django.test.utils import setup_databases, teardown_databases

    from levers9.services import workspace_create

    created = None
    with django_db_blocker.unblock():
        if not connection.settings_dict["NAME"].startswith("test_"):
            # pytest-django sets a test database up only when a collected test is marked for
            # one; tests that use real processes work on committed rows and are not. Never
            # let them reach the real database.
            created = setup_databases(verbosity=0, interactive=False, aliases={"default"})
        workspace_create(slug="acme", admin_email="owner@acme.test", password=PASSWORD)
        workspace_create(slug="rival", admin_email="owner@rival.test", password=PASSWORD)
    _point_channel_layer_at_test_database()
    yield
    with django_db_blocker.unblock():
        _close_channel_layer_pool()
        if created is not None:
            teardown_databases(created, verbosity=0)


def _close_channel_layer_pool() -> None:
    """channels_postgres keeps pooled connections (bound to event loops long gone); the test
    database cannot be dropped under them, so end them from the server side."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )


def _point_channel_layer_at_test_database() -> None:
    """channels_postgres read its database name at import; the tests use the test database."""
    from channels.layers import channel_layers
    from django.conf import settings

    config = settings.CHANNEL_LAYERS["default"].get("CONFIG", {})
    if "NAME" in config:
        config["NAME"] = connection.settings_dict["NAME"]
    channel_layers.backends = {}


def database_url_for_workers() -> str:
    """The URL a worker process needs to reach this test run's database."""
    db = connection.settings_dict
    return f"postgres://{db['USER']}:{db['PASSWORD'] or ''}@{db['HOST']}:{db['PORT']}/{db['NAME']}"


@pytest.fixture(autouse=True)
def _volumes_in_tmp(settings, tmp_path):
    """Specs, frozen picks and weights go to the test's own folders, never to var/."""
    settings.DATASETS_DIR = tmp_path / "datasets"
    settings.MODELS_DIR = tmp_path / "models"
    # A judge fit reads every reply with a base only where a test asks for one (a tiny base):
    # the default base would cost each fit a conversion and minutes of reading.
    settings.JUDGE_BASE = "none"


@pytest.fixture(autouse=True, scope="session")
def _layer_pool_that_never_grows():
    """The PostgreSQL channel layer's pool opens all its connections at once in tests.

    channels_postgres keeps one pool per process and grows it through tasks of the event loop
    that opened it. Each async test runs a loop of its own, so a pool an earlier test's loop
    opened could not grow once that loop closed, and a later handshake waited on it past its
    timeout (a web process, and a worker's events loop, keep one loop for their life)."""
    from django.conf import settings

    config = settings.CHANNEL_LAYERS["default"].get("CONFIG", {})
    options = config.get("PSYCOPG_OPTIONS")
    if options is not None:
        options["min_size"] = options.get("max_size", 4)


@pytest.fixture(autouse=True)
def _failures_forgotten_after_each_test():
    """Failed sign-ins and wrong tokens are counted per address in the cache. In the database
    cache a test's counts go with its transaction; in Redis (CI's second run) they outlived
    the test, and after the tests that send wrong tokens every request from 127.0.0.1 got 429."""
    _failure_counts_forget()
    yield
    _failure_counts_forget()


def _failure_counts_forget() -> None:
    from django.core.cache import caches

    cache = caches["default"]
    if "redis" not in type(cache).__module__:
        return
    client = cache._cache.get_client(write=True)
    for key in client.scan_iter(match="*levers9:*-failures:*"):
        client.delete(key)


@pytest.fixture(autouse=True)
def _back_to_public_schema():
    """django-tenants leaves the connection in the last request's schema; start clean."""
    yield
    connection.set_schema_to_public()


@pytest.fixture
def workspace(db):
    from levers9.models import Workspace

    return Workspace.objects.get(slug="acme")


@pytest.fixture
def other_workspace(db):
    from levers9.models import Workspace

    return Workspace.objects.get(slug="rival")


@pytest.fixture
def in_workspace(workspace):
    """Run the test body inside the workspace's schema."""
    with schema_context(workspace.schema_name):
        yield workspace
    connection.set_schema(get_public_schema_name())


def make_user(workspace, email: str, role: str):
    from levers9.services import workspace_user_create

    with schema_context(workspace.schema_name):
        return workspace_user_create(email=email, password=PASSWORD, role=role)


def client_for(workspace, email: str | None = None) -> Client:
    """A test client on the workspace's host, signed in as `email` when given."""
    client = Client(HTTP_HOST=f"{workspace.slug}.localhost")
    if email:
        # Through the login page, so the workspace's own schema authenticates the user.
        response = client.post("/login/", {"username": email, "password": PASSWORD})
        assert response.status_code == 302, f"{email} could not sign in to {workspace.slug}"
    return client


@pytest.fixture
def api_schema(db, tmp_path) -> str:
    """The API's OpenAPI schema as YAML, validated on the way: drf-spectacular exits non-zero
    (SystemExit) on any warning or validation error."""
    from django.core.management import call_command

    path = tmp_path / "schema.yml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(path))
    return path.read_text()


def api_token(workspace, email: str) -> str:
    """`email`'s API token in the workspace, made on first use."""
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    with schema_context(workspace.schema_name):
        user = get_user_model().objects.get(username=email)
        return Token.objects.get_or_create(user=user)[0].key


def token_client(workspace, token: str) -> Client:
    """A client on the workspace's host that sends an API token with every request, and no
    session: a token of another workspace must be refused here."""
    return Client(HTTP_HOST=f"{workspace.slug}.localhost", HTTP_AUTHORIZATION=f"Token {token}")


@pytest.fixture
def owner_client(workspace):
    return client_for(workspace, "owner@acme.test")


@pytest.fixture
def reviewer_client(workspace):
    """Signed in as Rita, a reviewer of the workspace."""
    make_user(workspace, "rita@acme.test", "reviewer")
    return client_for(workspace, "rita@acme.test")


@pytest.fixture
def manager_client(workspace):
    """Signed in as Max, a manager of the workspace."""
    make_user(workspace, "max@acme.test", "manager")
    return client_for(workspace, "max@acme.test")


@pytest.fixture
def operator_client(db):
    """The platform's operator: a superuser signed in on the public host (the platform admin)."""
    from django.contrib.auth import get_user_model

    operator = get_user_model().objects.create_superuser(
        "operator@platform.test", "operator@platform.test", PASSWORD
    )
    client = Client(HTTP_HOST="localhost")
    client.force_login(operator)
    return client


@pytest.fixture
def outsider_client(workspace, other_workspace):
    """Signed in to the rival workspace, then pointed at ours with the same cookies."""
    rival = client_for(other_workspace, "owner@rival.test")
    rival.defaults["HTTP_HOST"] = f"{workspace.slug}.localhost"
    return rival
