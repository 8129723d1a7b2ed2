"""One scoring process per base on a machine (trainers.reading.base_server): scorers asking at
once start one, it answers what an in-process reader gives, from the workspace's cache where
the reply was read before, only to a scorer with its token, and it goes when nobody asks."""

from __future__ import annotations

import http.client
import os
import threading

import numpy as np
import pytest

from tests.processes import wait_until
from trainers.bases import TINY_BASE, base_dir, tiny_base
from trainers.reading.base_client import BaseClient
from trainers.reading.base_features import BaseReader, ReadStats
from trainers.reading.base_server import (
    HOST,
    address_path,
    address_read,
    server_answers,
    server_ensure,
    servers_stop,
)

CALL = [{"speaker": "customer", "text": "Is the deposit for the flat refundable?"}]
ITEMS = [(CALL, reply) for reply in ("Yes, in full.", "Would you like a viewing?")]


@pytest.fixture
def models_dir(tmp_path, monkeypatch):
    # Exact comparisons: bf16 autocast (on a CPU that has it) rounds differently per shape;
    # the scoring process inherits this environment.
    monkeypatch.setenv("LEVERS9_CPU_BF16", "0")
    folder = tmp_path / "models"
    tiny_base(base_dir(TINY_BASE, folder), texts=["the flat deposit refundable viewing"])
    yield folder
    servers_stop(folder)


def test_it_starts_one_process_for_scorers_asking_at_once_and_answers_as_a_reader_here(
    models_dir, tmp_path
):
    found = []
    askers = [
        threading.Thread(
            target=lambda: found.append(server_ensure(TINY_BASE, models_dir=models_dir))
        )
        for _ in range(3)
    ]
    for asker in askers:
        asker.start()
    for asker in askers:
        asker.join()
    assert len({address.pid for address in found}) == 1
    assert found[0].pid != os.getpid()

    cache = tmp_path / "features"
    client = BaseClient(TINY_BASE, models_dir=models_dir, features_dir=cache, idle_seconds=60)
    first, again = ReadStats(), ReadStats()
    features = client.features(ITEMS, stats=first)
    answers = client.answers(ITEMS)
    assert (first.read, first.cached) == (2, 0)
    assert np.array_equal(client.features(ITEMS, stats=again), features)
    assert (again.read, again.cached) == (0, 2)  # from the workspace's cache
    assert any(cache.rglob("*.npy"))

    here = BaseReader(TINY_BASE, models_dir=models_dir, features_dir=tmp_path / "here")
    assert np.array_equal(here.features(ITEMS), features)
    # The same sums, read in another process: its thread count may order a reduction
    # differently (CI saw 2e-5 relative), which no score notices.
    np.testing.assert_allclose(here.answers(ITEMS), answers, rtol=1e-4, atol=1e-7)


def test_it_answers_only_a_scorer_with_its_token_on_loopback(models_dir):
    address = server_ensure(TINY_BASE, models_dir=models_dir)
    assert oct(address_path(models_dir, TINY_BASE).stat().st_mode & 0o777) == "0o600"
    connection = http.client.HTTPConnection(HOST, address.port, timeout=10)
    connection.request("POST", "/features", b"{}", {"Authorization": "Bearer guessed"})
    response = connection.getresponse()
    assert response.status == 401
    response.read()
    connection.request(
        "POST", "/features", b'{"features_dir": "relative", "items": []}', address.headers
    )
    refused = connection.getresponse()
    assert refused.status == 400
    assert b"features_dir" in refused.read()
    connection.close()


def test_it_exits_when_nobody_asks_and_a_scorer_then_starts_another(models_dir, tmp_path):
    client = BaseClient(TINY_BASE, models_dir=models_dir, features_dir=tmp_path, idle_seconds=1)
    client.features(ITEMS[:1])
    first = address_read(models_dir, TINY_BASE)
    wait_until(
        lambda: not address_path(models_dir, TINY_BASE).exists(),
        timeout=60,
        what="the idle scoring process to exit",
    )
    assert not server_answers(first, timeout=1)
    # The client's kept-alive connection is to a process that is gone: it starts another.
    assert client.features(ITEMS).shape[0] == 2
    assert address_read(models_dir, TINY_BASE).pid != first.pid
