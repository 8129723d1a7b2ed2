"""Middleware of the API: a NUL character in a query parameter or a JSON string is a 400 that
names the field, refused once here rather than in every view."""

from __future__ import annotations

import json
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse

NUL = "\x00"


class RefuseNulMiddleware:
    """PostgreSQL cannot hold NUL in text, so a filter or a value carrying one fails in the
    database (a 500); under /api/ it is refused before any view runs."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path.startswith("/api/"):
            field = _nul_in_query(request) or _nul_in_json(request)
            if field:
                return JsonResponse({field: ["Null characters are not allowed."]}, status=400)
        return self.get_response(request)


def _nul_in_query(request: HttpRequest) -> str | None:
    for name, values in request.GET.lists():
        if NUL in name or any(NUL in value for value in values):
            return _printable(name)
    return None


def _nul_in_json(request: HttpRequest) -> str | None:
    if request.content_type != "application/json" or not request.body:
        return None
    try:
        data = json.loads(request.body)
        return _nul_path(data, "")
    except ValueError:
        return None  # Not JSON: the API's parser answers that with its own 400.
    except RecursionError:
        # Nested deeper than any body of ours: refused here, before a parser tries it.
        return "body (nested too deeply)"


def _nul_path(value: Any, path: str) -> str | None:
    """The dotted path (`knobs.note`, `items[2]`) of the first string holding a NUL."""
    if isinstance(value, str):
        return (path or "body") if NUL in value else None
    if isinstance(value, dict):
        for key, item in value.items():
            where = f"{path}.{_printable(key)}" if path else _printable(key)
            if NUL in key:
                return where
            found = _nul_path(item, where)
            if found:
                return found
    if isinstance(value, list):
        for index, item in enumerate(value):
            found = _nul_path(item, f"{path}[{index}]")
            if found:
                return found
    return None


def _printable(name: str) -> str:
    return name.replace(NUL, "\\0")
