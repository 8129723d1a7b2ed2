"""API of the arena: worlds (packs), real calls and their import, the Duel (queue, picks,
overrules) and frozen preference versions."""

from __future__ import annotations

import json

from django.http import FileResponse, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    extend_schema,
    extend_schema_view,
    inline_serializer,
)
from rest_framework import mixins, serializers, viewsets
from rest_framework.decorators import action
from rest_framework.parsers import BaseParser
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.response import Response

from arena.errors import DuelError, DuelNotFound, JudgeFitError
from arena.judge.agreement import (
    judge_agreement,
    judge_measure_start,
    judge_measurement_latest,
)
from arena.judge.fit_job import judge_fit_start
from arena.judge.overrides import judge_override_submit, judgements_rescore
from arena.judge.scoring import judge_score_items
from arena.models import (
    Call,
    JudgeOverride,
    JudgeVersion,
    Moment,
    Pick,
    PreferenceVersion,
    Reply,
    Scenario,
    Turn,
    World,
)
from arena.preference_format import read_rows, spreadsheet_lines, trl_lines
from arena.selectors import (
    QUEUE_ORDERS,
    PickFilters,
    QueueSelection,
    duel_item,
    duel_pair_get,
    duel_pairs_shown,
    duel_stats,
    pair_reveal,
    picks_listed,
    policy_versions_numbered,
    preference_version_get,
    preference_version_path,
    preference_versions,
    world_by_slug,
    world_in_view,
    world_list_with_counts,
    world_named,
)
from arena.services.calls import (
    CONVERT_TO_REAL_CALLS,
    CallImportError,
    CallImportRefused,
    calls_import,
)
from arena.services.freeze import preference_freeze
from arena.services.pairs import PAIR_BATCH, duel_pairs_request
from arena.services.preferences import (
    PreferenceImportError,
    preference_imported_ids,
    preferences_import,
)
from arena.services.queue import (
    NOTE_MAX_CHARS,
    REASONS,
    duel_next,
    duel_skip,
    pick_submit,
    pick_undo,
)
from arena.services.worlds import WorldBadInput, world_create, world_update
from levers9.jobs.api import JobSerializer
from levers9.roles import MANAGER, REVIEWER, HasRole
from trainers.judge.standing import MIN_HELD_OUT_ITEMS, report_shown


class ScenarioSerializer(serializers.ModelSerializer):
    class Meta:
        model = Scenario
        fields = ["slug", "name", "budget", "family", "urgency", "objection", "dialect", "seed"]


class MoveSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=40, help_text="The key replies and pairs carry")
    description = serializers.CharField(
        max_length=200, required=False, allow_blank=True, default="", help_text="One line"
    )


class DimensionSerializer(serializers.Serializer):
    """One dimension of a world's rubric, which is also a reason its reviewers tick."""

    name = serializers.CharField(help_text="The key of every score and reason: a slug")
    label = serializers.CharField(help_text="What the Duel's reason tag and the radar say")
    help = serializers.CharField(allow_blank=True, help_text="Its one-line meaning")
    weight = serializers.FloatField(help_text="Its weight in the judge's total (0 to 10)")


# Sent as given: the service checks each item and answers 400 on "dimensions" naming the
# item and its field (arena.services.worlds.dimensions_clean).
_DIMENSIONS_HELP = (
    "2 to 12 objects {name, label?, help?, weight?}: a unique slug name, a one-line meaning "
    "(at most 200 characters) and a weight above 0 and at most 10. They are the world's "
    "reasons in the Duel and what its judge scores; none given: the description's seven."
)


class WorldSerializer(serializers.ModelSerializer):
    moves = MoveSerializer(many=True, read_only=True)
    dimensions = DimensionSerializer(
        many=True, read_only=True, help_text="The world's rubric and reason tags, in order"
    )
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
            "system_prompt",
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
        # The bytes as sent: the import decodes them and names a line that is not UTF-8.
        return stream.read()


ImportResult = inline_serializer(
    "CallImportResult",
    {
        "created": serializers.IntegerField(),
        "unchanged": serializers.IntegerField(),
        "turns_created": serializers.IntegerField(),
    },
)


class ErrorDetail(serializers.Serializer):
    # A refusal in words (`detail`), or DRF's field-named errors ({"name": ["..."]}).
    detail = serializers.CharField(required=False)


class JudgeTurnSerializer(serializers.Serializer):
    speaker = serializers.ChoiceField(choices=["agent", "customer"])
    text = serializers.CharField()


class JudgeItemSerializer(serializers.Serializer):
    dialogue = JudgeTurnSerializer(many=True)
    reply = serializers.CharField()


class JudgeScoreRequest(serializers.Serializer):
    items = JudgeItemSerializer(many=True, help_text="Up to 1,000 (dialogue, reply) items")


