"""`manage.py demo_setup` — the demo workspace `make run` serves. Safe to run again."""

from __future__ import annotations

import os
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django_tenants.utils import schema_context

from arena.judge.fit_job import JUDGE_FIT_KIND, judge_fit_start
from arena.models import DuelPair, JudgeVersion, World
from arena.services.calls import calls_import
from arena.services.pairs import duel_pairs_generate
from arena.services.worlds import world_create
from levers9.jobs.models import Job
from levers9.services import workspace_create
from levers9.shipped_data import PERSUASION_CALLS

DEMO_SLUG = "demo"
DEMO_EMAIL = "admin@demo.localhost"
DEMO_QUEUE = 40  # open Duel pairs per world after setup


class Command(BaseCommand):
    help = "Create (or reuse) the demo workspace with a simulated world and a real-calls world."

    def handle(self, *args, **options) -> None:
        password = os.environ.get("LEVERS9_DEMO_PASSWORD", "levers9-demo")
        # Checked before anything is made: a demo without its real calls is a hollow one (no
        # auto-pairs, no fitted judge, no replay, no lens), so it is refused, not made quietly.
        calls_file = Path(os.environ.get("LEVERS9_DEMO_CALLS", PERSUASION_CALLS))
        if not calls_file.is_file():
            raise CommandError(
                f"The demo's real calls are not at {calls_file}. They ship with the repository "
                "(data/real-calls/persuasionforgood/calls.jsonl): restore that file with git, or "
                "set LEVERS9_DEMO_CALLS to a calls file in the same format."
            )
        result = workspace_create(
            slug=DEMO_SLUG, admin_email=DEMO_EMAIL, password=password, name="Demo lettings"
        )
        with schema_context(result.workspace.schema_name):
            world = world_create(
                slug="persuasion",
                name="Persuasion for Good (real calls)",
                description="1,017 real recorded persuasion chats with their real outcome "
                "(won = the persuadee donated). Wang et al., ACL 2019, Apache-2.0.",
            )
            report = calls_import(
                world=world, text=calls_file.read_text(encoding="utf-8"), source=calls_file.name
            )
            self.stdout.write(
                f"Real calls: {report.created} imported, {report.unchanged} already there."
            )
            # A Duel queue ready to play on every world (simulated and real calls).
            for each in World.objects.order_by("name"):
                waiting = DuelPair.objects.filter(world=each, is_open=True).count()
                made = (
                    duel_pairs_generate(world=each, count=DEMO_QUEUE - waiting)
                    if (waiting < DEMO_QUEUE)
                    else 0
                )
                self.stdout.write(f"Duel queue of {each.name}: {waiting + made} pairs ready.")
            # Each world's judge learns from what it has (the real calls' outcomes here): a fit
            # job the worker runs once the demo serves. Importing the calls started it (as
            # background work); a world with calls and no fit gets one here. A freeze refits.
            for each in World.objects.filter(calls__isnull=False).distinct():
                if (
                    JudgeVersion.objects.filter(world=each).exists()
                    or Job.objects.filter(kind=JUDGE_FIT_KIND, arena_world__world=each)
                    .exclude(state__in=[Job.State.FAILED, Job.State.CANCELLED])
                    .exists()
                ):
                    continue
                job = judge_fit_start(world=each)
                self.stdout.write(f"Fitting the judge of {each.name}: job {job.pk}.")
        state = "created" if result.created else "reused"
        self.stdout.write(
            self.style.SUCCESS(
                f"\nDemo workspace {state}: http://{result.domain}:8000/\n"
                f"  sign in as {DEMO_EMAIL} / {password}\n"
            )
        )
