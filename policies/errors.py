"""Errors of the policy registry, each with the HTTP status an API or page answers with.

Raised by services before anything is written, so a refused request changes nothing.
"""

from __future__ import annotations


class PolicyError(Exception):
    """Something the caller asked for cannot be done; the message says why."""

    status = 400


class PolicyBadRequest(PolicyError):
    """The request itself is wrong: a bad card count, an unknown pool or provider, a bad URL."""

    status = 400


class PolicyConflict(PolicyError):
    """Well formed, but the version's state refuses it: already serving, not trained, ..."""

    status = 409