class JudgeScoreResult(serializers.Serializer):
    scores = serializers.DictField(child=serializers.FloatField(), help_text="dimension: 0..1")
    total = serializers.FloatField()
    won_probability = serializers.FloatField(allow_null=True)
    on_topic = serializers.CharField(
        allow_null=True,
        help_text="Why the world's on-topic guard capped this reply's total (its words belong "
        "to another business, or do not answer the conversation); null when it did not",
    )


class JudgeScoreResponse(serializers.Serializer):
    judge = serializers.CharField(help_text="The judge's name and version")
    results = JudgeScoreResult(many=True)


class JudgeMeasurementSerializer(serializers.Serializer):
    measurement = serializers.DictField(
        allow_null=True,
        help_text="{judge, model: {pairs, accuracy, accuracy_ci, ties, kappa, "
        "position_consistency}, rubric: {...}}; null before the first measurement",
    )


class JudgeVersionSerializer(serializers.ModelSerializer):
    label = serializers.CharField(read_only=True)
    report = serializers.JSONField(
        read_only=True,
        help_text="The fit's held-out report: pairs, dimensions and outcomes, each with a "
        "fitted and a rubric measure. A measure on fewer than "
        f"{MIN_HELD_OUT_ITEMS} held-out items (picks, or calls for an AUC) has its figure, "
        'interval and kappa null, and too_few says so: "too few to measure (n = 4)"; '
        "too_few is null when the figure counts.",
    )
    standing = serializers.CharField(
        source="standing.state",
        read_only=True,
        help_text='"above_chance", "at_chance", "too_few" (measured on too few held-out '
        'items) or "not_measured": whether its verdicts stand',
    )
    at_chance = serializers.BooleanField(read_only=True)

    class Meta:
        model = JudgeVersion
        fields = ["number", "label", "job_id", "report", "standing", "at_chance", "created_at"]

    def to_representation(self, version: JudgeVersion) -> dict:
        data = super().to_representation(version)
        data["report"] = report_shown(version.report)
        return data


class WorldCreateSerializer(serializers.Serializer):
    slug = serializers.SlugField(max_length=60, help_text="Its address in the API and pages")
    name = serializers.CharField(max_length=200)
    description = serializers.CharField(required=False, allow_blank=True, default="")
    system_prompt = serializers.CharField(
        required=False, allow_blank=True, default="", max_length=4000
    )
    moves = MoveSerializer(
        many=True,
        required=False,
        help_text="2 to 16 moves with unique names; none given: the generic set (greet, ask, "
        "inform, handle the objection, reassure, propose the next step, close).",
    )
    dimensions = serializers.ListField(
        child=serializers.DictField(), required=False, help_text=_DIMENSIONS_HELP
    )


class WorldUpdateSerializer(serializers.Serializer):
    """What describes a world's business; only the fields sent change."""

    name = serializers.CharField(max_length=200, required=False)
    description = serializers.CharField(required=False, allow_blank=True)
    system_prompt = serializers.CharField(required=False, allow_blank=True, max_length=4000)
    moves = MoveSerializer(many=True, required=False, help_text="2 to 16, unique names")
    dimensions = serializers.ListField(
        child=serializers.DictField(), required=False, help_text=_DIMENSIONS_HELP
    )


def _world_bad_input(error: WorldBadInput) -> Response:
    return Response({error.field: [str(error)]}, status=400)


