"""API of the job platform: every job of this workspace, with resume and cancel."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from levers9.jobs.models import Job
from levers9.jobs.services import JobError, job_cancel, job_resume
from levers9.roles import MANAGER, HasRole


class JobSerializer(serializers.ModelSerializer):
    parent_version = serializers.SlugRelatedField(
        slug_field="number", read_only=True, allow_null=True
    )
    produced_version = serializers.SlugRelatedField(
        slug_field="number", read_only=True, allow_null=True
    )
    progress_fraction = serializers.FloatField(read_only=True)
    eta_seconds = serializers.FloatField(read_only=True, allow_null=True)

    class Meta:
        model = Job
        fields = [
            "id",
            "kind",
            "trainer",
            "title",
            "state",
            "background",
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
    queryset = Job.objects.select_related("parent_version", "produced_version")

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
