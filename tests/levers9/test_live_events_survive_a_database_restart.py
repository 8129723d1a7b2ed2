"""Live progress across a real database restart, through a real daphne (issue 41, point 3).

Before: right after a restart a handshake got HTTP 500 (AdminShutdown from a dead pooled
connection in group_add); later handshakes succeeded but no event ever arrived again (the
layer's LISTEN connection had died and was never opened again); during the outage a handshake
got HTTP 403, where 1013 ("try again later") was meant.

The database is stopped and started for real, so it is a cluster of this module's own (the
suite's server is shared with other test runs): the embedded server in a scratch folder,
migrated, with one workspace. daphne and a stand-in worker (tests.levers9.event_sender) run on
it as separate processes, without Redis, so the layer is channels_postgres.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from django.conf import settings

from levers9 import embedded_pg
from tests.conftest import PASSWORD
from tests.processes import free_port, start_daphne, stop, wait_until
from tests.websocket_client import Closed, LiveSocket

pytestmark = pytest.mark.slow

SLUG, SCHEMA, OWNER = "acme", "ws_acme", "owner@acme.test"
HOST = f"{SLUG}.localhost"
LISTENING = (
    "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN channels_postgres_messages%'"
)


@contextlib.contextmanager
def _scratch_var(var: Path) -> Iterator[None]:
    """embedded_pg reads LEVERS9_VAR_DIR at each call: point it at the scratch cluster."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LEVERS9_VAR_DIR", str(var))
        yield


@dataclass
class Site:
    """daphne and a worker on a database this module may stop."""

    var: Path
    url: str
    web_port: int
    session_key: str
    sender: subprocess.Popen

    def socket(self) -> LiveSocket:
        return LiveSocket(
            self.web_port,
            HOST,
            "/ws/events/jobs/",
            cookie=f"{settings.SESSION_COOKIE_NAME}={self.session_key}",
        )

    def send_event(self, note: str) -> None:
        """The worker sends one event to the workspace (and says when it has)."""
        self.sender.stdin.write(f"{note}\n")
        self.sender.stdin.flush()
        assert self.sender.stdout.readline().strip() == "sent"

    def stop_database(self) -> None:
        with _scratch_var(self.var):
            assert embedded_pg.stop()

    def start_database(self) -> None:
        with _scratch_var(self.var):
            state = embedded_pg.start()
        assert state.url == self.url, "the server came back on another port"

    def layer_listeners(self) -> int:
        with psycopg.connect(self.url, autocommit=True) as connection:
            return connection.execute(LISTENING).fetchone()[0]


def _environment(url: str) -> dict[str, str]:
    env = {**os.environ, "DATABASE_URL": url, "DJANGO_SETTINGS_MODULE": "config.settings"}
    env.pop("REDIS_URL", None)  # the layer under test is the database's
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    return env


def _manage(env: dict[str, str], *args: str) -> None:
    subprocess.run(  # noqa: S603 - our own manage.py
        [sys.executable, "manage.py", *args],
        cwd=settings.BASE_DIR,
        env=env,
        check=True,
        capture_output=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    # Under /tmp and traversable: the postgres account (when we are root) must reach its data.
    var = Path(tempfile.mkdtemp(prefix="levers9-restart-"))
    var.chmod(0o755)
    processes: list[subprocess.Popen] = []
    try:
        with _scratch_var(var):
            url = embedded_pg.start().url
        env = _environment(url)
        _manage(env, "migrate_schemas", "--verbosity", "0")
        _manage(env, "create_workspace", SLUG, "--admin-email", OWNER, "--password", PASSWORD)
        sender = subprocess.Popen(  # noqa: S603
            [sys.executable, "-m", "tests.levers9.event_sender", SCHEMA, OWNER],
            cwd=settings.BASE_DIR,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=(var / "sender.log").open("wb"),
            text=True,
            start_new_session=True,
        )
        processes.append(sender)
        session_key = sender.stdout.readline().strip()
        assert session_key, (var / "sender.log").read_text()[-3000:]
        web_port = free_port()
        with (var / "daphne.log").open("wb") as log:
            processes.append(start_daphne(web_port, env=env, output=log))
        wait_until(lambda: _answers(web_port), timeout=60, what="daphne to answer on its port")
        yield Site(var, url, web_port, session_key, sender)
    finally:
        for process in reversed(processes):
            stop(process)
        with _scratch_var(var), contextlib.suppress(embedded_pg.EmbeddedPostgresError):
            state = embedded_pg.read_state()
            embedded_pg.stop()
            if state and not Path(state.pgdata).is_relative_to(var):
                shutil.rmtree(Path(state.pgdata).parent, ignore_errors=True)
        shutil.rmtree(var, ignore_errors=True)


def _answers(port: int) -> bool:
    import socket

    with socket.socket() as probe:
        probe.settimeout(0.5)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _daphne_log(site: Site) -> str:
    return (site.var / "daphne.log").read_text(errors="replace")[-4000:]


def test_a_socket_opened_before_a_database_restart_gets_the_next_events(site):
    before = site.socket()
    site.send_event("before the restart")
    assert before.receive_json(timeout=30)["note"] == "before the restart"

    site.stop_database()
    # During the outage: accepted, told why, and closed with 1013 (the page comes back by
    # itself), not an HTTP 403 that reads as "not allowed".
    during = site.socket()
    told = during.receive_json(timeout=30)
    assert told["type"] == "unavailable"
    assert "database" in told["detail"]
    closed = during.receive(timeout=30)
    assert isinstance(closed, Closed), closed
    assert closed.code == 1013, _daphne_log(site)

    site.start_database()
    # Right after the restart, the first handshake is accepted (it was an HTTP 500).
    after = site.socket()
    wait_until(
        site.layer_listeners,
        timeout=60,
        what=f"daphne's channel layer to LISTEN again; its log:\n{_daphne_log(site)}",
    )
    site.send_event("after the restart")
    assert before.receive_json(timeout=30)["note"] == "after the restart"
    assert after.receive_json(timeout=30)["note"] == "after the restart"
    for socket in (before, after):
        socket.close()
    assert "Traceback" not in _daphne_log(site), _daphne_log(site)
