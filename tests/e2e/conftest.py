"""Browser tests: real Chromium against a real server process on the test database.

pytest-django's live_server cannot be used: its transactional flush would empty the public
schema's workspaces. Instead the data these tests need is committed (outside any test
transaction), each test gets a fresh workspace `e2e-<hex>` at `<slug>.localhost` (Chromium
resolves *.localhost itself), and one daphne process serves every workspace of the session.

Fixtures, for this and later browser tests (a whole-game test can reuse them):
  e2e_server     the daphne process: .url_for(slug, path), .port, .datasets_dir (session)
  e2e_workspace  a fresh, committed workspace with its owner (deleted afterwards)
  e2e_db         a context manager to read or write committed rows in a workspace's schema
  browser        Debian's Chromium driven by Playwright (one per test module)
  page           a new browser page (and context) per test
  game_server    a web server and a real worker for the test's workspace: its base address
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import PASSWORD, database_url_for_workers
from tests.e2e.workspaces import fresh_workspace
from tests.processes import free_port, start_daphne

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def pytest_collection_modifyitems(config, items):
    """Skip browser tests, saying why, where Debian's Chromium or Playwright is missing."""
    reason = None
    if not Path(CHROMIUM).exists():
        reason = f"{CHROMIUM} is missing: apt-get install -y chromium chromium-driver"
    else:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            reason = "the playwright package is missing: pip install -r requirements-dev.txt"
    if reason:
        skip = pytest.mark.skip(reason=reason)
        for item in items:
            if "e2e" in item.keywords:
                item.add_marker(skip)


@dataclass
class E2EServer:
    port: int
    process: subprocess.Popen
    datasets_dir: Path
    log: Path

    def url_for(self, slug: str, path: str = "/") -> str:
        return f"http://{slug}.localhost:{self.port}{path}"

    def wait_until_up(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"daphne exited: {self.log.read_text()[-3000:]}")
            request = urllib.request.Request(
                f"http://127.0.0.1:{self.port}/", headers={"Host": "localhost"}
            )
            try:
                with urllib.request.urlopen(request, timeout=2):  # noqa: S310 - local server
                    return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"daphne did not answer in {timeout} s: {self.log.read_text()[-3000:]}")


@pytest.fixture(scope="session")
def e2e_server(django_db_setup, tmp_path_factory):
    """A real daphne process on a free port, on this test run's database."""
    folder = tmp_path_factory.mktemp("e2e-server")
    datasets_dir = folder / "datasets"
    log = folder / "daphne.log"
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": database_url_for_workers(),
        "LEVERS9_DATASETS_DIR": str(datasets_dir),
        "DJANGO_SETTINGS_MODULE": "config.settings",
    }
    env.pop("REDIS_URL", None)  # the server uses the database for its channel layer
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)  # the server keeps Django's async checks
    with open(log, "wb") as output:
        process = start_daphne(port, env=env, output=output)
    server = E2EServer(port=port, process=process, datasets_dir=datasets_dir, log=log)
    try:
        server.wait_until_up()
        yield server
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)


@dataclass
class E2EWorkspace:
    slug: str
    schema_name: str
    owner_email: str
    password: str
    workspace: object


@pytest.fixture
def e2e_db(django_db_setup, django_db_blocker):
    """`with e2e_db(workspace):` — committed reads and writes in that workspace's schema."""

    @contextlib.contextmanager
    def open_schema(e2e_workspace: E2EWorkspace):
        from django_tenants.utils import schema_context

        with django_db_blocker.unblock(), schema_context(e2e_workspace.schema_name):
            yield

    return open_schema


@pytest.fixture
def e2e_workspace(django_db_setup, django_db_blocker):
    """A fresh workspace, committed so the server process sees it; dropped afterwards."""
    with django_db_blocker.unblock(), fresh_workspace("e2e") as created:
        workspace = created.workspace
        yield E2EWorkspace(
            workspace.slug,
            workspace.schema_name,
            f"owner@{workspace.slug}.test",
            PASSWORD,
            workspace,
        )


@pytest.fixture(scope="module")
def browser(django_db_setup):
    # The test database is set up before Playwright's event loop starts in this thread. The
    # loop runs as long as the browser is open, and asyncio tests cannot run beside it: one
    # browser per test module, closed before other modules' tests run.
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an event loop running in this thread; Django then refuses
    # ORM calls from the test body as if it were async code. The test is plain sync code, so
    # that check does not apply while the browser is open.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            yield chromium
            chromium.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def page(browser):
    context = browser.new_context(accept_downloads=True)
    context.set_default_timeout(20_000)
    page = context.new_page()
    yield page
    context.close()


def sign_in(page, server: E2EServer, slug: str, email: str, password: str = PASSWORD) -> None:
    """Sign in through the workspace's login page."""
    page.goto(server.url_for(slug, "/login/"))
    page.fill("input[name=username]", email)
    page.fill("input[name=password]", password)
    page.click("button[type=submit], input[type=submit]")
    page.wait_for_url(server.url_for(slug, "/"))


def reviewer_at_the_duel(page, server: E2EServer, workspace, e2e_db) -> str:
    """A new reviewer of `workspace`, signed in and served a pair on the Lettings Duel: their
    e-mail."""
    from levers9.services import workspace_user_create

    reviewer = f"rita@{workspace.slug}.test"
    with e2e_db(workspace):
        workspace_user_create(email=reviewer, password=PASSWORD, role="reviewer")
    sign_in(page, server, workspace.slug, reviewer)
    page.goto(server.url_for(workspace.slug, "/duel/?world=lettings"))
    page.wait_for_selector("#duel[data-pair]")
    return reviewer


@pytest.fixture
def game_server(e2e_workspace):
    """A web server (with the dashboard's job watcher) and a real worker for one workspace:
    its base address."""
    from tests.processes import start_web, start_worker, stop

    worker = start_worker()
    port = free_port()
    web = start_web(port)
    yield f"http://{e2e_workspace.slug}.localhost:{port}"
    stop(web)
    stop(worker)
