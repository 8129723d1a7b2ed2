"""Middleware of the API and the pages.

- RefuseBadTextMiddleware: a NUL character or a lone surrogate in the path, a cookie, a query
  parameter, a form field or a JSON string, and an id (in the address or a JSON body) past
  what an id column holds, is a 400 that names the field (JSON under /api/, a page elsewhere,
  the admin included), refused once here rather than in every view.
- SameOriginCsrfMiddleware: Django's CSRF check, accepting only the request's own origin, so
  one workspace's pages can never post to another's.
- ApiSlashOptionalMiddleware: an API path with or without its trailing slash is one route
  (either way round).
- ApiJsonErrorsMiddleware: an error Django answers itself under /api/ (a body it cannot parse,
  a CSRF refusal, a host no workspace has) is JSON too, never a bare HTML or empty page.
- DatabaseUnavailableMiddleware: while the database cannot be reached, a 503 with Retry-After
  (JSON under /api/), never "Server Error (500)".
- UploadLimitMiddleware: a body over the upload limit is a 413 naming the limit, answered
  before anything reads the body; a body sent chunked (no Content-Length) is measured up to the
  limit and read like any other.
"""

from __future__ import annotations

import json
import logging
import sys
import tempfile
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.core.signals import got_request_exception
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.middleware.csrf import CsrfViewMiddleware
from django.urls import is_valid_path
from django.utils.functional import cached_property
from django.utils.html import escape

from levers9.text import (
    bad_text_in_fields,
    bad_text_path,
    number_problem,
    out_of_range_number_path,
    printable,
    text_problem,
)
from levers9.upload_limit_page import admin_upload_too_large_page

logger = logging.getLogger(__name__)


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


def _refused(request: HttpRequest, status: int, detail: str, **extra: Any) -> HttpResponse:
    """A refusal made before any view: JSON under /api/ (with `extra` fields), plain text
    elsewhere."""
    if _is_api(request):
        return JsonResponse({"detail": detail, **extra}, status=status)
    return HttpResponse(detail, status=status, content_type="text/plain; charset=utf-8")


class ApiJsonErrorsMiddleware:
    """Django answers some errors before any API view runs, as HTML or an empty body: a
    multipart body it cannot parse while the CSRF check reads the form (400), a CSRF refusal
    (403). Under /api/ those become JSON that says what happened; a view's own JSON passes."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if (
            request.path.startswith("/api/")
            and response.status_code >= 400
            and not response.get("Content-Type", "").startswith("application/json")
            and not getattr(response, "streaming", False)
        ):
            reason = _API_ERRORS.get(response.status_code, response.reason_phrase)
            return JsonResponse({"detail": reason}, status=response.status_code)
        return response


_API_ERRORS = {
    400: "The request could not be read: send JSON (or the documented body) that matches "
    "its Content-Type.",
    403: "Refused: with a session, send the CSRF token from the same origin; or use an API "
    "token (Authorization: Token ...).",
    404: "Nothing at this address, or no workspace at this host (a workspace's API is at its "
    "own host, <slug>.<domain>, as its pages are).",
    405: "This address does not take that method.",
}


# Path arguments that are numbers but reach a view as text: a DRF router's `pk` (and the
# regex routes named like it), a preference version's `number`. Other text arguments are text
# (a live call's own id, a slug), whatever digits they hold; `<int:...>` arrives as an int.
_NUMBERS_AS_TEXT = {"pk", "number"}


class RefuseBadTextMiddleware:
    """PostgreSQL cannot hold NUL in text, nor can UTF-8 encode a lone surrogate, so a filter or
    a value carrying one fails in the database (a 500); it is refused before any view runs,
    with the field named: JSON under /api/, a small page elsewhere (pages, forms, the admin).
    The path counts too: `/api/rl/live/calls/a%00b/outcome/` looked a call up by "a\\0b"."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        found = (
            _bad_text_in_path(request)
            or _bad_text_in_cookies(request)
            or bad_text_in_fields(request.GET)
            or _bad_text_in_form(request)
            or _bad_text_in_json(request)
        )
        if not found:
            return self.get_response(request)
        field, problem = found
        if _is_api(request):
            response = JsonResponse({field: [problem]}, status=400)
        else:
            response = bad_text_page(field, problem)
        for name, value in request.COOKIES.items():
            if text_problem(value) and not text_problem(name):
                response.delete_cookie(name)  # else every request after this one is refused
        return response

    def process_view(self, request: HttpRequest, view_func, view_args, view_kwargs):
        """An id in the address past what an id column holds (`/calls/<20 digits>/`) is
        refused naming it: it was looked for, and "not found" said nothing of why."""
        for name, value in view_kwargs.items():
            if isinstance(value, str) and name in _NUMBERS_AS_TEXT:
                value = int(value) if value.isascii() and value.isdigit() else None
            if not isinstance(value, int) or isinstance(value, bool):
                continue
            problem = number_problem(value)
            if problem:
                field = "id" if name == "pk" else name  # the schema's name for a router's pk
                if _is_api(request):
                    return JsonResponse({field: [problem]}, status=400)
                return bad_text_page(field, problem)
        return None


