"""A page fuzzer on Django's test client: it walks every page a signed-in person reaches from a
start page (the admin included), reads each page's links and forms from its HTML, and sends
every query parameter and every form field each bad value below. It reports every answer of
500 or more.

The browser crawler (tests.e2e.crawler) proves what a person sees; this one proves what any
client may send, and needs no browser, so it runs in `make test`. It shares the crawler's skip
list: forms that start long jobs are not submitted (tests.e2e.crawler.LONG_JOBS).

What it costs, and why it is shaped so: a page costs the test client some 30-100 ms, and an
owner reaches about 90 page shapes with 140 forms and queries and 600 fields, half of them the
admin's; every field alone with every value would be some 5,000 requests a person. So:
- a page is opened once for its shape: its path, digits read as any number, and the world in
  view (a world's pages hold other forms); the query keys of every link to it are gathered and
  sent with the page's own address, not opened one by one (the admin's filters are a hundred
  links);
- each bad value goes into every field of a form (every query parameter of a page) at once:
  one request per form and value. A form's validation reads every field, and the text check
  (levers9.middleware.RefuseBadTextMiddleware) reads every field before any view;
- where a form is accepted as a person would fill it (a required field the page left empty is
  filled, a list takes its first choice), each field alone also takes a NUL, 100 kB and a
  non-numeric id among good values, so that it reaches the code that saves: on every page,
  and in the admin on the bulk actions' own fields (see _one_field_plan);
- what is the same request for every person is sent once for all of them (see
  PageFuzzer._sent_already).

Each request runs in a savepoint that is rolled back: a form it submitted (a delete, a rename)
leaves the next request the same workspace, and a database error cannot leave the test's
transaction unusable for the requests after it.

    fuzzer = PageFuzzer(client)
    fuzzer.walk(["/?world=lettings", "/admin/"])
    failures = fuzzer.fuzz()
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html.parser import HTMLParser
from urllib.parse import parse_qsl, quote_plus, urljoin, urlsplit

from django.db import transaction
from django.test import Client

from tests.e2e.crawler import LONG_JOBS

# Bytes go on the wire as they are: a lone surrogate has no UTF-8 encoding, so a client can only
# send the bytes it would have had (CESU-8), which Django reads as U+FFFD.
BAD_VALUES: dict[str, str | bytes] = {
    "a NUL": "a\x00b",
    "a lone surrogate": b"a\xed\xa0\x80b",
    "100 kB of text": "x" * 100_000,
    "a non-numeric id": "not-an-id",
}
# Sent in each field alone too, where a form is accepted untouched: the surrogate's bytes are
# read as U+FFFD before anything sees them, so they add nothing there that another text would not.
ONE_FIELD_VALUES = ("a NUL", "100 kB of text", "a non-numeric id")

# Not submitted, besides the long jobs: each would end the session the walk goes on with.
SESSION_ENDERS: dict[tuple[str, str], str] = {
    ("post", r"/admin/logout/"): "signs the walk out of the admin",
    ("post", r"/admin/password_change/"): "changes the signed-in person's password",
    ("post", r"/admin/.+/password/"): "changes a person's password (the walk's own, perhaps)",
}
# Kept as the page wrote it: the test client checks no CSRF token, so a bad one changes nothing.
NOT_FUZZED = {"csrfmiddlewaretoken"}

# Pages the walk does not open: the API's answers are JSON (walked through its schema, by
# tests.test_cross_tenant_walk and the schema fuzzing), static files are no page, and the
# admin's history and JavaScript catalogue take nothing.
NOT_WALKED = re.compile(r"^/(api|static|media)/|^/admin/(jsi18n|r)/|/history/$")
MAX_PAGES = 150


@dataclass(frozen=True)
class Form:
    method: str
    action: str  # a path, with its query
    fields: tuple[tuple[str, str, bool], ...]  # (name, value, sent untouched) as on the page
    page: str  # where it was found


@dataclass(frozen=True)
class Failure:
    request: str
    bad_value: str
    status: int

    def __str__(self) -> str:
        return f"{self.request} with {self.bad_value}: {self.status}"


# What fills a required field the page left empty, as a person would (tests.e2e.crawler's
# _FILL_REQUIRED): the form is then accepted untouched, and a bad value in one field reaches the
# code that saves. A number takes its minimum, or this.
_REQUIRED_FILL = {"number": "1", "email": "e2e@example.test", "url": "https://example.test/"}


class _PageReader(HTMLParser):
    """The links and forms of one page: each field with the value a person would submit for it
    (an unchecked box is a field too, not sent untouched)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[str] = []
        self.forms: list[dict] = []
        self._form: dict | None = None
        self._select: list | None = None  # [name, value so far, sent untouched]
        self._select_chosen = False
        self._textarea: list | None = None  # a required textarea's field, its text so far

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = {name: value or "" for name, value in attrs}
        if tag == "option":
            self._option(attributes)
        elif tag == "a" and attributes.get("href"):
            self.links.append(attributes["href"])
        elif tag == "form":
            method = (attributes.get("method") or "get").lower()
            self._form = {"method": method, "action": attributes.get("action", ""), "fields": []}
            self.forms.append(self._form)
        elif self._form is None or not attributes.get("name"):
            return
        elif tag in ("input", "button"):
            kind = attributes.get("type", "text" if tag == "input" else "submit").lower()
            untouched = kind not in ("checkbox", "radio") or "checked" in attributes
            if kind not in ("file", "image", "reset"):
                value = attributes.get("value", "on" if kind == "checkbox" else "")
                if not value and "required" in attributes:
                    value = _REQUIRED_FILL.get(kind, attributes.get("min") or "e2e")
                self._form["fields"].append([attributes["name"], value, untouched])
        elif tag == "select":
            self._select = [attributes["name"], "", True]
            self._select_chosen = False
            self._form["fields"].append(self._select)
        elif tag == "textarea":
            self._form["fields"].append([attributes["name"], "", True])
            self._textarea = self._form["fields"][-1] if "required" in attributes else None

    def handle_startendtag(self, tag, attrs) -> None:
        self.handle_starttag(tag, attrs)

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self._form = None
        elif tag == "select":
            self._select = None
        elif tag == "textarea":
            if self._textarea is not None and not self._textarea[1]:
                self._textarea[1] = "e2e"  # required: filled, as for an input
            self._textarea = None

    def handle_data(self, data: str) -> None:
        if self._textarea is not None:
            self._textarea[1] += data

    def _option(self, attributes: dict[str, str]) -> None:
        # The selected option, else the first that is a choice (not a blank "---", even where
        # it is selected: the admin's bulk actions): the form as a person would send it, so
        # that a bad value elsewhere reaches what saves.
        if self._select is None or self._select_chosen:
            return
        value = attributes.get("value", "")
        if ("selected" in attributes and value) or not self._select[1]:
            self._select[1] = value
            self._select_chosen = "selected" in attributes and bool(value)


