"""One process per base on a machine that reads replies for every scorer there: the web
process's scoring API, the workers' pair making and Evaluate (pure Python, no Django).

    python -m trainers.reading.base_server --base BASE --models-dir DIR [--idle-seconds 900]

Why a process of its own: a base read in the process that scores stays there. A web process
that scored with SmolLM2-135M held 3.7 GB after an hour of the demo (138 MB before), and each
worker held its own copy too. Here the base is loaded once per machine, by the first scorer
that needs it, and goes when nobody has asked for `idle_seconds`.

How scorers find it: the process listens on 127.0.0.1 (a port the system picks) and writes
its address, pid and a secret token to `<models>/scoring/<host>/<base>.json` (mode 0600; the
models volume may be shared by several machines, and each has its own loopback). A scorer
that finds no answering process there starts one, under a lock file beside it, so two
scorers asking at once start one process (`server_ensure`). Requests carry the token: another
user of the machine reaches the port but cannot have it write to a workspace's cache.

What it answers: `POST /features` and `POST /answers` with {"features_dir", "items"}, what
`BaseReader.features` / `.answers` give for those items, as a .npy body (exactly the floats an
in-process reader gives), with what the read cost in the X-Read-Stats header. Each request
names its workspace's feature cache (trainers.reading.base_features), so replies read before are
served from there without the base: a request whose items are all cached never waits for
another's forward passes (the base is used by one request at a time, the cache by any).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fcntl
import hmac
import http.client
import io
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np

from trainers.reading.base_features import BaseReader, ReadStats

HOST = "127.0.0.1"
IDLE_SECONDS = 900.0
"""How long a scoring process waits for a request before it exits and frees its base."""
START_SECONDS = 300.0
"""How long a scorer waits for the process it started to answer: imports (≈ 4 s), the
tokenizer, and SmolLM2's first conversion from its GGUF (≈ 20 s) on the first start ever."""
MAX_BODY = 256 << 20
"""The largest request: the scoring API's 1,000 items of at most 20,000 characters each."""
KINDS = ("features", "answers")
PROJECT_ROOT = Path(__file__).resolve().parents[2]


# --- where a machine's scoring processes are found --------------------------------------


def servers_folder(models_dir: Path | str) -> Path:
    """This machine's scoring processes' addresses (one file per base)."""
    return Path(models_dir) / "scoring" / socket.gethostname()


def address_path(models_dir: Path | str, base: str) -> Path:
    return servers_folder(models_dir) / f"{base.replace('/', '--')}.json"


@dataclass(frozen=True)
class ServerAddress:
    """Where one base's scoring process listens, and the token it asks for."""

    base: str
    port: int
    token: str
    pid: int

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


