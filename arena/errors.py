"""Errors of the Duel and the freeze, each with the HTTP status an API or page answers with.

Raised by services and selectors before anything is written, so a refused request never
loses what was already saved.
"""

from __future__ import annotations


class DuelError(Exception):
    """Something the caller asked for cannot be done; the message says why."""

    status = 400


class DuelBadInput(DuelError):
    """The request itself is wrong: an unknown reason, side, dimension, move or scenario."""

    status = 400


class DuelNotFound(DuelError):
    """No such pair, reply or version in this workspace."""

    status = 404


class DuelConflict(DuelError):
    """The request is well formed but the pair's state refuses it (not held, frozen, ...)."""

    status = 409


class EmptyFreeze(DuelConflict):
    """There is no new pick to freeze."""
