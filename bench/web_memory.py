"""The web process's memory after a day of the demo, replayed in minutes, and the scoring API's
latency for replies the judge's base has read before (issue 42, point 7).

    python -m bench.web_memory                       # SmolLM2-135M, the CPU default base
    python -m bench.web_memory --hours 2 --calls 20  # a shorter day
    python -m bench.web_memory --base levers9/tiny-qwen3   # a tiny base made here (no figures
                                                           # worth quoting: the wiring only)

Needs PostgreSQL: DATABASE_URL, or else the embedded server (started here if need be). It
works in a database of its own, ``bench_web_<hex>``, made and dropped here, so that the jobs
the web process starts (the Duel's queue topping itself up) never reach a real pool's line.

1. A workspace ``bench-web``: its world takes --calls real persuasion calls,
   and its judge is fitted with the base, here (as a worker's trainer would), its reads cached
   in a temporary datasets volume that starts empty.
2. daphne serves the app on a free loopback port, as `manage.py serve` runs it, with no
   worker: all that is measured is what the web process does itself.
3. Each "hour" of the day (--hours): a reviewer signs in, opens the Duel, the Environment and
   the World pages, and picks the pairs it is served; a manager asks for two pairs (made in
   the web process, each candidate scored by the judge with its base); an integration scores
   new replies (read by the base) and replies scored before (from the cache) over the
   scoring API.
4. Printed: daphne's resident memory (RSS) at start, after each hour and at the end, its peak
   (VmHWM), each scoring process's memory (none before issue 42: the base was read inside
   daphne), and the scoring API's latency for 1 and for 20 cached replies (p50 and p95 of
   --latency requests each, through daphne); then the same requests in the bench's own
   process (Django's test Client: the web process's code path without HTTP), with a reader
   of the base in that process (as before issue 42) and with the scoring process's, in
   --rounds turns so both see the machine equally loaded.

The database, the files and any scoring process the bench started are removed at the end.
Target (issue 42): daphne under 400 MB after the day.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import http.client
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

from bench.django_app import setup_django

PASSWORD = secrets.token_urlsafe(16)  # a throwaway workspace's owner
SAYINGS = [
    "Would you consider giving a small part of your task payment to Save the Children?",
    "Even a dollar buys a child a meal; would you give something today?",
    "I understand. Many people feel that way at first; may I tell you what it does?",
    "Thank you so much, that is very generous of you!",
    "The charity works in many countries and is rated highly for how it spends money.",
    "No pressure at all; is there anything you would like to know about it first?",
]


class Site:
    """HTTP to daphne on one workspace's host, with a session cookie once signed in."""

    def __init__(self, port: int, slug: str, token: str):
        self.port, self.host, self.token = port, f"{slug}.localhost", token
        self.cookies: dict[str, str] = {}
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)

    def ask(self, method: str, path: str, body=None, *, api=True, form=None):
        headers = {"Host": self.host}
        if api:
            headers["Authorization"] = f"Token {self.token}"
        if self.cookies:
            headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if form is not None:
            from urllib.parse import urlencode

            data = urlencode(form).encode()
            headers["Content-Type"] = "application/x-www-form-urlencoded"
            headers["X-CSRFToken"] = self.cookies.get("csrftoken", "")
        for attempt in range(2):
            try:
                self.connection.request(method, path, data, headers)
                response = self.connection.getresponse()
                content = response.read()
                break
            except (http.client.HTTPException, OSError):
                self.connection.close()  # daphne closed the kept-alive connection
                if attempt:
                    raise
        for name, value in response.getheaders():
            if name.lower() == "set-cookie":
                key, _, rest = value.partition("=")
                self.cookies[key.strip()] = rest.split(";")[0]
        if response.status >= 500:
            raise RuntimeError(f"{method} {path}: {response.status} {content[:300]!r}")
        return response.status, content

    def sign_in(self, email: str) -> None:
        _status, page = self.ask("GET", "/login/", api=False)
        token = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
        form = {"username": email, "password": PASSWORD, "csrfmiddlewaretoken": token.decode()}
        status, _ = self.ask("POST", "/login/", api=False, form=form)
        if status != 302:
            raise RuntimeError(f"sign-in refused: {status}")


