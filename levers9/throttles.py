"""Throttles: API writes (POST, PUT, PATCH, DELETE) per user and per workspace, failed
sign-ins per account and per address, and wrong API tokens per address (at the end).

Reads never count against the write rates: a dashboard polling its jobs must not lock its
owner out. The rates are settings (REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], from
LEVERS9_THROTTLE_WRITES_PER_USER and LEVERS9_THROTTLE_WRITES_PER_WORKSPACE), generous enough
that people never meet them; they stop a runaway script. A throttled write gets a JSON 429
with `Retry-After` (DRF's handler).

Users live in their workspace's schema, so user ids repeat across workspaces: the user's key
names the workspace too, else user 1 of one workspace would spend user 1's of another. The
counts are kept in Django's cache: the database's cache table, or Redis when it is set, so every
web process counts the same failures and a restart forgets none (config.settings.cache_settings).
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth.backends import BaseBackend, ModelBackend
from django.contrib.auth.signals import user_login_failed
from django.core.cache import cache
from django.core.exceptions import PermissionDenied
from django.db import connection
from django.dispatch import receiver
from rest_framework.permissions import SAFE_METHODS
from rest_framework.throttling import SimpleRateThrottle


class _WriteThrottle(SimpleRateThrottle):
    # Set on a refused request, so the 429 can say which limit it met (levers9.api).
    REFUSED_BY = "_levers9_throttled_by"
    what = ""

    def allow_request(self, request, view) -> bool:
        if request.method in SAFE_METHODS:
            return True
        allowed = super().allow_request(request, view)
        if not allowed:
            setattr(request, self.REFUSED_BY, self)
        return allowed

    def describe(self) -> str:
        return f"{self.num_requests} writes per {self.duration} s {self.what}"


class UserWriteThrottle(_WriteThrottle):
    """Writes of one signed-in user (in one workspace)."""

    scope = "writes_per_user"
    what = "for one user"

    def get_cache_key(self, request, view) -> str:
        if request.user and request.user.is_authenticated:
            who = f"user-{request.user.pk}"
        else:
            who = f"anonymous-{self.get_ident(request)}"
        return self.cache_format % {
            "scope": self.scope,
            "ident": f"{connection.schema_name}:{who}",
        }


class WorkspaceWriteThrottle(_WriteThrottle):
    """Writes of everyone in one workspace together."""

    scope = "writes_per_workspace"
    what = "for one workspace"

    def get_cache_key(self, request, view) -> str:
        return self.cache_format % {"scope": self.scope, "ident": connection.schema_name}


def throttle_refusal(request, wait: float | None) -> str:
    """The 429's sentence: which limit was met, when to try again, where it is set."""
    token_refusal_met = getattr(request, _TOKEN_REFUSED, None)
    if token_refusal_met is not None:
        return token_refusal_met.sentence()
    throttle = getattr(request, _WriteThrottle.REFUSED_BY, None)
    limit = throttle.describe() if throttle else "the API's write limit"
    again = f"in {max(1, round(wait))} s" if wait else "shortly"
    return (
        f"Too many writes: {limit}. Try again {again} (the Retry-After header); the rates "
        "are set by LEVERS9_THROTTLE_WRITES_PER_USER and LEVERS9_THROTTLE_WRITES_PER_WORKSPACE."
    )


_WRITE_METHODS = ("post", "put", "patch", "delete")
_READ_METHODS = ("get", "head")


_TOKENS_429 = "too many wrong API tokens from the caller's address"


def schema_document_throttled_writes(result, generator, request, public):
    """drf-spectacular postprocessing hook: every write may answer 429 (a throttle, or a job
    over its workspace's limits), and any operation after too many wrong API tokens from one
    address, so the schema says so, with the Retry-After header."""
    for operations in result.get("paths", {}).values():
        for method, operation in operations.items():
            if method in _WRITE_METHODS:
                description = (
                    "Too many writes (Retry-After says when to try again), a job over the "
                    "workspace's queued-jobs limit (the body names the limit), or "
                    f"{_TOKENS_429}."
                )
            elif method in _READ_METHODS:
                description = f"Refused for a while: {_TOKENS_429} (Retry-After says when)."
            else:
                continue
            operation.setdefault("responses", {}).setdefault(
                "429",
                {
                    "description": description,
                    "headers": {
                        "Retry-After": {
                            "schema": {"type": "integer"},
                            "description": "Seconds to wait before writing again.",
                        }
                    },
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "properties": {
                                    "detail": {"type": "string"},
                                    "limit": {"type": "string"},
                                    "limit_value": {"type": "integer"},
                                },
                                "required": ["detail"],
                            }
                        }
                    },
                },
            )
    return result


# --- sign-in and API tokens: failures per account and per address --------------------------

_LOGIN_REFUSED = "_levers9_login_refused"
_TOKEN_REFUSED = "_levers9_token_refused"  # noqa: S105 - an attribute's name, not a secret
# Wrong API tokens allowed per address within the sign-in window, unless the settings name
# LEVERS9_TOKEN_FAILURES_PER_ADDRESS. Fewer than for sign-ins: a person mistypes a password; a
# token is pasted, and a script that sends a wrong one sends it again and again.
TOKEN_FAILURES_PER_ADDRESS = 20