def bad_text_page(field: str, problem: str) -> HttpResponse:
    """A page's refusal. No template: the page's context processors would read the same
    query (the world in view) from the database."""
    where = "The address" if field == "path" else f"The field <code>{escape(field)}</code>"
    return HttpResponse(
        '<!doctype html><html><head><meta charset="utf-8"><title>Cannot be read</title></head>'
        f"<body><h1>Cannot be read</h1><p>{where} cannot be stored: {escape(problem)} "
        "Go back, correct it and send it again.</p></body></html>",
        status=400,
        content_type="text/html; charset=utf-8",
    )


def _bad_text_in_path(request: HttpRequest) -> tuple[str, str] | None:
    problem = text_problem(request.path)
    return ("path", problem) if problem else None


def _bad_text_in_cookies(request: HttpRequest) -> tuple[str, str] | None:
    """A cookie's value is looked up too (the session's key, in the database): a quoted value
    takes octal escapes, so `sessionid="a\\000b"` carried a NUL there. The session is read
    lazily, after this check. The refusal clears the cookie."""
    for name, value in request.COOKIES.items():
        problem = text_problem(name) or text_problem(value)
        if problem:
            return f"cookie {printable(name)}", f"{problem} The cookie is cleared: send again."
    return None


_FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


def _bad_text_in_form(request: HttpRequest) -> tuple[str, str] | None:
    """A form's fields (and the names of its files). Under /api/ only an urlencoded body: a
    multipart body read here could no longer reach a view whose parser takes the raw bytes
    (the imports), and the API's fields refuse a NUL themselves (DRF's CharField)."""
    if request.method in ("GET", "HEAD", "OPTIONS") or request.content_type not in _FORM_TYPES:
        return None
    if _is_api(request) and request.content_type != "application/x-www-form-urlencoded":
        return None
    found = bad_text_in_fields(request.POST)
    if found or request.content_type != "multipart/form-data":
        return found
    for name, uploads in request.FILES.lists():
        for upload in uploads:
            problem = text_problem(name) or text_problem(upload.name or "")
            if problem:
                return printable(name), problem
    return None


def _bad_text_in_json(request: HttpRequest) -> tuple[str, str] | None:
    if request.content_type != "application/json" or not request.body:
        return None
    try:
        data = json.loads(request.body)
        return bad_text_path(data) or out_of_range_number_path(data)
    except RecursionError:
        # Nested deeper than any body of ours: refused here, before a parser tries it.
        return "body", "The JSON is nested too deeply."
    except ValueError:
        return None  # Not JSON: the API's parser answers that with its own 400.


class SameOriginCsrfMiddleware(CsrfViewMiddleware):
    """Every workspace is its own host, so an Origin is trusted only when it is the request's
    own scheme and host. Django would also trust CSRF_TRUSTED_ORIGINS, and a wildcard there
    (`http://*.localhost:8000`) lets workspace B's pages post into workspace A with A's
    cookies; wildcards are ignored here, exact origins an operator lists still count."""

    @cached_property
    def allowed_origin_subdomains(self) -> dict[str, list[str]]:
        return {}

    @cached_property
    def csrf_trusted_origins_hosts(self) -> list[str]:
        # Read by the HTTPS Referer check: the same rule, exact hosts only.
        return [
            urlsplit(origin).netloc for origin in settings.CSRF_TRUSTED_ORIGINS if "*" not in origin
        ]


