"""create_workspace: schema, domain, owner, default world and v1 · baseline; idempotent."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django_tenants.utils import schema_context

from levers9.models import Domain, Workspace


def _schema_exists(name: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM information_schema.schemata WHERE schema_name = %s", [name])
        return cursor.fetchone() is not None


def test_it_creates_everything_a_workspace_needs(db, capsys):
    call_command(
        "create_workspace",
        "north-lets",
        "--admin-email",
        "Boss@North.test",
        "--password",
        "a-long-enough-password",
    )
    workspace = Workspace.objects.get(slug="north-lets")
    assert workspace.schema_name == "ws_north_lets"
    assert _schema_exists("ws_north_lets")
    assert Domain.objects.get(tenant=workspace).domain == "north-lets.localhost"
    with schema_context(workspace.schema_name):
        from django.contrib.auth import get_user_model

        from arena.models import World
        from levers9.roles import user_role
        from policies.models import PolicyVersion

        owner = get_user_model().objects.get()
        assert owner.username == "boss@north.test"
        assert user_role(owner) == "owner"
        world = World.objects.get(slug="lettings")
        assert world.scenarios.count() >= 2
        assert [v.label for v in PolicyVersion.objects.all()] == ["v1 · baseline"]
    assert "created" in capsys.readouterr().out


def test_it_changes_nothing_when_run_twice(workspace, capsys):
    call_command(
        "create_workspace", "acme", "--admin-email", "x@y.test", "--password", "zzzzzzzzzz"
    )
    assert "already exists" in capsys.readouterr().out
    with schema_context(workspace.schema_name):
        from django.contrib.auth import get_user_model

        from policies.models import PolicyVersion

        assert get_user_model().objects.filter(username="x@y.test").count() == 0
        assert PolicyVersion.objects.count() == 1


@pytest.mark.parametrize("slug", ["Bad Slug", "public", "9lives", "a"])
def test_it_refuses_a_bad_slug_with_a_clear_message(db, slug):
    with pytest.raises(CommandError, match="not a usable workspace name"):
        call_command("create_workspace", slug, "--admin-email", "a@b.test", "--password", "x" * 12)
    assert not Workspace.objects.filter(slug=slug).exclude(schema_name="public").exists()


def test_it_refuses_a_weak_password_before_creating_anything(db):
    with pytest.raises(CommandError, match="too short"):
        call_command("create_workspace", "weakling", "--admin-email", "a@b.test", "--password", "x")
    assert not Workspace.objects.filter(slug="weakling").exists()
