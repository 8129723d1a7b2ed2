from __future__ import annotations

from django.apps import AppConfig


class ArenaConfig(AppConfig):
    name = "arena"
    verbose_name = "Arena"

    def ready(self) -> None:
        from arena.missions import duel_mission
        from arena.selectors import world_list_with_counts
        from levers9.game import home_part_register, mission_register

        mission_register(3, duel_mission)
        home_part_register("world_rows", world_list_with_counts)
