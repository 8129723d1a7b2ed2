"""API of the arena: worlds (packs), real calls and their import."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import mixins, serializers, viewsets
from rest_framework.decorators import action
from rest_framework.parsers import BaseParser
from rest_framework.response import Response

from arena.models import Call, Scenario, Turn, World
from arena.selectors import world_list_with_counts
from arena.services import CallImportError, calls_import
from levers9.roles import MANAGER, HasRole


class ScenarioSerializer(serializers.ModelSerializer):
    class Meta:
        model = Scenario
        fields = ["slug", "name", "budget", "family", "urgency", "objection", "dialect", "seed"]


class WorldSerializer(serializers.ModelSerializer):
    scenarios = ScenarioSerializer(many=True, read_only=True)
    call_count = serializers.IntegerField(read_only=True)
    won_count = serializers.IntegerField(read_only=True)

    class Meta:
        model = World
        fields = [
            "slug",
            "name",
            "description",
            "moves",
            "dimensions",
            "judge_provider",
            "judge_model",
            "scenarios",
            "call_count",
            "won_count",
        ]


class TurnSerializer(serializers.ModelSerializer):
    class Meta:
        model = Turn
        fields = ["index", "speaker", "text", "move_label"]


class CallSerializer(serializers.ModelSerializer):
    pack = serializers.SlugRelatedField(source="world", slug_field="slug", read_only=True)

    class Meta:
        model = Call
        fields = ["id", "external_id", "pack", "outcome", "turn_count", "source", "imported_at"]


class CallDetailSerializer(CallSerializer):
    turns = TurnSerializer(many=True, read_only=True)

    class Meta(CallSerializer.Meta):
        fields = [*CallSerializer.Meta.fields, "turns"]


class PlainTextParser(BaseParser):
    """JSONL bodies arrive as text; the import service validates them line by line."""

    media_type = "*/*"

    def parse(self, stream, media_type=None, parser_context=None):
        return stream.read().decode("utf-8", errors="replace")


ImportResult = inline_serializer(
    "CallImportResult",
    {
        "created": serializers.IntegerField(),
        "unchanged": serializers.IntegerField(),
        "turns_created": serializers.IntegerField(),
    },
)


class WorldViewSet(viewsets.ReadOnlyModelViewSet):
    """Worlds (packs) of this workspace."""

    serializer_class = WorldSerializer
    lookup_field = "slug"
    lookup_url_kwarg = "pack"

    def get_queryset(self):
        return world_list_with_counts().prefetch_related("scenarios")

    @extend_schema(
        request={"application/jsonl": OpenApiTypes.STR, "application/json": OpenApiTypes.STR},
        responses={200: ImportResult},
        description="Import real calls: a JSON array or JSONL, one call per line, "
        '{"id", "outcome": "won"|"lost"|"unknown", "turns": [{"speaker", "text"}]}. '
        "A body with any bad line imports nothing and names every bad line; importing the "
        "same ids again changes nothing. Needs the manager role.",
    )
    @action(
        detail=True,
        methods=["post"],
        url_path="calls/import",
        parser_classes=[PlainTextParser],
        permission_classes=[HasRole.at_least(MANAGER)],
    )
    def calls_import(self, request, pack: str):
        world = self.get_object()
        text = request.data if isinstance(request.data, str) else ""
        if not text.strip():
            return Response(
                {"detail": "The body is empty: send the calls as JSON or JSONL."}, status=400
            )
        try:
            report = calls_import(world=world, text=text, source="api")
        except CallImportError as error:
            return Response(
                {
                    "detail": str(error),
                    "problems": [
                        {"line": problem.line, "reason": problem.reason}
                        for problem in error.problems
                    ],
                },
                status=400,
            )
        return Response(report.as_dict())


class CallViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Real recorded calls of this workspace, newest import last."""

    def get_queryset(self):
        calls = Call.objects.select_related("world")
        if self.action == "retrieve":
            calls = calls.prefetch_related("turns")
        pack = self.request.query_params.get("pack")
        if pack:
            calls = calls.filter(world=get_object_or_404(World, slug=pack))
        outcome = self.request.query_params.get("outcome")
        if outcome:
            calls = calls.filter(outcome=outcome)
        return calls

    def get_serializer_class(self):
        return CallDetailSerializer if self.action == "retrieve" else CallSerializer

    @extend_schema(
        parameters=[
            OpenApiParameter("pack", str, description="Only calls of this world"),
            OpenApiParameter("outcome", str, enum=["won", "lost", "unknown"]),
        ]
    )
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)