class ApiSlashOptionalMiddleware:
    """`POST /api/rl/jobs/7/resume` and `.../resume/` are the same call. Django would answer
    the first with a 301 to the second, and a client following it loses the POST (its body
    and often its method), so under /api/ a path that resolves only with the slash is served
    as if it had one. The schema keeps naming the slashed form, the one links use."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        path = request.path_info
        if path.startswith("/api/") and not path.endswith("/"):
            urlconf = getattr(request, "urlconf", None)
            if not is_valid_path(path, urlconf) and is_valid_path(f"{path}/", urlconf):
                request.path_info = f"{path}/"
                request.path = f"{request.path}/"
        elif path.startswith("/api/") and path.endswith("/"):
            # The other way too: a route the description names without its slash
            # (packs/<pack>/score-vs-outcome) answered 404 to a client that added one.
            urlconf = getattr(request, "urlconf", None)
            if not is_valid_path(path, urlconf) and is_valid_path(path[:-1], urlconf):
                request.path_info = path[:-1]
                request.path = request.path[:-1]
        return self.get_response(request)


# --- the database out of reach: 503 ------------------------------------------------------

# Seconds a client is asked to wait: a restarting database is back within seconds, and a
# longer outage is better met by clients asking again than by clients giving up.
DATABASE_RETRY_AFTER_S = 10
_DATABASE_UNREACHABLE = "_levers9_database_unreachable"


def database_unreachable(exception: BaseException) -> bool:
    """A connection refused, closed or lost (and the database's own "try again" errors, such as
    a deadlock or a cancelled statement): worth a retry, never the server's bug."""
    return isinstance(exception, OperationalError | InterfaceError)


def database_unavailable_response(request: HttpRequest) -> HttpResponse:
    detail = (
        "The database cannot be reached at the moment: nothing was changed. Try again in "
        f"{DATABASE_RETRY_AFTER_S} s (the Retry-After header)."
    )
    if _is_api(request):
        response = JsonResponse({"detail": detail}, status=503)
    else:
        # No template: the page's context processors would ask the database again.
        response = HttpResponse(
            '<!doctype html><html><head><meta charset="utf-8"><title>Briefly unavailable'
            f"</title></head><body><h1>Briefly unavailable</h1><p>{escape(detail)}</p>"
            "</body></html>",
            status=503,
            content_type="text/html; charset=utf-8",
        )
    response["Retry-After"] = str(DATABASE_RETRY_AFTER_S)
    return response


def _note_database_unreachable(sender: Any, request: HttpRequest | None = None, **kwargs) -> None:
    """Django turns an exception raised in a middleware (the workspace lookup is the first
    query of every request) into a 500 before any outer middleware sees it; it sends this
    signal first, from inside the handling, so the exception is still at hand."""
    exception = sys.exc_info()[1]
    if request is not None and exception is not None and database_unreachable(exception):
        setattr(request, _DATABASE_UNREACHABLE, True)


class DatabaseUnavailableMiddleware:
    """While the database cannot be reached, every request gets a 503 with Retry-After: JSON
    under /api/, a plain page elsewhere. Outermost, so the workspace lookup is covered too.

    A view's exception comes here through process_exception (the API's exception handler
    leaves these to it); a middleware's is known by the signal above."""

    def __init__(self, get_response):
        self.get_response = get_response
        got_request_exception.connect(
            _note_database_unreachable, dispatch_uid="levers9-database-unreachable"
        )

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if getattr(request, _DATABASE_UNREACHABLE, False):
            return database_unavailable_response(request)
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not database_unreachable(exception):
            return None
        logger.warning(
            "The database cannot be reached (%s): 503 for %s %s",
            str(exception).strip().splitlines()[0] if str(exception).strip() else "no reason",
            request.method,
            request.path,
        )
        return database_unavailable_response(request)


# --- upload limit: 413 before the body is read ----------------------------------------------

_UPLOAD_TOO_LARGE = "_levers9_upload_too_large"
UPLOAD_LIMIT_NAME = "LEVERS9_UPLOAD_MAX_MB"


class UploadTooLarge(RequestDataTooBig):
    """A body sent without Content-Length (chunked) read past the upload limit."""


