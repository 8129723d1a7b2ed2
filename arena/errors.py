"""Errors of the Duel, the freeze, a model connection (Environment → Judge) and the judge's fit,
each with the HTTP status an API or page answers with.

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


class ModelConnectionError(Exception):
    """A model role's connection (a judge's or an agent's: provider, model, address, key
    variable) that cannot be stored; the message says why."""

    status = 400


class ModelConnectionBadRequest(ModelConnectionError):
    """Wrong as given: an unknown provider, a bad model name, address or key variable."""

    status = 400


class ModelConnectionConflict(ModelConnectionError):
    """Well formed, but not offered here: a hosted provider whose key is not set on the pod."""

    status = 409


class JudgeFitError(ValueError):
    """Why a world's judge cannot be fitted or measured now, or why items cannot be scored;
    said as is (the API answers 400)."""
