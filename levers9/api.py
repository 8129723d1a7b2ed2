"""The API's shared pieces: one router, errors as clear JSON, who-am-I."""

from __future__ import annotations

from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.decorators import api_view
from rest_framework.response import Response
from rest_framework.routers import DefaultRouter
from rest_framework.views import exception_handler as drf_exception_handler

from levers9.roles import ROLE_HELP, user_role

router = DefaultRouter()


def exception_handler(exc, context):
    """DRF's handler, plus Django's ValidationError as a 400 that names what was wrong."""
    if isinstance(exc, DjangoValidationError):
        return Response({"detail": " ".join(exc.messages)}, status=400)
    return drf_exception_handler(exc, context)


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