def path_shape(path: str) -> str:
    return re.sub(r"/\d+/", "/N/", path)


def _skipped(method: str, path: str) -> bool:
    return any(
        method == skip_method and re.fullmatch(pattern, path)
        for skip_method, pattern in (*LONG_JOBS, *SESSION_ENDERS)
    )


# The admin's bulk actions: the one admin form whose ids reach a query with no form field to
# read them first (a word among the selected ids was a 500).
_BULK_ACTION_FIELDS = ("action", "select_across", "index", "_selected_action")


def _one_field_plan(
    fields: list[tuple[str, str, bool]], fuzzed: list[int], *, in_admin: bool
) -> list[tuple[int, str]]:
    """(field, bad value) to send alone. On the pages, every field and ONE_FIELD_VALUES. In the
    admin, Django's forms read every field through a form field, so every field at once does,
    but the bulk actions' own fields each take a non-numeric id alone."""
    if not in_admin:
        return [(index, label) for index in fuzzed for label in ONE_FIELD_VALUES]
    names = {name for name, _, _ in fields}
    if not {"action", "_selected_action"} <= names:
        return []
    return [
        (index, "a non-numeric id") for index in fuzzed if fields[index][0] in _BULK_ACTION_FIELDS
    ]


def _encoded(pairs: list[tuple[str, str | bytes]]) -> str:
    return "&".join(f"{quote_plus(name)}={quote_plus(value)}" for name, value in pairs)


