"""API of training: the Train cards and Engines runs (jobs themselves: levers9.jobs.api)."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.response import Response

from arena.models import World
from arena.selectors import world_only
from levers9.jobs.api import JobSerializer
from levers9.jobs.models import Job
from levers9.jobs.services import JobError
from levers9.roles import MANAGER, HasRole
from policies.models import PolicyVersion
from policies.selectors import policy_live, policy_version_numbered
from policies.services import VersionWorldMismatch
from trainers.registry import DPO, RLHF
from training.cards import train_move_strategy
from training.wording import EPOCHS_MAX, SEED_MAX


def _parent_field(help_text: str = "Parent version number") -> serializers.IntegerField:
    # 0 must not read as "none given" (the live version): it is a mistake, said so.
    return serializers.IntegerField(
        required=False,
        min_value=1,
        error_messages={"min_value": "Version numbers start at 1."},
        help_text=help_text,
    )


class ParentNotInWorld(Exception):
    """The parent number names no version of the world: a 400 naming `parent`."""


def _parent_in(world: World, number: int | None) -> PolicyVersion | None:
    """`world`'s version with this number (each world numbers its own), else its live
    version when none is named; ParentNotInWorld when the world has no such version."""
    if not number:
        return policy_live(world=world)
    parent = policy_version_numbered(world=world, number=number)
    if parent is None:
        raise ParentNotInWorld(
            f"{world.name} has no version v{number}: each world numbers its own versions."
        )
    return parent


def _field_refused(field: str, message: str) -> Response:
    return Response({field: [message]}, status=status.HTTP_400_BAD_REQUEST)


def _seed_field() -> serializers.IntegerField:
    return serializers.IntegerField(
        required=False, default=0, min_value=0, max_value=SEED_MAX, help_text="0 to 2**32-1"
    )


class MoveStrategySerializer(serializers.Serializer):
    pack = serializers.SlugField(help_text="The world whose simulator it learns on")
    parent = _parent_field()
    seed = _seed_field()


def _job_started(request, serializer_class, start) -> Response:
    """Validate the body, find its world and the parent there, then `start(data, world,
    parent)`: 201 with the job, or a 400 naming what to fix (`parent`, a knob, ...)."""
    body = serializer_class(data=request.data)
    body.is_valid(raise_exception=True)
    data = body.validated_data
    world = get_object_or_404(World, slug=data["pack"])
    try:
        job = start(data, world, _parent_in(world, data.get("parent")))
    except ParentNotInWorld as error:
        return _field_refused("parent", str(error))
    except VersionWorldMismatch as error:
        return _field_refused(error.field, str(error))
    except ValueError as error:  # a knob out of range (KnobError names it), a world without calls
        refusal = {"detail": str(error)}
        if hasattr(error, "knob"):
            refusal["knob"] = error.knob
        return Response(refusal, status=status.HTTP_400_BAD_REQUEST)
    return Response(JobSerializer(job).data, status=status.HTTP_201_CREATED)


@extend_schema(request=MoveStrategySerializer, responses={201: JobSerializer})
@api_view(["POST"])
@permission_classes([HasRole.at_least(MANAGER)])
def train_move_strategy_api(request):
    """The "Move strategy" card: Q-learning with default knobs; always ends in a version."""
    return _job_started(
        request,
        MoveStrategySerializer,
        lambda data, world, parent: train_move_strategy(
            world=world, parent=parent, seed=data["seed"], started_by=request.user
        ),
    )


class EnginesRunSerializer(serializers.Serializer):
    algorithm = serializers.CharField(
        help_text="q-learning-online, ppo or reward-model where the world has the simulator; "
        "offline-outcome in a world of recorded calls (a route the world cannot run is a 400 "
        "naming algorithm, saying why)"
    )
    knobs = serializers.DictField(required=False, default=dict, help_text="name: value")
    pack = serializers.SlugField(help_text="The world the run learns in (and is listed in)")
    parent = _parent_field()


class EnginesRunsSerializer(serializers.Serializer):
    pack = serializers.CharField(help_text="The world listed: every run below is one of its")
    results = JobSerializer(many=True)


def _engines_world(pack: str | None) -> tuple[World | None, Response | None]:
    """The world an Engines request names with `pack`; without one, the workspace's only
    world. Else a 400 naming pack and how to fix it."""
    if not pack:
        worlds = list(World.objects.all()[:2])
        if len(worlds) == 1:
            return worlds[0], None
        return None, _field_refused(
            "pack", "Name the world with pack=<slug>: each world lists its own runs."
        )
    world = World.objects.filter(slug=pack).first()
    if world is None:
        return None, _field_refused("pack", f"No world '{pack}' in this workspace.")
    return world, None


@extend_schema(
    methods=["GET"],
    parameters=[OpenApiParameter("pack", str, description="The world whose runs to list")],
    request=None,
    responses={200: EnginesRunsSerializer},
)
@extend_schema(methods=["POST"], request=EnginesRunSerializer, responses={201: JobSerializer})
@api_view(["GET", "POST"])
@permission_classes([HasRole.at_least(MANAGER)])
def engines_run_api(request):
    """GET: a world's Engines runs (newest 30; another world's never). POST: start a run in
    the world named by pack; bad knobs, or a route the world cannot run, get a 400 naming the
    field before anything runs."""
    from training.engines import engines_run_start, engines_runs_of

    if request.method == "GET":
        world, refused = _engines_world(request.query_params.get("pack"))
        if refused is not None:
            return refused
        runs = JobSerializer(engines_runs_of(world=world), many=True).data
        return Response({"pack": world.slug, "results": runs})
    return _job_started(
        request,
        EnginesRunSerializer,
        lambda data, world, parent: engines_run_start(
            algorithm=data["algorithm"],
            knobs=data["knobs"],
            world=world,
            parent=parent,
            started_by=request.user,
        ),
    )


class PromoteSerializer(serializers.Serializer):
    confirm = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Needed when the run did worse than its parent; its version then says it "
        "did not learn",
    )
    pack = serializers.SlugField(
        required=False, help_text="The run's world (optional; another world's is refused)"
    )


class PromotedSerializer(serializers.Serializer):
    version = serializers.IntegerField()
    label = serializers.CharField()
    pack = serializers.CharField()
    did_not_learn = serializers.ListField(child=serializers.CharField())


@extend_schema(request=PromoteSerializer, responses={201: PromotedSerializer})
@api_view(["POST"])
@permission_classes([HasRole.at_least(MANAGER)])
def engines_run_promote_api(request, job_id: int):
    """Make a finished Engines run a version of its own world (once). A run that did worse
    than its parent is a 409 naming confirm until it is sent true."""
    from training.engines import KnobError, PromoteNeedsConfirm, engines_run_promote

    job = get_object_or_404(Job, pk=job_id, kind="engines")
    body = PromoteSerializer(data=request.data)
    body.is_valid(raise_exception=True)
    world = None
    if body.validated_data.get("pack"):
        world, refused = _engines_world(body.validated_data["pack"])
        if refused is not None:
            return refused
    try:
        version = engines_run_promote(
            job=job,
            world=world,
            confirm=body.validated_data["confirm"],
            promoted_by=request.user,
        )
    except KnobError as error:
        return _field_refused(error.knob or "pack", str(error))
    except PromoteNeedsConfirm as error:
        return Response(
            {error.field: [str(error)], "detail": str(error)}, status=status.HTTP_409_CONFLICT
        )
    except JobError as error:
        return Response({"detail": str(error)}, status=status.HTTP_409_CONFLICT)
    return Response(
        {
            "version": version.number,
            "label": version.label,
            "pack": version.world.slug,
            "did_not_learn": version.did_not_learn,
        },
        status=201,
    )


class WordingCardSerializer(serializers.Serializer):
    method = serializers.ChoiceField(
        choices=[RLHF, DPO], help_text="rlhf (Wording, the route to ship) or dpo (Benchmark)"
    )
    preference_version = serializers.IntegerField(help_text="A frozen preference version number")
    pack = serializers.SlugField(
        required=False,
        help_text="The world the version is made in (default: the outcome world for "
        "reward_source=outcomes, else the first world by name); the parent is its number there",
    )
    parent = _parent_field("Parent version number in the pack (default: its live version)")
    pool = serializers.CharField(
        required=False, allow_blank=True, help_text="Pool name (default: the biggest enabled)"
    )
    cards = serializers.IntegerField(required=False, min_value=1)
    base = serializers.CharField(
        required=False,
        allow_blank=True,
        help_text="A listed base or a Hugging Face repo id owner/name (default: the pool's)",
    )
    epochs = serializers.FloatField(
        required=False, min_value=0.01, max_value=EPOCHS_MAX, default=1.0
    )
    seed = _seed_field()
    reward_source = serializers.ChoiceField(
        choices=["picks", "outcomes"], required=False, default="picks", help_text="RLHF only"
    )
    outcomes_pack = serializers.SlugField(
        required=False, help_text="The real-call world whose outcome labels train the reward"
    )


@extend_schema(request=WordingCardSerializer, responses={201: JobSerializer})
@api_view(["POST"])
@permission_classes([HasRole.at_least(MANAGER)])
def train_wording_api(request):
    """The "Wording · RLHF" and "Benchmark · DPO" cards: frozen picks → a job → a version,
    served and checkpointed. Too few pairs, a bad base or a missing pool get a 400 saying so
    before anything runs."""
    from arena.models import PreferenceVersion
    from training.wording import WordingCardError, train_wording, wording_choice_from

    body = WordingCardSerializer(data=request.data)
    body.is_valid(raise_exception=True)
    data = body.validated_data
    world = _wording_world(data)
    if world is None:
        return _field_refused(
            "pack",
            f"No world '{data.get('pack')}' in this workspace."
            if data.get("pack")
            else "This workspace has several worlds: name the one to train in with pack.",
        )
    # The world's own version of that number (each world numbers its own).
    preference = PreferenceVersion.objects.filter(
        world=world, number=data["preference_version"]
    ).first()
    if preference is None:
        return _field_refused(
            "preference_version",
            f"No preference version v{data['preference_version']} in {world.name}: each world "
            "freezes its own picks into its own versions; freeze there first.",
        )
    try:
        parent = _parent_in(world, data.get("parent")) if data.get("parent") else None
    except ParentNotInWorld as error:
        return _field_refused("parent", str(error))
    if parent is not None and not parent.can_answer:
        return Response(
            {"detail": f"{parent.label} is released: choose a version that can answer."},
            status=status.HTTP_400_BAD_REQUEST,
        )
    try:
        choice = wording_choice_from(
            method=data["method"],
            preference=preference,
            pool_name=data.get("pool") or "",
            parent=parent,
            cards=data.get("cards"),
            epochs=data["epochs"],
            seed=data["seed"],
            base=data.get("base") or "",
            reward_source=data["reward_source"],
            outcomes_pack=data.get("outcomes_pack") or "",
            world=world,
        )
        job = train_wording(choice=choice, started_by=request.user)
    except (WordingCardError, ValueError) as error:
        return Response({"detail": str(error)}, status=status.HTTP_400_BAD_REQUEST)
    return Response(JobSerializer(job).data, status=status.HTTP_201_CREATED)


def _wording_world(data: dict) -> World | None:
    """The world a wording version is made in: the pack named; else, for an outcome reward,
    the outcome world; else the workspace's only world (None: an unknown pack, or several
    worlds and none named)."""
    if data.get("pack"):
        return World.objects.filter(slug=data["pack"]).first()
    if data.get("reward_source") == "outcomes":
        with_calls = World.objects.filter(calls__isnull=False).distinct().order_by("name")
        outcome_world = (
            with_calls.filter(slug=data["outcomes_pack"]).first()
            if data.get("outcomes_pack")
            else with_calls.first()
        )
        if outcome_world is not None:
            return outcome_world
    return world_only()
