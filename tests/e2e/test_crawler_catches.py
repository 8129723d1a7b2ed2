"""The every-control crawler can fail: on a planted page (served to the browser by Playwright,
the server untouched) it reports a form that posts to the API as a page did before the Duel's
"Make pairs" was fixed, a link to nowhere, a console error, a page wider than a phone and a
list with nothing to choose."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import sign_in
from tests.e2e.crawler import Crawler

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

BROKEN_FORM = """<!doctype html><html><head><meta name="viewport" content="width=device-width">
</head><body><main>
<form method="post" action="/api/rl/duel/generate/">
  <input type="hidden" name="csrfmiddlewaretoken" value="{token}">
  <input type="number" name="count" value="3"><button type="submit">Make pairs</button>
</form></main></body></html>"""

NOISY_PAGE = """<!doctype html><html><head><meta name="viewport" content="width=device-width">
</head><body><main><a href="/no-such-page/">a link to nowhere</a>
<div style="width: 700px">a table a phone cannot hold</div>
<button type="button" onclick="console.error('planted: the button broke')">Press</button>
<select name="world"><option value=""></option><option value=""> </option></select>
</main></body></html>"""


def _plant(page, url: str, body: str) -> None:
    page.route(url, lambda route: route.fulfill(status=200, content_type="text/html", body=body))


def test_it_reports_a_form_that_shows_json_as_a_page(page, e2e_server, e2e_workspace):
    sign_in(page, e2e_server, e2e_workspace.slug, e2e_workspace.owner_email)
    base = e2e_server.url_for(e2e_workspace.slug, "").rstrip("/")
    token = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    _plant(page, f"{base}/planted/", BROKEN_FORM.format(token=token))

    crawler = Crawler(page, base)
    findings = [str(finding) for finding in crawler.crawl(["/planted/"])]

    assert crawler.submitted == ["POST /api/rl/duel/generate/ (form on /planted/)"]
    assert any(
        finding.startswith("POST /api/rl/duel/generate/")
        and ("answered 4" in finding or "JSON as a page" in finding)
        for finding in findings
    ), findings


def test_it_reports_a_dead_link_a_console_error_and_overflow(page, e2e_server, e2e_workspace):
    sign_in(page, e2e_server, e2e_workspace.slug, e2e_workspace.owner_email)
    base = e2e_server.url_for(e2e_workspace.slug, "").rstrip("/")
    _plant(page, f"{base}/noisy/", NOISY_PAGE)

    findings = [str(finding) for finding in Crawler(page, base).crawl(["/noisy/"])]

    assert any(f.startswith("/no-such-page/: /no-such-page/ answered 404") for f in findings)
    assert any("console error: planted: the button broke" in f for f in findings), findings
    assert any(f.startswith("/noisy/: ") and "px wide at 390 px" in f for f in findings)
    assert "/noisy/: the list world offers nothing" in findings


# A phone's page as it was before issue 40: a header of more than a quarter of the screen, a
# box that scrolls sideways with no cue, a plot drawn 432 px wide and a list wider than the
# screen. The same page on the product's stylesheet, with a header that fits and the box
# marked `.scroll-x`, is not reported.
PHONE_PAGE = """<!doctype html><html><head><meta name="viewport" content="width=device-width">
{stylesheet}<style>
.bare {{ display:block; overflow-x:auto; background:#fff; }}</style></head><body>
<header style="height:{header}px">a header</header><main>
<div class="{scroller}" id="runs"><div style="width:900px">Make live · Runs on</div></div>
<div class="js-plotly-plot" id="reliability" style="width:{plot}px;height:50px"></div>
<select name="world" style="width:{select}px"><option>Persuasion for Good</option></select>
</main></body></html>"""

STYLESHEET = '<link rel="stylesheet" href="/static/levers9.css">'


def test_it_reports_a_tall_header_an_uncued_scroller_and_a_wide_plot_or_list(
    page, e2e_server, e2e_workspace
):
    sign_in(page, e2e_server, e2e_workspace.slug, e2e_workspace.owner_email)
    base = e2e_server.url_for(e2e_workspace.slug, "").rstrip("/")
    _plant(
        page,
        f"{base}/phone/",
        PHONE_PAGE.format(stylesheet="", header=570, scroller="bare", plot=432, select=420),
    )
    _plant(
        page,
        f"{base}/fits/",
        PHONE_PAGE.format(
            stylesheet=STYLESHEET, header=200, scroller="scroll-x", plot=432, select=420
        ),
    )

    findings = [str(finding) for finding in Crawler(page, base).crawl(["/phone/", "/fits/"])]

    phone = [f for f in findings if f.startswith("/phone/: ")]
    assert any("the header is 570 px tall" in f and "at most 211 px" in f for f in phone), findings
    assert any("scrolls sideways with no cue: div#runs.bare" in f for f in phone), findings
    assert any("wider than the screen: plot div#reliability" in f for f in phone), findings
    assert any("wider than the screen: list select" in f for f in phone), findings
    assert not [f for f in findings if f.startswith("/fits/: ")], findings
