"""API of evaluation: start an evaluation, read its results and episodes, and the lens.

    POST /api/rl/evaluations/                          {"pack", "candidate", "baseline", "seed"}
                                                       → 202, the evaluation and its job (manager)
    GET  /api/rl/evaluations/                          every evaluation, newest first
    GET  /api/rl/evaluations/{id}/                     its state and results (summary)
    GET  /api/rl/evaluations/{id}/episodes/{position}/ one held-out call, replies side by side
    GET  /api/rl/packs/{pack}/score-vs-outcome         the lead-to-order lens (observational)

Every read is scoped to the workspace of the host it is asked on (its own schema).
"""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action, api_view, permission_classes
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response

from arena.models import World
from evaluation.against_base import against_base_outcome
from evaluation.episodes import evaluation_episode
from evaluation.errors import EvaluationError
from evaluation.lens import LENS_BANDS, world_score_vs_outcome
from evaluation.models import Evaluation
from evaluation.selectors import evaluation_versions_default
from evaluation.services import evaluation_start
from evaluation.summary import evaluation_regressions
from evaluation.verdicts import judge_agreement_shown
from levers9.roles import MANAGER, REVIEWER, HasRole
from policies.api import AgainstBaseSerializer
from policies.models import PolicyVersion
from trainers.judge.standing import MIN_HELD_OUT_ITEMS


