#!/usr/bin/env python
"""Levers9 Arena's command line. Without DATABASE_URL it starts the embedded database first."""

from __future__ import annotations

import os
import sys

# Commands that must not start the embedded server on their own.
_NO_DATABASE_COMMANDS = {"embeddedpg", "help", "--help", "-h", "version", "--version"}


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    command = sys.argv[1] if len(sys.argv) > 1 else "help"
    if command in _NO_DATABASE_COMMANDS:
        os.environ["LEVERS9_EMBEDDED_PG_MANUAL"] = "1"
    elif not os.environ.get("DATABASE_URL"):
        from levers9 import embedded_pg

        try:
            embedded_pg.start(say=lambda message: sys.stderr.write(message + "\n"))
        except embedded_pg.EmbeddedPostgresError as error:
            sys.exit(f"The embedded PostgreSQL server could not start: {error}")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