@dataclass(frozen=True)
class LoginRefusal:
    """Why a sign-in is refused now, and for how long."""

    wait_s: int

    def sentence(self) -> str:
        minutes = max(1, math.ceil(self.wait_s / 60))
        return (
            "Too many failed sign-ins for this account or from this address. Try again in "
            f"{minutes} minute{'s' if minutes != 1 else ''}; until then no password is "
            "accepted, the right one included."
        )


@dataclass(frozen=True)
class TokenRefusal:
    """Why every API token from an address is refused now, and for how long."""

    wait_s: int

    def sentence(self) -> str:
        return (
            f"Too many wrong API tokens from this address. Try again in {self.wait_s} s (the "
            "Retry-After header); until then no token from here is accepted, the right one "
            "included. Send `Authorization: Token <key>` with a key from your profile (or "
            "`manage.py api_token`); LEVERS9_TOKEN_FAILURES_PER_ADDRESS sets the allowance."
        )


def token_failures_allowed() -> int:
    return int(getattr(settings, "LEVERS9_TOKEN_FAILURES_PER_ADDRESS", TOKEN_FAILURES_PER_ADDRESS))


def _client_address(request) -> str:
    # The address the connection came from: a header a client writes itself (X-Forwarded-For)
    # would let each guess claim a new address.
    return (request.META.get("REMOTE_ADDR") or "unknown") if request is not None else "unknown"


def _login_keys(request, username: str) -> list[tuple[str, int]]:
    """(cache key, failures allowed) for the account and for the address. Accounts live in
    their workspace's schema: the key names it, so one workspace's failures never lock out the
    same e-mail in another. The name is hashed: a key holds at most 250 characters, and a name
    is whatever the sign-in form was sent."""
    name = hashlib.sha256(username.casefold().encode("utf-8", "surrogatepass")).hexdigest()
    account = f"levers9:login-failures:account:{connection.schema_name}:{name}"
    address = f"levers9:login-failures:address:{_client_address(request)}"
    return [
        (account, settings.LEVERS9_LOGIN_FAILURES_PER_ACCOUNT),
        (address, settings.LEVERS9_LOGIN_FAILURES_PER_ADDRESS),
    ]


def _token_keys(request) -> list[tuple[str, int]]:
    # Per address only, across workspaces: a token names no account until it is found.
    return [
        (f"levers9:token-failures:address:{_client_address(request)}", token_failures_allowed())
    ]


def _recent(key: str, now: float) -> list[float]:
    window = settings.LEVERS9_LOGIN_FAILURE_WINDOW_S
    return [stamp for stamp in cache.get(key, []) if stamp > now - window]


def _wait_s(keys: list[tuple[str, int]]) -> int | None:
    """Seconds until every key is back under its allowance (the oldest of its last allowed
    failures ages out of the window), or None when none is over it."""
    now = time.time()
    window = settings.LEVERS9_LOGIN_FAILURE_WINDOW_S
    waits = []
    for key, allowed in keys:
        failures = _recent(key, now)
        if len(failures) >= allowed:
            # Newest first: the failure that must age out is the allowed-th newest.
            waits.append(sorted(failures, reverse=True)[allowed - 1] + window - now)
    return max(1, math.ceil(max(waits))) if waits else None


def _failure_record(keys: list[tuple[str, int]]) -> None:
    now = time.time()
    window = settings.LEVERS9_LOGIN_FAILURE_WINDOW_S
    for key, allowed in keys:
        # Only the newest `allowed` failures matter; a flood keeps the list that short.
        failures = [*_recent(key, now), now][-allowed:]
        cache.set(key, failures, timeout=window)


def login_refusal(request, username: str) -> LoginRefusal | None:
    """A refusal while the account or the address has used up its failures in the window
    (until the oldest of them ages out), else None."""
    wait_s = _wait_s(_login_keys(request, username or ""))
    return LoginRefusal(wait_s=wait_s) if wait_s else None


def login_failure_record(request, username: str) -> None:
    _failure_record(_login_keys(request, username or ""))


def token_refusal(request) -> TokenRefusal | None:
    """A refusal while the address has sent too many wrong API tokens in the window; it is
    also kept on the request, so the 429 says which limit it met (throttle_refusal)."""
    wait_s = _wait_s(_token_keys(request))
    if not wait_s:
        return None
    refusal = TokenRefusal(wait_s=wait_s)
    setattr(request, _TOKEN_REFUSED, refusal)
    return refusal


def token_failure_record(request) -> None:
    _failure_record(_token_keys(request))


class LoginThrottleBackend(BaseBackend):
    """First of AUTHENTICATION_BACKENDS, on every way to sign in (the sign-in page, the
    admin's): while the account or the address is over its failures, the attempt is refused
    before any password is checked (PermissionDenied stops Django's authenticate), so the
    right password after 40 wrong ones is refused too. It never signs anyone in itself."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        if login_refusal(request, username or "") is not None:
            if request is not None:
                setattr(request, _LOGIN_REFUSED, True)
            raise PermissionDenied("Too many failed sign-ins.")
        return None

    def get_user(self, user_id):
        # A session names the backend that signed it in (ModelBackend); this one never does,
        # but should one name it, the user is found the same way.
        return ModelBackend().get_user(user_id)


@receiver(user_login_failed)
def _login_failed(sender, credentials: dict, request=None, **kwargs) -> None:
    """Count a wrong password. A refusal by the throttle is not counted again: an attacker
    hammering a locked account must not keep it locked for ever."""
    if request is not None and getattr(request, _LOGIN_REFUSED, False):
        return
    login_failure_record(request, str(credentials.get("username") or ""))
