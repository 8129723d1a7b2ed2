"""API of Make live, the canary and live calls (for integrations).

Each world (pack) has its own live version and canary. Every call here takes `pack` (a world's
slug; in the body of a POST, in the query of a GET). It may be left out only in a workspace
with one world; where there are several, leaving it out is a 400 naming `pack` (a live call
sent to the first world by name landed in another business). An unknown pack is a 400 naming
`pack`. The answers name the world.
"""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.response import Response

from arena.models import Call, Turn, World
from arena.services.calls import MAX_TURN_TEXT
from levers9.roles import MANAGER, OWNER, HasRole
from policies.api import world_for_pack
from policies.canary import (
    CanaryShareError,
    canary_comparison,
    canary_promote,
    canary_roll_back,
    canary_running,
    canary_share_check,
    canary_start,
    caused_won_rates,
    live_call_route,
)
from policies.live import LiveError, live_call_record, version_make_live
from policies.models import PolicyVersion
from policies.selectors import policy_version_numbered

PACK_HELP = (
    "The world (pack) by slug; required where the workspace has several worlds (left out in a "
    "workspace with one world: that world)."
)


def _pack_field() -> serializers.SlugField:
    return serializers.SlugField(required=False, allow_blank=True, help_text=PACK_HELP)


class LiveCallRouteSerializer(serializers.Serializer):
    call_id = serializers.CharField(max_length=200, help_text="The integration's id for the call")
    pack = _pack_field()


class LiveCallSerializer(serializers.Serializer):
    call_id = serializers.CharField(source="external_id")
    pack = serializers.CharField(source="version.world.slug", help_text="The version's world")
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
    candidate = serializers.IntegerField(help_text="Candidate version number, in the pack")
    share = serializers.FloatField(
        help_text="Share of live calls for the candidate: a fraction, more than 0 and less "
        "than 1 (0.1 for 10%)"
    )
    pack = _pack_field()

    def validate_share(self, share: float) -> float:
        # The API's unit is a fraction; the pages' is percent (canary_share_from_percent).
        try:
            return canary_share_check(share)
        except CanaryShareError as error:
            raise serializers.ValidationError(str(error)) from error


class PackSerializer(serializers.Serializer):
    pack = _pack_field()


class WonRateSerializer(serializers.Serializer):
    version = serializers.IntegerField(source="version.number")
    label = serializers.CharField(source="version.label")
    won = serializers.IntegerField()
    lost = serializers.IntegerField()
    pending = serializers.IntegerField()
    rate = serializers.FloatField(allow_null=True)
    interval = serializers.ListField(
        child=serializers.FloatField(),
        allow_null=True,
        help_text="95% bootstrap interval of the rate; null under two decided calls",
    )


class CanaryComparisonSerializer(serializers.Serializer):
    difference = serializers.FloatField(
        allow_null=True, help_text="Candidate's won rate minus the live version's"
    )
    interval = serializers.ListField(
        child=serializers.FloatField(), allow_null=True, help_text="Its 95% bootstrap interval"
    )
    beyond_chance = serializers.BooleanField(help_text="The interval leaves 0")
    sentence = serializers.CharField(help_text="The same in words")


class CanarySerializer(serializers.Serializer):
    pack = serializers.CharField(help_text="The world the canary runs in")
    id = serializers.IntegerField(allow_null=True)
    candidate = serializers.IntegerField(allow_null=True)
    live = serializers.IntegerField(allow_null=True)
    share = serializers.FloatField(allow_null=True)
    won_rates = WonRateSerializer(many=True)
    comparison = CanaryComparisonSerializer(
        allow_null=True, help_text="Candidate against live on the canary's calls"
    )


def _conflict(error: LiveError) -> Response:
    return Response({"detail": str(error)}, status=status.HTTP_409_CONFLICT)


