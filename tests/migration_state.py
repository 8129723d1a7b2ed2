"""Moving a workspace's schema to a migration state inside a test, with Django's
MigrationExecutor: the test's transaction rolls it all back, DDL included (PostgreSQL)."""

from __future__ import annotations

from django.db import connection
from django.db.migrations.executor import MigrationExecutor


def migrate_to(targets: list[tuple[str, str]]):
    """Migrate the current schema to `targets` and return the models as they were there."""
    # Rows the test wrote first (deferred foreign-key checks pending) would keep the way back
    # from altering their tables, as they would the way forward below.
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    # Rows of that shape are written next and the tables change again in this transaction:
    # PostgreSQL refuses to alter a table while deferred checks on its rows are pending.
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    return executor.loader.project_state(targets).apps


def migrate_to_latest() -> None:
    migrate_to(MigrationExecutor(connection).loader.graph.leaf_nodes())