def _rss_mb(pid: int) -> float:
    import psutil

    return psutil.Process(pid).memory_info().rss / 2**20


def _peak_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _scoring_processes(models_dir: Path) -> dict[str, int]:
    """The scoring processes serving this machine (base -> pid); none before issue 42."""
    folder = models_dir / "scoring" / socket.gethostname()
    found = {}
    for path in folder.glob("*.json"):
        with contextlib.suppress(OSError, ValueError, KeyError):
            raw = json.loads(path.read_text())
            found[raw["base"]] = int(raw["pid"])
    return found


def _world_with_a_fitted_judge(slug: str, calls: int, base: str):
    """The workspace's default world, given real calls, its judge fitted with `base` here."""
    from django_tenants.utils import schema_context

    from arena.judge.fit_job import _judge_fit_pack, judge_fit_finish
    from arena.models import World
    from arena.services.calls import calls_import
    from levers9.shipped_data import PERSUASION_CALLS
    from trainers.judge import fit as judge_fit

    with schema_context(f"ws_{slug.replace('-', '_')}"):
        world = World.objects.order_by("pk").first()
        lines = PERSUASION_CALLS.read_text().splitlines()[:calls]
        calls_import(world=world, text="\n".join(lines), source="bench", convert=True)
        spec, _read_up_to = _judge_fit_pack(world, base=base)
        started = time.perf_counter()
        result = judge_fit.run(spec)
        seconds = time.perf_counter() - started
        # As the job's finish does it, for a fit run here (no job row).
        judge_fit_finish(SimpleNamespace(pk=None, arena_world=SimpleNamespace(world=world)), result)
        dialogues = [
            [{"speaker": t.speaker, "text": t.text} for t in call.turns.order_by("index")[:4]]
            for call in world.calls.all()[:12]
        ]
        return world.slug, seconds, result.get("scorer", {}), dialogues


def _score_items(dialogues, hour: int, new: int) -> list[dict]:
    """`new` replies never scored before at this hour (the base reads them), at real calls."""
    return [
        {
            "dialogue": dialogues[(hour * new + n) % len(dialogues)],
            "reply": f"{SAYINGS[n % len(SAYINGS)]} (hour {hour}, line {n})",
        }
        for n in range(new)
    ]


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def _day(site: Site, reviewer: Site, pack: str, dialogues, hours: int, pid: int) -> list[float]:
    score = f"/api/rl/packs/{pack}/judge/score/"
    memory = []
    for hour in range(hours):
        reviewer.cookies.clear()
        reviewer.sign_in("owner@bench.test")
        for page in ("/duel/", "/environment/", "/world/", "/"):
            reviewer.ask("GET", page, api=False)
        site.ask("POST", "/api/rl/duel/generate/", {"pack": pack, "count": 2})
        for _ in range(3):
            status, body = site.ask("GET", f"/api/rl/duel/next/?pack={pack}")
            if status != 200 or not body:
                break
            item = json.loads(body)
            pair = item.get("pair") or item.get("id")
            if pair is None:
                break
            site.ask("POST", "/api/rl/picks/", {"pair": pair, "chosen": "A", "reasons": []})
        for batch in range(5):
            items = _score_items(dialogues, hour * 5 + batch, 4)
            for _again in range(3):  # the same replies again: from the cache
                status, body = site.ask("POST", score, {"items": items})
                if status != 200:
                    raise RuntimeError(f"scoring: {status} {body[:300]!r}")
        memory.append(_rss_mb(pid))
        print(f"  hour {hour + 1}: daphne {memory[-1]:.0f} MB", flush=True)
    return memory


