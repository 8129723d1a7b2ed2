from __future__ import annotations

from django.apps import AppConfig


class Levers9Config(AppConfig):
    name = "levers9"
    verbose_name = "Platform"

    def ready(self) -> None:
        from levers9 import channel_pools

        channel_pools.install()
