"""API of Make live, the canary and live calls (for integrations)."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.response import Response

from arena.models import Call, Turn
from arena.services.calls import MAX_TURN_TEXT
from levers9.roles import MANAGER, OWNER, HasRole
from policies.live import (
    LiveError,
    canary_promote,
    canary_roll_back,
    canary_running,
    canary_start,
    caused_won_rates,
    live_call_record,
    live_call_route,
    version_make_live,
)
from policies.models import PolicyVersion


class LiveCallRouteSerializer(serializers.Serializer):
    call_id = serializers.CharField(max_length=200, help_text="The integration's id for the call")


class LiveCallSerializer(serializers.Serializer):
    call_id = serializers.CharField(source="external_id")
    version = serializers.IntegerField(source="version.number")
    label = serializers.CharField(source="version.label")
    provider = serializers.CharField(source="version.provider")
    endpoint_url = serializers.CharField(source="version.endpoint_url")
    canary = serializers.IntegerField(source="canary_id", allow_null=True)
    outcome = serializers.CharField()


class LiveTurnSerializer(serializers.Serializer):
    # The same rules as an imported call's turns (arena.services.calls.turns_problem).
    # Plain values, as the judge's turns declare them: one `speaker` enum in the schema.
    speaker = serializers.ChoiceField(choices=list(Turn.Speaker.values))
    text = serializers.CharField(max_length=MAX_TURN_TEXT)


class LiveOutcomeSerializer(serializers.Serializer):
    # The same choices as a recorded call's outcome, so the schema names one enum for both.
    outcome = serializers.ChoiceField(choices=Call.Outcome.choices)
    turns = LiveTurnSerializer(
        many=True, required=False, help_text="The call's turns, oldest first (optional)."
    )


class CanaryStartSerializer(serializers.Serializer):
    candidate = serializers.IntegerField(help_text="Candidate version number")
    share = serializers.FloatField(help_text="Share of live calls for the candidate, 0–1")


class WonRateSerializer(serializers.Serializer):
    version = serializers.IntegerField(source="version.number")
    label = serializers.CharField(source="version.label")
    won = serializers.IntegerField()
    lost = serializers.IntegerField()
    pending = serializers.IntegerField()
    rate = serializers.FloatField(allow_null=True)


class CanarySerializer(serializers.Serializer):
    id = serializers.IntegerField(allow_null=True)
    candidate = serializers.IntegerField(allow_null=True)
    live = serializers.IntegerField(allow_null=True)
    share = serializers.FloatField(allow_null=True)
    won_rates = WonRateSerializer(many=True)


def _conflict(error: LiveError) -> Response:
    return Response({"detail": str(error)}, status=status.HTTP_409_CONFLICT)


def _canary_body() -> dict:
    canary = canary_running()
    return {
        "id": canary.pk if canary else None,
        "candidate": canary.candidate.number if canary else None,
        "live": canary.live.number if canary else None,
        "share": canary.share if canary else None,
        "won_rates": WonRateSerializer(
            caused_won_rates(canary=canary) if canary else caused_won_rates(), many=True
        ).data,
    }


@extend_schema(request=LiveCallRouteSerializer, responses={200: LiveCallSerializer})
@api_view(["POST"])
@permission_classes([HasRole.at_least(MANAGER)])
def live_call_route_api(request):
    """Which version takes this live call (the canary's share goes to the candidate). Asking
    again for the same call gives the same answer."""
    body = LiveCallRouteSerializer(data=request.data)
    body.is_valid(raise_exception=True)
    try:
        call = live_call_route(call_id=body.validated_data["call_id"])
    except LiveError as error:
        return _conflict(error)
    return Response(LiveCallSerializer(call).data)


@extend_schema(request=LiveOutcomeSerializer, responses={200: LiveCallSerializer})
@api_view(["POST"])
@permission_classes([HasRole.at_least(MANAGER)])
def live_call_outcome_api(request, call_id: str):
    """Record how a live call ended (and optionally its turns)."""
    body = LiveOutcomeSerializer(data=request.data)
    body.is_valid(raise_exception=True)
    try:
        call = live_call_record(
            call_id=call_id,
            outcome=body.validated_data["outcome"],
            turns=body.validated_data.get("turns"),
        )
    except LiveError as error:
        return Response({"detail": str(error)}, status=status.HTTP_404_NOT_FOUND)
    return Response(LiveCallSerializer(call).data)


@extend_schema(responses={200: CanarySerializer})
@api_view(["GET"])
@permission_classes([HasRole.at_least(MANAGER)])
def canary_api(request):
    """The running canary (if any) and the won rate each version caused, with counts."""
    return Response(_canary_body())


@extend_schema(request=CanaryStartSerializer, responses={201: CanarySerializer})
@api_view(["POST"])
@permission_classes([HasRole.at_least(OWNER)])
def canary_start_api(request):
    body = CanaryStartSerializer(data=request.data)
    body.is_valid(raise_exception=True)
    candidate = get_object_or_404(PolicyVersion, number=body.validated_data["candidate"])
    try:
        canary_start(candidate=candidate, share=body.validated_data["share"], by=request.user)
    except LiveError as error:
        return _conflict(error)
    return Response(_canary_body(), status=status.HTTP_201_CREATED)


@extend_schema(request=None, responses={200: CanarySerializer})
@api_view(["POST"])
@permission_classes([HasRole.at_least(OWNER)])
def canary_end_api(request, action: str):
    """Promote the candidate (it becomes live) or roll back (the live version takes all)."""
    canary = canary_running()
    if canary is None:
        return _conflict(LiveError("No canary is running."))
    try:
        if action == "promote":
            canary_promote(canary=canary, by=request.user)
        else:
            canary_roll_back(canary=canary)
    except LiveError as error:
        return _conflict(error)
    return Response(_canary_body())


class MadeLiveSerializer(serializers.Serializer):
    live = serializers.IntegerField()
    label = serializers.CharField()


@extend_schema(request=None, responses={200: MadeLiveSerializer})
@api_view(["POST"])
@permission_classes([HasRole.at_least(OWNER)])
def version_make_live_api(request, version_id: int):
    """Make a version live. It does not refuse a version that lost its evaluation."""
    version = get_object_or_404(PolicyVersion, pk=version_id)
    try:
        version_make_live(version=version, by=request.user)
    except LiveError as error:
        return _conflict(error)
    return Response({"live": version.number, "label": version.label})
