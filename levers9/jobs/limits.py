"""Per-workspace limits on jobs (the limits themselves live on the public-schema Workspace).

The pools are shared by every workspace. The line serves workspaces in turn (levers9.pools),
and these limits bound what one workspace may pile up: `queued_jobs_limit` jobs waiting for
cards (one more is refused: a 429 over the API, a message on a page) and `running_jobs_limit`
jobs holding cards (the next ones wait in line; levers9.pools holds them back). An operator
sets both per workspace in the platform admin.

A refusal is its own exception, not a ValueError: every page and API view that starts a job
already turns ValueErrors into a 400 or a form error, and this is neither. The API's exception
handler answers it with a 429 (levers9.api), and JobLimitPageMiddleware shows it on the page
the user came from, so no view has to know about it.
"""

from __future__ import annotations

from django.contrib import messages
from django.db import connection
from django.shortcuts import redirect
from django.utils.http import url_has_allowed_host_and_scheme

from levers9.limit_refusal import JobLimitReached
from levers9.models import CardAllocation, Workspace
from levers9.pools import PERSON_JOB, SHORT_JOB

QUEUED_LIMIT_FIELD = "queued_jobs_limit"


def workspace_jobs_waiting(*, workspace: Workspace) -> int:
    """Jobs of the workspace waiting for cards, on every pool: a person's, long or short
    (background work is never refused, and does not count)."""
    return CardAllocation.objects.filter(
        workspace=workspace,
        holder_kind__in=(PERSON_JOB, SHORT_JOB),
        state=CardAllocation.State.WAITING,
    ).count()


def job_limits_check() -> None:
    """Refuse a new job when this workspace already has its limit of jobs waiting.

    Locks the workspace's row until the caller's transaction ends, so racing starts count one
    another: call it inside the transaction that creates the job and its card request.
    """
    workspace = Workspace.objects.select_for_update().get(schema_name=connection.schema_name)
    waiting = workspace_jobs_waiting(workspace=workspace)
    if waiting < workspace.queued_jobs_limit:
        return
    raise JobLimitReached(
        f"This workspace already has {waiting} jobs waiting for cards, its limit "
        f"(queued_jobs_limit = {workspace.queued_jobs_limit}). Wait for some to start or "
        "cancel one; a platform operator can raise the limit in the platform admin "
        f"(Workspaces → {workspace.slug} → Queued jobs limit).",
        limit=QUEUED_LIMIT_FIELD,
        value=workspace.queued_jobs_limit,
    )


class JobLimitPageMiddleware:
    """A job refused by a limit on a page: the refusal as a message on the page it came from
    (the API answers it with a 429 itself, before this sees it)."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if not isinstance(exception, JobLimitReached):
            return None
        messages.error(request, str(exception))
        back = request.headers.get("referer", "")
        safe = url_has_allowed_host_and_scheme(
            back, allowed_hosts={request.get_host()}, require_https=request.is_secure()
        )
        return redirect(back if safe else "/")
