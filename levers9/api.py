"""The API's shared pieces: one router, errors as clear JSON, who-am-I."""

from __future__ import annotations

import logging
import secrets

from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.authentication import SessionScheme
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.decorators import api_view
from rest_framework.exceptions import Throttled
from rest_framework.response import Response
from rest_framework.routers import DefaultRouter
from rest_framework.views import exception_handler as drf_exception_handler
from rest_framework.views import set_rollback

from levers9.jobs.limits import JobLimitReached
from levers9.roles import ROLE_HELP, user_role
from levers9.throttles import throttle_refusal

logger = logging.getLogger(__name__)

router = DefaultRouter()


class SameOriginSessionScheme(SessionScheme):
    """The schema describes our session authentication as DRF's (cookie `sessionid`)."""

    target_class = "levers9.authentication.SessionAuthentication"


def exception_handler(exc, context):
    """DRF's handler, plus Django's ValidationError as a 400 that names what was wrong, a job
    over its workspace's limits as a 429 naming the limit, a throttled write's 429 saying which
    rate it met (DRF adds Retry-After), and anything unhandled under /api/ as a JSON 500 whose
    id finds its traceback in the log (an API client must never get Django's HTML error page,
    nor the traceback)."""
    if isinstance(exc, DjangoValidationError):
        return Response({"detail": " ".join(exc.messages)}, status=400)
    if isinstance(exc, JobLimitReached):
        # Refused before anything was saved; the jobs already waiting keep their places.
        set_rollback()
        return Response(
            {"detail": str(exc), "limit": exc.limit, "limit_value": exc.value}, status=429
        )
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