class WorldViewSet(viewsets.ReadOnlyModelViewSet):
    """Worlds (packs) of this workspace."""

    serializer_class = WorldSerializer
    lookup_field = "slug"
    lookup_url_kwarg = "pack"

    def get_queryset(self):
        return world_list_with_counts().prefetch_related("scenarios")

    def get_permissions(self):
        if self.action in ("create", "partial_update"):
            return [HasRole.at_least(MANAGER)()]
        return super().get_permissions()

    @extend_schema(
        request=WorldCreateSerializer, responses={201: WorldSerializer, 400: ErrorDetail}
    )
    def create(self, request):
        """A world with no simulator: a business's own, filled with its real calls."""
        body = WorldCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        if World.objects.filter(slug=data["slug"]).exists():
            return Response(
                {"slug": [f"A world '{data['slug']}' exists already: choose another slug."]},
                status=400,
            )
        try:
            world = world_create(
                slug=data["slug"],
                name=data["name"],
                description=data["description"],
                system_prompt=data["system_prompt"],
                moves=data.get("moves"),
                dimensions=data.get("dimensions"),
            )
        except WorldBadInput as error:
            return _world_bad_input(error)
        created = world_list_with_counts().get(pk=world.pk)
        return Response(WorldSerializer(created).data, status=201)

    @extend_schema(
        request=WorldUpdateSerializer, responses={200: WorldSerializer, 400: ErrorDetail}
    )
    def partial_update(self, request, pack: str):
        """Change a world's name, description, agent system prompt, moves or its reasons and
        rubric (`dimensions`) (managers)."""
        world = self.get_object()
        allowed = set(WorldUpdateSerializer().fields)
        sent = set(request.data) if isinstance(request.data, dict) else set()
        unknown = sorted(sent - allowed)
        if unknown:
            return Response(
                {unknown[0]: [f"Not editable here; send any of {', '.join(sorted(allowed))}."]},
                status=400,
            )
        body = WorldUpdateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            world_update(world=world, **body.validated_data)
        except WorldBadInput as error:
            return _world_bad_input(error)
        return Response(WorldSerializer(self.get_queryset().get(pk=world.pk)).data)

    @extend_schema(
        request={"application/jsonl": OpenApiTypes.STR},
        responses={200: ImportResult, 400: ErrorDetail},
        description="Import preference pairs as picks, in TRL's preference format, one JSON "
        'object per line: {"id", "prompt": [{"role", "content"}], "chosen": [...], '
        '"rejected": [...], "reasons": [...], "reviewer": "..."} (or prompt/chosen/rejected '
        "as text). A body with any bad line imports nothing and names every bad line; the same "
        "ids again change nothing. Needs the manager role.",
    )
    @action(
        detail=True,
        methods=["post"],
        url_path="preferences/import",
        parser_classes=[PlainTextParser],
        permission_classes=[HasRole.at_least(MANAGER)],
    )
    def preferences_import(self, request, pack: str):
        return self._import(request, preferences_import, "the pairs as JSONL, one per line")

    @extend_schema(
        request={"application/jsonl": OpenApiTypes.STR, "application/json": OpenApiTypes.STR},
        parameters=[
            OpenApiParameter(
                "convert",
                str,
                enum=[CONVERT_TO_REAL_CALLS],
                description="Only for a simulated world (scripted customers) with no recorded "
                f"call yet: `{CONVERT_TO_REAL_CALLS}` turns it into a world of real recorded "
                "calls on purpose. Without it such a world refuses calls (400 naming "
                "`convert`): a business's own calls belong in a world of its own.",
            )
        ],
        responses={200: ImportResult, 400: ErrorDetail},
        description="Import real calls: a JSON array or JSONL, one call per line, "
        '{"id", "outcome": "won"|"lost"|"unknown", "turns": [{"speaker", "text"}]}. '
        "A body with any bad line imports nothing and names every bad line; importing the "
        "same ids again changes nothing. A simulated world with no recorded call refuses "
        "them unless `?convert=real-calls` says to make it a real-call world. Needs the "
        "manager role.",
    )
    @action(
        detail=True,
        methods=["post"],
        url_path="calls/import",
        parser_classes=[PlainTextParser],
        permission_classes=[HasRole.at_least(MANAGER)],
    )
    def calls_import(self, request, pack: str):
        convert = request.query_params.get("convert", "")
        if convert not in ("", CONVERT_TO_REAL_CALLS):
            message = f"convert takes one value, {CONVERT_TO_REAL_CALLS}, or is left out."
            return Response({"convert": [message], "detail": message}, status=400)
        return self._import(
            request,
            calls_import,
            "the calls as JSON or JSONL",
            convert=convert == CONVERT_TO_REAL_CALLS,
        )

    def _import(self, request, service, what: str, **options) -> Response:
        """Both imports: the body as text, all or nothing, every bad line named."""
        world = self.get_object()
        text = request.data if isinstance(request.data, str | bytes) else ""
        if not text.strip():
            return Response({"detail": f"The body is empty: send {what}."}, status=400)
        try:
            report = service(world=world, text=text, source="api", **options)
        except CallImportRefused as error:
            return Response({error.field: [str(error)], "detail": str(error)}, status=400)
        except (CallImportError, PreferenceImportError) as error:
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

    @extend_schema(
        request=JudgeScoreRequest,
        responses={200: JudgeScoreResponse, 400: ErrorDetail},
        description="Score up to 1,000 replies with the world's judge in force (its newest "
        "fitted version, else the rubric judge or the model judge it names), in order.",
    )
    @action(
        detail=True,
        methods=["post"],
        url_path="judge/score",
        permission_classes=[HasRole.at_least(REVIEWER)],
    )
    def judge_score(self, request, pack: str):
        world = self.get_object()
        body = request.data if isinstance(request.data, dict) else {}
        try:
            return Response(judge_score_items(world=world, items=body.get("items")))
        except JudgeFitError as error:
            return Response({"detail": str(error)}, status=400)

    @extend_schema(
        request=None,
        responses={202: JobSerializer, 400: ErrorDetail},
        description="Fit the world's judge on its frozen picks, overrides and call outcomes: "
        "a job (follow it at GET /api/rl/jobs/{id}/); its finish makes the next judge version. "
        "One fit per world at a time: while one runs, it is returned with joined true (its end "
        "refits on anything it did not read); a background refit still waiting is replaced.",
    )
    @action(
        detail=True,
        methods=["post"],
        url_path="judge/fit",
        permission_classes=[HasRole.at_least(MANAGER)],
    )
    def judge_fit(self, request, pack: str):
        world = self.get_object()
        try:
            job = judge_fit_start(world=world, started_by=request.user)
        except JudgeFitError as error:
            return Response({"detail": str(error)}, status=400)
        return Response(JobSerializer(job).data, status=202)

    @extend_schema(
        request=None,
        responses={202: JobSerializer, 400: ErrorDetail},
        description="Measure the world's model judge (OpenAI, Anthropic or vLLM) on the frozen "
        "picks a fit holds out, asking in both orders (a disagreement counts as a tie): a job; "
        "its result is at GET judge/measurement/. A freeze measures it again by itself. 400 "
        "when the world is judged by its fitted judge or the rubric (its fit measures it).",
    )
    @action(
        detail=True,
        methods=["post"],
        url_path="judge/measure",
        permission_classes=[HasRole.at_least(MANAGER)],
    )
    def judge_measure(self, request, pack: str):
        world = self.get_object()
        try:
            job = judge_measure_start(world=world, started_by=request.user)
        except JudgeFitError as error:
            return Response({"detail": str(error)}, status=400)
        return Response(JobSerializer(job).data, status=202)

    @extend_schema(responses={200: JudgeMeasurementSerializer})
    @action(detail=True, methods=["get"], url_path="judge/measurement", pagination_class=None)
    def judge_measurement(self, request, pack: str):
        """The newest finished measurement of the world's model judge (null before the first):
        accuracy, kappa, ties and position consistency on held-out picks, the rubric beside it."""
        world = self.get_object()
        return Response({"measurement": judge_measurement_latest(world)})

    @extend_schema(responses={200: JudgeVersionSerializer(many=True)})
    # The whole list, unpaginated (a world has a handful): the schema must not say paginated.
    @action(detail=True, methods=["get"], url_path="judge/versions", pagination_class=None)
    def judge_versions(self, request, pack: str):
        """The world's fitted judge versions, newest first, with their held-out agreement."""
        world = self.get_object()
        versions = JudgeVersion.objects.filter(world=world).order_by("-number")
        return Response(JudgeVersionSerializer(versions, many=True).data)


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


