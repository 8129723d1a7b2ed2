"""Workspace admin of the job platform: jobs with their progress, cancel and resume as actions."""

from __future__ import annotations

from django.contrib import admin, messages
from django.utils.html import format_html

from levers9.jobs.adoption import job_resume
from levers9.jobs.models import Job
from levers9.jobs.progress import job_payload
from levers9.jobs.selectors import job_log_tail, jobs_about_read
from levers9.jobs.services import JobError, job_cancel
from levers9.roles import MANAGER, RoleAdminMixin


@admin.register(Job)
class JobAdmin(RoleAdminMixin, admin.ModelAdmin):
    change_role = MANAGER
    list_display = [
        "id",
        "title",
        "trainer",
        "state",
        "started_how",
        "progress_bar",
        "produced_version",
        "created_at",
    ]
    list_filter = ["state", "background", "kind", "trainer", "pool_name"]
    search_fields = ["title", "trainer", "task_id", "error"]
    actions = ["cancel_jobs", "resume_jobs"]
    change_form_template = "admin/jobs/job/change_form.html"
    readonly_fields = [f.name for f in Job._meta.fields] + ["progress_bar", "log"]

    class Media:
        css = {"all": ["progress.css"]}
        js = ["jobs.js"]

    def has_add_permission(self, request, *args) -> bool:
        return False  # jobs start from Train, Engines, Evaluate and Endpoints

    @admin.display(description="Progress")
    def progress_bar(self, job: Job) -> str:
        return format_html(
            '<div data-job="{}"><span data-field="state">{}</span>'
            '<div class="bar" style="width:180px">'
            '<div class="bar-fill" data-field="bar" style="width:{}%"></div>'
            '</div><small data-field="detail">{} / {}</small>'
            '<span data-field="version"></span></div>',
            job.pk,
            job.get_state_display(),
            round(job.progress_fraction * 100),
            job.progress_step,
            job.progress_total,
        )

    @admin.display(description="Produced version")
    def produced_version(self, job: Job) -> str:
        # What the job made, as its kind's app says: the platform keeps no link to a version.
        version = job.about.produced_version
        return version.label if version is not None else "-"

    def get_changelist_instance(self, request):
        changelist = super().get_changelist_instance(request)
        jobs_about_read(list(changelist.result_list))
        return changelist

    @admin.display(description="Started", ordering="background")
    def started_how(self, job: Job) -> str:
        # Background work waits in the pool's own lane and yields to a person's jobs.
        return "background (yields to user jobs)" if job.background else "by a person"

    @admin.display(description="Log (tail)")
    def log(self, job: Job) -> str:
        return format_html(
            "<pre style='max-height:300px;overflow:auto'>{}</pre>", job_log_tail(job)
        )

    def change_view(self, request, object_id, form_url="", extra_context=None):
        job = self.get_object(request, object_id)
        extra_context = {**(extra_context or {}), "job_payload": job_payload(job) if job else None}
        return super().change_view(request, object_id, form_url, extra_context)

    @admin.action(description="Cancel the selected jobs")
    def cancel_jobs(self, request, queryset) -> None:
        self._each(request, queryset, lambda job: job_cancel(job=job), "cancelled")

    @admin.action(description="Resume the selected interrupted jobs")
    def resume_jobs(self, request, queryset) -> None:
        self._each(request, queryset, lambda job: job_resume(job=job), "resumed")

    def _each(self, request, queryset, handler, verb: str) -> None:
        for job in queryset:
            try:
                handler(job)
                self.message_user(request, f"Job {job.pk} {verb}.")
            except JobError as error:
                self.message_user(request, str(error), level=messages.ERROR)
