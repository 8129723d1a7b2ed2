"""API throttles on writes (POST, PUT, PATCH, DELETE): per user and per workspace.

Reads are never throttled: a dashboard polling its jobs must not lock its owner out. The rates
are settings (REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], from LEVERS9_THROTTLE_WRITES_PER_USER
and LEVERS9_THROTTLE_WRITES_PER_WORKSPACE), generous enough that people never meet them; they
stop a runaway script. A throttled write gets a JSON 429 with `Retry-After` (DRF's handler).

Users live in their workspace's schema, so user ids repeat across workspaces: the user's key
names the workspace too, else user 1 of one workspace would spend user 1's of another. The
counts are kept in Django's cache (per process unless a shared cache is configured).
"""

from __future__ import annotations

from django.db import connection
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
    throttle = getattr(request, _WriteThrottle.REFUSED_BY, None)
    limit = throttle.describe() if throttle else "the API's write limit"
    again = f"in {max(1, round(wait))} s" if wait else "shortly"
    return (
        f"Too many writes: {limit}. Try again {again} (the Retry-After header); the rates "
        "are set by LEVERS9_THROTTLE_WRITES_PER_USER and LEVERS9_THROTTLE_WRITES_PER_WORKSPACE."
    )


_WRITE_METHODS = ("post", "put", "patch", "delete")


def schema_document_throttled_writes(result, generator, request, public):
    """drf-spectacular postprocessing hook: every write may answer 429 (a throttle, or a job
    over its workspace's limits), so the schema says so, with the Retry-After header."""
    for operations in result.get("paths", {}).values():
        for method, operation in operations.items():
            if method not in _WRITE_METHODS:
                continue
            operation.setdefault("responses", {}).setdefault(
                "429",
                {
                    "description": "Too many writes (Retry-After says when to try again), or "
                    "a job over the workspace's queued-jobs limit (the body names the limit).",
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