# --- the Duel ---------------------------------------------------------------------------------


class DuelErrorsMixin:
    """Service refusals (DuelError) answer with their own status and a `detail` that says why."""

    def handle_exception(self, exc):
        if isinstance(exc, DuelError):
            return Response({"detail": str(exc)}, status=exc.status)
        return super().handle_exception(exc)


def _pack_of(request) -> str | None:
    """The world a call names: ?pack=, or "pack" in its body."""
    return request.query_params.get("pack") or (
        request.data.get("pack") if isinstance(request.data, dict) else None
    )


def _world_for(request) -> World:
    """The world named by ?pack= (or "pack" in the body), else the one the pages have in view."""
    slug = _pack_of(request)
    if slug:
        return world_by_slug(str(slug))
    world = world_in_view(request)
    if world is None:
        raise DuelNotFound("This workspace has no world yet.")
    return world


class DialogueTurnSerializer(serializers.Serializer):
    speaker = serializers.CharField()
    text = serializers.CharField()


class DuelMomentSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=Moment.Kind.choices)
    at = serializers.CharField(help_text="Where the moment is: a call and turn, or a scenario.")
    dialogue = DialogueTurnSerializer(many=True, help_text="The call so far, oldest first.")


class ShownReplySerializer(serializers.Serializer):
    text = serializers.CharField()
    on_topic = serializers.CharField(
        allow_null=True,
        help_text="Why the world's on-topic guard capped this reply's judge total when the "
        "pair was made (its words belong to another business, or do not answer the "
        "conversation); null when it did not",
    )


class DuelItemSerializer(serializers.Serializer):
    pair = serializers.IntegerField()
    pack = serializers.CharField()
    moment = DuelMomentSerializer()
    a = ShownReplySerializer()
    b = ShownReplySerializer()
    reserved_until = serializers.DateTimeField(help_text="The pair is yours until then.")
    picks_wanted = serializers.IntegerField()
    pick_count = serializers.IntegerField()


class DuelNextSerializer(serializers.Serializer):
    item = DuelItemSerializer(allow_null=True)
    selection = serializers.CharField(help_text="What preloaded the queue, in words.")
    detail = serializers.CharField(allow_blank=True)


class JudgeViewSerializer(serializers.Serializer):
    judge_model = serializers.CharField()
    total = serializers.FloatField(allow_null=True)
    scores = serializers.DictField(child=serializers.FloatField())
    reasons = serializers.DictField(child=serializers.CharField())
    overruled = serializers.BooleanField()


class RevealSideSerializer(serializers.Serializer):
    reply = serializers.IntegerField(help_text="Use it to overrule the judge on this reply.")
    source = serializers.ChoiceField(choices=Reply.Source.choices)
    label = serializers.CharField()
    version = serializers.CharField(allow_null=True)
    move = serializers.CharField(allow_blank=True)
    judge = JudgeViewSerializer(allow_null=True)
    can_overrule = serializers.BooleanField()


