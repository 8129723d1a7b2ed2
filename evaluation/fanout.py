"""Asking the versions and the judge at once: an evaluation's replies go out concurrently,
bounded per endpoint, so it takes about as long as its slowest few replies, not their sum.

One thread pool; each version has its own semaphore (its endpoint takes at most that many
requests from us at once) and so has the judge. A task asks its version for a reply, gives
the version's slot back, then waits for a judge slot and has the reply judged: replies and
verdicts overlap across the whole evaluation.

Threads and the database: a thread starts with no workspace schema and its own connection,
so every task runs inside the caller's schema and closes its connections when it ends.
Callers hand in moments whose dialogue, scenario and world are already loaded, so the only
queries a task makes are the ones `version_reply` itself needs (a remote version's status).

Beside it, what Evaluate, the checkpoints and the lens ask it with and make of its answers:
how many requests each endpoint takes from us, an ask's context, an answer as a judgement
row, and the verdicts already in force that spare asking the judge again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

from django.db import connection, connections
from django_tenants.utils import schema_context

from arena.models import Judgement, Moment, Reply
from policies.models import PolicyVersion
from trainers.judge.model_judge import judgement_or_error
from trainers.judge.rubric import Judgement as Verdict
from trainers.judge.rubric import Turn as JudgeTurn

# More threads than this buys nothing: each holds a database connection while it works.
MAX_WORKERS = 64


@dataclass(frozen=True)
class Ask:
    """One reply to get and judge: `version` answers at `moment`; with no version, `text`
    (the real agent's words, say) is only judged."""

    key: Hashable
    moment: Any
    context: tuple[JudgeTurn, ...]
    version: Any = None
    text: str = ""
    move: str = ""


@dataclass
class Answer:
    key: Hashable
    text: str = ""
    move: str = ""
    verdict: Verdict | None = None
    error: str = ""  # the version gave no reply (the message says why)
    judge_error: str = ""  # the judge gave no verdict on the reply


def _answer(
    ask: Ask,
    *,
    judge: Any,
    reply: Callable[[Any, Any], Any],
    version_slots: dict[Any, threading.Semaphore],
    judge_slots: threading.Semaphore,
) -> Answer:
    answer = Answer(ask.key, text=ask.text, move=ask.move)
    if ask.version is not None:
        from policies.agents import VersionCannotAnswer

        with version_slots[ask.version.pk]:
            try:
                said = reply(ask.version, ask.moment)
            except VersionCannotAnswer as error:
                answer.error = str(error)
                return answer
            except Exception as error:  # noqa: BLE001 - one bad reply must not sink the rest
                answer.error = f"{ask.version.label} failed: {type(error).__name__}: {error}"
                return answer
        answer.text, answer.move = said.text, said.move
    with judge_slots:
        try:
            verdict, problem = judgement_or_error(judge, list(ask.context), answer.text)
        except Exception as error:  # noqa: BLE001 - recorded as an error, never as a score
            verdict, problem = None, f"{type(error).__name__}: {error}"
    answer.verdict, answer.judge_error = verdict, problem
    return answer


def answers_gather(
    asks: Sequence[Ask],
    *,
    judge: Any,
    slots_per_version: int,
    judge_slots: int,
    on_answer: Callable[[int, int], None] | None = None,
    reply: Callable[[Any, Any], Any] | None = None,
) -> dict[Hashable, Answer]:
    """Every ask answered and judged, by key. `on_answer(done, total)` is called in the
    calling thread after each one (it may raise to stop: what has not started is dropped).
    With one slot each, everything runs here, one call after another."""
    if reply is None:
        from policies.agents import version_reply as reply
    versions = {ask.version.pk: ask.version for ask in asks if ask.version is not None}
    version_slots = {pk: threading.BoundedSemaphore(max(1, slots_per_version)) for pk in versions}
    judge_semaphore = threading.BoundedSemaphore(max(1, judge_slots))
    options = {
        "judge": judge,
        "reply": reply,
        "version_slots": version_slots,
        "judge_slots": judge_semaphore,
    }
    answers: dict[Hashable, Answer] = {}
    if slots_per_version <= 1 and judge_slots <= 1:
        for done, ask in enumerate(asks, start=1):
            answers[ask.key] = _answer(ask, **options)
            if on_answer:
                on_answer(done, len(asks))
        return answers

    schema_name = connection.schema_name
    workers = min(MAX_WORKERS, max(1, slots_per_version) * len(versions) + max(1, judge_slots))

    def work(ask: Ask) -> Answer:
        try:
            with schema_context(schema_name):
                return _answer(ask, **options)
        finally:
            # This thread's own connections: the pool's threads outlive the task.
            connections.close_all()

    executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="evaluation")
    try:
        pending: set[Future] = {executor.submit(work, ask) for ask in asks}
        while pending:
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in finished:
                answer = future.result()
                answers[answer.key] = answer
                if on_answer:
                    on_answer(len(answers), len(asks))
    finally:
        # On a stop (cancelled job), drop what has not started; wait for what has.
        executor.shutdown(wait=True, cancel_futures=True)
    return answers


# --- how many asks an endpoint takes, what an ask reads, what its answer becomes ----------


def endpoint_slots(judge_or_version: Any) -> int:
    """How many requests one endpoint takes from us at once. Local work (the rubric judge,
    the simulator) gains nothing from threads and takes one."""
    from levers9.providers import CallLimits

    if getattr(judge_or_version, "quick", False):
        return 1
    if isinstance(judge_or_version, PolicyVersion) and (
        judge_or_version.provider == PolicyVersion.Provider.SIMULATOR
    ):
        return 1
    return max(1, CallLimits.from_environment().concurrency)


def judge_context(moment: Moment) -> tuple[JudgeTurn, ...]:
    """The dialogue before a moment, as the judge reads it."""
    return tuple(JudgeTurn(turn["speaker"], turn["text"]) for turn in moment.dialogue())


def judgements_in_force(reply_ids: Iterable[int], judge_model: str) -> dict[int, Judgement]:
    """The newest usable verdict of `judge_model` per reply (a rescoring's, if any): the
    cache a replayed yardstick and the lens read instead of asking the judge again."""
    in_force: dict[int, Judgement] = {}
    for judgement in Judgement.objects.filter(
        reply_id__in=list(reply_ids), judge_model=judge_model, error=""
    ).order_by("created_at", "id"):
        in_force[judgement.reply_id] = judgement
    return in_force


def judgement_from(answer: Answer, reply: Reply, judge_model: str) -> Judgement:
    """A verdict as scores, a failure as an error, never the one as the other."""
    if answer.verdict is None:
        return Judgement(
            reply=reply, judge_model=judge_model, scores={}, total=None, error=answer.judge_error
        )
    return Judgement(
        reply=reply,
        judge_model=answer.verdict.judge_model,
        scores=dict(answer.verdict.scores),
        reasons=dict(answer.verdict.reasons),
        total=answer.verdict.total,
    )
