"""Middleware of the API and the pages.

- RefuseBadTextMiddleware: a NUL character or a lone surrogate in a query parameter or a JSON
  string is a 400 that names the field, refused once here rather than in every view.
- SameOriginCsrfMiddleware: Django's CSRF check, accepting only the request's own origin, so
  one workspace's pages can never post to another's.
- ApiSlashOptionalMiddleware: an API path with or without its trailing slash is one route.
- ApiJsonErrorsMiddleware: an error Django answers itself under /api/ (a body it cannot parse,
  a CSRF refusal) is JSON too, never a bare HTML or empty page.
"""

from __future__ import annotations

import json
from urllib.parse import urlsplit

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.middleware.csrf import CsrfViewMiddleware
from django.urls import is_valid_path
from django.utils.functional import cached_property

from levers9.text import bad_text_path, printable, text_problem


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
    404: "Nothing at this address.",
    405: "This address does not take that method.",
}


class RefuseBadTextMiddleware:
    """PostgreSQL cannot hold NUL in text, nor can UTF-8 encode a lone surrogate, so a filter or
    a value carrying one fails in the database (a 500); under /api/ it is refused before any
    view runs."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path.startswith("/api/"):
            found = _bad_text_in_query(request) or _bad_text_in_json(request)
            if found:
                field, problem = found
                return JsonResponse({field: [problem]}, status=400)
        return self.get_response(request)


def _bad_text_in_query(request: HttpRequest) -> tuple[str, str] | None:
    for name, values in request.GET.lists():
        for value in (name, *values):
            problem = text_problem(value)
            if problem:
                return printable(name), problem
    return None


def _bad_text_in_json(request: HttpRequest) -> tuple[str, str] | None:
    if request.content_type != "application/json" or not request.body:
        return None
    try:
        data = json.loads(request.body)
        return bad_text_path(data)
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
        return self.get_response(request)
