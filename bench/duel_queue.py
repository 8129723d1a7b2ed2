"""The Duel under load: queue and pick latency, concurrent reviewers, and a big freeze.

    python -m bench.duel_queue                 # the figures of issue 4 (takes a few minutes)
    python -m bench.duel_queue --seconds 10    # a shorter concurrent run
    python -m bench.duel_queue --order informative --moments 5000 --picks 1000 --latency-only
                                               # "most informative first": its plan and p95

Needs PostgreSQL: DATABASE_URL, or else the embedded server (started here if need be).
In a throwaway workspace ``bench-duel-<hex>`` it bulk-creates 100,000 moments with their
replies, judgements and pairs and 50,000 picks, then measures through the API (Django's test
Client with token auth, in process):

1. p95 of "next queue item" (GET /api/rl/duel/next/) and "submit a pick" (POST
   /api/rl/picks/) for one reviewer (target: under 50 ms each);
2. 20 reviewers in parallel threads (each its own database connection) serving and picking
   for --seconds: every pick stored exactly once (counted), no 5xx;
3. freezing 1,000,000 picks: rows/s of the TSV write (target: 100,000 rows/s or better) and
   the process's peak memory above its start, for a small and the big version (flat).

The workspace, its schema and its files are removed at the end.
"""

from __future__ import annotations

import argparse
import secrets
import shutil
import statistics
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path

from bench.django_app import setup_django, workspaces_drop

REVIEWERS = 20
BATCH = 20_000
WARM_UP = 5


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def _batches(iterable, size: int = BATCH):
    batch = []
    for item in iterable:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def _create_data(world, moments: int, picks: int, reviewers: list) -> None:
    """Moments, two replies each, their judgements, a pair per moment, and picks."""
    from arena.judge.world_dimensions import world_dimension_names
    from arena.models import DuelPair, Judgement, Moment, Pick, Reply
    from arena.preference_format import dialogue_json

    started = time.perf_counter()
    scenarios = list(world.scenarios.all())
    dialogue = [
        {"speaker": "customer", "text": "Hello, I saw the flat on your site — is it free?"},
        {"speaker": "agent", "text": "Good afternoon, thank you for calling. How may I help?"},
    ]
    dialogue_text = dialogue_json(dialogue)
    scores = {name: 0.5 for name in world_dimension_names(world)}
    pair_ids: list[int] = []
    for numbers in _batches(range(moments)):
        made = Moment.objects.bulk_create(
            Moment(
                world=world,
                kind=Moment.Kind.SYNTHETIC,
                scenario=scenarios[n % len(scenarios)],
                simulator_state=11 + n % 500,
                context=dialogue,
                digest=f"bench-{n}",
            )
            for n in numbers
        )
        replies = Reply.objects.bulk_create(
            Reply(
                moment=moment,
                text=f"Reply {side} number {moment.pk}: would you like to arrange a viewing?",
                source=Reply.Source.SIMULATOR,
                move="propose_viewing" if side == "a" else "give_details",
            )
            for moment in made
            for side in "ab"
        )
        judgements = Judgement.objects.bulk_create(
            Judgement(
                reply=reply,
                judge_model="rubric-v1",
                scores=scores,
                reasons={},
                total=round(0.3 + (reply.pk * 7919 % 1000) / 2000, 4),
            )
            for reply in replies
        )
        pairs = DuelPair.objects.bulk_create(
            DuelPair(
                world=world,
                moment=moment,
                scenario_id=moment.scenario_id,
                reply_a=replies[2 * index],
                reply_b=replies[2 * index + 1],
                dialogue=dialogue_text,
                judge_model="rubric-v1",
                judge_total=round((moment.pk * 104729 % 10_000) / 10_000, 4),
                # As pair making stores it: how far apart the judge put A and B.
                judge_gap=abs(judgements[2 * index].total - judgements[2 * index + 1].total),
                move_a="propose_viewing",
                move_b="give_details",
                previous_move="greet",
            )
            for index, moment in enumerate(made)
        )
        pair_ids.extend(pair.pk for pair in pairs)
    # The first `picks` pairs are picked once and leave the queue.
    picked = pair_ids[:picks]
    pair_replies = dict(
        DuelPair.objects.filter(pk__in=picked).values_list("pk", "reply_a_id").iterator()
    )
    for numbers in _batches(range(len(picked))):
        Pick.objects.bulk_create(
            Pick(
                pair_id=picked[n],
                world=world,
                chosen_side="A",
                chosen_reply_id=pair_replies[picked[n]],
                rejected_reply_id=pair_replies[picked[n]] + 1,
                chosen_source="simulator (Propose a viewing)",
                rejected_source="simulator (Give details)",
                reasons=["progress"],
                reviewer=reviewers[n % len(reviewers)],
                reviewer_name=reviewers[n % len(reviewers)].username,
            )
            for n in numbers
        )
    DuelPair.objects.filter(pk__in=picked).update(pick_count=1, is_open=False)
    _analyze()
    print(
        f"  {moments:,} moments, {2 * moments:,} replies and judgements, {moments:,} pairs, "
        f"{len(picked):,} picks in {time.perf_counter() - started:.1f} s"
    )


