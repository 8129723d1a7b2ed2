"""No 5xx on any page, whatever is sent: every query parameter and every form field of every page
an owner, a manager and a reviewer reach (the admin included) gets a NUL, a lone surrogate's
bytes, 100 kB of text and a non-numeric id (tests.page_fuzzer says how, within a test's time)."""

from __future__ import annotations

import json
from unittest import mock
from urllib.parse import urlsplit

import pytest
from django.core.cache import cache
from django.test import Client
from django_tenants.utils import schema_context

from arena.models import World
from arena.services.calls import calls_import
from arena.services.pairs import duel_pairs_generate
from arena.services.worlds import world_create
from tests.conftest import PASSWORD, make_user
from tests.page_fuzzer import BAD_VALUES, Form, PageFuzzer, path_shape
from tests.recorded_calls import two_turn_call

STARTS = ["/?world=lettings", "/?world=fuzz-calls", "/admin/"]
PEOPLE = {
    "owner": "owner@acme.test",
    "manager": "max@acme.test",
    "reviewer": "rita@acme.test",
}


@pytest.fixture
def people_and_pages(workspace):
    """Both kinds of world with something on every page: a simulated one (lettings) and one of
    real calls with pairs to pick; a manager and a reviewer beside the owner."""
    make_user(workspace, PEOPLE["manager"], "manager")
    make_user(workspace, PEOPLE["reviewer"], "reviewer")
    with schema_context(workspace.schema_name):
        world = world_create(slug="fuzz-calls", name="Fuzzed calls")
        calls = [two_turn_call(f"fuzz-call-{number}") for number in range(3)]
        calls_import(world=world, text="\n".join(map(json.dumps, calls)), source="test")
        for each in World.objects.all():
            duel_pairs_generate(world=each, count=4)
    cache.clear()  # sign-in failures the fuzz makes count against no other test
    yield
    cache.clear()


def _signed_in(workspace, email: str) -> Client:
    client = Client(HTTP_HOST=f"{workspace.slug}.localhost", raise_request_exception=False)
    assert client.post("/login/", {"username": email, "password": PASSWORD}).status_code == 302
    return client


def test_no_page_answers_bad_input_with_a_5xx(workspace, people_and_pages):
    done: set[tuple] = set()  # what is sent once, whoever reaches it (PageFuzzer.done)
    failures, reached = [], {}
    for role, email in PEOPLE.items():
        fuzzer = PageFuzzer(_signed_in(workspace, email), done=done)
        fuzzer.walk(STARTS)
        reached[role] = {path_shape(urlsplit(target.action).path) for target in fuzzer.targets()}
        failures += [f"as the {role}: {failure}" for failure in fuzzer.fuzz()]
    assert not failures, "\n".join(failures)
    # The walk reached what each person works with (so the fuzz above had something to send).
    assert {"/duel/", "/world/new/", "/admin/arena/call/", "/calls/N/"} <= reached["owner"]
    assert {"/duel/", "/world/new/"} <= reached["manager"]
    assert "/duel/" in reached["reviewer"]
    assert "/world/new/" not in reached["reviewer"]
    assert len(BAD_VALUES) == 4


def test_the_fuzzer_reports_a_5xx(workspace, people_and_pages):
    """The fuzz above can fail: with the text check off, a NUL in a new world's name alone (its
    slug good) reaches the database, and the fuzzer names the field."""
    fuzzer = PageFuzzer(_signed_in(workspace, PEOPLE["manager"]))
    fields = (("slug", "fuzz-new", True), ("name", "Fuzzed", True))
    fuzzer.forms = [Form("post", "/world/new/", fields, "/world/")]
    with mock.patch("levers9.middleware._bad_text_in_form", return_value=None):
        failures = fuzzer.fuzz()
    assert [str(failure) for failure in failures] == [
        "POST /world/new/, 'name' (on /world/) with a NUL: 500"
    ]
