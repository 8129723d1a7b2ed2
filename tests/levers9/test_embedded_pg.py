"""The embedded PostgreSQL server's lifecycle: start, restart, stale leftovers, the fallback.

Every test runs on a cluster of its own, never on the suite's database: LEVERS9_VAR_DIR (read by
``embedded_pg`` at call time) points at a scratch folder for the whole module, so ``initdb`` runs
once. Teardown stops the server and removes its data, /var/tmp fallback included.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import struct
import tempfile
from collections.abc import Iterator
from io import StringIO
from pathlib import Path

import psycopg
import pytest
from django.core.management import call_command

from levers9 import embedded_pg

pytestmark = pytest.mark.slow

FALLBACK_PARENT = Path("/var/tmp")


def _postmaster_pid(state: embedded_pg.ServerState) -> int:
    return int((Path(state.pgdata) / "postmaster.pid").read_text().splitlines()[0])


def _pid_that_does_not_exist() -> int:
    pid = int(Path("/proc/sys/kernel/pid_max").read_text()) - 1
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return pid
        except PermissionError:
            pass
        pid -= 1


def _data_roots(var: Path) -> set[Path]:
    """Every folder the cluster recorded under `var` may occupy: its record's and the fallback."""
    roots = {embedded_pg._placement_root()}
    state = embedded_pg.read_state()
    if state:
        roots.add(Path(state.pgdata).parent)
    # Only folders of this cluster: never the wheel's shared binaries copy, never anything else.
    return {
        root
        for root in roots
        if root.is_relative_to(var)
        or (
            root.parent == FALLBACK_PARENT
            and root.name.startswith("levers9-pg-")
            and not root.name.startswith("levers9-pg-install-")
        )
    }


@contextlib.contextmanager
def _separate_cluster(var: Path) -> Iterator[None]:
    """Point embedded_pg at `var` for the block; afterwards stop its server and remove its data."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LEVERS9_VAR_DIR", str(var))
        try:
            yield
        finally:
            roots = _data_roots(var)
            with contextlib.suppress(embedded_pg.EmbeddedPostgresError):
                embedded_pg.stop()
            for root in roots:
                shutil.rmtree(root, ignore_errors=True)
            shutil.rmtree(var, ignore_errors=True)


@pytest.fixture(scope="module")
def scratch_folder() -> Iterator[Path]:
    # Not tmp_path_factory: /tmp/pytest-of-<user> is mode 700, which would send every cluster
    # to the /var/tmp fallback when we run as root.
    folder = Path(tempfile.mkdtemp(prefix="levers9-embedded-pg-test-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def separate_cluster(scratch_folder: Path) -> Iterator[Path]:
    var = scratch_folder / "var"
    with _separate_cluster(var):
        yield var


@pytest.fixture
def server(separate_cluster: Path) -> embedded_pg.ServerState:
    """The module's server, running (a test before may have left it stopped)."""
    return embedded_pg.start()


def test_it_starts_a_server_that_accepts_connections(server, separate_cluster):
    assert Path(server.pgdata).is_relative_to(separate_cluster)
    with psycopg.connect(server.url) as conn:
        assert conn.execute("select 1").fetchone() == (1,)
    assert embedded_pg.is_running()
    assert embedded_pg.read_state() == server


def test_it_starts_twice_harmlessly(server):
    postmaster_pid = _postmaster_pid(server)
    messages: list[str] = []

    again = embedded_pg.start(say=messages.append)

    assert again.port == server.port
    assert _postmaster_pid(again) == postmaster_pid
    assert messages == []


def test_it_keeps_the_data_across_a_restart(server):
    with psycopg.connect(server.url, autocommit=True) as conn:
        conn.execute("create table kept_across_restart (word text)")
        conn.execute("insert into kept_across_restart values ('still here')")

    assert embedded_pg.stop() is True
    assert not embedded_pg.is_running()
    restarted = embedded_pg.start()

    with psycopg.connect(restarted.url) as conn:
        rows = conn.execute("select word from kept_across_restart").fetchall()
    assert rows == [("still here",)]