def _analyze() -> None:
    """Fresh planner statistics after a bulk load, as autovacuum would gather them soon."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")


def _token_client(slug: str, user):
    from django.test import Client
    from rest_framework.authtoken.models import Token

    token = Token.objects.get_or_create(user=user)[0].key
    return Client(HTTP_HOST=f"{slug}.localhost", HTTP_AUTHORIZATION=f"Token {token}")


def _explain_claim(world, user, order: str) -> None:
    """The plan of the claim's "first free pair" query in this order, as PostgreSQL runs it
    (EXPLAIN ANALYZE, inside a transaction that is rolled back: nothing stays locked)."""
    from django.db import transaction
    from django.utils import timezone

    from arena.selectors import QueueSelection
    from arena.services.queue import queue_first_free

    query = queue_first_free(
        world=world, reviewer=user, selection=QueueSelection(order=order), now=timezone.now()
    )
    with transaction.atomic():
        plan = query.explain(analyze=True)
        transaction.set_rollback(True)
    print("  Plan of the claim's first-free-pair query:")
    for line in plan.splitlines():
        print(f"    {line}")


def _bench_latency(slug: str, user, rounds: int, order: str = "weakest") -> tuple[float, float]:
    client = _token_client(slug, user)
    next_ms, pick_ms = [], []
    for round_number in range(rounds + WARM_UP):
        started = time.perf_counter()
        response = client.get(f"/api/rl/duel/next/?pack=lettings&order={order}")
        next_ms.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, response.content
        pair = response.json()["item"]["pair"]
        started = time.perf_counter()
        response = client.post(
            "/api/rl/picks/",
            {"pair": pair, "chosen": "B", "reasons": ["respect"]},
            content_type="application/json",
        )
        pick_ms.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 201, response.content
        if round_number < WARM_UP:  # connections and caches warm up first; not counted
            next_ms.clear()
            pick_ms.clear()
    for label, values in (("next queue item", next_ms), ("submit a pick", pick_ms)):
        print(
            f"  {label:<16} p50 {statistics.median(values):6.1f} ms  p95 {_p(values, 0.95):6.1f} ms"
            f"  max {max(values):6.1f} ms  ({len(values)} calls)"
        )
    return _p(next_ms, 0.95), _p(pick_ms, 0.95)


def _bench_concurrent(schema: str, slug: str, reviewers: list, seconds: float) -> bool:
    from django.db import connection
    from django.db.models import Count, F
    from django_tenants.utils import schema_context

    from arena.models import DuelPair, Pick

    with schema_context(schema):
        before = Pick.objects.count()
        clients = [_token_client(slug, user) for user in reviewers]
    stored = [0] * len(reviewers)
    statuses: list[dict[int, int]] = [{} for _ in reviewers]
    latencies: list[list[float]] = [[] for _ in reviewers]
    stop_at = time.monotonic() + seconds
    start = threading.Barrier(len(reviewers))

    def reviewer_loop(index: int) -> None:
        client = clients[index]
        start.wait()
        try:
            while time.monotonic() < stop_at:
                began = time.perf_counter()
                served = client.get("/api/rl/duel/next/?pack=lettings")
                statuses[index][served.status_code] = statuses[index].get(served.status_code, 0) + 1
                if served.status_code != 200 or not served.json()["item"]:
                    continue
                answer = client.post(
                    "/api/rl/picks/",
                    {"pair": served.json()["item"]["pair"], "chosen": "A"},
                    content_type="application/json",
                )
                statuses[index][answer.status_code] = statuses[index].get(answer.status_code, 0) + 1
                latencies[index].append((time.perf_counter() - began) * 1000)
                if answer.status_code == 201:
                    stored[index] += 1
        finally:
            connection.close()

    threads = [threading.Thread(target=reviewer_loop, args=(n,)) for n in range(len(reviewers))]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    totals: dict[int, int] = {}
    for counts in statuses:
        for status, count in counts.items():
            totals[status] = totals.get(status, 0) + count
    server_errors = sum(count for status, count in totals.items() if status >= 500)
    with schema_context(schema):
        after = Pick.objects.count()
        duplicates = (
            Pick.objects.values("pair_id", "reviewer_id").order_by().distinct().count()
            != Pick.objects.count()
        )
        mismatched = (
            DuelPair.objects.annotate(real=Count("picks")).exclude(real=F("pick_count")).count()
        )
    answered = sum(stored)
    every_pick_once = (after - before == answered) and not duplicates and mismatched == 0
    all_ms = [value for values in latencies for value in values]
    print(
        f"  {len(reviewers)} reviewers for {elapsed:.1f} s: {answered:,} picks answered 201, "
        f"{after - before:,} stored ({answered / elapsed:.0f} picks/s); "
        f"statuses {dict(sorted(totals.items()))}; 5xx: {server_errors}"
    )
    if all_ms:
        print(
            f"  next+pick under load: p50 {statistics.median(all_ms):.1f} ms, "
            f"p95 {_p(all_ms, 0.95):.1f} ms"
        )
    print(
        f"  every pick stored exactly once: {'yes' if every_pick_once else 'NO'} "
        f"(duplicates: {duplicates}, pairs whose pick_count disagrees: {mismatched})"
    )
    return every_pick_once and server_errors == 0


def _top_up_picks(world, total: int, reviewers: list) -> None:
    """Picks by reviewers of their own, one per (pair, reviewer), up to `total` in all."""
    from arena.models import DuelPair, Pick

    missing = total - Pick.objects.count()
    if missing <= 0:
        return
    started = time.perf_counter()
    pairs = list(
        DuelPair.objects.filter(world=world)
        .order_by("pk")
        .values_list("pk", "reply_a_id", "reply_b_id")
    )
    if missing > len(pairs) * len(reviewers):
        raise SystemExit("Not enough pairs and reviewers for that many picks.")

    def picks():
        for n in range(missing):
            reviewer = reviewers[n % len(reviewers)]
            pair_id, reply_a, reply_b = pairs[(n // len(reviewers)) % len(pairs)]
            yield Pick(
                pair_id=pair_id,
                world=world,
                chosen_side="B",
                chosen_reply_id=reply_b,
                rejected_reply_id=reply_a,
                chosen_source="simulator (Give details)",
                rejected_source="simulator (Propose a viewing)",
                reasons=["accuracy", "progress"] if n % 3 else [],
                reviewer=reviewer,
                reviewer_name=reviewer.username,
            )

    for batch in _batches(picks()):
        Pick.objects.bulk_create(batch)
    _analyze()
    print(f"  {missing:,} more picks in {time.perf_counter() - started:.1f} s")


class _Memory:
    """While a block runs: the process's resident memory above where it started (sampled
    every 20 ms) and, with `python=True`, the peak of Python's own allocations (tracemalloc,
    which slows allocation-heavy code: time such a block for memory, not for speed)."""

    def __init__(self, *, python: bool = False):
        self.python = python
        self.python_peak: int | None = None

    def __enter__(self):
        import psutil

        self.process = psutil.Process()
        self.start = self.peak = self.process.memory_info().rss
        self.running = True
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()
        if self.python:
            tracemalloc.start()
        return self

    def _sample(self) -> None:
        while self.running:
            self.peak = max(self.peak, self.process.memory_info().rss)
            time.sleep(0.02)

    def __exit__(self, *exc):
        if self.python:
            self.python_peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
        self.running = False
        self.thread.join()
        self.peak = max(self.peak, self.process.memory_info().rss)

    def __str__(self) -> str:
        resident = f"resident memory +{(self.peak - self.start) / 2**20:.1f} MB"
        if self.python_peak is None:
            return resident
        return f"peak Python allocations {self.python_peak / 2**20:.1f} MB, {resident}"


def _rewrite(version) -> bool:
    """Write a frozen version again: the same bytes? And Python's own peak memory while its
    rows stream through (under tracemalloc, so this pass is not timed for speed)."""
    from arena.preference_format import file_sha256
    from arena.selectors import preference_version_path
    from arena.services.freeze import preference_version_write

    scratch = Path(tempfile.mkdtemp(prefix="bench-duel-rewrite-"))
    try:
        with _Memory(python=True) as memory:
            again = preference_version_write(version=version, directory=scratch)
        same = again.sha256 == version.sha256 == file_sha256(preference_version_path(version))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(
        f"    written again: {again.count:,} rows; {memory}; "
        f"byte-identical: {'yes' if same else 'NO'}"
    )
    return same


def _timed_freeze(world, owner):
    from arena.services.freeze import preference_freeze

    with _Memory() as memory:
        started = time.perf_counter()
        version = preference_freeze(world=world, by=owner)
        seconds = time.perf_counter() - started
    print(
        f"  v{version.number}: {version.row_count:>9,} rows in {seconds:6.2f} s "
        f"({version.row_count / seconds:>9,.0f} rows/s, {version.size_bytes / 2**20:.0f} MB); "
        f"{memory}"
    )
    return version, version.row_count / seconds


def _bench_freeze(world, owner, freeze_total: int, bulk_reviewers: list) -> tuple[bool, float]:
    small, _rate = _timed_freeze(world, owner)
    same = _rewrite(small)
    _top_up_picks(world, freeze_total, bulk_reviewers)
    big, rate = _timed_freeze(world, owner)
    same &= _rewrite(big)
    return same, rate


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--moments", type=int, default=100_000)
    parser.add_argument("--picks", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=300, help="next+pick calls for p95")
    parser.add_argument("--reviewers", type=int, default=REVIEWERS)
    parser.add_argument("--seconds", type=float, default=60.0, help="concurrent run length")
    parser.add_argument("--freeze-picks", type=int, default=1_000_000)
    parser.add_argument(
        "--order",
        choices=("weakest", "informative"),
        default="weakest",
        help="the queue order the latency rounds ask for (and whose claim query is EXPLAINed)",
    )
    parser.add_argument(
        "--latency-only",
        action="store_true",
        help="only the data and the one-reviewer latency (no concurrent run, no freeze)",
    )
    args = parser.parse_args(argv)

    datasets_dir = Path(tempfile.mkdtemp(prefix="bench-duel-datasets-"))
    setup_django(datasets_dir)
    from django.contrib.auth import get_user_model
    from django_tenants.utils import schema_context

    from arena.models import World
    from levers9.services import workspace_create, workspace_user_create

    slug = f"bench-duel-{secrets.token_hex(3)}"
    password = secrets.token_urlsafe(18)
    ok = True
    try:
        created = workspace_create(slug=slug, admin_email=f"owner@{slug}.test", password=password)
        schema = created.workspace.schema_name
        print(f"Workspace {slug}")
        with schema_context(schema):
            world = World.objects.get(slug="lettings")
            owner = get_user_model().objects.get(username=f"owner@{slug}.test")
            reviewers = [
                workspace_user_create(email=f"r{n}@{slug}.test", password=password, role="reviewer")
                for n in range(args.reviewers)
            ]
            bulk_reviewers = [
                workspace_user_create(email=f"b{n}@{slug}.test", password=password, role="reviewer")
                for n in range(20)
            ]
            print("Data")
            _create_data(world, args.moments, args.picks, reviewers)
            _explain_claim(world, reviewers[0], args.order)
            print(f"Latency through the API, one reviewer, {args.order} first (target p95 < 50 ms)")
            p95_next, p95_pick = _bench_latency(slug, reviewers[0], args.rounds, args.order)
        if not args.latency_only:
            print(f"Concurrent reviewers ({args.reviewers}, {args.seconds:.0f} s)")
            ok &= _bench_concurrent(schema, slug, reviewers, args.seconds)
            with schema_context(schema):
                print(
                    f"Freeze (target >= 100,000 rows/s, memory flat), up to "
                    f"{args.freeze_picks:,} picks"
                )
                same, rate = _bench_freeze(world, owner, args.freeze_picks, bulk_reviewers)
                ok &= same and rate >= 100_000
        ok &= p95_next < 50 and p95_pick < 50
    finally:
        workspaces_drop([slug])
        shutil.rmtree(datasets_dir, ignore_errors=True)
        print(f"\nDeleted workspace {slug}, its schema and its files.")
    if not ok:
        raise SystemExit("A target was missed or a check failed (see above).")


if __name__ == "__main__":
    main()
