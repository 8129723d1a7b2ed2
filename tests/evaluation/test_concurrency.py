"""Replies go out concurrently, bounded per endpoint: an evaluation takes about as long as
its slowest few replies, not their sum. First the fan-out alone, then a whole evaluation of
two versions on an OpenAI-compatible stub over loopback, in threads with their own database
connections (so on committed rows, in a throwaway workspace).

How long it takes is a benchmark's figure, not a test's:
`python -m bench.evaluation_concurrency`."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass

import pytest
from django_tenants.utils import schema_context

from bench.evaluation_concurrency import OpenAIStub
from evaluation.fanout import Ask, answers_gather
from levers9.shipped_data import PERSUASION_CALLS
from tests.e2e.workspaces import fresh_workspace
from trainers.judge.rubric import RubricJudge

DELAY = 0.1


@dataclass(frozen=True)
class FakeVersion:
    pk: int
    label: str


@dataclass(frozen=True)
class Said:
    text: str
    move: str = ""


def test_it_bounds_each_version_and_overlaps_the_rest():
    in_flight: dict[int, int] = {1: 0, 2: 0}
    most: dict[int, int] = {1: 0, 2: 0}
    most_together = 0  # both versions' replies in flight at one moment
    lock = threading.Lock()

    def reply(version, moment):
        nonlocal most_together
        with lock:
            in_flight[version.pk] += 1
            most[version.pk] = max(most[version.pk], in_flight[version.pk])
            most_together = max(most_together, sum(in_flight.values()))
        time.sleep(0.05)
        with lock:
            in_flight[version.pk] -= 1
        return Said(f"{version.label} at {moment}: shall we book a viewing?")

    versions = [FakeVersion(1, "v1"), FakeVersion(2, "v2")]
    asks = [Ask((version.pk, n), n, (), version=version) for n in range(24) for version in versions]
    progress: list[tuple[int, int]] = []
    answers = answers_gather(
        asks,
        judge=RubricJudge(),
        slots_per_version=4,
        judge_slots=2,
        reply=reply,
        on_answer=lambda done, total: progress.append((done, total)),
    )
    assert most == {1: 4, 2: 4}  # each version's bound reached, never passed
    assert most_together > 4  # the two versions overlap, not one after the other
    assert len(answers) == 48
    assert all(a.verdict is not None for a in answers.values())
    assert progress[-1] == (48, 48)
    assert len(progress) == 48


def test_it_records_a_reply_that_failed_as_an_error_not_a_score():
    def reply(version, moment):
        from policies.agents import VersionDidNotAnswer

        raise VersionDidNotAnswer(f"{version.label}: the endpoint timed out")

    asks = [Ask(("x", 1), 1, (), version=FakeVersion(1, "v9"))]
    answer = answers_gather(
        asks, judge=RubricJudge(), slots_per_version=2, judge_slots=2, reply=reply
    )
    assert answer[("x", 1)].error == "v9: the endpoint timed out"
    assert answer[("x", 1)].verdict is None


@pytest.fixture
def stub(monkeypatch):
    from levers9 import providers

    monkeypatch.setenv("LEVERS9_PROVIDER_CONCURRENCY", "8")
    providers._SEMAPHORES.clear()
    server = OpenAIStub(delay=DELAY).start()
    yield server
    server.stop()
    providers._SEMAPHORES.clear()
    providers._CLIENTS.clear()


def test_it_evaluates_two_endpoint_versions_concurrently(committed_db, stub):
    from arena.services.calls import calls_import
    from arena.services.worlds import world_create
    from evaluation.call_sets import call_set_ensure
    from evaluation.models import Evaluation
    from evaluation.replay import evaluation_run
    from policies.models import PolicyVersion
    from policies.services import version_register

    lines = PERSUASION_CALLS.read_text().splitlines()[:6]
    with fresh_workspace("evalconc") as created, schema_context(created.workspace.schema_name):
        world = world_create(slug="real", name="Real calls")
        calls_import(world=world, text="\n".join(lines))
        baseline = PolicyVersion.objects.get(world=world, number=1)
        versions = [
            version_register(
                world=world,
                name=name,
                parent=baseline,
                move_strategy={},
                learned_from={},
                provider=PolicyVersion.Provider.VLLM,
                provider_model=name,
                endpoint_url=stub.base_url,
            )
            for name in ("stub-a", "stub-b")
        ]
        # No job: the evaluation is run right here, as its worker would.
        evaluation = Evaluation.objects.create(
            world=world,
            call_set=call_set_ensure(world=world),
            candidate=versions[1],
            baseline=versions[0],
        )
        summary = evaluation_run(evaluation=evaluation)

        replies = evaluation.answers.exclude(reply=None).count()
        assert (
            replies
            == 2 * summary["moments"]
            == 2
            * sum(
                min(4, sum(1 for t in json.loads(line)["turns"] if t["speaker"] == "agent"))
                for line in lines
            )
        )
        assert summary["candidate"]["errors"] == summary["baseline"]["errors"] == 0
        assert summary["compared"] == summary["moments"]
    assert 1 < stub.most_in_flight <= 16  # both endpoints at once, each within its 8