class _CappedBody:
    """A request's body stream that never hands out more than the limit: a chunked body has no
    Content-Length to check first, so its reads are counted instead (and never asked for more
    than one byte past the limit at once, so an unbounded read() stays bounded)."""

    def __init__(self, stream, limit: int, request: HttpRequest) -> None:
        self.stream = stream
        self.limit = limit
        self.request = request
        self.consumed = 0

    def _bounded(self, size: int | None) -> int:
        allowed = self.limit - self.consumed + 1
        return allowed if size is None or size < 0 else min(size, allowed)

    def _count(self, chunk: bytes) -> bytes:
        self.consumed += len(chunk)
        if self.consumed > self.limit:
            setattr(self.request, _UPLOAD_TOO_LARGE, True)
            raise UploadTooLarge(f"The body is over the upload limit of {self.limit} bytes.")
        return chunk

    def read(self, size: int | None = -1) -> bytes:
        return self._count(self.stream.read(self._bounded(size)))

    def readline(self, size: int | None = -1) -> bytes:
        return self._count(self.stream.readline(self._bounded(size)))

    def close(self) -> None:
        self.stream.close()


_MEASURE_CHUNK = 64 * 1024


def _measure_undeclared_body(request: HttpRequest, limit: int) -> bool:
    """Gives a body sent without a Content-Length the header it would have had, and the request
    a stream that reads it from its start; False (nothing kept) when it is over `limit`.

    Read through _CappedBody, so never more than one byte past the limit. daphne's body (a
    spooled file, Django's ASGI handler) is read again from its start; a stream that cannot
    seek (WSGI) is copied into a spooled file of the same kind."""
    stream = request._stream
    capped = _CappedBody(stream, limit, request)
    seekable = hasattr(stream, "seekable") and stream.seekable()
    start = stream.tell() if seekable else 0
    # The copy outlives this function: it becomes the request's stream, closed with it.
    copy = (
        None if seekable else tempfile.SpooledTemporaryFile(settings.FILE_UPLOAD_MAX_MEMORY_SIZE)  # noqa: SIM115
    )
    length = 0
    try:
        while chunk := capped.read(_MEASURE_CHUNK):
            length += len(chunk)
            if copy is not None:
                copy.write(chunk)
    except UploadTooLarge:
        if copy is not None:
            copy.close()
        return False
    if not length:
        return True  # no body: nothing to say
    if copy is not None:
        copy.seek(0)
        request._stream = copy
    else:
        stream.seek(start)
    request.META["CONTENT_LENGTH"] = str(length)
    return True


def upload_too_large_response(request: HttpRequest, limit: int) -> HttpResponse:
    megabytes = limit / (1024 * 1024)
    detail = (
        f"The body is larger than the upload limit: at most {limit} bytes ({megabytes:g} MiB, "
        f"set by {UPLOAD_LIMIT_NAME}). Send a smaller file, or split it: importing the same "
        "ids again changes nothing."
    )
    # Under /admin/ the admin's own page, with the limit and the way back to the form.
    return admin_upload_too_large_page(request, detail) or _refused(
        request, 413, detail, limit=UPLOAD_LIMIT_NAME, limit_value=limit
    )


class UploadLimitMiddleware:
    """No body over DATA_UPLOAD_MAX_MEMORY_SIZE (LEVERS9_UPLOAD_MAX_MB) is read. Django checks
    that limit only where it reads `request.body` itself; the imports read the stream (a 150 MB
    body was parsed in full). A Content-Length over the limit is refused before anything reads
    the body.

    A body without one (Transfer-Encoding: chunked: curl -T -, a client streaming a generator)
    reaches Django whole, as daphne received it, but with no Content-Length, and both DRF
    (`Request._load_stream`) and Django's multipart parser read a missing length as "no body":
    an import said "The body is empty", a chunked world "This field is required". So it is
    measured here, once, through a counter that stops at the limit (a 413 past it), and given
    the Content-Length it would have had; every endpoint then reads it as any other body."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        if limit is None:
            return self.get_response(request)
        declared = request.META.get("CONTENT_LENGTH") or ""
        if declared:
            try:
                length = int(declared)
            except ValueError:
                length = -1
            if length < 0:
                return _refused(request, 400, "The Content-Length header is not a number of bytes.")
            if length > limit:
                return upload_too_large_response(request, limit)
        elif not _measure_undeclared_body(request, limit):
            return upload_too_large_response(request, limit)
        response = self.get_response(request)
        if getattr(request, _UPLOAD_TOO_LARGE, False):
            # Read past the limit somewhere inside (a view, or a middleware reading a form):
            # whatever answer that became, the answer is the limit.
            return upload_too_large_response(request, limit)
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        # Django's own check (a form's fields over the limit) names no limit: this one does.
        if isinstance(exception, RequestDataTooBig) and settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
            return upload_too_large_response(request, settings.DATA_UPLOAD_MAX_MEMORY_SIZE)
        return None
