"""A sign-in lockout, and every throttle's count, lives where every web process and a restart see
it (issue 41, point 4): the database's cache table (Redis when REDIS_URL is set), not one
process's memory. Before, an account locked for 894 s accepted the right password after daphne
was restarted.

The lockout test writes committed rows (another process must read them), on addresses of its
own, and removes its counts afterwards.
"""

from __future__ import annotations

import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
from django.conf import settings
from django.core.cache import cache
from django.db import connection
from django.test import Client
from django_tenants.utils import schema_context

from levers9.throttles import _login_keys
from tests.conftest import PASSWORD, database_url_for_workers

OWNER = "owner@acme.test"
LOCKING_ADDRESS, FRESH_ADDRESS = "10.41.4.1", "10.41.4.2"

# A fresh process, as after a restart: nothing of this one's memory, only what is shared.
SIGN_IN_FROM_A_FRESH_PROCESS = """
import sys
import django
django.setup()
from django.test import Client
answer = Client(HTTP_HOST="acme.localhost").post(
    "/login/", {"username": sys.argv[1], "password": sys.argv[2]}, REMOTE_ADDR=sys.argv[3]
)
print(answer.status_code)
"""


@pytest.fixture
def committed(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        yield
        with schema_context("ws_acme"):
            for address in (LOCKING_ADDRESS, FRESH_ADDRESS):
                request = SimpleNamespace(META={"REMOTE_ADDR": address})
                cache.delete_many([key for key, _allowed in _login_keys(request, OWNER)])


def _sign_in_from_a_fresh_process(password: str, address: str) -> int:
    env = {**os.environ, "DATABASE_URL": database_url_for_workers()}
    env.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    answer = subprocess.run(  # noqa: S603 - this interpreter, our own script
        [sys.executable, "-c", SIGN_IN_FROM_A_FRESH_PROCESS, OWNER, password, address],
        cwd=settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return int(answer.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_a_locked_account_stays_locked_for_a_fresh_process(committed):
    client = Client(HTTP_HOST="acme.localhost")
    for n in range(settings.LEVERS9_LOGIN_FAILURES_PER_ACCOUNT):
        wrong = client.post(
            "/login/", {"username": OWNER, "password": f"guess-{n}"}, REMOTE_ADDR=LOCKING_ADDRESS
        )
        assert wrong.status_code == 200
    right_here = client.post(
        "/login/", {"username": OWNER, "password": PASSWORD}, REMOTE_ADDR=LOCKING_ADDRESS
    )
    assert right_here.status_code == 429
    # The same right password, from another process and another address: still locked.
    assert _sign_in_from_a_fresh_process(PASSWORD, FRESH_ADDRESS) == 429, (
        "a fresh process accepted the right password of a locked account"
    )


def test_the_cache_table_is_in_the_public_schema_and_found_from_a_workspace(db, workspace):
    location = settings.CACHES["default"].get("LOCATION", "")
    if "DatabaseCache" not in settings.CACHES["default"]["BACKEND"]:
        pytest.skip("REDIS_URL is set: the counts live in Redis")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_schema FROM information_schema.tables WHERE table_name = %s",
            [location],
        )
        assert [row[0] for row in cursor.fetchall()] == ["public"]
    with schema_context(workspace.schema_name):
        cache.set("levers9-test:seen-from-a-workspace", [1.0], timeout=60)
    assert cache.get("levers9-test:seen-from-a-workspace") == [1.0]