class RevealSerializer(serializers.Serializer):
    A = RevealSideSerializer()
    B = RevealSideSerializer()


class PickSerializer(serializers.ModelSerializer):
    pack = serializers.SlugRelatedField(source="world", slug_field="slug", read_only=True)
    frozen_in = serializers.IntegerField(
        source="frozen_in_number",
        read_only=True,
        allow_null=True,
        default=None,
        help_text="The first preference version holding this pick; null until frozen.",
    )
    reasons = serializers.ListField(child=serializers.CharField())
    kind = serializers.ChoiceField(
        choices=Pick.Kind.choices,
        read_only=True,
        help_text="preference (chosen_side was better), tie or both_bad (chosen_side is then "
        "A: chosen and rejected are A and B as shown)",
    )

    class Meta:
        model = Pick
        fields = [
            "id",
            "pair",
            "pack",
            "kind",
            "chosen_side",
            "chosen_source",
            "rejected_source",
            "reasons",
            "note",
            "reviewer_name",
            "created_at",
            "frozen_in",
        ]


class PickResultSerializer(PickSerializer):
    reveal = RevealSerializer()

    class Meta(PickSerializer.Meta):
        fields = [*PickSerializer.Meta.fields, "reveal"]


class PickRequestSerializer(serializers.Serializer):
    pair = serializers.IntegerField(help_text="The pair you were served by duel/next.")
    chosen = serializers.CharField(
        required=False,
        allow_blank=True,
        help_text="'A' or 'B': the better reply. Needed for a preference; a tie or both bad "
        "has none.",
    )
    kind = serializers.ChoiceField(
        choices=Pick.Kind.choices,
        required=False,
        default=Pick.Kind.PREFERENCE,
        help_text="preference (the default), tie (as good as each other) or both_bad "
        "(neither would do). Ties and both bad are frozen as such; training skips them.",
    )
    note = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=NOTE_MAX_CHARS,
        trim_whitespace=True,
        help_text=f"Your own words on the pick, at most {NOTE_MAX_CHARS} characters.",
    )
    reasons = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        help_text="Any of the pair's world's reasons (its rubric's dimensions, GET "
        f"/api/rl/packs/<pack>/); a world that keeps the defaults: {', '.join(REASONS)}.",
    )


class DuelGenerateRequestSerializer(serializers.Serializer):
    pack = serializers.CharField()
    count = serializers.IntegerField(min_value=1, max_value=500, default=PAIR_BATCH)
    scenario = serializers.CharField(required=False, allow_blank=True)
    versions = serializers.ListField(
        child=serializers.IntegerField(),
        required=False,
        help_text="Version numbers to compare; default: the live one and the newest answering.",
    )


DuelStats = inline_serializer(
    "DuelStats",
    {
        "pairs": serializers.IntegerField(),
        "open": serializers.IntegerField(),
        "picks": serializers.IntegerField(),
        "unfrozen_picks": serializers.IntegerField(),
        "my_picks": serializers.IntegerField(allow_null=True),
        "reviewer_agreement": serializers.DictField(),
        "judge_agreement": serializers.DictField(),
    },
)

_QUEUE_PARAMETERS = [
    OpenApiParameter("pack", str, description="The world; default: the one in view"),
    OpenApiParameter("scenario", str, description="Only this scenario's moments"),
    OpenApiParameter(
        "move", str, description="Only pairs under this move on the map (reply A's, else B's)"
    ),
    OpenApiParameter("from", str, description="With move: the agent's previous move"),
    OpenApiParameter(
        "order",
        str,
        enum=list(QUEUE_ORDERS),
        description="Which pair first: 'weakest' (lowest judge total, the default) or "
        "'informative' (the judge least sure which reply is better)",
    ),
]


