"""API of the policy registry: versions (with Runs on, release and serve) and endpoints.

    GET  /api/rl/policies/[?pack=<slug>]       every version (of one world), lineage, status
    POST /api/rl/policies/{id}/release         free the cards of its endpoint (owner)
    POST /api/rl/policies/{id}/serve           {"gpu_count": 4, "pool": "..."}: a job (owner)
    POST /api/rl/policies/{id}/runs-on         move its agent (owner)
    GET  /api/rl/endpoints/                    every endpoint with its cards and counters (owner)
    POST /api/rl/endpoints/{id}/release        release one endpoint (owner)

Each version belongs to one world (`pack`): numbers count per world, so `pack` + `number`
name a version (its `id` names it alone). Without `?pack=` the list holds every world's.

No key is ever part of a response: a version records model names, addresses and at most
the NAME of the variable its key is read from.
"""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from arena.models import World
from arena.selectors import world_only
from levers9.roles import OWNER, REVIEWER, HasRole
from policies.endpoints import endpoint_release, version_release, version_serve
from policies.errors import PolicyError
from policies.models import Endpoint, PolicyVersion
from policies.selectors import endpoints_list, version_lineage
from policies.services import JUDGE_MODEL, version_runs_on_set


def world_for_pack(pack: str | None, *, field: str = "pack", named: bool = False) -> World:
    """The world a request names by slug. None named: the first world by name (as the pages
    show when none is chosen), or, with `named`, the only world of the workspace, and a 400
    naming the field where there are several (a live call sent to a world by the order of
    names lands in a business it is not). An unknown slug is a 400 naming the field."""
    if pack:
        world = World.objects.filter(slug=pack).first()
        if world is None:
            raise serializers.ValidationError({field: [f"No world '{pack}' in this workspace."]})
        return world
    only = world_only()
    if only is not None:
        return only
    slugs = list(World.objects.order_by("name").values_list("slug", flat=True))
    if not slugs:
        raise serializers.ValidationError({field: ["No world yet."]})
    if named:
        raise serializers.ValidationError(
            {
                field: [
                    f"Name the world: this workspace has several, give '{field}' as one of "
                    f"{', '.join(slugs)}."
                ]
            }
        )
    return World.objects.get(slug=slugs[0])


class EndpointSerializer(serializers.ModelSerializer):
    pack = serializers.CharField(
        source="version.world.slug", read_only=True, help_text="The version's world"
    )
    version = serializers.SlugRelatedField(
        slug_field="number", read_only=True, help_text="The version's number in its pack"
    )
    version_label = serializers.CharField(source="version.label", read_only=True)
    mean_latency_ms = serializers.FloatField(read_only=True, allow_null=True)
    error_rate = serializers.FloatField(read_only=True, allow_null=True)

    class Meta:
        model = Endpoint
        fields = [
            "id",
            "pack",
            "version",
            "version_label",
            "kind",
            "state",
            "pool_name",
            "card_type",
            "card_count",
            "card_allocation_id",
            "job_id",
            "url",
            "served_model",
            "error",
            "request_count",
            "error_count",
            "error_rate",
            "mean_latency_ms",
            "latency_last_ms",
            "created_at",
            "serving_since",
            "ended_at",
        ]


class ReplyHabitsSerializer(serializers.Serializer):
    replies = serializers.IntegerField(help_text="Judged replies")
    capped = serializers.IntegerField(help_text="How many the on-topic guard capped")
    capped_share = serializers.FloatField(allow_null=True)
    mean_words = serializers.FloatField(allow_null=True, help_text="Mean length in words")
    repeating = serializers.IntegerField(
        help_text="How many repeat a word 3-gram within the same reply"
    )
    repeat_share = serializers.FloatField(allow_null=True)


class AgainstBaseRepliesSerializer(serializers.Serializer):
    version = ReplyHabitsSerializer()
    base = ReplyHabitsSerializer()


