"""`manage.py demo_setup` — the demo workspace `make run` serves. Safe to run again.

Three worlds: Lettings (scripted customers), the charity's real calls (Persuasion for Good:
real outcomes no reader predicts, so its judge rightly gives no verdict), and real human
preference pairs (hh-rlhf harmless-base), a world whose judge is measured above chance, where a
wording version can be shown to beat its base on the pairs it holds out.
"""

from __future__ import annotations

import os
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.db.models import Q
from django_tenants.utils import schema_context

from arena.judge.fit_job import JUDGE_FIT_KIND, judge_fit_start
from arena.models import DuelPair, JudgeVersion, PreferenceVersion, World
from arena.services.calls import calls_import
from arena.services.freeze import preference_freeze
from arena.services.pairs import duel_pairs_generate
from arena.services.preferences import preferences_import
from arena.services.worlds import world_create
from levers9.jobs.models import Job
from levers9.services import workspace_create
from levers9.shipped_data import HH_RLHF_PAIRS, PERSUASION_CALLS

DEMO_SLUG = "demo"
DEMO_EMAIL = "admin@demo.localhost"
DEMO_QUEUE = 40  # open Duel pairs per world after setup
PAIRS_WORLD_SLUG = "human-preferences"


class Command(BaseCommand):
    help = (
        "Create (or reuse) the demo workspace: a simulated world, a real-calls world and a "
        "world of real human preference pairs."
    )

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
            self._human_preferences()
            # A Duel queue ready to play on every world (simulated and real calls). A world of
            # imported pairs only has no moments to pair (no calls, no simulator): its picks
            # are the pairs, already decided, and its Duel says the queue is empty.
            for each in (
                World.objects.filter(Q(calls__isnull=False) | Q(scenarios__isnull=False))
                .distinct()
                .order_by("name")
            ):
                waiting = DuelPair.objects.filter(world=each, is_open=True).count()
                made = (
                    duel_pairs_generate(world=each, count=DEMO_QUEUE - waiting)
                    if (waiting < DEMO_QUEUE)
                    else 0
                )
                self.stdout.write(f"Duel queue of {each.name}: {waiting + made} pairs ready.")
            # Each world's judge learns from what it has (the real calls' outcomes, the frozen
            # pairs): a fit job the worker runs once the demo serves. Importing the calls and
            # freezing the pairs started it (as background work); a world with either and no
            # fit gets one here.
            for each in World.objects.filter(
                Q(calls__isnull=False) | Q(preference_versions__isnull=False)
            ).distinct():
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

    def _human_preferences(self) -> None:
        """The world of real human preference pairs: imported in TRL's format (the pairs it
        holds out for Evaluate are chosen at import, arena.held_out) and frozen as its v1, which
        its judge's fit and the wording cards read."""
        world = world_create(
            slug=PAIRS_WORLD_SLUG,
            name="Helpful and harmless (human preference pairs)",
            description="1,150 real human preference pairs in TRL's format: which of two "
            "assistant replies crowd workers found less harmful. Anthropic hh-rlhf, "
            "harmless-base (Bai et al. 2022), MIT. Not sales data: a world whose judge is "
            "measured above chance, where a wording version can beat its base.",
            system_prompt="You are a helpful, honest and harmless assistant.",
        )
        report = preferences_import(
            world=world, text=HH_RLHF_PAIRS.read_text(encoding="utf-8"), source=HH_RLHF_PAIRS.name
        )
        self.stdout.write(
            f"Human preference pairs: {report.created} imported, {report.unchanged} already there."
        )
        if not PreferenceVersion.objects.filter(world=world).exists():
            version = preference_freeze(world=world)
            self.stdout.write(f"Froze them as {version.label} of {world.name}.")