def _latency(site: Site, pack: str, dialogues, size: int, count: int) -> tuple[float, float]:
    score = f"/api/rl/packs/{pack}/judge/score/"
    items = _score_items(dialogues, 10_000 + size, size)
    site.ask("POST", score, {"items": items})  # read once: every request after is cached
    times = []
    for _ in range(count):
        started = time.perf_counter()
        status, _body = site.ask("POST", score, {"items": items})
        times.append((time.perf_counter() - started) * 1000)
        assert status == 200
    return _p(times, 0.5), _p(times, 0.95)


def _readers_side_by_side(slug: str, token: str, pack: str, dialogues, rounds: int) -> dict:
    """The scoring API's code path in this process (Django's test Client, no HTTP), on the
    replies `_latency` cached: with a reader of the base in this process (as before issue 42)
    and with the scoring process's, in turns, so both see the machine as loaded. Where the
    new code is absent (the bench run on today's code), the in-process reader alone."""
    from django.test import Client

    from arena.judge import judge_base, versions
    from trainers.reading.base_features import BaseReader

    @functools.lru_cache(maxsize=8)
    def in_process(base: str, models_dir: str, features: str):
        return BaseReader(base, models_dir=models_dir, features_dir=features)

    readers = {"in this process": in_process}
    if "BaseClient" in Path(judge_base.__file__).read_text():
        readers["scoring process"] = judge_base._reader
    client = Client(HTTP_HOST=f"{slug}.localhost", HTTP_AUTHORIZATION=f"Token {token}")
    score = f"/api/rl/packs/{pack}/judge/score/"
    times: dict[tuple[str, int], list[float]] = {}
    original = judge_base._reader
    try:
        for _round in range(rounds):
            for name, reader in readers.items():
                judge_base._reader = reader
                versions._loaded.cache_clear()
                for size in (1, 20):
                    body = {"items": _score_items(dialogues, 10_000 + size, size)}
                    client.post(score, body, content_type="application/json")  # warm
                    for _ in range(10):
                        started = time.perf_counter()
                        response = client.post(score, body, content_type="application/json")
                        elapsed = (time.perf_counter() - started) * 1000
                        assert response.status_code == 200, response.content[:300]
                        times.setdefault((name, size), []).append(elapsed)
    finally:
        judge_base._reader = original
        versions._loaded.cache_clear()
    return {key: (_p(values, 0.5), _p(values, 0.95)) for key, values in times.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=40, help="real calls in the world")
    parser.add_argument("--hours", type=int, default=8, help="hours of the day replayed")
    parser.add_argument("--latency", type=int, default=50, help="requests per latency figure")
    parser.add_argument(
        "--rounds", type=int, default=10, help="turns of the two readers, 10 requests each"
    )
    parser.add_argument("--base", default="smollm2-135m-instruct", help="the judge's base")
    arguments = parser.parse_args(argv)

    datasets = Path(tempfile.mkdtemp(prefix="bench-web-memory-"))
    os.environ["LEVERS9_JUDGE_BASE"] = arguments.base
    setup_django(datasets_dir=datasets)
    from django.conf import settings
    from django.db import connection
    from django_tenants.utils import schema_context
    from rest_framework.authtoken.models import Token

    from levers9.models import Workspace
    from levers9.services import workspace_create
    from trainers.bases import TINY_BASE, base_dir, tiny_base

    models_dir = Path(settings.MODELS_DIR)
    if arguments.base == TINY_BASE:
        tiny_base(base_dir(TINY_BASE, models_dir), texts=["donate", "children"])
    scoring_before = _scoring_processes(models_dir)
    slug = "bench-web"
    daphne = None
    from django.test.utils import setup_databases, teardown_databases

    settings.DATABASES["default"].setdefault("TEST", {})["NAME"] = (
        f"bench_web_{secrets.token_hex(4)}"
    )
    print("a database of the bench's own (migrations) ...", flush=True)
    created = setup_databases(verbosity=0, interactive=False, aliases={"default"})
    try:
        workspace_create(slug=slug, admin_email="owner@bench.test", password=PASSWORD)
        workspace = Workspace.objects.get(slug=slug)
        with schema_context(workspace.schema_name):
            from django.contrib.auth import get_user_model

            owner = get_user_model().objects.get(email="owner@bench.test")
            token = Token.objects.get_or_create(user=owner)[0].key
        print(f"fitting the judge of {arguments.calls} calls with {arguments.base} ...", flush=True)
        pack, fit_seconds, scorer, dialogues = _world_with_a_fitted_judge(
            slug, arguments.calls, arguments.base
        )
        print(f"  fitted in {fit_seconds:.0f} s; scorer {json.dumps(scorer)[:200]}", flush=True)

        db = connection.settings_dict
        url = (
            f"postgres://{db['USER']}:{db['PASSWORD'] or ''}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
        )
        port = _free_port()
        environment = {
            **os.environ,
            "DATABASE_URL": url,
            "LEVERS9_DATASETS_DIR": str(datasets),
            "LEVERS9_MODELS_DIR": str(models_dir),
            "LEVERS9_JUDGE_BASE": arguments.base,
        }
        daphne = subprocess.Popen(  # noqa: S603 - this interpreter's daphne
            [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port)]
            + ["config.asgi:application"],
            cwd=settings.BASE_DIR,
            env=environment,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        site = Site(port, slug, token)
        reviewer = Site(port, slug, token)
        _wait_for(port)
        site.ask("GET", "/api/rl/me/")
        start = _rss_mb(daphne.pid)
        print(f"daphne at start (after its first request): {start:.0f} MB", flush=True)
        day_started = time.perf_counter()
        memory = _day(site, reviewer, pack, dialogues, arguments.hours, daphne.pid)
        day_seconds = time.perf_counter() - day_started
        one = _latency(site, pack, dialogues, 1, arguments.latency)
        twenty = _latency(site, pack, dialogues, 20, arguments.latency)
        side_by_side = _readers_side_by_side(slug, token, pack, dialogues, arguments.rounds)
        end, peak = _rss_mb(daphne.pid), _peak_mb(daphne.pid)
        scoring = {base: _rss_mb(pid) for base, pid in _scoring_processes(models_dir).items()}
        print()
        print(f"the day: {arguments.hours} hours replayed in {day_seconds:.0f} s")
        print(f"daphne resident memory: start {start:.0f} MB, end {end:.0f} MB, peak {peak:.0f} MB")
        print(f"  target: end <= 400 MB: {'met' if end <= 400 else 'NOT met'}")
        for base, mb in scoring.items():
            print(f"scoring process for {base}: {mb:.0f} MB")
        if not scoring:
            print("scoring processes: none (the base is read inside daphne)")
        print(f"scoring API, 1 cached reply:   p50 {one[0]:.1f} ms, p95 {one[1]:.1f} ms")
        print(f"scoring API, 20 cached replies: p50 {twenty[0]:.1f} ms, p95 {twenty[1]:.1f} ms")
        print("the same in this process (no HTTP), the two readers in turns:")
        for (name, size), (p50, p95) in sorted(side_by_side.items()):
            print(f"  {size:>2} cached, reader {name}: p50 {p50:.1f} ms, p95 {p95:.1f} ms")
        print(f"(hourly: {', '.join(f'{mb:.0f}' for mb in memory)} MB)")
    finally:
        if daphne is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(daphne.pid, signal.SIGTERM)
            daphne.wait(timeout=30)
        for base, pid in _scoring_processes(models_dir).items():
            if scoring_before.get(base) != pid:  # started by this bench
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
        connection.close()
        teardown_databases(created, verbosity=0)
        shutil.rmtree(datasets, ignore_errors=True)
    return 0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait_for(port: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            probe.settimeout(0.5)
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise RuntimeError("daphne did not answer")


if __name__ == "__main__":
    sys.exit(main())
