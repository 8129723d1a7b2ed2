from __future__ import annotations

from django.apps import AppConfig


class EvaluationConfig(AppConfig):
    name = "evaluation"
    verbose_name = "Evaluation"

    def ready(self) -> None:
        from evaluation.leaderboard_games import evaluation_games, evaluation_games_left_out
        from evaluation.missions import boss_fight_mission
        from evaluation.runner import evaluation_job_run
        from evaluation.selectors import evaluation_jobs_about
        from evaluation.services import (
            evaluation_job_ended,
            evaluation_job_finish,
            version_checkpoint,
        )
        from evaluation.verdict_words import version_verdicts
        from levers9.game import mission_register
        from levers9.jobs.kinds import (
            JobKind,
            job_kind_register,
            job_produced_listen,
            trainer_register,
        )
        from policies.leaderboard import leaderboard_games_source_register
        from policies.selectors import version_verdicts_register

        job_kind_register(
            JobKind(
                "evaluate",
                "Evaluation",
                finish=lambda job, result: evaluation_job_finish(job=job, result=result),
                on_end=evaluation_job_ended,
                about=evaluation_jobs_about,
            )
        )
        # Evaluations read and write the database: they run in the worker, not as a process.
        trainer_register("evaluate", function=evaluation_job_run)
        # Every version a job produces is checkpointed against its parent on held-out calls.
        job_produced_listen(version_checkpoint)
        mission_register(5, boss_fight_mission)
        # The Policies page ranks and judges versions by their evaluations.
        leaderboard_games_source_register(evaluation_games, left_out=evaluation_games_left_out)
        version_verdicts_register(version_verdicts)
