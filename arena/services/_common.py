"""Helpers the arena's service modules share (one copy, imported by each)."""

from __future__ import annotations

from django.db import connection


def _advisory_lock(name: str) -> None:
    """Serialise one kind of write per workspace until the transaction ends."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_advisory_xact_lock(hashtext(%s))", [f"{connection.schema_name}:{name}"]
        )
