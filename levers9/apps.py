from __future__ import annotations

from django.apps import AppConfig


class Levers9Config(AppConfig):
    name = "levers9"
    verbose_name = "Platform"

    def ready(self) -> None:
        from levers9.key_scope import workspace_in_view_and_all
        from levers9.providers import workspace_scope_register

        # Key variables are read per workspace (levers9.providers, key_env_problem).
        workspace_scope_register(workspace_in_view_and_all)
