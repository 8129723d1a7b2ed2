"""API of the job platform: every job of this workspace, with resume and cancel."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from levers9.jobs.adoption import job_resume
from levers9.jobs.models import Job
from levers9.jobs.selectors import jobs_about_read
from levers9.jobs.services import JobError, job_cancel
from levers9.roles import MANAGER, HasRole


class JobListSerializer(serializers.ListSerializer):
    def to_representation(self, data):
        # What the jobs are about, read once per kind for the whole page.
        jobs = list(data.all() if hasattr(data, "all") else data)
        return super().to_representation(jobs_about_read(jobs))


class JobSerializer(serializers.ModelSerializer):
    # What the job is about, as its kind's app says (levers9.jobs.kinds.JobAbout).
    parent_version = serializers.IntegerField(
        source="about.parent_version.number", read_only=True, allow_null=True
    )
    produced_version = serializers.IntegerField(
        source="about.produced_version.number", read_only=True, allow_null=True
    )
    preference_version = serializers.IntegerField(
        source="about.preference_version", read_only=True, allow_null=True
    )
    base_model = serializers.CharField(source="about.base_model", read_only=True)
    # Not read_only, as the model's field was: the schema stays as it was (nothing writes a job).
    finish_needs = serializers.JSONField(source="finish_needs_shown")
    progress_fraction = serializers.FloatField(read_only=True)
    eta_seconds = serializers.FloatField(read_only=True, allow_null=True)
    joined = serializers.BooleanField(
        read_only=True,
        help_text="true on a start answered with the same work already on its way (a fit of "
        "the same world): nothing new was started",
    )

    class Meta:
        model = Job
        list_serializer_class = JobListSerializer
        fields = [
            "id",
            "kind",
            "trainer",
            "title",
            "state",
            "background",
            "joined",
            "task_id",
            "workspace_schema",
            "parent_version",
            "produced_version",
            "preference_version",
            "base_model",
            "pool_name",
            "card_type",
            "card_count",
            "progress_step",
            "progress_total",
            "progress_fraction",
            "eta_seconds",
            "metrics",
            "result",
            "error",
            "finish_needs",
            "created_at",
            "submitted_at",
            "started_at",
            "finished_at",
        ]


class ResumeSerializer(serializers.Serializer):
    task_id = serializers.CharField(
        required=False,
        allow_blank=True,
        help_text="Only when the launcher never found the task: a finished task of this "
        "job's trainer, in this workspace, started after the job was created.",
    )


class JobViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Training jobs of this workspace."""

    serializer_class = JobSerializer
    queryset = Job.objects.all()

    def _act(self, handler) -> Response:
        try:
            job = handler()
        except JobError as error:
            return Response({"detail": str(error)}, status=status.HTTP_409_CONFLICT)
        return Response(JobSerializer(job).data)

    @extend_schema(request=ResumeSerializer, responses={200: JobSerializer})
    @action(detail=True, methods=["post"], permission_classes=[HasRole.at_least(MANAGER)])
    def resume(self, request, pk=None):
        """Adopt an interrupted job by hand: wait for its task, read its result, finish."""
        body = ResumeSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        job = self.get_object()
        return self._act(
            lambda: job_resume(job=job, task_id=body.validated_data.get("task_id", ""))
        )

    @extend_schema(request=None, responses={200: JobSerializer})
    @action(detail=True, methods=["post"], permission_classes=[HasRole.at_least(MANAGER)])
    def cancel(self, request, pk=None):
        """Cancel: stops the trainer, frees the cards, marks the job cancelled."""
        job = self.get_object()
        return self._act(lambda: job_cancel(job=job))