def _canary_body(world: World) -> dict:
    canary = canary_running(world=world)
    rates = caused_won_rates(world=world, canary=canary)
    comparison = canary_comparison(canary=canary, rates=rates) if canary else None
    return {
        "pack": world.slug,
        "id": canary.pk if canary else None,
        "candidate": canary.candidate.number if canary else None,
        "live": canary.live.number if canary else None,
        "share": canary.share if canary else None,
        "won_rates": WonRateSerializer(rates, many=True).data,
        "comparison": CanaryComparisonSerializer(comparison).data if comparison else None,
    }


def _pack_of(request) -> World:
    """The world the request names (`pack` in the body, else the query); none named: the
    workspace's only world, else a 400 naming `pack`."""
    data = request.data if isinstance(request.data, dict) else {}
    return world_for_pack(data.get("pack") or request.query_params.get("pack") or "", named=True)


@extend_schema(request=LiveCallRouteSerializer, responses={200: LiveCallSerializer})
@api_view(["POST"])
@permission_classes([HasRole.at_least(MANAGER)])
def live_call_route_api(request):
    """Which version takes this live call (the canary's share goes to the candidate). Asking
    again for the same call gives the same answer."""
    body = LiveCallRouteSerializer(data=request.data)
    body.is_valid(raise_exception=True)
    world = world_for_pack(body.validated_data.get("pack"), named=True)
    try:
        call = live_call_route(call_id=body.validated_data["call_id"], world=world)
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


@extend_schema(
    parameters=[OpenApiParameter("pack", OpenApiTypes.STR, description=PACK_HELP)],
    responses={200: CanarySerializer},
)
@api_view(["GET"])
@permission_classes([HasRole.at_least(MANAGER)])
def canary_api(request):
    """The world's running canary (if any) and the won rate each of its versions caused,
    with counts, intervals and whether the candidate's difference is beyond chance."""
    return Response(_canary_body(_pack_of(request)))


@extend_schema(request=CanaryStartSerializer, responses={201: CanarySerializer})
@api_view(["POST"])
@permission_classes([HasRole.at_least(OWNER)])
def canary_start_api(request):
    body = CanaryStartSerializer(data=request.data)
    body.is_valid(raise_exception=True)
    world = world_for_pack(body.validated_data.get("pack"), named=True)
    number = body.validated_data["candidate"]
    candidate = policy_version_numbered(world=world, number=number)
    if candidate is None:
        # A 400 naming the field, as Train and Evaluate answer a version the world lacks.
        numbers = ", ".join(
            f"v{n}"
            for n in PolicyVersion.objects.filter(world=world).values_list("number", flat=True)
        )
        raise serializers.ValidationError(
            {"candidate": [f"No version v{number} in {world.name}: choose one of {numbers}."]}
        )
    try:
        canary_start(candidate=candidate, share=body.validated_data["share"], by=request.user)
    except LiveError as error:
        return _conflict(error)
    return Response(_canary_body(world), status=status.HTTP_201_CREATED)


@extend_schema(request=PackSerializer, responses={200: CanarySerializer})
@api_view(["POST"])
@permission_classes([HasRole.at_least(OWNER)])
def canary_end_api(request, action: str):
    """Promote the candidate (it becomes live) or roll back (the live version takes all)."""
    world = _pack_of(request)
    canary = canary_running(world=world)
    if canary is None:
        return _conflict(LiveError("No canary is running."))
    try:
        if action == "promote":
            canary_promote(canary=canary, by=request.user)
        else:
            canary_roll_back(canary=canary)
    except LiveError as error:
        return _conflict(error)
    return Response(_canary_body(world))


class MadeLiveSerializer(serializers.Serializer):
    pack = serializers.CharField(help_text="The version's world: it is live there")
    live = serializers.IntegerField()
    label = serializers.CharField()


@extend_schema(request=None, responses={200: MadeLiveSerializer})
@api_view(["POST"])
@permission_classes([HasRole.at_least(OWNER)])
def version_make_live_api(request, version_id: int):
    """Make a version live in its own world. It does not refuse a version that lost its
    evaluation."""
    version = get_object_or_404(PolicyVersion, pk=version_id)
    try:
        version_make_live(version=version, by=request.user)
    except LiveError as error:
        return _conflict(error)
    return Response({"pack": version.world.slug, "live": version.number, "label": version.label})