class EvaluationSerializer(serializers.ModelSerializer):
    pack = serializers.SlugRelatedField(source="world", slug_field="slug", read_only=True)
    candidate = serializers.SlugRelatedField(slug_field="number", read_only=True)
    baseline = serializers.SlugRelatedField(slug_field="number", read_only=True)
    candidate_label = serializers.CharField(source="candidate.label", read_only=True)
    baseline_label = serializers.CharField(read_only=True)
    kind = serializers.CharField(source="call_set.kind", read_only=True)
    job = serializers.PrimaryKeyRelatedField(read_only=True)
    joined = serializers.BooleanField(
        read_only=True,
        help_text="true on a start answered with the evaluation of the same versions on the "
        "same calls already on its way (nothing new was started)",
    )
    win_rate = serializers.FloatField(read_only=True, allow_null=True)
    verdict = serializers.CharField(
        read_only=True,
        help_text='"won", "lost", "even", "incomplete" or "no_verdict" once done ("" before): '
        'on scripted customers the simulator\'s (verdict_source "simulator"), else the '
        "judge's, and only from a judge measured above chance on at least "
        f'{MIN_HELD_OUT_ITEMS} held-out items: otherwise "no_verdict", with no_verdict '
        "saying why. A no verdict is not a win or a loss; win_rate stays the judge's raw one.",
    )
    verdict_source = serializers.SerializerMethodField(
        help_text='"simulator" or "judge": what the verdict rests on'
    )
    no_verdict = serializers.SerializerMethodField(
        help_text='null unless verdict is "no_verdict"; then {"reason": "at_chance", '
        '"too_few" or "not_measured" (the judge\'s standing), "sentence": "no verdict: this '
        'world\'s judge is at chance (AUC 0.50 [0.42, 0.59])", "judge_win_rate", '
        '"judge_ci"}'
    )
    verdict_licensed_by = serializers.SerializerMethodField(
        help_text="The judge's figures that licensed its verdict: \"AUC 0.68 [0.58, 0.77] on 116 "
        'held-out calls" (those whose interval lies above chance); "" for the simulator\'s '
        "verdict and where there is none"
    )
    against_base = serializers.SerializerMethodField(
        help_text="For a checkpoint against the candidate's own base untrained (purpose "
        '"against_base"), once done: what its version\'s record keeps of it, with the reasons '
        "it added to did_not_learn and the notes shown beside the win rate; else null"
    )
    verdict_not_counted = serializers.SerializerMethodField(
        help_text="The judge's other figures, which did not license it: \"its pair accuracy is "
        'too few to measure (n = 5)"; "" when none'
    )
    summary = serializers.JSONField(
        read_only=True,
        help_text="Once done: win_rate with its bootstrap interval ci, wins/ties/losses, per "
        "version (candidate, baseline) mean_reward, mean_call_score, radar (mean judge score "
        "per dimension), beat_yardstick (how often it beat the real agent); the yardstick's "
        "own figures; per_call means (each with its noise and whether it is a regression); "
        "regressions (positions of calls where the candidate scored lower by more than the "
        "judge's noise, worst first) and regression_noise (that noise: spread, the per-turn "
        "difference's standard deviation within calls, pooled; degrees; calls; z; confidence; "
        "turns; noise, z x spread / sqrt(turns) for a call of that many turns); on scripted "
        "customers, the simulator's returns on the "
        "held-out calls and the simulated duel (simulator: won_share and mean_return per "
        "version on 1,000 seeded customers each, won_share_difference and return_difference "
        "with their bootstrap intervals, verdict; or unavailable: why); verdict_source "
        '("simulator" or "judge"), judge_verdict (the judge\'s, as verdict) and '
        "judge_agreement (the judge's measured pair_accuracy with pair_accuracy_ci and pairs, "
        "outcome_auc with outcome_auc_ci and calls, standing, at_chance; a figure measured on "
        f"fewer than {MIN_HELD_OUT_ITEMS} held-out items is null, and pairs_too_few or "
        'outcomes_too_few says so: "too few to measure (n = 4)").',
    )

    def get_verdict_source(self, evaluation: Evaluation) -> str:
        return evaluation.verdict_decided.source

    def get_no_verdict(self, evaluation: Evaluation) -> dict | None:
        return evaluation.verdict_decided.why_none()

    def get_verdict_licensed_by(self, evaluation: Evaluation) -> str:
        return evaluation.verdict_decided.licensed_by

    def get_verdict_not_counted(self, evaluation: Evaluation) -> str:
        return evaluation.verdict_decided.not_counted

    @extend_schema_field(AgainstBaseSerializer(allow_null=True))
    def get_against_base(self, evaluation: Evaluation) -> dict | None:
        if not evaluation.against_base or evaluation.state != Evaluation.State.DONE:
            return None
        return against_base_outcome(evaluation)

    def to_representation(self, evaluation: Evaluation) -> dict:
        data = super().to_representation(evaluation)
        summary = data.get("summary")
        if isinstance(summary, dict) and summary.get("judge_agreement"):
            # Summaries kept before the too-few rule are read through it too.
            data["summary"] = {
                **summary,
                "judge_agreement": judge_agreement_shown(summary["judge_agreement"]),
            }
        if isinstance(summary, dict) and summary.get("per_call"):
            # So are those kept before the regressions' noise rule.
            regressions = evaluation_regressions(evaluation)
            data["summary"] = {
                **data["summary"],
                "regressions": regressions["positions"],
                "regression_noise": regressions["noise"],
                "per_call": regressions["per_call"],
            }
        return data

    class Meta:
        model = Evaluation
        fields = [
            "id",
            "pack",
            "kind",
            "purpose",
            "candidate",
            "candidate_label",
            "baseline",
            "baseline_label",
            "seed",
            "judge_model",
            "state",
            "job",
            "joined",
            "win_rate",
            "verdict",
            "verdict_source",
            "no_verdict",
            "verdict_licensed_by",
            "verdict_not_counted",
            "against_base",
            "summary",
            "error",
            "created_at",
            "started_at",
            "finished_at",
        ]


class EvaluationStartSerializer(serializers.Serializer):
    pack = serializers.SlugField(
        help_text="The world (pack) whose held-out calls are replayed; both versions are its own"
    )
    candidate = serializers.IntegerField(
        required=False,
        help_text="Version number in the pack of the new version; its newest answering one",
    )
    baseline = serializers.IntegerField(
        required=False,
        help_text="Version number in the pack to beat; the candidate's parent, else its live "
        "version",
    )
    seed = serializers.IntegerField(
        required=False,
        default=0,
        min_value=0,
        # Evaluation.seed is a PositiveIntegerField: a signed 32-bit column in PostgreSQL.
        max_value=2**31 - 1,
        help_text="0 to 2**31-1 (what the evaluation's record holds)",
    )


