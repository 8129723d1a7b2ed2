"""A crawler that opens every page a signed-in person can reach from a start page, submits
every form and presses every button on it, and reports what a person would meet as broken:

- an error page: a navigation answered with a status of 400 or more, or Django's error page;
- a JSON body shown as a page: a navigation answered with application/json (an API's error,
  or any API answer, where a page was expected);
- a console error or an uncaught exception in the page's scripts;
- a page wider than a phone: at 390 px, document.documentElement.scrollWidth > 390;
- a phone's layout (390 x 844) that hides or cuts what it shows: a header taller than a
  quarter of the screen, a box that scrolls sideways without its cue (levers9.css's edge
  shadows, `.scroll-x`; a table is its own), and a plot or a list wider than the screen;
- a list (select) whose every option is blank.

Forms that start long jobs are not submitted: the caller names them, each with the reason, in
a skip list (LONG_JOBS below is the product's). Pages are counted by their shape, so a world's
thousand calls cost one visit (/calls/N/), and /api/, /admin/ and /static/ addresses are not
crawled (the API's answers are JSON on purpose; the admin is Django's own).

    findings = Crawler(page, base, skip=LONG_JOBS).crawl(["/?world=lettings"])
    assert not findings, "\n".join(map(str, findings))
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlencode, urlsplit

PHONE_WIDTH = 390
PHONE_HEIGHT = 844
# The header may take at most this share of a phone's screen before the page's own content.
HEADER_SHARE = 0.25

# (method, path pattern) -> why it is not submitted. Each starts a job that runs for minutes.
LONG_JOBS: dict[tuple[str, str], str] = {
    ("post", r"/train/move-strategy/"): "starts a move-strategy training job",
    ("post", r"/train/wording/"): "starts an RLHF or DPO training job (15-25 minutes)",
    ("post", r"/evaluate/"): "starts an evaluation job",
    ("post", r"/engines/"): "starts an Engines run (a training job)",
    ("post", r"/environment/[^/]+/fit/"): "starts a judge fit job",
    (
        "post",
        r"/environment/[^/]+/measure/",
    ): "starts a judge measurement job (a model call a pick)",
    ("post", r"/policies/\d+/serve/"): "starts a serving job that loads the model",
    ("post", r"/train/jobs/\d+/resume/"): "resumes a job's long work",
    ("post", r"/engines/runs/\d+/promote/"): "registers a version from a finished run",
    # Not a job, but it would end the crawler's own session.
    ("post", r"/logout/"): "signs the crawler out",
}

NOT_CRAWLED = re.compile(r"^/(api|admin|static)/")
MAX_PAGES = 120

# Fills what a browser would refuse to submit empty (a required field), without choosing
# anything a person must choose: the crawl submits every form as it stands, else.
_FILL_REQUIRED = """form => {
  for (const field of form.querySelectorAll('input[required], textarea[required]')) {
    if (field.value) continue;
    if (field.type === 'number') field.value = field.min || '1';
    else if (field.type === 'email') field.value = 'e2e@example.test';
    else if (field.type === 'url') field.value = 'https://example.test/';
    else if (field.type === 'checkbox' || field.type === 'radio') field.checked = true;
    else if (field.type !== 'file' && field.type !== 'hidden') field.value = 'e2e';
  }
}"""

_OVERFLOW = """width => {
  const wide = [];
  for (const element of document.querySelectorAll('body *')) {
    const box = element.getBoundingClientRect();
    if (box.right > width + 1 && box.width > 0) {
      const name = element.tagName.toLowerCase() + (element.id ? '#' + element.id : '')
        + (element.className && typeof element.className === 'string'
           ? '.' + element.className.trim().split(/\\s+/).join('.') : '');
      wide.push(name + ' (right edge ' + Math.round(box.right) + ' px)');
    }
  }
  return {scrollWidth: document.documentElement.scrollWidth, wide: wide.slice(0, 5)};
}"""

# What a phone's screen shows wrongly. A box that scrolls sideways must say so: its background
# carries the scroll shadows (a gradient) that levers9.css gives a table and `.scroll-x`, the
# cue that there is more to the side. A plot must fit the screen even inside such a box (it is
# drawn, not read across), and a list (select) must fit unless a scrolling box holds it.
_PHONE_LAYOUT = """([width, height]) => {
  const name = element => element.tagName.toLowerCase() + (element.id ? '#' + element.id : '')
    + (element.className && typeof element.className === 'string'
       ? '.' + element.className.trim().split(/\\s+/).join('.') : '');
  const scrolls = element => element.scrollWidth > element.clientWidth + 1
    && ['auto', 'scroll'].includes(getComputedStyle(element).overflowX);
  const header = document.querySelector('body > header');
  const headerHeight = header ? Math.round(header.getBoundingClientRect().height) : 0;
  const uncued = [], wide = [];
  for (const element of document.querySelectorAll('body *')) {
    if (element.offsetParent === null && getComputedStyle(element).position !== 'fixed') continue;
    if (scrolls(element) && !getComputedStyle(element).backgroundImage.includes('gradient')) {
      uncued.push(name(element) + ' (' + element.scrollWidth + ' px in '
        + element.clientWidth + ' px)');
    }
  }
  for (const element of document.querySelectorAll('.js-plotly-plot, select')) {
    const box = element.getBoundingClientRect();
    if (box.width === 0) continue;
    let held = false;
    for (let parent = element.parentElement; parent; parent = parent.parentElement) {
      if (scrolls(parent)) { held = true; break; }
    }
    const plot = element.matches('.js-plotly-plot');
    if (box.width > width || (box.right > width + 1 && (plot || !held))) {
      wide.push((plot ? 'plot ' : 'list ') + name(element) + ' (' + Math.round(box.width)
        + ' px wide, right edge ' + Math.round(box.right) + ' px)');
    }
  }
  return {headerHeight, uncued: uncued.slice(0, 5), wide: wide.slice(0, 5)};
}"""

# Shown lists whose every option is blank: an empty box to choose from (the header's world
# selector was one on Environment, its options fed the page's own "worlds").
_EMPTY_LISTS = """() => Array.from(document.querySelectorAll('select'))
  .filter(s => s.offsetParent !== null && s.options.length
    && Array.from(s.options).every(o => !o.textContent.trim()))
  .map(s => s.name || s.id || 'unnamed')"""

# Buttons a script handles (a form's own submit buttons count as the form's submission).
_BUTTONS = """() => Array.from(document.querySelectorAll('button, input[type=button]'))
  .map((b, index) => ({b, index}))
  .filter(({b}) => (!b.form || b.type === 'button') && !b.disabled && b.offsetParent !== null)
  .map(({b, index}) => ({index,
    name: b.id ? '#' + b.id : (b.textContent || b.value).replace(/\\s+/g, ' ').trim()}))"""


@dataclass(frozen=True)
class Finding:
    where: str
    what: str

    def __str__(self) -> str:
        return f"{self.where}: {self.what}"


@dataclass
class Crawler:
    page: object  # a Playwright page
    base: str  # http://<slug>.localhost:<port>
    skip: dict[tuple[str, str], str] = field(default_factory=lambda: dict(LONG_JOBS))
    findings: list[Finding] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    visited: list[str] = field(default_factory=list)
    submitted: list[str] = field(default_factory=list)
    pressed: list[str] = field(default_factory=list)
    downloaded: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._console: list[str] = []
        self._navigations: list[tuple[str, int, str]] = []
        self._shapes: set[tuple] = set()
        self._forms_done: set[tuple] = set()
        self._buttons_done: set[tuple] = set()
        self._too_wide: set[tuple] = set()
        self._empty_lists: set[tuple] = set()
        self._phone_layout: set[tuple] = set()
        self._button_tries: dict[tuple, int] = {}
        self.page.set_viewport_size({"width": PHONE_WIDTH, "height": PHONE_HEIGHT})
        self.page.on("console", self._on_console)
        self.page.on("pageerror", lambda error: self._console.append(f"uncaught: {error}"))
        self.page.on("response", self._on_response)
        self._in_flight: set = set()
        self.page.on("request", self._on_request_start)
        self.page.on("requestfinished", self._on_request_end)
        self.page.on("requestfailed", self._on_request_end)

    # --- what the browser reports ---------------------------------------------------------

    def _on_console(self, message) -> None:
        if message.type == "error":
            self._console.append(message.text)

    def _on_request_start(self, request) -> None:
        # A script's own requests: a navigation's are waited for by the load state.
        if request.resource_type in ("fetch", "xhr"):
            self._in_flight.add(request)

    def _on_request_end(self, request) -> None:
        self._in_flight.discard(request)

    def _settle(self) -> None:
        """Until what a press started has finished: the page's load, then its scripts'
        requests (a fetch; the load state alone says nothing after the first load)."""
        self.page.wait_for_load_state("load")
        for _ in range(200):  # at most about 10 s of a script's requests
            self.page.wait_for_timeout(50)  # lets a handler start its fetch, then re-looks
            if not self._in_flight:
                break
        self.page.evaluate("() => new Promise(done => requestAnimationFrame(() => done()))")

    def _on_response(self, response) -> None:
        try:
            navigation = response.request.is_navigation_request()
            main = response.frame == self.page.main_frame
        except Exception:  # noqa: BLE001 - a frame gone by now is no navigation of ours
            return
        if navigation and main:
            kind = response.headers.get("content-type", "")
            self._navigations.append((response.url, response.status, kind))

    def _collect(self, where: str) -> None:
        """What happened since the last look, as findings for `where`."""
        for url, status, kind in self._navigations:
            path = self._path(url)
            if status >= 400:
                self.findings.append(Finding(where, f"{path} answered {status} ({kind})"))
            elif kind.startswith("application/json"):
                self.findings.append(Finding(where, f"{path} showed JSON as a page"))
        self._navigations.clear()
        for text in self._console:
            self.findings.append(Finding(where, f"console error: {text}"))
        self._console.clear()
        try:
            body = self.page.content()
        except Exception:  # noqa: BLE001 - mid-navigation: the next look reads it
            body = ""
        if "Traceback (most recent call last)" in body or 'id="traceback"' in body:
            self.findings.append(Finding(where, "Django's error page"))
        if self.page.url.startswith(self.base) and "json" not in self._content_type():
            try:
                seen = self.page.evaluate(_OVERFLOW, PHONE_WIDTH)
                empty_lists = self.page.evaluate(_EMPTY_LISTS)
                layout = self.page.evaluate(_PHONE_LAYOUT, [PHONE_WIDTH, PHONE_HEIGHT])
            except Exception:  # noqa: BLE001 - mid-navigation: the next look measures it
                return
            shape = self._shape(self.page.url, "")[:2]
            for name in empty_lists:
                if (shape, name) not in self._empty_lists:
                    self._empty_lists.add((shape, name))
                    self.findings.append(Finding(where, f"the list {name} offers nothing"))
            shape = self._shape(self.page.url, "")[:2]
            if seen["scrollWidth"] > PHONE_WIDTH and shape not in self._too_wide:
                self._too_wide.add(shape)  # once a page: every form on it would repeat it
                self.findings.append(
                    Finding(
                        where,
                        f"{seen['scrollWidth']} px wide at {PHONE_WIDTH} px: "
                        + ", ".join(seen["wide"]),
                    )
                )
            self._report_phone_layout(where, shape, layout)

    def _report_phone_layout(self, where: str, shape: tuple, layout: dict) -> None:
        """A phone's header, sideways scrolling and wide plots or lists, once a page each."""
        tallest = int(PHONE_HEIGHT * HEADER_SHARE)
        problems = []
        if layout["headerHeight"] > tallest:
            problems.append(
                f"the header is {layout['headerHeight']} px tall at {PHONE_WIDTH} x "
                f"{PHONE_HEIGHT} px (at most {tallest} px, a quarter of the screen)"
            )
        problems.extend(f"scrolls sideways with no cue: {name}" for name in layout["uncued"])
        problems.extend(f"wider than the screen: {name}" for name in layout["wide"])
        for problem in problems:
            # Keyed by the page's path and what, less the figures: its forms (a filter's
            # query) would repeat it, a htmx swap would move its pixels.
            key = (shape[0], re.sub(r"\(.*", "", problem))
            if key not in self._phone_layout:
                self._phone_layout.add(key)
                self.findings.append(Finding(where, problem))

    def _content_type(self) -> str:
        try:
            return self.page.evaluate("() => document.contentType") or ""
        except Exception:  # noqa: BLE001 - mid-navigation: no document to read yet
            return ""

    # --- addresses --------------------------------------------------------------------------

    def _path(self, url: str) -> str:
        parts = urlsplit(url)
        return parts.path + (f"?{parts.query}" if parts.query else "")

    def _shape(self, url: str, world: str) -> tuple:
        """Pages of one shape are one visit: digits in the path are any number, and the
        query counts by its keys (the world's value counts too)."""
        parts = urlsplit(url)
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        return (
            re.sub(r"/\d+/", "/N/", parts.path),
            tuple(sorted(query)),
            query.get("world", world),
        )

    def _skip_reason(self, method: str, action: str) -> str | None:
        for (skip_method, pattern), reason in self.skip.items():
            if method == skip_method and re.fullmatch(pattern, urlsplit(action).path):
                return reason
        return None

    # --- the crawl --------------------------------------------------------------------------

    def crawl(self, starts: list[str]) -> list[Finding]:
        """Each start (a path, e.g. "/?world=lettings") and every page reachable from it."""
        for start in starts:
            world = dict(parse_qsl(urlsplit(start).query)).get("world", "")
            queue = [self.base + start]
            while queue and len(self.visited) < MAX_PAGES:
                url = queue.pop(0)
                shape = self._shape(url, world)
                if shape in self._shapes:
                    continue
                self._shapes.add(shape)
                queue.extend(self._visit(url, world))
        return self.findings

    def _goto(self, url: str) -> bool:
        """Opens `url`: False where it is a download (a file, e.g. the Picks page's CSV),
        which the browser saves rather than shows."""
        from playwright.sync_api import Error as BrowserError

        self._in_flight.clear()  # what the last page's scripts left unanswered is gone
        try:
            self.page.goto(url)
        except BrowserError as error:
            if "Download is starting" not in str(error):
                raise
            return False
        self.page.wait_for_load_state("networkidle")
        return True

    def _visit(self, url: str, world: str) -> list[str]:
        where = self._path(url)
        self.visited.append(where)
        if not self._goto(url):
            self.downloaded.append(where)
            return []
        self._collect(where)
        if "json" in self._content_type():
            return []
        links = self._links(world)
        self._submit_forms(url, where)
        self._press_buttons(url, where)
        return links

    def _links(self, world: str) -> list[str]:
        hrefs = self.page.eval_on_selector_all(
            "a[href]",
            # getAttribute, not .href: an SVG link's (the Duel's map) is no string.
            "links => links.map(a => new URL(a.getAttribute('href'), document.baseURI).href)"
            ".filter(h => h.startsWith('http'))",
        )
        found = []
        for href in hrefs:
            parts = urlsplit(href)
            if f"{parts.scheme}://{parts.netloc}" != self.base or NOT_CRAWLED.match(parts.path):
                continue
            query = dict(parse_qsl(parts.query, keep_blank_values=True))
            if query.get("world", world) != world:
                continue  # visited in that world's own crawl
            found.append(f"{self.base}{parts.path}" + (f"?{urlencode(query)}" if query else ""))
        return found

    def _forms(self) -> list[dict]:
        return self.page.eval_on_selector_all(
            "form",
            """forms => forms.map((f, index) => ({
                index, method: (f.getAttribute('method') || 'get').toLowerCase(),
                action: f.action, id: f.id,
                fields: Array.from(f.elements).map(e => e.name).filter(Boolean).sort().join(',')
            }))""",
        )

    def _submit_forms(self, url: str, where: str) -> None:
        for form in self._forms():
            action_path = urlsplit(form["action"]).path
            key = (form["method"], re.sub(r"/\d+/", "/N/", action_path), form["fields"])
            if key in self._forms_done:
                continue
            self._forms_done.add(key)
            label = f"{form['method'].upper()} {action_path} (form on {where})"
            reason = self._skip_reason(form["method"], form["action"])
            if reason:
                self.skipped.append(f"{label}: {reason}")
                continue
            self._goto(url)
            self._collect(where)
            handle = self.page.query_selector_all("form")[form["index"]]
            handle.evaluate(_FILL_REQUIRED)
            self.submitted.append(label)
            from playwright.sync_api import TimeoutError as NoNavigation

            # A form a script handles (fetch, then a message) does not navigate: no error.
            with contextlib.suppress(NoNavigation), self.page.expect_navigation(timeout=15_000):
                handle.evaluate("form => form.requestSubmit()")
            self._settle()
            self._collect(label)

    def _press_buttons(self, url: str, where: str) -> None:
        """Each button once. A fresh load of the page, then the first button not pressed yet,
        then those its press revealed or enabled (the Duel's pick shows Overrule and enables
        Next), until none is left; then a fresh load for what a press disabled (Skip)."""
        page_shape = self._shape(url, "")[0]
        while True:
            self._goto(url)
            self._collect(where)
            pressed_any = False
            while True:
                waiting = [
                    button
                    for button in self.page.evaluate(_BUTTONS)
                    if (page_shape, button["name"]) not in self._buttons_done
                ]
                if not waiting:
                    break
                button = waiting[0]
                key = (page_shape, button["name"])
                self._buttons_done.add(key)
                label = f"button {button['name']} on {where}"
                before = self.page.url
                handle = self.page.query_selector_all("button, input[type=button]")[button["index"]]
                if not (handle.is_visible() and handle.is_enabled()):
                    # The page's script changed it since the look (a pair came, a pick was
                    # made): pressed on a later fresh load, a few tries at most.
                    self._button_tries[key] = self._button_tries.get(key, 0) + 1
                    if self._button_tries[key] < 3:
                        self._buttons_done.discard(key)
                        pressed_any = True  # so that a fresh load comes
                        break
                    continue
                self.pressed.append(label)
                try:
                    handle.click(timeout=5_000)
                except Exception as error:  # noqa: BLE001 - named in the findings
                    if handle.is_enabled():
                        self.findings.append(Finding(label, f"could not be pressed: {error}"))
                    continue
                pressed_any = True
                self._settle()
                self._collect(label)
                if self.page.url != before:
                    break  # it navigated: the rest are pressed on a fresh load
            if not pressed_any:
                return
