from __future__ import annotations

from django.apps import AppConfig

from trainers.registry import ENGINES_KIND, TRAIN_KIND, Family, trainers_of

# The trainers that Train cards and Engines runs start; the catalogue (trainers.registry) names
# each one's module (what a worker runs as `python -m <module> --spec ... --out ...`).
TRAINING_FAMILIES = (Family.MOVE_STRATEGY, Family.MOVE_REWARD, Family.OFFLINE_MOVES, Family.WORDING)


class TrainingConfig(AppConfig):
    name = "training"
    verbose_name = "Training"

    def ready(self) -> None:
        from levers9.game import mission_register
        from levers9.jobs.kinds import JobKind, job_kind_register, trainer_register
        from training.finish import train_job_finish
        from training.missions import level_up_mission
        from training.runs import training_runs_about

        # A Train card always ends in a version; an Engines run ends in a measurement, and
        # becomes a version only when someone promotes it (training.engines).
        job_kind_register(
            JobKind(TRAIN_KIND, "Train card", finish=train_job_finish, about=training_runs_about)
        )
        job_kind_register(JobKind(ENGINES_KIND, "Engines run", about=training_runs_about))
        for name in trainers_of(*TRAINING_FAMILIES):
            trainer_register(name)
        mission_register(4, level_up_mission)
