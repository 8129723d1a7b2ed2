"""Throwaway workspaces with committed rows, for tests that a second process or thread must
see (browser tests, concurrency tests).

Such tests write outside any test transaction (pytest-django's transactional flush would
empty the public schema's workspaces), so they ask for neither `db` nor django_db. Mark them
`e2e` or have them use the `committed_db` fixture below: importing this module makes
pytest-django set the test database up for them even when they run alone.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator

import pytest

from tests.conftest import PASSWORD


def _count_committed_tests_as_database_tests() -> None:
    """pytest-django creates the test database only when a collected test asks for `db` (or
    carries django_db); without that, a run of only these tests would point at the
    development database. Count them as needing the default database."""
    from pytest_django import fixtures

    original = fixtures._get_databases_for_test
    if getattr(original, "_levers9_committed", False):
        return

    def databases_for_test(test):
        if test.get_closest_marker("e2e") or "committed_db" in getattr(test, "fixturenames", ()):
            return ("default",), False
        return original(test)

    databases_for_test._levers9_committed = True
    fixtures._get_databases_for_test = databases_for_test


_count_committed_tests_as_database_tests()


@pytest.fixture
def committed_db(django_db_setup, django_db_blocker):
    """Database access outside any test transaction: what is written is committed."""
    with django_db_blocker.unblock():
        yield


@contextlib.contextmanager
def fresh_workspace(prefix: str = "e2e") -> Iterator:
    """A new workspace `<prefix>-<hex>` with an owner `owner@<slug>.test`; dropped after."""
    from levers9.models import Domain, Workspace
    from levers9.services import workspace_create

    slug = f"{prefix}-{secrets.token_hex(4)}"
    try:
        yield workspace_create(slug=slug, admin_email=f"owner@{slug}.test", password=PASSWORD)
    finally:
        # By slug, so a workspace whose creation failed half-way goes too.
        for workspace in Workspace.objects.filter(slug=slug):
            Domain.objects.filter(tenant=workspace).delete()
            workspace.delete(force_drop=True)