class AgainstBaseSerializer(serializers.Serializer):
    evaluation = serializers.IntegerField(help_text="The against-base checkpoint's id")
    base = serializers.CharField(help_text="The base, answering with no adapter")
    win_rate = serializers.FloatField(
        allow_null=True, help_text="The world's judge's win rate of the version over its base"
    )
    interval = serializers.ListField(
        child=serializers.FloatField(),
        allow_null=True,
        help_text="Its 95% bootstrap interval, resampling held-out calls",
    )
    calls = serializers.IntegerField(allow_null=True, help_text="Held-out calls")
    moments = serializers.IntegerField(allow_null=True, help_text="Held-out moments")
    compared = serializers.IntegerField(allow_null=True, help_text="Moments both answered")
    judge = serializers.CharField(help_text="The world's judge that scored both")
    verdict = serializers.CharField(
        help_text='"won", "lost", "even", "incomplete" or "no_verdict" (evaluation.verdicts)'
    )
    beats_base = serializers.BooleanField(
        help_text="true only where the interval lies wholly above 0.5, from a judge measured "
        "above chance"
    )
    replies = AgainstBaseRepliesSerializer(
        help_text="Each side's capped share, length and repeat rate"
    )
    reasons = serializers.ListField(
        child=serializers.CharField(), help_text="What it added to did_not_learn"
    )
    notes = serializers.ListField(
        child=serializers.CharField(),
        help_text="Shown beside the win rate: much longer or more repetitive than the base",
    )


class PolicyVersionSerializer(serializers.ModelSerializer):
    pack = serializers.SlugRelatedField(
        source="world",
        slug_field="slug",
        read_only=True,
        help_text="The world (pack) it belongs to: numbers, lineage, live and canary are per "
        "world.",
    )
    label = serializers.CharField(read_only=True)
    parent = serializers.PrimaryKeyRelatedField(read_only=True, allow_null=True)
    can_answer = serializers.BooleanField(read_only=True)
    did_not_learn = serializers.ListField(
        child=serializers.CharField(),
        read_only=True,
        help_text="Why a trained version learned nothing (reward model at chance on held-out "
        "data, a policy that did not move, no better than its base untrained); empty when it "
        "learned. A wording version that beats its base untrained is not marked for what its "
        "trainer's own figures said: those reasons move to own_figures_overruled.",
    )
    own_figures_overruled = serializers.ListField(
        child=serializers.CharField(),
        read_only=True,
        help_text="Its trainer's own did-not-learn reasons that its win against its base "
        "untrained (against_base.beats_base) overrules; empty otherwise.",
    )
    lineage = serializers.SerializerMethodField(help_text="Labels from this version to v1.")
    endpoint = serializers.SerializerMethodField()
    against_base = serializers.SerializerMethodField(
        help_text="A wording version against its own base untrained (no adapter) on the "
        "world's held-out calls, scored by the world's judge with the on-topic guard on; null "
        "before that checkpoint is done and for versions with no base."
    )

    class Meta:
        model = PolicyVersion
        fields = [
            "id",
            "pack",
            "number",
            "name",
            "label",
            "parent",
            "lineage",
            "description",
            "provider",
            "provider_model",
            "endpoint_url",
            "lora_adapter",
            "api_key_env",
            "learned_from",
            "status",
            "can_answer",
            "did_not_learn",
            "own_figures_overruled",
            "against_base",
            "endpoint",
            "created_at",
        ]

    def get_lineage(self, version: PolicyVersion) -> list[str]:
        known = self.context.get("versions_by_id")
        return [ancestor.label for ancestor in version_lineage(version, known=known)]

    @extend_schema_field(AgainstBaseSerializer(allow_null=True))
    def get_against_base(self, version: PolicyVersion) -> dict | None:
        return getattr(version.learned, "against_base", None)

    @extend_schema_field(EndpointSerializer(allow_null=True))
    def get_endpoint(self, version: PolicyVersion) -> dict | None:
        endpoint = version.endpoints.filter(state__in=Endpoint.LIVE_STATES).first()
        return EndpointSerializer(endpoint).data if endpoint else None


class ServeSerializer(serializers.Serializer):
    gpu_count = serializers.IntegerField(
        min_value=1, help_text="Cards to serve on (the pool's size at most)."
    )
    pool = serializers.CharField(
        required=False,
        allow_blank=True,
        help_text="A pool by name; the first enabled GPU pool (else the CPU pool) by default.",
    )


class RunsOnSerializer(serializers.Serializer):
    provider = serializers.ChoiceField(
        choices=["simulator", "vllm", "openai", "anthropic", JUDGE_MODEL],
        help_text='"judge" moves the agent to the model of its world\'s judge (or the named '
        "world's).",
    )
    model = serializers.CharField(required=False, allow_blank=True, default="")
    endpoint_url = serializers.CharField(required=False, allow_blank=True, default="")
    lora_adapter = serializers.CharField(required=False, allow_blank=True, default="")
    api_key_env = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        help_text="The NAME of the variable holding the endpoint's key (VLLM_API_KEY), "
        "never the key.",
    )
    pack = serializers.SlugField(
        required=False,
        allow_blank=True,
        default="",
        help_text='The world whose judge, for "judge" (default: the version\'s own).',
    )


def _refused(error: PolicyError) -> Response:
    return Response({"detail": str(error)}, status=error.status)


