"""Fuzz the API with schemathesis against a live server: no 5xx, no response that breaks the
schema.

    python -m bench.fuzz_api                 # bounded: a few examples per operation (CI)
    python -m bench.fuzz_api --full          # the full-length run, by hand (many minutes)
    python -m bench.fuzz_api --paths import  # only the operations whose path matches

Needs PostgreSQL: DATABASE_URL (a database of its own: the run migrates it, and the fuzzer's
writes stay there), or else the embedded server. It seeds a workspace `fuzz` with an owner and
an API token, starts `manage.py runserver` on a free port, fetches the schema, and runs
`schemathesis run` with the token and the workspace's Host header. No worker runs, so the jobs
the fuzzer queues only wait. Prints the figures (operations, requests, 5xx, schema failures,
the slowest operations) and exits non-zero on any failure.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from bench.django_app import setup_django

ROOT = Path(__file__).resolve().parents[1]
SLUG = "fuzz"
OWNER = "owner@fuzz.test"
CHECKS = "not_a_server_error,response_schema_conformance,status_code_conformance"


def _seed() -> str:
    """The fuzz workspace (created once) and its owner's API token."""
    import secrets

    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django_tenants.utils import schema_context
    from rest_framework.authtoken.models import Token

    from levers9.models import Workspace
    from levers9.services import workspace_create

    call_command("migrate_schemas", shared=True, verbosity=0)
    workspace_create(slug=SLUG, admin_email=OWNER, password=secrets.token_urlsafe(16))
    # The fuzzer writes far faster than a person: with the default job limit and write
    # throttles most writes would only meet 429s and leave their logic untested (the limits
    # and throttles have tests of their own). 32767 is the field's largest value.
    Workspace.objects.filter(slug=SLUG).update(queued_jobs_limit=32767)
    with schema_context(Workspace.objects.get(slug=SLUG).schema_name):
        owner = get_user_model().objects.get(username=OWNER)
        return Token.objects.get_or_create(user=owner)[0].key


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _get(url: str, headers: dict[str, str]) -> bytes:
    request = urllib.request.Request(url, headers=headers)  # noqa: S310 (our own local server)
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
        return response.read()


def _wait_for(url: str, headers: dict[str, str], server: subprocess.Popen) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"The server exited with {server.returncode} before answering.")
        try:
            _get(url, headers)
            return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"No answer from {url} within 120 s.")


def _figures(report: Path) -> dict[str, int]:
    """Operations, requests, 5xx answers and failures, read from schemathesis's JUnit XML."""
    import xml.etree.ElementTree as ElementTree

    try:
        suites = ElementTree.parse(report).getroot()  # noqa: S314 (written by our own run)
    except (OSError, ElementTree.ParseError):
        return {}  # the run stopped before it wrote its report
    cases = suites.findall(".//testcase")
    failures = [case for case in cases if case.find("failure") is not None]
    server_errors = sum(
        "Server error" in (failure.get("message") or "") + (failure.text or "")
        for case in failures
        for failure in case.findall("failure")
    )
    return {
        "operations": len(cases),
        "failed_operations": len(failures),
        "server_error_operations": server_errors,
    }


def _request_figures(log: Path) -> dict[str, Any]:
    """Requests sent, 5xx answers among them, and the slowest operations (p95 seconds)."""
    try:
        lines = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    except OSError:
        return {}
    by_operation: dict[str, list[float]] = {}
    for line in lines:
        key = f"{line['method']} {line['path']}"
        by_operation.setdefault(key, []).append(float(line.get("seconds") or 0.0))
    slowest = sorted(
        ((max(times), key, len(times)) for key, times in by_operation.items()), reverse=True
    )[:5]
    return {
        "requests": len(lines),
        "server_error_answers": sum(int(line["status"]) >= 500 for line in lines),
        "slowest": [
            {"operation": key, "max_seconds": round(top, 2), "requests": count}
            for top, key, count in slowest
        ],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--full", action="store_true", help="many examples, every phase")
    parser.add_argument("--max-examples", type=int, default=None, help="per operation")
    parser.add_argument("--seed", type=int, default=1, help="the run's seed (reproducible)")
    parser.add_argument("--report-dir", type=Path, default=None, help="keep the reports here")
    parser.add_argument(
        "--paths",
        default=None,
        help="only the operations whose path matches this regular expression (a quick look by "
        "hand, e.g. 'import'); CI fuzzes them all",
    )
    args = parser.parse_args(argv)

    setup_django()
    token = _seed()
    port = _free_port()
    host = f"{SLUG}.localhost:{port}"
    headers = {"Host": host, "Authorization": f"Token {token}"}
    env = {
        **os.environ,
        "DEBUG": "0",
        "LEVERS9_JOB_WATCHER": "0",
        "LEVERS9_THROTTLE_WRITES_PER_USER": "1000000/minute",
        "LEVERS9_THROTTLE_WRITES_PER_WORKSPACE": "1000000/minute",
    }
    report_dir = args.report_dir or Path(tempfile.mkdtemp(prefix="fuzz-api-"))
    report_dir.mkdir(parents=True, exist_ok=True)
    # The server's log goes to a file: a pipe nobody reads fills up after a few hundred
    # requests and then blocks the server on its next log line (the long run stalled so).
    server_log = (report_dir / "server.log").open("w")
    server = subprocess.Popen(  # noqa: S603 (our own manage.py)
        [sys.executable, "manage.py", "runserver", "--noreload", f"127.0.0.1:{port}"],
        cwd=ROOT,
        env=env,
        stdout=server_log,
        stderr=subprocess.STDOUT,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        _wait_for(f"{base}/api/rl/me/", headers, server)
        schema_file = report_dir / "schema.json"
        schema = json.loads(_get(f"{base}/api/schema/?format=json", headers))
        schema_file.write_text(json.dumps(schema))
        examples = args.max_examples or (100 if args.full else 5)
        phases = "examples,coverage,fuzzing,stateful" if args.full else "examples,fuzzing"
        junit = report_dir / "junit.xml"
        command = [
            str(Path(sys.executable).with_name("schemathesis")),
            "run",
            str(schema_file),
            "--url",
            base,
            "-H",
            f"Host: {host}",
            "-H",
            f"Authorization: Token {token}",
            "--checks",
            CHECKS,
            "--phases",
            phases,
            "--max-examples",
            str(examples),
            "--seed",
            str(args.seed),
            "--workers",
            "1",
            "--request-timeout",
            "60",
            "--suppress-health-check",
            "all",
            "--report",
            "junit",
            "--report-junit-path",
            str(junit),
        ]
        if args.paths:
            command += ["--include-path-regex", args.paths]
        print("$", " ".join(command).replace(token, "<token>"), flush=True)  # noqa: T201
        started = time.monotonic()
        request_log = report_dir / "requests.jsonl"
        request_log.unlink(missing_ok=True)
        hooks = {
            **os.environ,
            "SCHEMATHESIS_HOOKS": "bench.fuzz_hooks",
            "LEVERS9_FUZZ_LOG": str(request_log),
        }
        outcome = subprocess.run(command, cwd=ROOT, env=hooks, check=False)  # noqa: S603
        figures = {
            **_figures(junit),
            **_request_figures(request_log),
            "seconds": round(time.monotonic() - started),
            "exit_code": outcome.returncode,
        }
        print("fuzz figures:", json.dumps(figures), flush=True)  # noqa: T201
        return outcome.returncode
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        server_log.close()
        print(f"reports and the server's log: {report_dir}", flush=True)  # noqa: T201


if __name__ == "__main__":
    raise SystemExit(main())
