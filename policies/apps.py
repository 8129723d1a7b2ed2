from __future__ import annotations

from django.apps import AppConfig


class PoliciesConfig(AppConfig):
    name = "policies"
    verbose_name = "Policies"
