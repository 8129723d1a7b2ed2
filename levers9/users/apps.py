from __future__ import annotations

from django.apps import AppConfig


class UsersConfig(AppConfig):
    name = "levers9.users"
    # Not "auth" nor "users" alone: the label names only this app's tables (users_invitation).
    label = "users"
    verbose_name = "Users"