class DuelViewSet(DuelErrorsMixin, viewsets.ViewSet):
    """The Duel's review queue: weakest pair first, one reviewer per pair at a time."""

    permission_classes = [HasRole.at_least(REVIEWER)]
    lookup_value_regex = r"[0-9]+"

    @extend_schema(
        parameters=_QUEUE_PARAMETERS,
        responses={200: DuelNextSerializer},
        description="Serve the first open pair nobody else holds (weakest first, or most "
        "informative first with order=informative) and reserve it for you "
        "for five minutes (asking again serves the same pair). `item` is null when nothing "
        "is left. Which version wrote A or B is revealed by the pick.",
    )
    @action(detail=False, methods=["get"])
    def next(self, request):
        world = _world_for(request)
        selection = QueueSelection.from_params(request.query_params, world=world)
        pair = duel_next(world=world, reviewer=request.user, selection=selection)
        return Response(
            {
                "item": duel_item(pair) if pair else None,
                "selection": selection.describe(),
                "detail": "" if pair else "Nothing left to review here: every pair is picked.",
            }
        )

    @extend_schema(request=None, responses={204: None})
    @action(detail=True, methods=["post"])
    def skip(self, request, pk: str):
        """Pass on a pair: it goes back to the queue, never again to you."""
        duel_skip(pair=duel_pair_get(pair_id=pk), reviewer=request.user)
        return Response(status=204)

    @extend_schema(parameters=_QUEUE_PARAMETERS[:1], responses={200: DuelStats})
    @action(detail=False, methods=["get"])
    def stats(self, request):
        """Queue size, picks, how often reviewers agree, and how often the judge agrees with
        reviewers per dimension."""
        world = _world_for(request)
        stats = duel_stats(world, reviewer=request.user)
        stats["judge_agreement"] = judge_agreement(world)
        return Response(stats)

    @extend_schema(
        request=DuelGenerateRequestSerializer,
        responses={
            201: inline_serializer(
                "DuelGenerated",
                {
                    "made": serializers.IntegerField(help_text="pairs in the queue now"),
                    "later": serializers.IntegerField(
                        help_text="pairs a job writes (a version answers from a model, or the "
                        "judge reads with a base: seconds per reply)"
                    ),
                    "job": serializers.IntegerField(
                        allow_null=True,
                        help_text="that job, to follow at /api/rl/jobs/{id}/; null when none",
                    ),
                },
            )
        },
    )
    @action(detail=False, methods=["post"])
    def generate(self, request):
        """Make new pairs now, optionally between versions you choose."""
        params = DuelGenerateRequestSerializer(data=request.data)
        params.is_valid(raise_exception=True)
        world = world_by_slug(params.validated_data["pack"])
        numbers = params.validated_data.get("versions")
        versions = policy_versions_numbered(numbers=numbers, world=world) if numbers else None
        requested = duel_pairs_request(
            world=world,
            count=params.validated_data["count"],
            scenario=params.validated_data.get("scenario") or None,
            versions=versions,
            started_by=request.user,
            on_request=True,
        )
        job = requested.job.pk if requested.job is not None else None
        return Response({"made": requested.made, "later": requested.later, "job": job}, status=201)


class PickUndoRequestSerializer(serializers.Serializer):
    pack = serializers.CharField(
        required=False, help_text="The world whose last pick of yours to undo; default: any"
    )
    pick = serializers.IntegerField(
        required=False, help_text="The pick you expect to undo; refused unless it is your last"
    )


class PickUndoneSerializer(serializers.Serializer):
    undone = serializers.IntegerField(help_text="The id the pick had")
    pair = serializers.IntegerField(help_text="Its pair, back in the queue")
    pack = serializers.CharField()
    item = DuelItemSerializer(
        allow_null=True,
        help_text="The pair again, reserved for you to pick anew; null when another reviewer "
        "holds it now or a freeze closed it",
    )


class PickViewSet(
    DuelErrorsMixin, mixins.ListModelMixin, mixins.CreateModelMixin, viewsets.GenericViewSet
):
    """Picks (preferences, ties, both bad) of this workspace; submit one for the pair you
    hold, or undo your own last pick until it is frozen."""

    permission_classes = [HasRole.at_least(REVIEWER)]
    serializer_class = PickSerializer
    lookup_value_regex = r"[0-9]+"

    def get_queryset(self):
        pack = self.request.query_params.get("pack")
        filters = PickFilters.from_params(
            self.request.query_params, world=world_by_slug(pack) if pack else None
        )
        picks = picks_listed(filters)
        if self.request.query_params.get("mine"):
            picks = picks.filter(reviewer=self.request.user)
        return picks

    @extend_schema(
        parameters=[
            OpenApiParameter("pack", str, description="Only picks in this world"),
            OpenApiParameter("mine", bool, description="Only your own picks"),
            OpenApiParameter("reviewer", str, description="Only this reviewer's (their email)"),
            OpenApiParameter("reason", str, description="Only picks with this reason ticked"),
            OpenApiParameter("kind", str, enum=list(Pick.Kind.values), description="Only these"),
            OpenApiParameter("since", OpenApiTypes.DATE, description="Picked on or after"),
            OpenApiParameter("until", OpenApiTypes.DATE, description="Picked on or before"),
        ]
    )
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)

    def _undone(self, request, *, pick_id=None, pack=None) -> Response:
        undone = pick_undo(
            reviewer=request.user,
            world=world_by_slug(str(pack)) if pack else None,
            pick_id=pick_id,
        )
        pair = (
            duel_pairs_shown()
            .filter(pk=undone.pair_id, reserved_by=request.user, is_open=True)
            .first()
        )
        return Response(
            {
                "undone": undone.pk,
                "pair": undone.pair_id,
                "pack": undone.world.slug,
                "item": duel_item(pair) if pair is not None else None,
            }
        )

    @extend_schema(
        request=PickUndoRequestSerializer,
        responses={200: PickUndoneSerializer},
        description="Undo your own most recent pick (in `pack` when given) while no preference "
        "version holds it: it is deleted and its pair goes back into the queue, reserved for "
        "you. 409 naming why: you have no pick, `pick` is not yours or not your last, or it "
        "is frozen.",
    )
    @action(detail=False, methods=["post"])
    def undo(self, request):
        body = PickUndoRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        return self._undone(
            request, pick_id=body.validated_data.get("pick"), pack=body.validated_data.get("pack")
        )

    @extend_schema(
        responses={200: PickUndoneSerializer},
        description="Undo this pick: the same as POST picks/undo/ naming it (only your own "
        "last pick, until it is frozen; 409 naming why).",
    )
    def destroy(self, request, pk: str):
        return self._undone(request, pick_id=pk)

    @extend_schema(
        request=PickRequestSerializer,
        responses={201: PickResultSerializer},
        description="Pick the better reply of a pair you hold, or say it is a tie or both bad, "
        "with an optional note. Answers with the pick and the "
        "reveal: who wrote A and B and the judge's scores. 400: unknown reason, side or kind, "
        "or a note over 1000 characters (naming note); "
        "404: no such pair in this workspace; 409: you do not hold the pair, already picked "
        "it, or it was frozen.",
    )
    def create(self, request, *args, **kwargs):
        body = PickRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        pick = pick_submit(
            pair_id=body.validated_data["pair"],
            reviewer=request.user,
            chosen=body.validated_data.get("chosen"),
            reasons=body.validated_data.get("reasons", []),
            kind=body.validated_data["kind"],
            note=body.validated_data.get("note", ""),
        )
        data = PickSerializer(pick).data
        data["reveal"] = pair_reveal(pick.pair)
        return Response(data, status=201)


