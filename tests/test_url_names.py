"""A page's name never reverses to the API: the router names its routes "<basename>-<action>"
("duel-generate", "call-detail", "job-cancel"), pages used the same names, and Django's
reverse() takes the last pattern of a name. The Duel's "Make pairs" form then posted to the
API's route and showed its JSON error as the page."""

from __future__ import annotations

from django.conf import settings
from django.urls import URLPattern, URLResolver, get_resolver, reverse


def _names(patterns, prefix: str = "", namespace: str = ""):
    for pattern in patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            inner = ":".join(filter(None, [namespace, pattern.namespace or ""]))
            yield from _names(pattern.url_patterns, route, inner)
        elif isinstance(pattern, URLPattern) and pattern.name:
            yield (f"{namespace}:{pattern.name}" if namespace else pattern.name), route


def test_it_keeps_page_names_and_api_names_apart():
    names = list(_names(get_resolver(settings.ROOT_URLCONF).url_patterns))
    api = {name for name, route in names if route.startswith("api/")}
    pages = {name for name, route in names if not route.startswith("api/")}
    assert not api & pages


def test_the_pages_that_shared_a_name_with_the_api_reverse_to_themselves():
    assert reverse("duel-generate") == "/duel/generate/"
    assert reverse("call-detail", args=[3]) == "/calls/3/"
    assert reverse("job-detail", args=[3]) == "/train/jobs/3/"
    assert reverse("job-cancel", args=[3]) == "/train/jobs/3/cancel/"
    assert reverse("api:job-detail", args=[3]) == "/api/rl/jobs/3/"


def test_the_api_root_still_lists_its_routes(owner_client):
    root = owner_client.get("/api/rl/", HTTP_ACCEPT="application/json")
    assert root.status_code == 200
    assert root.json()["jobs"].endswith("/api/rl/jobs/")
