"""The API's shared pieces: one router, errors as clear JSON, who-am-I."""

from __future__ import annotations

import logging
import secrets

from django.core.exceptions import RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.authentication import SessionScheme
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.decorators import api_view, permission_classes
from rest_framework.exceptions import Throttled
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.routers import DefaultRouter
from rest_framework.views import exception_handler as drf_exception_handler
from rest_framework.views import set_rollback

from levers9.limit_refusal import JOB_LIMIT_RETRY_AFTER_S, JobLimitReached
from levers9.middleware import database_unreachable
from levers9.roles import ROLE_HELP, user_role
from levers9.throttles import throttle_refusal

logger = logging.getLogger(__name__)

router = DefaultRouter()


class SameOriginSessionScheme(SessionScheme):
    """The schema describes our session authentication as DRF's (cookie `sessionid`)."""

    target_class = "levers9.authentication.SessionAuthentication"


def exception_handler(exc, context):
    """DRF's handler, plus Django's ValidationError as a 400 that names what was wrong, a job
    over its workspace's limits as a 429 naming the limit (with Retry-After), a throttled
    write's 429 saying which rate it met (DRF adds Retry-After), the database out of reach and
    a body over the upload limit left to the middleware (503, 413), and anything unhandled
    under /api/ as a JSON 500 whose id finds its traceback in the log (an API client must
    never get Django's HTML error page, nor the traceback)."""
    if isinstance(exc, DjangoValidationError):
        return Response({"detail": " ".join(exc.messages)}, status=400)
    if isinstance(exc, JobLimitReached):
        # Refused before anything was saved; the jobs already waiting keep their places.
        set_rollback()
        return Response(
            {"detail": str(exc), "limit": exc.limit, "limit_value": exc.value},
            status=429,
            headers={"Retry-After": str(JOB_LIMIT_RETRY_AFTER_S)},
        )
    if database_unreachable(exc) or isinstance(exc, RequestDataTooBig):
        # Answered by the platform's middleware, for pages and the API alike: a 503 with
        # Retry-After (levers9.middleware.DatabaseUnavailableMiddleware), a 413 naming the
        # upload limit (UploadLimitMiddleware). Not ours to turn into a 500.
        return None
    if isinstance(exc, Throttled):
        exc.detail = throttle_refusal(context.get("request"), exc.wait)
    response = drf_exception_handler(exc, context)
    request = context.get("request")
    if response is not None or request is None or not request.path.startswith("/api/"):
        return response
    error_id = secrets.token_hex(4)
    logger.error(
        "Unhandled error %s on %s %s", error_id, request.method, request.path, exc_info=exc
    )
    set_rollback()
    return Response(
        {
            "detail": f"Something went wrong on our side; quote error id {error_id}.",
            "error_id": error_id,
        },
        status=500,
    )


@extend_schema(
    responses=inline_serializer(
        "Me",
        {
            "username": serializers.CharField(),
            "workspace": serializers.CharField(),
            "role": serializers.CharField(allow_null=True),
            "can": serializers.CharField(allow_null=True),
        },
    )
)
@api_view(["GET"])
# Any signed-in user: a user without a role learns here why everything else is refused.
@permission_classes([IsAuthenticated])
def me(request):
    """The signed-in user, the workspace and the role held there."""
    role = user_role(request.user)
    return Response(
        {
            "username": request.user.get_username(),
            "workspace": request.tenant.slug,
            "role": role,
            "can": ROLE_HELP.get(role),
        }
    )


# Every operation can answer these, whatever its view declares: a bad query parameter or body
# (400, naming the field), no or a bad token (401), a role too low or another workspace's
# object (403), a path id that is not there (404, where the path has one), a body over the
# upload limit (413), an unhandled error (500, JSON with an id to find it in the log) and the
# database out of reach (503).
_ERROR_BODY = {
    "application/json": {
        "schema": {
            "type": "object",
            "additionalProperties": True,
            "description": "What went wrong: field names with their messages, or 'detail'.",
        }
    }
}
_ALWAYS = {
    "400": "Bad input: the body names each field and how to fix it.",
    "401": "Not signed in, or the token is wrong.",
    "403": "The user's role may not do this here.",
    "500": "An unhandled error: the body carries an id to find it in the server log.",
    "503": "The database cannot be reached for the moment (Retry-After says when to try again).",
}


def schema_document_errors(result, generator, request, public):
    """drf-spectacular postprocessing hook: the error answers of every operation, so a client
    (and the fuzzing in CI) finds each status it can get documented."""
    for operations in result.get("paths", {}).values():
        for method, operation in operations.items():
            if method not in {"get", "post", "put", "patch", "delete"}:
                continue
            responses = operation.setdefault("responses", {})
            wanted = dict(_ALWAYS)
            # Named in the path, the body or a filter (a pair, a version, a world).
            wanted["404"] = "Nothing with that id or name in this workspace."
            if method != "get":
                wanted["409"] = "The object is not in a state that allows this (the body says why)."
                wanted["413"] = "The body is over the upload limit (the body names it)."
            for status, description in wanted.items():
                responses.setdefault(status, {"description": description, "content": _ERROR_BODY})
    return result
