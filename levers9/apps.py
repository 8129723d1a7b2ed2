from __future__ import annotations

from django.apps import AppConfig


class Levers9Config(AppConfig):
    name = "levers9"
    verbose_name = "Platform"
