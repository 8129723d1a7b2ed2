from __future__ import annotations

from django.apps import AppConfig


class ArenaConfig(AppConfig):
    name = "arena"
    verbose_name = "Arena"

    def ready(self) -> None:
        from arena.job_worlds import job_worlds_about
        from arena.judge.agreement import (
            JUDGE_MEASURE_KIND,
            JUDGE_MEASURE_TRAINER,
            judge_measure_run,
        )
        from arena.judge.fit_job import (
            JUDGE_FIT_KIND,
            JUDGE_FIT_TRAINER,
            judge_fit_ended,
            judge_fit_finish,
        )
        from arena.missions import duel_mission
        from arena.selectors import world_rows_described
        from arena.services.pairs import DUEL_PAIRS_KIND, DUEL_PAIRS_TRAINER, duel_pairs_job_run
        from levers9.game import home_part_register, mission_register
        from levers9.jobs.kinds import JobKind, job_kind_register, trainer_register

        mission_register(3, duel_mission)
        home_part_register("world_rows", world_rows_described)
        # Each of the arena's kinds keeps its world in arena.JobWorld, shown in the job's
        # finish_needs as when it was stored there (job_worlds_about).
        # A world's judge is fitted on the CPU pool by the pure trainer; the finish numbers it,
        # the end refits if the world gained picks or overrides while it ran.
        job_kind_register(
            JobKind(
                JUDGE_FIT_KIND,
                "Judge fit",
                finish=judge_fit_finish,
                on_end=judge_fit_ended,
                about=job_worlds_about,
            )
        )
        trainer_register(JUDGE_FIT_TRAINER)
        # A model judge is measured where it runs: calling its model, in the worker.
        job_kind_register(
            JobKind(JUDGE_MEASURE_KIND, "Model judge measurement", about=job_worlds_about)
        )
        trainer_register(JUDGE_MEASURE_TRAINER, function=judge_measure_run)
        # The Duel's pairs, written where a model answers or the judge reads with a base
        # (seconds a reply): in the worker, with its progress, while the page stays usable.
        job_kind_register(JobKind(DUEL_PAIRS_KIND, "Duel pairs", about=job_worlds_about))
        trainer_register(DUEL_PAIRS_TRAINER, function=duel_pairs_job_run)