def test_it_keeps_its_port_across_a_restart(server):
    with socket.create_connection(("127.0.0.1", server.port)) as client:
        # A protocol version no server speaks: postgres answers and hangs up first, which
        # leaves its end of the connection in TIME_WAIT (as any failed login does).
        client.sendall(struct.pack("!ii", 8, 0))
        while client.recv(4096):
            pass
    assert embedded_pg.stop() is True
    messages: list[str] = []

    restarted = embedded_pg.start(say=messages.append)

    assert restarted.port == server.port, messages


def test_it_treats_a_pid_file_naming_another_program_as_stale(server):
    """After a reboot the pid in postmaster.pid may belong to something else (here: pid 1)."""
    assert embedded_pg.stop() is True
    (Path(server.pgdata) / "postmaster.pid").write_text("1\n")
    messages: list[str] = []

    restarted = embedded_pg.start(say=messages.append)

    assert embedded_pg.is_running(restarted)
    assert any("stale" in message for message in messages), messages


def test_it_recovers_from_a_stale_postmaster_pid(server):
    assert embedded_pg.stop() is True
    gone = _pid_that_does_not_exist()
    # What a crash leaves behind: the lock file of a postmaster that no longer exists.
    (Path(server.pgdata) / "postmaster.pid").write_text(f"{gone}\n{server.pgdata}\n")
    messages: list[str] = []

    restarted = embedded_pg.start(say=messages.append)

    assert embedded_pg.is_running(restarted)
    assert _postmaster_pid(restarted) != gone
    assert any("stale" in message for message in messages), messages


def test_it_moves_to_a_free_port_when_its_port_is_taken(server):
    assert embedded_pg.stop() is True
    messages: list[str] = []

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as squatter:
        # SO_REUSEADDR so that leftover TIME_WAIT connections cannot stop us taking the port.
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind(("127.0.0.1", server.port))
        squatter.listen()
        moved = embedded_pg.start(say=messages.append)

    assert moved.port != server.port
    assert embedded_pg.read_state() == moved
    with psycopg.connect(moved.url) as conn:
        assert conn.execute("select 1").fetchone() == (1,)
    assert any(str(server.port) in message for message in messages), messages


def _manage_py(*args: str) -> str:
    out = StringIO()
    call_command("embeddedpg", *args, stdout=out)
    return out.getvalue().strip()


def test_it_reports_status_and_url_through_manage_py(server):
    if os.environ.get("DATABASE_URL"):
        pytest.skip("DATABASE_URL is set: `manage.py embeddedpg` then leaves the server alone")

    assert _manage_py("status") == f"running on 127.0.0.1:{server.port}, data in {server.pgdata}"
    assert _manage_py("url") == server.url

    assert _manage_py("stop") == "Stopped."
    assert _manage_py("status") == "stopped"
    assert not embedded_pg.is_running()

    # The port may change on the way (see test_it_keeps_its_port_across_a_restart).
    started = _manage_py("start")
    assert embedded_pg.is_running()
    assert started.endswith(f"started at {embedded_pg.read_state().url}")


def test_it_places_the_data_under_var_tmp_when_the_var_dir_is_private(scratch_folder):
    if os.geteuid() != 0:
        pytest.skip("only root runs postgres as another account that may not reach the folder")
    private = scratch_folder / "private"
    private.mkdir()
    private.chmod(0o700)
    var = private / "var"
    messages: list[str] = []

    with _separate_cluster(var):
        state = embedded_pg.start(say=messages.append)

        root = Path(state.pgdata).parent
        assert root.parent == FALLBACK_PARENT
        assert root.name.startswith("levers9-pg-")
        assert embedded_pg.is_running(state)
        with psycopg.connect(state.url) as conn:
            assert conn.execute("select 1").fetchone() == (1,)
        # The record stays in the var dir, so later processes find the server.
        assert embedded_pg.state_file().is_relative_to(var)
        assert any(str(root) in message for message in messages), messages

    assert not root.exists()