class PolicyVersionViewSet(viewsets.ReadOnlyModelViewSet):
    """Every agent version of this workspace with its world, lineage, provider and endpoint;
    `?pack=<slug>` keeps one world's."""

    serializer_class = PolicyVersionSerializer
    permission_classes = [HasRole.at_least(REVIEWER)]

    def get_queryset(self):
        versions = PolicyVersion.objects.select_related("parent", "world").order_by(
            "world__name", "number"
        )
        pack = self.request.query_params.get("pack") if self.action == "list" else None
        if pack:
            versions = versions.filter(world=world_for_pack(pack))
        return versions

    def get_serializer_context(self):
        context = super().get_serializer_context()
        context["versions_by_id"] = {version.pk: version for version in PolicyVersion.objects.all()}
        return context

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "pack",
                OpenApiTypes.STR,
                description="Only this world's versions (a world's slug); every world's when "
                "left out. An unknown slug is a 400 naming `pack`.",
            )
        ]
    )
    def list(self, request, *args, **kwargs):
        # The list read keeps the registry honest: endpoints deleted directly are released.
        endpoints_list()
        return super().list(request, *args, **kwargs)

    @extend_schema(request=None, responses={200: PolicyVersionSerializer})
    @action(detail=True, methods=["post"], permission_classes=[HasRole.at_least(OWNER)])
    def release(self, request, pk=None):
        """Release the version's endpoint: its cards go back to the pool, its merged weights
        stay on the models volume, and it answers nothing until served again."""
        version = self.get_object()
        try:
            version_release(version=version)
        except PolicyError as error:
            return _refused(error)
        version.refresh_from_db()
        return Response(self.get_serializer(version).data)

    @extend_schema(request=ServeSerializer, responses={202: EndpointSerializer})
    @action(detail=True, methods=["post"], permission_classes=[HasRole.at_least(OWNER)])
    def serve(self, request, pk=None):
        """Serve the trained version again on N cards: a serve job. The endpoint is starting
        until the job says it answers."""
        body = ServeSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        version = self.get_object()
        try:
            endpoint = version_serve(
                version=version,
                gpu_count=body.validated_data["gpu_count"],
                pool_name=body.validated_data.get("pool", ""),
                started_by=request.user,
            )
        except PolicyError as error:
            return _refused(error)
        return Response(EndpointSerializer(endpoint).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=RunsOnSerializer, responses={200: PolicyVersionSerializer})
    @action(
        detail=True,
        methods=["post"],
        url_path="runs-on",
        permission_classes=[HasRole.at_least(OWNER)],
    )
    def runs_on(self, request, pk=None):
        """Move the version's agent to the judge's model, a vLLM endpoint, an OpenAI or
        Anthropic model by name, or back to the simulator."""
        body = RunsOnSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        version = self.get_object()
        # The version's own world's judge, unless another world is named.
        world = World.objects.filter(slug=data["pack"]).first() if data["pack"] else version.world
        if data["provider"] == JUDGE_MODEL and world is None:
            return Response(
                {"detail": "Name the world (pack) whose judge model to run on."}, status=400
            )
        try:
            version = version_runs_on_set(
                version=version,
                provider=data["provider"],
                model=data["model"],
                endpoint_url=data["endpoint_url"],
                lora_adapter=data["lora_adapter"],
                api_key_env=data["api_key_env"],
                world=world,
            )
        except PolicyError as error:
            return _refused(error)
        return Response(self.get_serializer(version).data)


class PolicyVersionActionsWithoutSlash(PolicyVersionViewSet):
    """The same actions at the addresses the description names, without a trailing slash
    (`POST /api/rl/policies/{id}/release`). Left out of the schema: it lists them once."""

    schema = None


class EndpointViewSet(viewsets.ReadOnlyModelViewSet):
    """Every endpoint of this workspace: version, pool, cards, state, latency, error rate."""

    serializer_class = EndpointSerializer
    permission_classes = [HasRole.at_least(OWNER)]

    def get_queryset(self):
        return Endpoint.objects.select_related("version__world").order_by("-created_at", "-id")

    def list(self, request, *args, **kwargs):
        endpoints_list()
        return super().list(request, *args, **kwargs)

    @extend_schema(request=None, responses={200: EndpointSerializer})
    @action(detail=True, methods=["post"])
    def release(self, request, pk=None):
        """Release this endpoint: its cards go back to the pool; the weights stay."""
        endpoint = self.get_object()
        try:
            endpoint = endpoint_release(endpoint=endpoint)
        except PolicyError as error:
            return _refused(error)
        return Response(EndpointSerializer(endpoint).data)
