from __future__ import annotations

from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "levers9.jobs"
    # The label the model and its admin go by; the table keeps training's name (training_job).
    label = "jobs"
    verbose_name = "Jobs"
