from __future__ import annotations

from django.apps import AppConfig

# Trainer name → the module a worker runs as `python -m <module> --spec ... --out ...`.
TRAINER_MODULES = {
    "q-learning-online": "trainers.moves.q_learning",
    "ppo": "trainers.moves.ppo",
    "reward-model": "trainers.moves.reward_model",
    "offline-outcome": "trainers.moves.offline_outcome",
    "rlhf": "trainers.wording.rlhf",
    "dpo": "trainers.wording.dpo",
}


class TrainingConfig(AppConfig):
    name = "training"
    verbose_name = "Training"

    def ready(self) -> None:
        from levers9.game import mission_register
        from levers9.jobs.kinds import JobKind, job_kind_register, trainer_register
        from training.finish import train_job_finish
        from training.missions import level_up_mission

        # A Train card always ends in a version; an Engines run ends in a measurement, and
        # becomes a version only when someone promotes it (training.engines).
        job_kind_register(JobKind("train", "Train card", finish=train_job_finish))
        job_kind_register(JobKind("engines", "Engines run"))
        for name, module in TRAINER_MODULES.items():
            trainer_register(name, module=module)
        mission_register(4, level_up_mission)