@dataclass
class PageFuzzer:
    client: Client  # signed in, built with raise_request_exception=False
    pages: list[str] = field(default_factory=list)
    forms: list[Form] = field(default_factory=list)
    queries: dict[str, dict[str, str]] = field(default_factory=dict)  # path shape -> keys seen
    requests: int = 0
    # What another person's fuzzer sent already, shared between fuzzers: see _sent_already.
    done: set[tuple] = field(default_factory=set)

    # --- the walk ---------------------------------------------------------------------------

    def walk(self, starts: list[str]) -> None:
        """Every page reachable from `starts`, one of each shape, with its forms, and the query
        keys of every link to it."""
        shapes: set[tuple[str, str]] = set()
        form_keys: set[tuple] = set()
        queue = list(starts)
        while queue and len(self.pages) < MAX_PAGES:
            url = queue.pop(0)
            parts = urlsplit(url)
            if not url or NOT_WALKED.search(parts.path):
                continue
            query = dict(parse_qsl(parts.query, keep_blank_values=True))
            for name, value in query.items():
                self.queries.setdefault(path_shape(parts.path), {}).setdefault(name, value)
            shape = (path_shape(parts.path), query.get("world", ""))
            if shape in shapes:
                continue
            shapes.add(shape)
            response = self._send("get", url)
            if response.status_code >= 500:
                raise AssertionError(f"GET {url} answered {response.status_code} untouched")
            if response.status_code != 200 or "html" not in response.get("Content-Type", ""):
                continue
            self.pages.append(url)
            reader = _PageReader()
            reader.feed(response.content.decode("utf-8", "replace"))
            queue.extend(self._same_site(url, href) for href in reader.links)
            for found in reader.forms:
                action = self._same_site(url, found["action"] or url)
                fields = tuple((name, value, sent) for name, value, sent in found["fields"])
                key = (
                    found["method"],
                    path_shape(urlsplit(action).path),
                    tuple(sorted({name for name, _, _ in fields})),
                )
                if action and key not in form_keys:
                    form_keys.add(key)
                    self.forms.append(Form(found["method"], action, fields, url))

    def _same_site(self, page: str, href: str) -> str:
        """`href` as a path and query on this site, or "" (another site, a fragment, mailto)."""
        parts = urlsplit(urljoin(f"http://testserver{page}", href))
        if parts.scheme not in ("http", "https") or parts.netloc not in ("testserver", ""):
            return ""
        return parts.path + (f"?{parts.query}" if parts.query else "")

    # --- the fuzz ---------------------------------------------------------------------------

    def targets(self) -> list[Form]:
        """Every form that may be submitted, and every page's query (as a GET form)."""
        pages_by_shape = {path_shape(urlsplit(page).path): page for page in reversed(self.pages)}
        queries = [
            Form("get", urlsplit(page).path, tuple((k, v, True) for k, v in keys.items()), page)
            for shape, keys in self.queries.items()
            if (page := pages_by_shape.get(shape))
        ]
        forms = [
            form for form in self.forms if not _skipped(form.method, urlsplit(form.action).path)
        ]
        # A page's query and a GET form on it with the same fields (the world selector) are
        # one request: sent once.
        unique: dict[tuple, Form] = {}
        for target in queries + forms:
            unique.setdefault(self._key(target), target)
        return list(unique.values())

    def _key(self, target: Form) -> tuple:
        """What a request to `target` is, whatever page it was found on."""
        path = path_shape(urlsplit(target.action).path)
        return target.method, path, tuple(sorted({name for name, _, _ in self._fields(target)}))

    def _sent_already(self, stage: str, target: Form) -> bool:
        """Whether another person's fuzzer sent `target` this `stage` already (and if not, it
        is counted as sent now). Two stages are sent once whoever reaches them:
        - "every field" of the admin's forms: the admin is Django's machinery on each model,
          the same for every role that may change what it shows (a role that may only view
          gets other forms, so other keys);
        - "each field": a form a lower role may submit runs the owner's code after the role
          check, which every field at once goes through for each person."""
        key = (stage, *self._key(target))
        if key in self.done:
            return True
        self.done.add(key)
        return False

    def fuzz(self) -> list[Failure]:
        """Each bad value in every field of each target at once, then (where the target's
        untouched submission is accepted) in each field alone; every answer of 500 or more."""
        failures: list[Failure] = []
        for target in self.targets():
            fields = self._fields(target)
            # A name once: the admin's list has a box per row, all one field to its view.
            first = {name: index for index, (name, _, _) in reversed(list(enumerate(fields)))}
            fuzzed = sorted(index for name, index in first.items() if name not in NOT_FUZZED)
            in_admin = urlsplit(target.action).path.startswith("/admin/")
            if not fuzzed or (in_admin and self._sent_already("every field", target)):
                continue
            for label, bad in BAD_VALUES.items():
                status = self._submit(target, fields, set(fuzzed), bad)
                if status >= 500:
                    failures.append(Failure(self._named(target, "every field"), label, status))
            # With one field, every field at once was each field alone.
            plan = _one_field_plan(fields, fuzzed, in_admin=in_admin) if len(fuzzed) > 1 else []
            if not plan or self._sent_already("each field", target):
                continue
            if self._submit(target, fields, set(), "") >= 400:
                continue  # refused untouched: a bad field alone would be refused the same way
            for index, label in plan:
                status = self._submit(target, fields, {index}, BAD_VALUES[label])
                if status >= 500:
                    name = repr(fields[index][0])
                    failures.append(Failure(self._named(target, name), label, status))
        return failures

    def _fields(self, target: Form) -> list[tuple[str, str, bool]]:
        """A GET form's action query is replaced by its fields, as a browser does; a POST's is
        kept in the address."""
        if target.method == "post":
            return list(target.fields)
        action_query = parse_qsl(urlsplit(target.action).query, keep_blank_values=True)
        names = {name for name, _, _ in target.fields}
        return [*((k, v, True) for k, v in action_query if k not in names), *target.fields]

    def _submit(self, target: Form, fields: list, bad_at: set[int], bad: str | bytes) -> int:
        sent = [
            (name, bad if index in bad_at else value)
            for index, (name, value, untouched) in enumerate(fields)
            if untouched or index in bad_at
        ]
        path = urlsplit(target.action).path
        if target.method == "post":
            query = urlsplit(target.action).query
            response = self._send("post", f"{path}?{query}" if query else path, _encoded(sent))
        else:
            response = self._send("get", f"{path}?{_encoded(sent)}")
        return response.status_code

    def _named(self, target: Form, fields: str) -> str:
        path = urlsplit(target.action).path
        return f"{target.method.upper()} {path}, {fields} (on {target.page})"

    def _send(self, method: str, url: str, body: str = ""):
        """One request in a savepoint that is rolled back: what it wrote is gone after it."""
        self.requests += 1
        with transaction.atomic():
            if method == "post":
                response = self.client.post(
                    url, body, content_type="application/x-www-form-urlencoded"
                )
            else:
                response = self.client.get(url)
            transaction.set_rollback(True)
        return response