class EpisodeReplySerializer(serializers.Serializer):
    side = serializers.ChoiceField(choices=["candidate", "baseline", "yardstick"])
    label = serializers.CharField()
    text = serializers.CharField()
    move = serializers.CharField()
    error = serializers.CharField()
    judge = serializers.JSONField(allow_null=True, help_text="total, scores, reasons")


class EpisodeTurnSerializer(serializers.Serializer):
    number = serializers.IntegerField(help_text="1 for the call's first agent turn")
    moment = serializers.IntegerField()
    dialogue = serializers.ListField(child=serializers.DictField(child=serializers.CharField()))
    replies = EpisodeReplySerializer(many=True)


class EpisodeSerializer(serializers.Serializer):
    position = serializers.IntegerField()
    label = serializers.CharField()
    outcome = serializers.CharField()
    regression = serializers.BooleanField()
    summary = serializers.JSONField(allow_null=True)
    turns = EpisodeTurnSerializer(many=True)


class ScoreBandSerializer(serializers.Serializer):
    band = serializers.IntegerField(help_text="0 is the lowest band")
    low = serializers.FloatField(help_text="The band's lower edge (held by the band)")
    high = serializers.FloatField(help_text="Its upper edge (the next band's lower edge)")
    min_score = serializers.FloatField(allow_null=True, help_text="Its lowest call score")
    max_score = serializers.FloatField(allow_null=True, help_text="Its highest call score")
    calls = serializers.IntegerField()
    won = serializers.IntegerField()
    won_rate = serializers.FloatField(allow_null=True)
    ci_low = serializers.FloatField(allow_null=True, help_text="Wilson 95% interval")
    ci_high = serializers.FloatField(allow_null=True)
    share_low = serializers.FloatField(
        help_text="The share of the world's scored calls below this band: where the chart "
        "starts it, so equal-count bands are drawn equally wide however their scores bunch"
    )
    share_high = serializers.FloatField(help_text="The share at its top: where the chart ends it")


class LensVersionSerializer(serializers.Serializer):
    role = serializers.ChoiceField(choices=["candidate", "baseline"])
    version = serializers.IntegerField()
    label = serializers.CharField()
    score = serializers.FloatField(help_text="Its mean judge score on the replayed openings")
    band = serializers.IntegerField(allow_null=True)
    band_won_rate = serializers.FloatField(allow_null=True)
    share = serializers.FloatField(
        allow_null=True,
        help_text="The share of the world's scored calls scoring below it (ties half): where "
        "the chart places it",
    )


class ScoreVsOutcomeSerializer(serializers.Serializer):
    pack = serializers.CharField()
    judge_model = serializers.CharField()
    observational = serializers.BooleanField()
    note = serializers.CharField()
    score = serializers.CharField(help_text="What a call's score is")
    calls_total = serializers.IntegerField()
    calls_with_openings = serializers.IntegerField()
    calls_scored = serializers.IntegerField()
    calls_labelled = serializers.IntegerField(help_text="Scored calls with a won or lost outcome")
    won = serializers.IntegerField()
    won_rate = serializers.FloatField(allow_null=True)
    band_count = serializers.IntegerField()
    edges = serializers.ListField(child=serializers.FloatField())
    bands = ScoreBandSerializer(many=True)
    evaluation = serializers.IntegerField(allow_null=True)
    versions = LensVersionSerializer(many=True)


def _version(number: int | None, *, world: World, field: str) -> PolicyVersion | None:
    """`world`'s version with this number (each world numbers its own); one the world does
    not have is a 400 naming the field."""
    if number is None:
        return None
    version = PolicyVersion.objects.filter(world=world, number=number).first()
    if version is None:
        raise serializers.ValidationError(
            {field: [f"{world.name} has no version v{number}: each world numbers its own."]}
        )
    return version


class EvaluationViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Evaluations of this workspace: two versions on the same held-out calls."""

    serializer_class = EvaluationSerializer
    permission_classes = [IsAuthenticated, HasRole.at_least(REVIEWER)]

    def get_queryset(self):
        return Evaluation.objects.select_related(
            "world", "call_set", "candidate", "baseline", "job"
        ).order_by("-created_at", "-id")

    def get_permissions(self):
        if self.action == "create":
            return [IsAuthenticated(), HasRole.at_least(MANAGER)()]
        return super().get_permissions()

    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)

    @extend_schema(
        request=EvaluationStartSerializer,
        responses={202: EvaluationSerializer},
        description="Start an evaluation: a job on the CPU pool; follow it at "
        "/api/rl/jobs/{job}/ or on the jobs websocket. While an evaluation of the same versions "
        "on the same calls (and seed) is on its way, that one is returned, with joined true. "
        "A released version cannot be evaluated (409, saying so). Needs the manager role.",
    )
    def create(self, request):
        start = EvaluationStartSerializer(data=request.data)
        start.is_valid(raise_exception=True)
        world = get_object_or_404(World, slug=start.validated_data["pack"])
        candidate = _version(start.validated_data.get("candidate"), world=world, field="candidate")
        baseline = _version(start.validated_data.get("baseline"), world=world, field="baseline")
        default_candidate, default_baseline = evaluation_versions_default(world=world)
        candidate = candidate or default_candidate
        if baseline is None:
            by_parent = (
                candidate.parent
                if candidate and candidate.parent_id and candidate.parent.world_id == world.pk
                else None
            )
            baseline = by_parent or default_baseline
        if candidate is None or baseline is None:
            return Response(
                {"detail": "Name two versions: there are not two answering versions to choose."},
                status=status.HTTP_400_BAD_REQUEST,
            )
        try:
            evaluation = evaluation_start(
                world=world,
                candidate=candidate,
                baseline=baseline,
                seed=start.validated_data["seed"],
                started_by=request.user,
            )
        except EvaluationError as error:
            return Response({"detail": str(error)}, status=status.HTTP_409_CONFLICT)
        return Response(EvaluationSerializer(evaluation).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(responses={200: EpisodeSerializer})
    @action(detail=True, methods=["get"], url_path=r"episodes/(?P<position>[0-9]+)")
    def episodes(self, request, pk=None, position=None):
        """One held-out call of the evaluation as an episode: at each agent turn, the
        candidate's, the baseline's and the real (or scripted) agent's replies and scores."""
        episode = evaluation_episode(self.get_object(), int(position))
        if episode is None:
            return Response({"detail": "No such call in this evaluation."}, status=404)
        return Response(EpisodeSerializer(episode).data)


@extend_schema(
    parameters=[
        OpenApiParameter("pack", OpenApiTypes.STR, OpenApiParameter.PATH),
        OpenApiParameter(
            "bands", OpenApiTypes.INT, description=f"How many bands (2–10, {LENS_BANDS} default)"
        ),
        OpenApiParameter(
            "evaluation",
            OpenApiTypes.INT,
            description="Whose versions to place on it; the latest finished evaluation of "
            "the pack on its real calls by default",
        ),
    ],
    responses={200: ScoreVsOutcomeSerializer},
    description="The lead-to-order lens: on the pack's real calls, the won rate by band of "
    "judge score (equal-count bands of the real agent's opening score), with the counts, and "
    "an evaluation's two versions placed on it by their mean score on the replayed openings. "
    "Observational: a replay cannot change a recorded outcome.",
)
@api_view(["GET"])
@permission_classes([IsAuthenticated, HasRole.at_least(REVIEWER)])
def score_vs_outcome_api(request, pack: str):
    world = get_object_or_404(World, slug=pack)
    try:
        bands = int(request.query_params.get("bands") or LENS_BANDS)
    except ValueError:
        bands = 0
    if not 2 <= bands <= 10:
        return Response({"detail": "bands must be a whole number from 2 to 10."}, status=400)
    evaluation = None
    wanted = request.query_params.get("evaluation") or ""
    if wanted:
        evaluation = (
            Evaluation.objects.filter(pk=int(wanted), world=world).first()
            if wanted.isdigit()
            else None
        )
        if evaluation is None:
            return Response({"detail": "No such evaluation of this pack."}, status=404)
    lens = world_score_vs_outcome(world=world, bands=bands, evaluation=evaluation)
    return Response(ScoreVsOutcomeSerializer(lens).data)