class JudgeOverrideSerializer(serializers.ModelSerializer):
    class Meta:
        model = JudgeOverride
        fields = [
            "id",
            "reply",
            "judge_model",
            "scores",
            "judge_scores",
            "note",
            "reviewer_name",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields


class JudgeOverrideRequestSerializer(serializers.Serializer):
    reply = serializers.IntegerField(help_text="A reply id, as the pick's reveal gives it.")
    scores = serializers.DictField(
        child=serializers.FloatField(),
        help_text="Your verdict per dimension, 0 to 1; dimensions left out you accept.",
    )
    note = serializers.CharField(required=False, allow_blank=True)


class JudgeOverrideViewSet(
    DuelErrorsMixin, mixins.ListModelMixin, mixins.CreateModelMixin, viewsets.GenericViewSet
):
    """Reviewers overruling the judge on a reply, per dimension (Approve)."""

    permission_classes = [HasRole.at_least(REVIEWER)]
    serializer_class = JudgeOverrideSerializer

    def get_queryset(self):
        return JudgeOverride.objects.order_by("-updated_at")

    @extend_schema(
        request=JudgeOverrideRequestSerializer,
        responses={201: JudgeOverrideSerializer},
        description="Overrule the judge on some dimensions of a reply; saying it again "
        "replaces your earlier verdict. The next rescoring uses it.",
    )
    def create(self, request, *args, **kwargs):
        body = JudgeOverrideRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        override = judge_override_submit(
            reply_id=body.validated_data["reply"],
            reviewer=request.user,
            scores=body.validated_data["scores"],
            note=body.validated_data.get("note", ""),
        )
        return Response(JudgeOverrideSerializer(override).data, status=201)

    @extend_schema(
        request=None,
        parameters=_QUEUE_PARAMETERS[:1],
        responses={
            200: inline_serializer(
                "RescoreReport",
                {
                    "replies_rescored": serializers.IntegerField(),
                    "pairs_reordered": serializers.IntegerField(),
                    "overrides": serializers.IntegerField(),
                    "agreement": serializers.DictField(),
                },
            )
        },
    )
    @action(detail=False, methods=["post"], permission_classes=[HasRole.at_least(MANAGER)])
    def rescore(self, request):
        """Replace the judge's scores on overruled replies; report judge–reviewer agreement
        per dimension. Needs the manager role."""
        pack = request.query_params.get("pack")
        world = world_by_slug(pack) if pack else None
        return Response(judgements_rescore(world=world).as_dict())


class PreferenceVersionSerializer(serializers.ModelSerializer):
    pack = serializers.SlugRelatedField(
        source="world", slug_field="slug", read_only=True, allow_null=True
    )
    extends = serializers.SlugRelatedField(slug_field="number", read_only=True, allow_null=True)
    label = serializers.CharField(read_only=True)
    download = serializers.SerializerMethodField()

    class Meta:
        model = PreferenceVersion
        fields = [
            "pack",
            "is_mixed",
            "number",
            "label",
            "extends",
            "row_count",
            "picks_added",
            "sha256",
            "size_bytes",
            "file_path",
            "created_by_name",
            "created_at",
            "download",
        ]
        read_only_fields = fields

    def get_download(self, version: PreferenceVersion) -> str:
        return version.download_url


class PassthroughTSVRenderer(BaseRenderer):
    """Lets a client ask for the TSV by its media type; errors still read as JSON."""

    media_type = "text/tab-separated-values"
    format = "tsv"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        return json.dumps(data).encode() if data is not None else b""


PACK_OF_VERSIONS = OpenApiParameter(
    "pack",
    str,
    description="The world whose versions are meant (each world numbers its own). Needed when "
    "the workspace has more than one world.",
)
MIXED_VERSIONS = OpenApiParameter(
    "mixed",
    bool,
    description="true: the versions frozen before versions belonged to a world (picks of "
    "several worlds; readable, never trained on) instead of a world's",
)


def _versions_world(request) -> World | None:
    """The world a preferences call means (None: the mixed versions, with ?mixed=true)."""
    if str(request.query_params.get("mixed", "")).lower() in ("1", "true", "yes"):
        return None
    return world_named(_pack_of(request))


@extend_schema_view(
    list=extend_schema(parameters=[PACK_OF_VERSIONS, MIXED_VERSIONS]),
    retrieve=extend_schema(parameters=[PACK_OF_VERSIONS, MIXED_VERSIONS]),
)
class PreferenceVersionViewSet(DuelErrorsMixin, viewsets.ReadOnlyModelViewSet):
    """A world's frozen, numbered preference versions: what training in that world reads."""

    permission_classes = [HasRole.at_least(REVIEWER)]
    serializer_class = PreferenceVersionSerializer
    lookup_field = "number"
    lookup_value_regex = r"[0-9]+"

    def get_queryset(self):
        return preference_versions(_versions_world(self.request))

    def get_object(self):
        return preference_version_get(
            world=_versions_world(self.request), number=self.kwargs["number"]
        )

    @extend_schema(
        request=None,
        parameters=[PACK_OF_VERSIONS],
        responses={201: PreferenceVersionSerializer},
        description="Freeze the world's picks not frozen yet into its next numbered version (a "
        "TSV and a manifest on the datasets volume); no other world's pick is in it. 409 when "
        "the world has no new pick; 400 naming pack when the workspace has several worlds and "
        "none is named. Needs the manager role.",
    )
    @action(detail=False, methods=["post"], permission_classes=[HasRole.at_least(MANAGER)])
    def freeze(self, request):
        version = preference_freeze(world=world_named(_pack_of(request)), by=request.user)
        return Response(PreferenceVersionSerializer(version).data, status=201)

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "part",
                str,
                enum=["tsv", "manifest", "jsonl", "spreadsheet"],
                description="The TSV (default: the exact text training reads), its manifest, "
                "TRL's preference format (JSONL), or CSV for a spreadsheet (cells that would "
                "start a formula get a leading apostrophe)",
            )
        ],
        responses={
            (200, "text/tab-separated-values"): OpenApiTypes.BINARY,
            (200, "text/csv"): OpenApiTypes.BINARY,
            (200, "application/json"): OpenApiTypes.OBJECT,
        },
    )
    @action(
        detail=True,
        methods=["get"],
        renderer_classes=[JSONRenderer, PassthroughTSVRenderer],
    )
    def download(self, request, number: str):
        """The version's TSV (one row per pick) or, with ?part=manifest, its manifest."""
        version = preference_version_get(world=_versions_world(request), number=number)
        path = preference_version_path(version)
        part = request.query_params.get("part") or "tsv"
        if part not in ("tsv", "manifest", "jsonl", "spreadsheet"):
            return Response(
                {
                    "part": "part must be tsv, manifest, jsonl (TRL's preference format) or "
                    "spreadsheet (CSV that is safe to open in a spreadsheet)."
                },
                status=400,
            )
        if part == "spreadsheet":
            if not path.is_file():
                raise DuelNotFound(
                    f"The file of v{version.number} is missing from the datasets volume."
                )
            response = StreamingHttpResponse(
                spreadsheet_lines(path, sha256=version.sha256), content_type="text/csv"
            )
            response["Content-Disposition"] = (
                f'attachment; filename="preferences-v{version.number}.csv"'
            )
            return response
        if part == "jsonl":
            rows = list(read_rows(path, sha256=version.sha256))
            lines = trl_lines(
                rows, imported_ids=preference_imported_ids([row.pick_id for row in rows])
            )
            response = HttpResponse(
                "".join(line + "\n" for line in lines), content_type="application/jsonl"
            )
            response["Content-Disposition"] = (
                f'attachment; filename="preferences-v{version.number}.jsonl"'
            )
            return response
        manifest = part == "manifest"
        if manifest:
            path = path.with_name(f"v{version.number}.manifest.json")
        if not path.is_file():
            raise DuelNotFound(
                f"The file of v{version.number} is missing from the datasets volume."
            )
        response = FileResponse(
            open(path, "rb"),  # noqa: SIM115 - FileResponse closes it
            as_attachment=True,
            filename=path.name if manifest else f"preferences-v{version.number}.tsv",
            content_type="application/json"
            if manifest
            else "text/tab-separated-values; charset=utf-8",
        )
        response["X-Preferences-SHA256"] = version.sha256
        return response