def address_read(models_dir: Path | str, base: str) -> ServerAddress | None:
    try:
        raw = json.loads(address_path(models_dir, base).read_text())
        return ServerAddress(str(raw["base"]), int(raw["port"]), str(raw["token"]), int(raw["pid"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None  # none yet, or one being written (it is renamed into place whole)


def _address_write(models_dir: Path | str, address: ServerAddress) -> None:
    path = address_path(models_dir, address.base)
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.with_name(f"{path.name}.{address.pid}.tmp")
    # The token is the process's only guard against the machine's other users: owner only.
    handle = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(handle, "w") as out:
        json.dump(dataclasses.asdict(address), out)
    os.replace(staging, path)


def _address_remove(models_dir: Path | str, address: ServerAddress) -> None:
    """Remove the address file if it is still this process's (a successor may have its own)."""
    found = address_read(models_dir, address.base)
    if found is not None and found.pid == address.pid:
        with contextlib.suppress(OSError):
            address_path(models_dir, address.base).unlink()


def server_answers(address: ServerAddress, *, timeout: float = 5.0) -> bool:
    """Whether the process at `address` is there and serves its base."""
    connection = http.client.HTTPConnection(HOST, address.port, timeout=timeout)
    try:
        connection.request("GET", "/health", headers=address.headers)
        response = connection.getresponse()
        body = response.read()
        return response.status == HTTPStatus.OK and json.loads(body).get("pid") == address.pid
    except (OSError, ValueError, http.client.HTTPException):
        return False
    finally:
        connection.close()


@contextlib.contextmanager
def _start_lock(models_dir: Path | str, base: str) -> Iterator[None]:
    path = address_path(models_dir, base).with_suffix(".lock")
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # released when the file closes, or its holder dies
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def server_ensure(
    base: str,
    *,
    models_dir: Path | str,
    idle_seconds: float = IDLE_SECONDS,
    start_seconds: float = START_SECONDS,
) -> ServerAddress:
    """The address of this machine's scoring process for `base`, started here if none answers
    (one at a time: whoever holds the lock starts it, the others then find it)."""
    address = address_read(models_dir, base)
    if address is not None and server_answers(address):
        return address
    with _start_lock(models_dir, base):
        address = address_read(models_dir, base)
        if address is not None and server_answers(address):
            return address
        return _started(base, models_dir, idle_seconds, start_seconds)


def _started(base: str, models_dir: Path | str, idle_seconds: float, wait: float) -> ServerAddress:
    folder = servers_folder(models_dir)
    folder.mkdir(parents=True, exist_ok=True)
    log_path = address_path(models_dir, base).with_suffix(".log")
    with open(log_path, "ab") as log:
        process = subprocess.Popen(  # noqa: S603 - our own module, with this interpreter
            [
                sys.executable,
                "-m",
                "trainers.reading.base_server",
                "--base",
                base,
                "--models-dir",
                str(models_dir),
                "--idle-seconds",
                str(idle_seconds),
            ],
            cwd=PROJECT_ROOT,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            # Its own session: it serves every scorer on the machine, so it outlives the one
            # that started it (a request, a worker's task) and that one's process group.
            start_new_session=True,
        )
    # Reaped when it exits (a web server never waits for its children otherwise).
    threading.Thread(target=process.wait, name="base-server-reaper", daemon=True).start()
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        address = address_read(models_dir, base)
        if address is not None and address.pid == process.pid and server_answers(address):
            return address
        if process.poll() is not None:
            break
        time.sleep(0.1)
    else:
        process.terminate()
    raise RuntimeError(
        f"The scoring process for {base} did not start (exit {process.poll()}): "
        f"{_log_tail(log_path)}"
    )


def _log_tail(path: Path, size: int = 2000) -> str:
    try:
        return path.read_bytes()[-size:].decode(errors="replace").strip() or "no output"
    except OSError:
        return "no log"


def servers_stop(models_dir: Path | str) -> int:
    """Stop this machine's scoring processes (serve's shutdown, a test's end); how many. Only a
    process that answers with the pid its file names is signalled: a pid can be reused."""
    stopped = 0
    for path in sorted(servers_folder(models_dir).glob("*.json")):
        address = address_read(models_dir, path.stem.replace("--", "/"))
        if address is None or not server_answers(address, timeout=2.0):
            continue
        with contextlib.suppress(ProcessLookupError):
            os.kill(address.pid, signal.SIGTERM)
            stopped += 1
    return stopped


def base_on_machine(base: str, *, models_dir: Path | str) -> bool:
    """Whether the base can be loaded here without downloading, checked without loading it
    (trainers.bases.resolve_base would convert SmolLM2's GGUF in the asking process)."""
    from trainers.bases import (
        SMOLLM2_BASE,
        BaseNotFoundError,
        base_dir,
        resolve_base,
        smollm2_gguf_path,
        validate_base,
    )

    try:
        validate_base(base)
        if base == SMOLLM2_BASE and not (base_dir(base, models_dir) / "config.json").is_file():
            smollm2_gguf_path()  # converted by the scoring process on its first start
            return True
        resolve_base(base, models_dir=models_dir)
    except (BaseNotFoundError, ValueError):
        return False
    return True


# --- the process -------------------------------------------------------------------------


class _CacheOnly(BaseReader):
    """A reader that serves what the cache holds and never loads the base: its miss is
    `_NotCached`, and the request then waits its turn for the base."""

    def model(self) -> Any:
        raise _NotCached


class _NotCached(Exception):
    pass


class _Reading:
    """The base held by this process: one request at a time uses it; the cache and the
    tokenizer (its own copy, for the cached path) are shared by all."""

    def __init__(self, base: str, models_dir: str, idle_seconds: float):
        self.base = base
        self.idle_seconds = idle_seconds
        self._full = BaseReader(base, models_dir=models_dir, features_dir="")
        self._quick = _CacheOnly(base, models_dir=models_dir, features_dir="")
        self._quick.tokenizer()  # ready before the address is written: the first ask is quick
        self._base_lock = threading.Lock()
        self._quick_lock = threading.Lock()
        self._busy = 0
        self._last = time.monotonic()
        self._clock = threading.Lock()

    @contextlib.contextmanager
    def request(self) -> Iterator[None]:
        with self._clock:
            self._busy += 1
        try:
            yield
        finally:
            with self._clock:
                self._busy -= 1
                self._last = time.monotonic()

    def idle_for(self) -> float:
        with self._clock:
            return 0.0 if self._busy else time.monotonic() - self._last

    def read(self, kind: str, features_dir: str, items: list) -> tuple[np.ndarray, ReadStats]:
        stats = ReadStats()
        with self._quick_lock:  # a tokenizer is not made to be shared by threads
            quick = dataclasses.replace(self._quick, features_dir=features_dir)
            try:
                return _asked(quick, kind, items, stats), stats
            except _NotCached:
                pass
        stats = ReadStats()
        with self._base_lock:
            self._full.model()  # loaded once, then shared by the copies for each cache
            full = dataclasses.replace(self._full, features_dir=features_dir)
            return _asked(full, kind, items, stats), stats


def _asked(reader: BaseReader, kind: str, items: list, stats: ReadStats) -> np.ndarray:
    if kind == "features":
        return reader.features(items, stats=stats)
    return reader.answers(items, stats=stats)


def _items(raw: Any) -> list[tuple[list[dict[str, str]], str]]:
    """The request's items as the reader takes them, or ValueError naming what is wrong."""
    if not isinstance(raw, list):
        raise ValueError("items must be a list of [dialogue, reply]")
    items = []
    for index, item in enumerate(raw):
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[1], str)):
            raise ValueError(f"items[{index}] must be [dialogue, reply]")
        dialogue = item[0]
        if not isinstance(dialogue, list) or not all(
            isinstance(turn, dict)
            and isinstance(turn.get("speaker"), str)
            and isinstance(turn.get("text"), str)
            for turn in dialogue
        ):
            raise ValueError(f"items[{index}][0] must be a list of {{speaker, text}} turns")
        turns = [{"speaker": turn["speaker"], "text": turn["text"]} for turn in dialogue]
        items.append((turns, item[1]))
    return items


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: a scorer's requests share one connection
    # Headers and body go out as two writes: with Nagle's algorithm the body waited for the
    # scorer's delayed ACK, 40 ms a request (a cached score took 96 ms instead of 9).
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        pass  # one line per score would fill the log; failures are answered, not logged

    def _allowed(self) -> bool:
        sent = self.headers.get("Authorization", "")
        if hmac.compare_digest(sent.encode(), f"Bearer {self.server.token}".encode()):
            return True
        self.close_connection = True  # its body is not read
        self._answer_json(HTTPStatus.UNAUTHORIZED, {"error": "a token is needed"})
        return False

    def _answer_json(self, status: HTTPStatus, body: dict[str, Any]) -> None:
        self._answer(status, json.dumps(body).encode(), "application/json")

    def _answer(self, status: HTTPStatus, body: bytes, kind: str, extra=None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if not self._allowed():
            return
        if self.path != "/health":
            self._answer_json(HTTPStatus.NOT_FOUND, {"error": "GET /health only"})
            return
        reading = self.server.reading
        self._answer_json(HTTPStatus.OK, {"base": reading.base, "pid": os.getpid()})

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        if not self._allowed():
            return
        kind = self.path.strip("/")
        length = int(self.headers.get("Content-Length") or 0)
        if kind not in KINDS or length > MAX_BODY:
            self.close_connection = True  # the body is not read
        if kind not in KINDS:
            self._answer_json(HTTPStatus.NOT_FOUND, {"error": "POST /features or /answers"})
            return
        if length > MAX_BODY:
            self._answer_json(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, {"error": "body too large"})
            return
        with self.server.reading.request():
            try:
                asked = json.loads(self.rfile.read(length))
                features_dir = asked["features_dir"]
                if not isinstance(features_dir, str) or not Path(features_dir).is_absolute():
                    raise ValueError("features_dir must be an absolute path")
                items = _items(asked["items"])
            except (ValueError, KeyError, TypeError) as error:
                self._answer_json(HTTPStatus.BAD_REQUEST, {"error": str(error)})
                return
            try:
                values, stats = self.server.reading.read(kind, features_dir, items)
            except Exception as error:  # noqa: BLE001 - said to the scorer, which raises it
                message = f"{type(error).__name__}: {error}"
                self._answer_json(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": message})
                return
        out = io.BytesIO()
        np.save(out, values, allow_pickle=False)
        stats_header = {"X-Read-Stats": json.dumps(dataclasses.asdict(stats))}
        self._answer(HTTPStatus.OK, out.getvalue(), "application/x-npy", stats_header)


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # a scorer's idle keep-alive connection never holds up the exit

    def __init__(self, reading: _Reading, token: str):
        super().__init__((HOST, 0), _Handler)
        self.reading = reading
        self.token = token


def serve(base: str, *, models_dir: str, idle_seconds: float = IDLE_SECONDS) -> None:
    """Serve `base` until nobody has asked for `idle_seconds`, or SIGTERM."""
    reading = _Reading(base, models_dir, idle_seconds)
    server = _Server(reading, secrets.token_urlsafe(32))
    address = ServerAddress(base, server.server_address[1], server.token, os.getpid())

    def stop(*_args: Any) -> None:
        # shutdown() waits for serve_forever, which runs on this (the main) thread.
        threading.Thread(target=server.shutdown, daemon=True).start()

    def watch_idle() -> None:
        while True:
            time.sleep(max(0.05, min(5.0, idle_seconds / 4)))
            if reading.idle_for() >= idle_seconds:
                stop()
                return

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    _address_write(models_dir, address)
    threading.Thread(target=watch_idle, name="idle", daemon=True).start()
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        # The address goes first: a scorer that finds no file starts a successor.
        _address_remove(models_dir, address)
        server.server_close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the base's repo id")
    parser.add_argument("--models-dir", required=True, help="the models volume")
    parser.add_argument(
        "--idle-seconds", type=float, default=IDLE_SECONDS, help="exit after this long unasked"
    )
    arguments = parser.parse_args(argv)
    serve(arguments.base, models_dir=arguments.models_dir, idle_seconds=arguments.idle_seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
